#include "core/random.h"

#include <cmath>
#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace vb {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double uniform01(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t r = splitmix64(splitmix64(seed) ^ (i * 0xd1b54a32d192ed03ULL));
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

namespace {

// Box-Muller from IEEE basic operations only (+, -, *, /, sqrt: correctly rounded, and this
// project compiles in ISO C++ mode, where GCC does not contract a*b+c into an FMA), so a value
// has the same bits on every machine, at every vector width and in every build: no libm call,
// whose last bits differ between libm versions. The loops below vectorize (no branches, no
// calls); libm's log and sincos made input generation ~85 ns per pair per thread, the
// dominant cost of timing a large problem (issue 16: 0.8 s per 154 MB fp32 set).

constexpr double kTwo52 = 4503599627370496.0;  // 2^52

/// The double whose bits are `b`.
inline double from_bits(std::uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}
inline std::uint64_t to_bits(double d) {
  std::uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

/// Exact double of an integer v < 2^52 (the 2^52 trick: no int->double conversion
/// instruction, which SSE2/AVX2 lack for 64-bit integers).
inline double small_u64_to_double(std::uint64_t v) {
  return from_bits(v | 0x4330000000000000ULL) - kTwo52;
}

/// Uniform in [0, 1) with 53 random bits: (r >> 11) * 2^-53, as uniform01 computes it.
inline double bits_to_unit(std::uint64_t r) {
  // r >> 11 < 2^53: split into the top bit and 52 bits so each part fits the 2^52 trick.
  const std::uint64_t v = r >> 11;
  return (small_u64_to_double(v >> 1) * 2.0 + small_u64_to_double(v & 1)) * 0x1.0p-53;
}

/// 1 / n! for n <= 18 (exact factorials in double up to 18! < 2^53; one rounding each).
constexpr double inv_factorial(int n) {
  double f = 1.0;
  for (int k = 2; k <= n; ++k) f *= k;
  return 1.0 / f;
}

/// Natural log of x in [2^-53, 1] (the Box-Muller radius' argument). x = 2^k * m with m in
/// [sqrt(2)/2, sqrt(2)); log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716, summed as
/// 2 s * sum_{n<=11} s^(2n) / (2n + 1) (truncation < 3e-18 relative). Within a few ulp of
/// libm's log.
inline double log_unit(double x) {
  const std::uint64_t b = to_bits(x);
  const std::uint64_t e = (b >> 52) & 0x7ff;  // x is normal here (x >= 2^-53)
  double m = from_bits((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);  // [1, 2)
  double k = small_u64_to_double(e) - 1023.0;
  const bool big = m > 1.4142135623730951;  // selects of constants: branch-free
  m *= big ? 0.5 : 1.0;
  k += big ? 1.0 : 0.0;
  const double s = (m - 1.0) / (m + 1.0);
  const double z = s * s;
  double p = 1.0 / 23.0;
  p = 1.0 / 21.0 + z * p;
  p = 1.0 / 19.0 + z * p;
  p = 1.0 / 17.0 + z * p;
  p = 1.0 / 15.0 + z * p;
  p = 1.0 / 13.0 + z * p;
  p = 1.0 / 11.0 + z * p;
  p = 1.0 / 9.0 + z * p;
  p = 1.0 / 7.0 + z * p;
  p = 1.0 / 5.0 + z * p;
  p = 1.0 / 3.0 + z * p;
  p = 1.0 + z * p;
  return k * 0.6931471805599453 + 2.0 * s * p;
}

/// cos(2 pi u) and sin(2 pi u) for u in [0, 1): the quarter turn j = round(4u) and
/// theta = (4u - j) pi/2 in [-pi/4, pi/4] (4u - j is exact), Taylor series of sin to theta^17
/// and cos to theta^18 (truncation < 1e-19), then the quadrant's signs and swap.
inline void cos_sin_2pi(double u, double* c_out, double* s_out) {
  const double q = 4.0 * u;
  const double j = (q >= 0.5 ? 1.0 : 0.0) + (q >= 1.5 ? 1.0 : 0.0) + (q >= 2.5 ? 1.0 : 0.0) +
                   (q >= 3.5 ? 1.0 : 0.0);  // 0..4; 4 is a full turn, same as 0
  const double t = (q - j) * 1.5707963267948966;
  const double t2 = t * t;
  double ss = -inv_factorial(17);
  ss = inv_factorial(15) + t2 * ss;
  ss = -inv_factorial(13) + t2 * ss;
  ss = inv_factorial(11) + t2 * ss;
  ss = -inv_factorial(9) + t2 * ss;
  ss = inv_factorial(7) + t2 * ss;
  ss = -inv_factorial(5) + t2 * ss;
  ss = inv_factorial(3) + t2 * ss;
  const double sn = t - t * t2 * ss;  // t - t^3/3! + t^5/5! ...: ss holds 1/3! - t^2/5! + ...
  double cc = inv_factorial(18);
  cc = -inv_factorial(16) + t2 * cc;
  cc = inv_factorial(14) + t2 * cc;
  cc = -inv_factorial(12) + t2 * cc;
  cc = inv_factorial(10) + t2 * cc;
  cc = -inv_factorial(8) + t2 * cc;
  cc = inv_factorial(6) + t2 * cc;
  cc = -inv_factorial(4) + t2 * cc;
  cc = inv_factorial(2) + t2 * cc;
  const double cs = 1.0 - t2 * cc;  // cc holds 1/2! - t^2/4! + ...
  // j = 1: (cos, sin) = (-sn, cs); j = 2: (-cs, -sn); j = 3: (sn, -cs); j = 0, 4: (cs, sn).
  const double odd = (j == 1.0 || j == 3.0) ? 1.0 : 0.0;
  const double c0 = odd * sn + (1.0 - odd) * cs, s0 = odd * cs + (1.0 - odd) * sn;  // exact
  *c_out = ((j == 1.0 || j == 2.0) ? -1.0 : 1.0) * c0;
  *s_out = ((j == 2.0 || j == 3.0) ? -1.0 : 1.0) * s0;
}

inline std::uint64_t uniform_bits(std::uint64_t mixed_seed, std::uint64_t i) {
  return splitmix64(mixed_seed ^ (i * 0xd1b54a32d192ed03ULL));
}

/// The Box-Muller pair `pair` of stream `seed` (see normal_pair), given splitmix64(seed).
inline void pair_from_mixed(std::uint64_t ms, std::uint64_t pair, double* z0, double* z1) {
  const double u1 = 1.0 - bits_to_unit(uniform_bits(ms, 2 * pair));  // (0, 1]
  const double u2 = bits_to_unit(uniform_bits(ms, 2 * pair + 1));    // [0, 1)
  const double r = std::sqrt(-2.0 * log_unit(u1));
  double c, s;
  cos_sin_2pi(u2, &c, &s);
  *z0 = r * c;
  *z1 = r * s;
}

}  // namespace

double normal01(std::uint64_t seed, std::uint64_t i) {
  double z0, z1;
  pair_from_mixed(splitmix64(seed), i >> 1, &z0, &z1);
  return (i & 1) ? z1 : z0;
}

void normal_pair(std::uint64_t seed, std::uint64_t pair, double* z0, double* z1) {
  pair_from_mixed(splitmix64(seed), pair, z0, z1);
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t tag) {
  return splitmix64(seed ^ splitmix64(tag + 0x632be59bd9b4e019ULL));
}

namespace {
constexpr std::int64_t kGrain = 1 << 15;
}

namespace {

/// z0[j], z1[j] = mean + std * (the Box-Muller pair b + j of the stream whose mixed seed is
/// ms), j < m. Cloned for x86-64-v4 (AVX-512, 64-bit vector multiply) and v3 (AVX2) with a
/// baseline fallback, picked at load time; every clone gives the same bits (IEEE basic
/// operations, no contraction: this file is built with -ffp-contract=off).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void normal_block(std::uint64_t ms, std::int64_t b, std::int64_t m, double mean, double std,
                  double* __restrict z0, double* __restrict z1) {
  for (std::int64_t j = 0; j < m; ++j) {
    double a, c;
    pair_from_mixed(ms, static_cast<std::uint64_t>(b + j), &a, &c);
    z0[j] = mean + std * a;
    z1[j] = mean + std * c;
  }
}

}  // namespace

void fill_normal(const TensorView& t, std::uint64_t seed, double mean, double std) {
  // Chunks start at even indices so each Box-Muller pair is computed once; element i still
  // equals normal01(seed, i) (times std, plus mean). Pairs are made in blocks (a loop the
  // compiler vectorizes), then rounded to the dtype.
  const std::int64_t n = t.desc.numel();
  const std::uint64_t ms = splitmix64(seed);
  parallel_for((n + 1) / 2, kGrain / 2, [&](std::int64_t lo, std::int64_t hi) {
    constexpr std::int64_t kBlock = 512;
    double z0[kBlock], z1[kBlock];
    for (std::int64_t b = lo; b < hi; b += kBlock) {
      const std::int64_t m = std::min(kBlock, hi - b);
      normal_block(ms, b, m, mean, std, z0, z1);
      const std::int64_t i0 = 2 * b;
      const std::int64_t pairs_whole = std::min<std::int64_t>(m, (n - i0) / 2);
      if (t.desc.dtype == DType::F32) {
        float* out = static_cast<float*>(t.data) + i0;
        for (std::int64_t j = 0; j < pairs_whole; ++j) {
          out[2 * j] = static_cast<float>(z0[j]);
          out[2 * j + 1] = static_cast<float>(z1[j]);
        }
      } else {
        for (std::int64_t j = 0; j < pairs_whole; ++j) {
          t.set(i0 + 2 * j, z0[j]);
          t.set(i0 + 2 * j + 1, z1[j]);
        }
      }
      if (pairs_whole < m) t.set(i0 + 2 * pairs_whole, z0[pairs_whole]);  // odd n: the last
    }
  });
}

void fill_uniform(const TensorView& t, std::uint64_t seed, double lo_v, double hi_v) {
  parallel_for(t.desc.numel(), kGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i)
      t.set(i, lo_v + (hi_v - lo_v) * uniform01(seed, static_cast<std::uint64_t>(i)));
  });
}

void fill_int_uniform(const TensorView& t, std::uint64_t seed, std::int64_t lo_v,
                      std::int64_t hi_v) {
  const auto span = static_cast<std::uint64_t>(hi_v - lo_v);
  auto* p = static_cast<std::int64_t*>(t.data);
  parallel_for(t.desc.numel(), kGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      const std::uint64_t r = splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(i));
      p[i] = lo_v + static_cast<std::int64_t>(span ? r % span : 0);
    }
  });
}

void fill_constant(const TensorView& t, double x) {
  parallel_for(t.desc.numel(), kGrain, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) t.set(i, x);
  });
}

}  // namespace vb
