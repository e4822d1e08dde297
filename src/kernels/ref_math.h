// Shared pieces of the nine kernel types (src/kernels/*.cpp): the float64 GEMM every oracle
// that multiplies matrices goes through, small fp64 row primitives, problem scaffolding
// (dimension/attribute validation with errors that name the field) and input-generation
// helpers. Nothing here is part of the kernel ABI; only the kernel-type files include it.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "kernels/kernel_type.h"

namespace vb {

/// C[M,N] = A[M,K] · op(B) in float64, row-major with leading dimensions (in elements) lda, ldb,
/// ldc. op(B) = B with B stored [K,N] when `trans_b` is false, Bᵀ with B stored [N,K] when true.
/// C is overwritten (K == 0 gives C = 0). Any M, N, K >= 0, no alignment needed.
/// GotoBLAS-style blocking (Goto & van de Geijn, "Anatomy of High-Performance Matrix
/// Multiplication", ACM TOMS 2008): packed KC×NC panels of B, MC×KC panels of A and an MR×NR
/// register-tile micro-kernel (AVX2+FMA 6×8 when the CPU has it, checked at run time, else a
/// portable 4×4). When `threaded`, the larger of M and N is split over hardware_threads().
/// Results are deterministic for a given machine and thread count.
void gemm64(std::int64_t M, std::int64_t N, std::int64_t K, const double* A, std::int64_t lda,
            const double* B, std::int64_t ldb, double* C, std::int64_t ldc, bool trans_b,
            bool threaded = true);

namespace kt {

// ---- problem scaffolding -----------------------------------------------------------------

/// Throws std::invalid_argument "<kernel>: <field>: <what>".
[[noreturn]] void throw_field(std::string_view kernel, std::string_view field,
                              std::string_view what);

/// Starts a Problem for `type`: checks that `size` has exactly the dimensions `dim_names` (plus
/// any of `optional_dims` it gives, e.g. flash_attention's HKV), each >= 1, and no attribute the
/// type does not declare; checks that `dtype` is floating; fills kernel, size, dtype, attr_names
/// and attrs (size overrides, else defaults; NaN defaults are left for the caller to resolve).
/// An absent optional dimension is left absent (the type supplies its default). Throws
/// std::invalid_argument naming the offending field.
Problem start_problem(const KernelType& type, const Size& size, DType dtype,
                      std::initializer_list<std::string_view> dim_names,
                      std::initializer_list<std::string_view> optional_dims = {});

/// Checks that attribute `name` of p is 0 or 1; throws std::invalid_argument naming it.
void require_flag(const Problem& p, std::string_view name);

/// Checks that attribute `name` of p is finite (and > 0 when `positive`).
void require_finite(const Problem& p, std::string_view name, bool positive);

/// A Size from a label, dimensions and attribute overrides.
Size make_size(std::string label, std::map<std::string, std::int64_t> dims,
               std::map<std::string, double> attrs = {});

/// A tensor descriptor.
TensorDesc tensor(std::string name, DType dtype, std::vector<std::int64_t> shape);

/// An oracle output of the given shape, zero-filled.
Array64 make_output(std::vector<std::int64_t> shape);

/// Checks the count of inputs handed to generate/reference against the problem's.
void check_arity(const Problem& p, std::size_t n_inputs, const char* where);

// ---- input generation ----------------------------------------------------------------------

/// The regime every type understands: ordinary inputs.
inline constexpr std::string_view kNormal = "normal";

/// Throws std::invalid_argument naming the unknown regime and the ones `kernel` knows.
[[noreturn]] void throw_unknown_regime(std::string_view kernel, std::string_view regime,
                                       std::initializer_list<std::string_view> known);

/// Calls t.set(i, f(i)) for every element i, in parallel (f must be thread-safe and pure).
template <class F>
void fill_each(const TensorView& t, F&& f) {
  parallel_for(t.desc.numel(), 1 << 14, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) t.set(i, f(i));
  });
}

/// Largest magnitude m <= dtype_max(t) such that n values of magnitude m sum without overflow
/// in fp32 (the accumulation type DESIGN §2 prescribes): min(dtype_max(t), FLT_MAX / n).
/// For fp16 this is 65504 for every practical n; for bf16/fp32 it caps near-max regimes so that
/// the exact result is finite and no fp32 partial sum can overflow in any summation order.
double max_without_fp32_overflow(DType t, double n);

/// Row lengths of the tail sweep every type adds to its edge sizes (issue 18): 32 + r for
/// r = 1..15, i.e. every nonzero remainder modulo 16 (hence modulo 8, 4 and 2), each after two
/// full 16-wide vectors. Kernels vectorize rows in 8 or 16 fp32 lanes (AVX2, AVX-512) or 8/16
/// 16-bit lanes and handle the rest in a tail; on these short rows a wrong tail is a large part
/// of the row, so the localized check cannot miss it.
std::vector<std::int64_t> tail_lengths();

/// The r-th tail length's partner for a second vectorized dimension (matmul's K beside N,
/// attention's S beside D): a permutation of tail_lengths() so that both dimensions cover
/// every remainder and no size pairs equal remainders. `i` indexes tail_lengths().
std::int64_t tail_partner(std::size_t i);

