#include "kernels/ref_math.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "core/random.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define VB_GEMM_X86 1
#endif

namespace vb {

// ---- gemm64 ----------------------------------------------------------------------------------

namespace {

// Cache blocking for doubles: an MC×KC panel of A (192 KiB) stays in L2, a KC×NR micro-panel
// of B (16 KiB) in L1, the KC×NC panel of B (4 MiB) in L3 (Goto & van de Geijn 2008, §6).
constexpr std::int64_t kKC = 256;
constexpr std::int64_t kMC = 96;  // multiple of both MR values (6, 4)
constexpr std::int64_t kNC = 2048;

std::int64_t round_up(std::int64_t x, std::int64_t m) {
  return (x + m - 1) / m * m;
}

// c[MR×NR, row-major, stride NR] = sum_k a[k*MR + i] * b[k*NR + j] over k < kc.
using MicroKernel = void (*)(std::int64_t kc, const double* a, const double* b, double* c);

void micro_portable_4x4(std::int64_t kc, const double* a, const double* b, double* c) {
  double acc[4][4] = {};
  for (std::int64_t k = 0; k < kc; ++k, a += 4, b += 4)
    for (int i = 0; i < 4; ++i) {
      const double ai = a[i];
      for (int j = 0; j < 4; ++j) acc[i][j] += ai * b[j];
    }
  std::memcpy(c, acc, sizeof acc);
}

#ifdef VB_GEMM_X86
__attribute__((target("avx2,fma"))) void micro_avx2_6x8(std::int64_t kc, const double* a,
                                                        const double* b, double* c) {
  __m256d c00 = _mm256_setzero_pd(), c01 = _mm256_setzero_pd();
  __m256d c10 = _mm256_setzero_pd(), c11 = _mm256_setzero_pd();
  __m256d c20 = _mm256_setzero_pd(), c21 = _mm256_setzero_pd();
  __m256d c30 = _mm256_setzero_pd(), c31 = _mm256_setzero_pd();
  __m256d c40 = _mm256_setzero_pd(), c41 = _mm256_setzero_pd();
  __m256d c50 = _mm256_setzero_pd(), c51 = _mm256_setzero_pd();
  for (std::int64_t k = 0; k < kc; ++k, a += 6, b += 8) {
    const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
    __m256d ai = _mm256_broadcast_sd(a + 0);
    c00 = _mm256_fmadd_pd(ai, b0, c00);
    c01 = _mm256_fmadd_pd(ai, b1, c01);
    ai = _mm256_broadcast_sd(a + 1);
    c10 = _mm256_fmadd_pd(ai, b0, c10);
    c11 = _mm256_fmadd_pd(ai, b1, c11);
    ai = _mm256_broadcast_sd(a + 2);
    c20 = _mm256_fmadd_pd(ai, b0, c20);
    c21 = _mm256_fmadd_pd(ai, b1, c21);
    ai = _mm256_broadcast_sd(a + 3);
    c30 = _mm256_fmadd_pd(ai, b0, c30);
    c31 = _mm256_fmadd_pd(ai, b1, c31);
    ai = _mm256_broadcast_sd(a + 4);
    c40 = _mm256_fmadd_pd(ai, b0, c40);
    c41 = _mm256_fmadd_pd(ai, b1, c41);
    ai = _mm256_broadcast_sd(a + 5);
    c50 = _mm256_fmadd_pd(ai, b0, c50);
    c51 = _mm256_fmadd_pd(ai, b1, c51);
  }
  _mm256_storeu_pd(c + 0, c00);
  _mm256_storeu_pd(c + 4, c01);
  _mm256_storeu_pd(c + 8, c10);
  _mm256_storeu_pd(c + 12, c11);
  _mm256_storeu_pd(c + 16, c20);
  _mm256_storeu_pd(c + 20, c21);
  _mm256_storeu_pd(c + 24, c30);
  _mm256_storeu_pd(c + 28, c31);
  _mm256_storeu_pd(c + 32, c40);
  _mm256_storeu_pd(c + 36, c41);
  _mm256_storeu_pd(c + 40, c50);
  _mm256_storeu_pd(c + 44, c51);
}
#endif

// Single-threaded blocked GEMM with an MR×NR micro-kernel.
template <int MR, int NR>
void gemm_serial(MicroKernel micro, std::int64_t M, std::int64_t N, std::int64_t K, const double* A,
                 std::int64_t lda, const double* B, std::int64_t ldb, double* C, std::int64_t ldc,
                 bool trans_b) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (std::int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0);
    return;
  }
  static_assert(kMC % MR == 0);
  const std::int64_t kc_max = std::min(kKC, K);
  std::vector<double> ap(static_cast<std::size_t>(std::min(kMC, round_up(M, MR)) * kc_max));
  std::vector<double> bp(static_cast<std::size_t>(std::min(kNC, round_up(N, NR)) * kc_max));
  double tile[MR * NR];

