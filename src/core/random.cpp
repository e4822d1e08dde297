#include "core/random.h"

#include <cmath>

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

double normal01(std::uint64_t seed, std::uint64_t i) {
  // Box-Muller on the uniforms of pair i/2; even i takes the cosine branch, odd i the sine.
  const std::uint64_t pair = i >> 1;
  const double u1 = 1.0 - uniform01(seed, 2 * pair);  // (0, 1]
  const double u2 = uniform01(seed, 2 * pair + 1);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double t = 6.283185307179586 * u2;
  return r * ((i & 1) ? std::sin(t) : std::cos(t));
}

void normal_pair(std::uint64_t seed, std::uint64_t pair, double* z0, double* z1) {
  const double u1 = 1.0 - uniform01(seed, 2 * pair);
  const double u2 = uniform01(seed, 2 * pair + 1);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double t = 6.283185307179586 * u2;
  *z0 = r * std::cos(t);
  *z1 = r * std::sin(t);
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t tag) {
  return splitmix64(seed ^ splitmix64(tag + 0x632be59bd9b4e019ULL));
}

namespace {
constexpr std::int64_t kGrain = 1 << 15;
}

void fill_normal(const TensorView& t, std::uint64_t seed, double mean, double std) {
  // Chunks start at even indices so each Box-Muller pair is computed once; element i still
  // equals normal01(seed, i).
  const std::int64_t n = t.desc.numel();
  parallel_for((n + 1) / 2, kGrain / 2, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t p = lo; p < hi; ++p) {
      double z0, z1;
      normal_pair(seed, static_cast<std::uint64_t>(p), &z0, &z1);
      t.set(2 * p, mean + std * z0);
      if (2 * p + 1 < n) t.set(2 * p + 1, mean + std * z1);
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