/// A permutation of [0, n) drawn from stream `seed` (Fisher-Yates), for shuffled rows.
std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed);

/// One family of rotary tables as models build them (HF transformers, modeling_rope_utils.py):
/// angle(s, i) = (offset + s) / position_scale · inv_freq_i, inv_freq_i = base^(-2i/D), with
/// LLaMA-3.1's frequency-dependent rescaling of inv_freq when `llama3_factor` > 0.
struct RopeTables {
  std::string name;             ///< e.g. "llama3.1 base 500000, offset 731"
  double base = 10000;          ///< rope_theta
  double position_scale = 1;    ///< linear position interpolation factor (Chen et al. 2023)
  double llama3_factor = 0;     ///< LLaMA-3.1 rope_scaling factor (0 = none)
  std::int64_t offset = 0;      ///< position of the first row (a KV-cache decode step)
};

/// The table family used for a problem of shape (S, D) under `seed`. Deterministic in
/// (seed, S, D); over seeds and shapes it cycles through four real configurations, none of
/// which is the plain base-10000 table starting at position 0, so a kernel that synthesizes
/// cos/sin instead of reading them fails:
///  0 LLaMA-2 decode: base 10000, positions offset by 1..4096;
///  1 LLaMA-3.1: base 500000, rope_scaling llama3 (factor 8, low/high freq factors 1/4,
///    original context 8192), offset 0..8191;
///  2 linear position interpolation x4 (HF rope_scaling "linear"): base 10000, offset 0..4095;
///  3 Qwen2 / CodeLlama: base 1000000, offset 1..4096.
RopeTables rope_tables_for(std::uint64_t seed, std::int64_t S, std::int64_t D);

/// Fills cos[S, D/2] and sin[S, D/2] with the tables of `tables` (cos/sin of angle(s, i)
/// computed in double, then rounded to the views' dtype).
void fill_rope_tables(const TensorView& cos_t, const TensorView& sin_t, std::int64_t S,
                      std::int64_t D, const RopeTables& tables);

/// Fills x[rows, D] of a normalisation type (layernorm, rmsnorm) under one of its regimes and
/// returns true, or returns false for a regime it does not know:
///  normal      N(0,1).
///  near_max    U(-a,a), a = min(0.9·max, sqrt(FLT_MAX/D)/4): fp16 values near 65504 (Σx² far
///              above fp16's range, fine in fp32); for bf16/fp32 the cap keeps Σx² finite in
///              fp32 statistics, so the exact result is well-defined and reachable.
///  large_mean  2000 + N(0,1) (bf16: 2000 + 8·N(0,1); bf16's spacing at 2000 is 8): one-pass
///              E[x²]−E[x]² in fp32 cancels catastrophically. Meant for fp16/bf16 inputs: with
///              fp32 inputs even a correctly rounded fp32 mean is off by up to 6e-5 (half an ulp
///              of 2000), i.e. ~3e-5 relative error in y, above fp32 tolerances.
///  tiny        1e-3·N(0,1): mean(x²) ~ 1e-6, comparable to or below eps, so eps matters.
///  subnormal   U(-1,1)·min_normal (the dtype's subnormals).
///  all_equal   row r constant c_r = k/8, k uniform in [-24, 24] (zero variance). Few significant
///              bits, so fp32 row sums are exact in any order and the fp32 mean equals c_r: the
///              exact answer (layernorm: y = bias) is reachable by fp32 kernels.
///  pm300       ±(300 + 30·N(0,1)), random signs: every x² exceeds 65504 (the fp16 "sum of
///              squares overflows" bug reports); results are O(1) and must stay finite.
bool fill_norm_rows(const TensorView& x, DType dtype, std::int64_t D, std::uint64_t seed,
                    std::string_view regime);

// ---- oracle primitives ---------------------------------------------------------------------

/// Runs body(r0, r1) over row ranges of [0, rows) in parallel, with chunks of roughly 32k
/// elements of `row_len` each (at least one row).
void parallel_rows(std::int64_t rows, std::int64_t row_len,
                   const std::function<void(std::int64_t, std::int64_t)>& body);

/// silu(z) = z / (1 + exp(-z)) (Elfwing et al. 2018; SwiGLU: Shazeer 2020), exact at ±inf.
double silu64(double z);

/// In-place softmax of x[0..n) with max subtraction. IEEE semantics give PyTorch's: -inf
/// entries become 0, a row of all -inf (or with NaN) becomes all NaN.
void softmax_row64(double* x, std::int64_t n);

/// log(sum(exp(x[0..n)))) with max subtraction; -inf when every entry is -inf.
double logsumexp64(const double* x, std::int64_t n);

/// Neumaier-compensated sum of x[0..n) (Neumaier 1974): exact to ~1 ulp of the result for any
/// realistic n, so cancellations such as 32000 - 32000 give exact zeros.
double sum64(const double* x, std::int64_t n);

}  // namespace kt
}  // namespace vb