  for (std::int64_t jc = 0; jc < N; jc += kNC) {
    const std::int64_t nc = std::min(kNC, N - jc);
    for (std::int64_t pc = 0; pc < K; pc += kKC) {
      const std::int64_t kc = std::min(kKC, K - pc);
      // Pack B[pc:pc+kc, jc:jc+nc] into NR-wide panels, zero-padded: bp[jp*kc + k*NR + j].
      for (std::int64_t jp = 0; jp < nc; jp += NR) {
        double* dst = bp.data() + jp * kc;
        const std::int64_t nj = std::min<std::int64_t>(NR, nc - jp);
        if (!trans_b) {
          for (std::int64_t k = 0; k < kc; ++k) {
            const double* src = B + (pc + k) * ldb + jc + jp;
            for (std::int64_t j = 0; j < NR; ++j) dst[k * NR + j] = j < nj ? src[j] : 0.0;
          }
        } else {
          for (std::int64_t j = 0; j < NR; ++j) {
            if (j < nj) {
              const double* src = B + (jc + jp + j) * ldb + pc;
              for (std::int64_t k = 0; k < kc; ++k) dst[k * NR + j] = src[k];
            } else {
              for (std::int64_t k = 0; k < kc; ++k) dst[k * NR + j] = 0.0;
            }
          }
        }
      }
      for (std::int64_t ic = 0; ic < M; ic += kMC) {
        const std::int64_t mc = std::min(kMC, M - ic);
        // Pack A[ic:ic+mc, pc:pc+kc] into MR-tall panels, zero-padded: ap[ip*kc + k*MR + i].
        for (std::int64_t ip = 0; ip < mc; ip += MR) {
          double* dst = ap.data() + ip * kc;
          const std::int64_t ni = std::min<std::int64_t>(MR, mc - ip);
          for (std::int64_t i = 0; i < MR; ++i) {
            if (i < ni) {
              const double* src = A + (ic + ip + i) * lda + pc;
              for (std::int64_t k = 0; k < kc; ++k) dst[k * MR + i] = src[k];
            } else {
              for (std::int64_t k = 0; k < kc; ++k) dst[k * MR + i] = 0.0;
            }
          }
        }
        for (std::int64_t jr = 0; jr < nc; jr += NR) {
          const std::int64_t nj = std::min<std::int64_t>(NR, nc - jr);
          for (std::int64_t ir = 0; ir < mc; ir += MR) {
            const std::int64_t ni = std::min<std::int64_t>(MR, mc - ir);
            micro(kc, ap.data() + ir * kc, bp.data() + jr * kc, tile);
            double* cp = C + (ic + ir) * ldc + jc + jr;
            if (pc == 0) {
              for (std::int64_t i = 0; i < ni; ++i)
                for (std::int64_t j = 0; j < nj; ++j) cp[i * ldc + j] = tile[i * NR + j];
            } else {
              for (std::int64_t i = 0; i < ni; ++i)
                for (std::int64_t j = 0; j < nj; ++j) cp[i * ldc + j] += tile[i * NR + j];
            }
          }
        }
      }
    }
  }
}

using SerialGemm = void (*)(std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t,
                            const double*, std::int64_t, double*, std::int64_t, bool);

void gemm_serial_portable(std::int64_t M, std::int64_t N, std::int64_t K, const double* A,
                          std::int64_t lda, const double* B, std::int64_t ldb, double* C,
                          std::int64_t ldc, bool trans_b) {
  gemm_serial<4, 4>(micro_portable_4x4, M, N, K, A, lda, B, ldb, C, ldc, trans_b);
}

#ifdef VB_GEMM_X86
void gemm_serial_avx2(std::int64_t M, std::int64_t N, std::int64_t K, const double* A,
                      std::int64_t lda, const double* B, std::int64_t ldb, double* C,
                      std::int64_t ldc, bool trans_b) {
  gemm_serial<6, 8>(micro_avx2_6x8, M, N, K, A, lda, B, ldb, C, ldc, trans_b);
}
#endif

