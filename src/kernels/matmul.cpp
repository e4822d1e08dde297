// matmul: C[M,N] = A[M,K] · B[K,N] (DESIGN §2), fp32 accumulation expected of kernels.
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/random.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

using kt::make_size;

class MatmulType final : public KernelType {
 public:
  std::string name() const override { return "matmul"; }
  std::string summary() const override {
    return "C[M,N] = A[M,K] · B[K,N], row-major, fp32 accumulation";
  }
  std::vector<AttrSpec> attributes() const override { return {}; }

  Problem make_problem(const Size& size, DType dtype) const override {
    Problem p = kt::start_problem(*this, size, dtype, {"M", "N", "K"});
    const std::int64_t M = p.dim("M"), N = p.dim("N"), K = p.dim("K");
    p.inputs = {kt::tensor("A", dtype, {M, K}), kt::tensor("B", dtype, {K, N})};
    p.outputs = {kt::tensor("C", dtype, {M, N})};
    return p;
  }

  // Regimes:
  //  normal     A ~ N(0,1), B ~ N(0,1/K): C ~ N(0,1) for every K, so fp16 cannot overflow.
  //  near_max   A ~ U(-a,a) with a = max/2 (capped by max_without_fp32_overflow(K)), B ~
  //             N(0,σ²), σ = 1/(12·sqrt(K/3)): std(C) = a/12 = cap/24, so |C| < cap/4 and
  //             no fp32 partial sum can overflow in any order.
  //  tiny       A ~ 4·min_normal·N(0,1) (small normals), B ~ N(0,1/K): C ~ 4·min_normal.
  //  subnormal  A ~ U(-1,1)·min_normal (subnormals of the dtype), B ~ N(0,1). A kernel that
  //             flushes subnormals to zero (FTZ/DAZ) fails.
  void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                const std::vector<TensorView>& in) const override {
    kt::check_arity(p, in.size(), "generate");
    const double K = static_cast<double>(p.dim("K"));
    const std::uint64_t sa = derive_seed(seed, 0), sb = derive_seed(seed, 1);
    const double tiny = dtype_min_normal(p.dtype);
    if (regime == kt::kNormal) {
      fill_normal(in[0], sa);
      fill_normal(in[1], sb, 0.0, 1.0 / std::sqrt(K));
    } else if (regime == "near_max") {
      const double a = 0.5 * kt::max_without_fp32_overflow(p.dtype, K);
      fill_uniform(in[0], sa, -a, a);
      fill_normal(in[1], sb, 0.0, 1.0 / (12.0 * std::sqrt(K / 3.0)));
    } else if (regime == "tiny") {
      fill_normal(in[0], sa, 0.0, 4.0 * tiny);
      fill_normal(in[1], sb, 0.0, 1.0 / std::sqrt(K));
    } else if (regime == "subnormal") {
      fill_uniform(in[0], sa, -tiny, tiny);
      fill_normal(in[1], sb);
    } else if (regime == "subnormal_large_b") {
      // Subnormal A against B of up to 2^70 (fp16: max/8): the products are normal fp32 values,
      // so a kernel that flushes subnormal inputs (DAZ, e.g. bf16 vdpbf16ps chosen from the
      // operands' largest magnitudes) returns 0 where the answer is ~1e-16 (bf16, fp32).
      fill_uniform(in[0], sa, -tiny, tiny);
      fill_normal(in[1], sb, 0.0, std::min(0x1p70, dtype_max(p.dtype) / 8.0));
    } else {
      kt::throw_unknown_regime(name(), regime,
                               {"normal", "near_max", "tiny", "subnormal", "subnormal_large_b"});
    }
  }

  void reference(const Problem& p, const std::vector<Array64>& in,
                 std::vector<Array64>& out) const override {
    kt::check_arity(p, in.size(), "reference");
    const std::int64_t M = p.dim("M"), N = p.dim("N"), K = p.dim("K");
    out.assign(1, kt::make_output({M, N}));
    gemm64(M, N, K, in[0].v.data(), K, in[1].v.data(), N, out[0].v.data(), N, false);
  }

  // 2·M·N·K: one multiply and one add per inner-product term (the BLAS/LINPACK convention).
  double flops(const Problem& p) const override {
    return 2.0 * static_cast<double>(p.dim("M")) * static_cast<double>(p.dim("N")) *
           static_cast<double>(p.dim("K"));
  }

  // Tiles of area M*N/ctas, square-ish: elem / sqrt(area) (see KernelType).
  double operand_bytes_per_flop(const Problem& p, double ctas) const override {
    if (!(ctas > 0)) return 0;
    const double area = std::max(1.0, static_cast<double>(p.dim("M")) *
                                          static_cast<double>(p.dim("N")) / ctas);
    return static_cast<double>(dtype_size(p.dtype)) / std::sqrt(area);
  }

  Size smoke_size() const override { return mnk("64x64x64", 64, 64, 64); }

  // Transformer GEMMs at modest token counts: BERT/GPT-2 FFN up (768→3072) and down
  // (3072→768), a K = 4096 projection (LLaMA-7B hidden) where fp16 accumulation must fail,
  // and a square one. Each ≤ 0.6 GFLOP in the fp64 oracle.
  std::vector<Size> test_sizes() const override {
    return {mnk("128x3072x768", 128, 3072, 768), mnk("128x768x3072", 128, 768, 3072),
            mnk("64x1024x4096", 64, 1024, 4096), mnk("512x512x512", 512, 512, 512)};
  }

  // Tails in every dimension, degenerate K = 1 and M = 1 (GEMV), primes; edge-8x512x1032 is a
  // decode-like shape whose K (16 full 64-wide slices and an 8-wide tail) splits unevenly where a
  // kernel splits K over idle SMs (the CUDA starter's WG_SPLIT_K on a 132-SM H100: 4 chunks of
  // 5, 5, 5 and 2 slices, the last with the tail; a review found no stage covering this).
  std::vector<Size> edge_sizes() const override {
    std::vector<Size> v = {mnk("edge-1x1x1", 1, 1, 1),
                           mnk("edge-1023x4097x1", 1023, 4097, 1),
                           mnk("edge-1x4097x1023", 1, 4097, 1023),
                           mnk("edge-127x251x1021", 127, 251, 1021),
                           mnk("edge-3x13x4097", 3, 13, 4097),
                           mnk("edge-4097x3x127", 4097, 3, 127),
                           mnk("edge-1021x127x13", 1021, 127, 13),
                           mnk("edge-8x512x1032", 8, 512, 1032)};
    // N and K both sweep every remainder mod 16 (K paired through kt::tail_partner); M = 3..5.
    const auto tails = kt::tail_lengths();
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const std::int64_t M = 3 + static_cast<std::int64_t>(i % 3), N = tails[i],
                         K = kt::tail_partner(i);
      v.push_back(mnk(fmt::format("tail-{}x{}x{}", M, N, K), M, N, K));
    }
    return v;
  }

  std::vector<StabilityCase> stability_cases() const override {
    const Size s = mnk("stab-64x128x1024", 64, 128, 1024);
    return {{"values near the dtype's max (A ~ max/2, B scaled so |C| < max/4)", s, "near_max", {}},
            {"tiny normal values in A", s, "tiny", {}},
            {"subnormal values in A", s, "subnormal", {}},
            {"subnormal values in A, B up to 2^70", s, "subnormal_large_b", {}}};
  }

  // Host CPU: 1024³ (2.1 GFLOP: ~10-100 ms on two cores). GPUs: 4096³
  // (137 GFLOP), the usual square benchmark; its fp64 oracle takes ~4 s at 40 GFLOP/s.
  Size benchmark_size(DeviceKind device) const override {
    if (device == DeviceKind::Host) return mnk("1024x1024x1024", 1024, 1024, 1024);
    return mnk("4096x4096x4096", 4096, 4096, 4096);
  }

  /// Reduced-size screens shrink the output columns, then rows; never the reduction length K.
  std::vector<std::string> screen_dims() const override { return {"N", "M"}; }

 private:
  static Size mnk(std::string label, std::int64_t M, std::int64_t N, std::int64_t K) {
    return make_size(std::move(label), {{"M", M}, {"N", N}, {"K", K}});
  }
};

}  // namespace

const KernelType& matmul_type() {
  static const MatmulType type;
  return type;
}

}  // namespace vb