SerialGemm pick_serial_gemm() {
#ifdef VB_GEMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return gemm_serial_avx2;
#endif
  return gemm_serial_portable;
}

}  // namespace

void gemm64(std::int64_t M, std::int64_t N, std::int64_t K, const double* A, std::int64_t lda,
            const double* B, std::int64_t ldb, double* C, std::int64_t ldc, bool trans_b,
            bool threaded) {
  static const SerialGemm serial = pick_serial_gemm();
  if (M <= 0 || N <= 0) return;
  const int nt = threaded ? hardware_threads() : 1;
  // Below ~2 MFLOP a thread start costs more than it saves.
  if (nt <= 1 || static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < 1e6) {
    serial(M, N, K, A, lda, B, ldb, C, ldc, trans_b);
    return;
  }
  if (M >= N) {
    const std::int64_t grain = round_up((M + nt - 1) / nt, 8);
    parallel_for(M, grain, [&](std::int64_t lo, std::int64_t hi) {
      serial(hi - lo, N, K, A + lo * lda, lda, B, ldb, C + lo * ldc, ldc, trans_b);
    });
  } else {
    const std::int64_t grain = round_up((N + nt - 1) / nt, 8);
    parallel_for(N, grain, [&](std::int64_t lo, std::int64_t hi) {
      const double* b = trans_b ? B + lo * ldb : B + lo;
      serial(M, hi - lo, K, A, lda, b, ldb, C + lo, ldc, trans_b);
    });
  }
}

namespace kt {

// ---- problem scaffolding -----------------------------------------------------------------

void throw_field(std::string_view kernel, std::string_view field, std::string_view what) {
  std::string msg(kernel);
  msg += ": ";
  msg += field;
  msg += ": ";
  msg += what;
  throw std::invalid_argument(msg);
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}
}  // namespace

Problem start_problem(const KernelType& type, const Size& size, DType dtype,
                      std::initializer_list<std::string_view> dim_names,
                      std::initializer_list<std::string_view> optional_dims) {
  Problem p;
  p.kernel = type.name();
  p.size = size;
  p.dtype = dtype;
  if (!is_floating(dtype))
    throw_field(
        p.kernel, "dtype",
        "must be a floating type (fp16, bf16, fp32), got " + std::string(dtype_name(dtype)));
  std::vector<std::string> expected, allowed;
  for (auto d : dim_names) expected.emplace_back(d);
  allowed = expected;
  for (auto d : optional_dims) allowed.emplace_back(d);
  for (const auto& name : allowed) {
    auto it = size.dims.find(name);
    const bool optional =
        std::find(expected.begin(), expected.end(), name) == expected.end();
    if (it == size.dims.end() && optional) continue;
    if (it == size.dims.end())
      throw_field(p.kernel, "dimension '" + name + "'",
                  "missing from size '" + size.label + "' (needs " + join(expected) + ")");
    if (it->second < 1)
      throw_field(p.kernel, "dimension '" + name + "'",
                  "must be >= 1, got " + std::to_string(it->second));
    if (it->second > (std::int64_t{1} << 40))
      throw_field(p.kernel, "dimension '" + name + "'",
                  "is implausibly large: " + std::to_string(it->second));
  }
  for (const auto& [name, value] : size.dims) {
    (void)value;
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
      throw_field(p.kernel, "dimension '" + name + "'",
                  "is not a dimension of " + p.kernel + " (expected " + join(expected) +
                      (allowed.size() > expected.size()
                           ? "; optional " + join({allowed.begin() +
                                                       static_cast<std::ptrdiff_t>(expected.size()),
                                                   allowed.end()})
                           : std::string()) +
                      ")");
  }
  const auto specs = type.attributes();
  std::vector<std::string> names;
  for (const auto& a : specs) names.push_back(a.name);
  for (const auto& [name, value] : size.attrs) {
    (void)value;
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw_field(
          p.kernel, "attribute '" + name + "'",
          "is not an attribute of " + p.kernel +
              (names.empty() ? std::string(" (it has none)") : " (has " + join(names) + ")"));
  }
  p.attr_names = names;
  p.attrs = type.resolve_attrs(size);
  return p;
}

void require_flag(const Problem& p, std::string_view name) {
  const double v = p.attr(name);
  if (v != 0.0 && v != 1.0) {
    std::ostringstream o;
    o << "must be 0 or 1, got " << v;
    throw_field(p.kernel, "attribute '" + std::string(name) + "'", o.str());
  }
}

void require_finite(const Problem& p, std::string_view name, bool positive) {
  const double v = p.attr(name);
  if (!std::isfinite(v) || (positive && !(v > 0))) {
    std::ostringstream o;
    o << (positive ? "must be finite and > 0, got " : "must be finite, got ") << v;
    throw_field(p.kernel, "attribute '" + std::string(name) + "'", o.str());
  }
}

Size make_size(std::string label, std::map<std::string, std::int64_t> dims,
               std::map<std::string, double> attrs) {
  Size s;
  s.label = std::move(label);
  s.dims = std::move(dims);
  s.attrs = std::move(attrs);
  return s;
}

TensorDesc tensor(std::string name, DType dtype, std::vector<std::int64_t> shape) {
  TensorDesc t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  return t;
}

Array64 make_output(std::vector<std::int64_t> shape) {
  Array64 a;
  a.v.assign(static_cast<std::size_t>(shape_numel(shape)), 0.0);
  a.shape = std::move(shape);
  return a;
}

void check_arity(const Problem& p, std::size_t n_inputs, const char* where) {
  if (n_inputs != p.inputs.size())
    throw std::invalid_argument(p.kernel + "::" + where + ": expected " +
                                std::to_string(p.inputs.size()) + " inputs, got " +
                                std::to_string(n_inputs));
}

// ---- input generation ----------------------------------------------------------------------

void throw_unknown_regime(std::string_view kernel, std::string_view regime,
                          std::initializer_list<std::string_view> known) {
  std::string k;
  for (auto r : known) k += (k.empty() ? "" : ", ") + std::string(r);
  throw_field(kernel, "regime '" + std::string(regime) + "'", "unknown (known: " + k + ")");
}

double max_without_fp32_overflow(DType t, double n) {
  return std::min(dtype_max(t), static_cast<double>(FLT_MAX) / std::max(n, 1.0));
}

std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(uniform01(seed, static_cast<std::uint64_t>(i)) *
                                             static_cast<double>(i + 1));
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(std::min(j, i))]);
  }
  return p;
}

std::vector<std::int64_t> tail_lengths() {
  std::vector<std::int64_t> v;
  for (std::int64_t r = 1; r <= 15; ++r) v.push_back(32 + r);
  return v;
}

std::int64_t tail_partner(std::size_t i) {
  // r -> (r + 6) mod 15 + 1: a bijection of 1..15 without fixed points.
  const auto r = static_cast<std::int64_t>(i) + 1;
  return 32 + (r + 6) % 15 + 1;
}

namespace {
std::string fmt_rope(const char* what, std::int64_t offset) {
  return std::string(what) + ", positions from " + std::to_string(offset);
}
}  // namespace

RopeTables rope_tables_for(std::uint64_t seed, std::int64_t S, std::int64_t D) {
  const std::uint64_t h =
      derive_seed(seed, static_cast<std::uint64_t>(S) * 1000003ULL + static_cast<std::uint64_t>(D));
  const auto draw = [&](std::uint64_t i, std::int64_t lo, std::int64_t hi) {  // [lo, hi]
    return lo + static_cast<std::int64_t>(uniform01(h, i) * static_cast<double>(hi - lo + 1));
  };
  RopeTables t;
  switch (h % 4) {
    case 0:
      t.base = 10000;
      t.offset = draw(1, 1, 4096);
      t.name = fmt_rope("llama2 decode, base 10000", t.offset);
      break;
    case 1:
      t.base = 500000;
      t.llama3_factor = 8;
      t.offset = draw(1, 0, 8191);
      t.name = fmt_rope("llama3.1, base 500000, rope_scaling llama3 factor 8", t.offset);
      break;
    case 2:
      t.base = 10000;
      t.position_scale = 4;
      t.offset = draw(1, 0, 4095);
      t.name = fmt_rope("linear position interpolation x4, base 10000", t.offset);
      break;
    default:
      t.base = 1000000;
      t.offset = draw(1, 1, 4096);
      t.name = fmt_rope("qwen2, base 1000000", t.offset);
      break;
  }
  return t;
}

void fill_rope_tables(const TensorView& cos_t, const TensorView& sin_t, std::int64_t S,
                      std::int64_t D, const RopeTables& t) {
  const std::int64_t half = D / 2;
  (void)S;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    double f = std::pow(t.base, -2.0 * static_cast<double>(i) / static_cast<double>(D));
    if (t.llama3_factor > 0) {
      // transformers _compute_llama3_parameters: low_freq_factor 1, high_freq_factor 4,
      // original_max_position_embeddings 8192.
      constexpr double kLow = 1, kHigh = 4, kOld = 8192;
      const double wavelen = 2 * 3.14159265358979323846 / f;
      if (wavelen > kOld / kLow) {
        f /= t.llama3_factor;
      } else if (wavelen >= kOld / kHigh) {
        const double smooth = (kOld / wavelen - kLow) / (kHigh - kLow);
        f = (1 - smooth) * f / t.llama3_factor + smooth * f;
      }
    }
    inv_freq[static_cast<std::size_t>(i)] = f;
  }
  auto angle = [&](std::int64_t idx) {
    const std::int64_t s = idx / half, i = idx % half;
    return static_cast<double>(t.offset + s) / t.position_scale *
           inv_freq[static_cast<std::size_t>(i)];
  };
  fill_each(cos_t, [&](std::int64_t idx) { return std::cos(angle(idx)); });
  fill_each(sin_t, [&](std::int64_t idx) { return std::sin(angle(idx)); });
}

bool fill_norm_rows(const TensorView& x, DType dtype, std::int64_t D, std::uint64_t seed,
                    std::string_view regime) {
  const std::uint64_t s0 = derive_seed(seed, 100), s1 = derive_seed(seed, 101);
  if (regime == kNormal) {
    fill_normal(x, s0);
  } else if (regime == "near_max") {
    const double a = std::min(0.9 * dtype_max(dtype),
                              std::sqrt(static_cast<double>(FLT_MAX) / static_cast<double>(D)) / 4);
    fill_uniform(x, s0, -a, a);
  } else if (regime == "large_mean") {
    fill_normal(x, s0, 2000.0, dtype == DType::BF16 ? 8.0 : 1.0);
  } else if (regime == "tiny") {
    fill_normal(x, s0, 0.0, 1e-3);
  } else if (regime == "subnormal") {
    const double t = dtype_min_normal(dtype);
    fill_uniform(x, s0, -t, t);
  } else if (regime == "all_equal") {
    fill_each(x, [&](std::int64_t i) {
      const double u = uniform01(s1, static_cast<std::uint64_t>(i / D));
      return std::floor(u * 49.0 - 24.0) / 8.0;  // k/8, k in [-24, 24]
    });
  } else if (regime == "pm300") {
    fill_each(x, [&](std::int64_t i) {
      const auto u = static_cast<std::uint64_t>(i);
      const double m = 300.0 + 30.0 * normal01(s0, u);
      return uniform01(s1, u) < 0.5 ? -m : m;
    });
  } else {
    return false;
  }
  return true;
}

// ---- oracle primitives ---------------------------------------------------------------------

void parallel_rows(std::int64_t rows, std::int64_t row_len,
                   const std::function<void(std::int64_t, std::int64_t)>& body) {
  const std::int64_t grain =
      std::max<std::int64_t>(1, (std::int64_t{1} << 15) / std::max<std::int64_t>(row_len, 1));
  parallel_for(rows, grain, body);
}

double silu64(double z) {
  if (std::isinf(z)) return z > 0 ? z : -0.0;
  if (z >= 0) return z / (1.0 + std::exp(-z));
  const double e = std::exp(z);  // z < 0: no overflow
  return z * e / (1.0 + e);
}

void softmax_row64(double* x, std::int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  double s = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - m);  // all -inf: -inf - -inf = NaN, as PyTorch gives
    s += x[j];
  }
  const double inv = 1.0 / s;
  for (std::int64_t j = 0; j < n; ++j) x[j] *= inv;
}

double logsumexp64(const double* x, std::int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (std::int64_t j = 0; j < n; ++j) {
    nan |= std::isnan(x[j]);
    m = x[j] > m ? x[j] : m;
  }
  if (nan) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(m)) return m;
  double s = 0;
  for (std::int64_t j = 0; j < n; ++j) s += std::exp(x[j] - m);
  return m + std::log(s);
}

double sum64(const double* x, std::int64_t n) {
  double s = 0, c = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const double t = s + x[j];
    if (std::fabs(s) >= std::fabs(x[j]))
      c += (s - t) + x[j];
    else
      c += (x[j] - t) + s;
    s = t;
  }
  if (!std::isfinite(s)) {  // inf/NaN present (or overflow): IEEE sum semantics
    double naive = 0;
    for (std::int64_t j = 0; j < n; ++j) naive += x[j];
    return naive;
  }
  return s + c;
}

}  // namespace kt
}  // namespace vb
