// layernorm: y[B,D] = (x - mean) / sqrt(var + eps) · weight + bias over the last dimension,
// biased variance (Ba, Kiros, Hinton 2016; torch.nn.functional.layer_norm) (DESIGN §2).
#include <fmt/format.h>
#include <cmath>

#include "core/random.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

using kt::make_size;

class LayerNormType final : public KernelType {
 public:
  std::string name() const override { return "layernorm"; }
  std::string summary() const override {
    return "y[B,D] = (x - mean) / sqrt(var + eps) * weight + bias (biased var, last dim)";
  }
  std::vector<AttrSpec> attributes() const override {
    return {{"eps", 1e-5, "added to the variance (PyTorch LayerNorm default 1e-5)"}};
  }

  Problem make_problem(const Size& size, DType dtype) const override {
    Problem p = kt::start_problem(*this, size, dtype, {"B", "D"});
    kt::require_finite(p, "eps", true);
    const std::int64_t B = p.dim("B"), D = p.dim("D");
    p.inputs = {kt::tensor("x", dtype, {B, D}), kt::tensor("weight", dtype, {D}),
                kt::tensor("bias", dtype, {D})};
    p.outputs = {kt::tensor("y", dtype, {B, D})};
    return p;
  }

  // x follows kt::fill_norm_rows (normal, near_max, large_mean, tiny, subnormal, all_equal,
  // pm300). weight ~ 1 + 0.5·N(0,1) and bias ~ 0.5·N(0,1) in every regime, so a kernel that
  // ignores either fails.
  void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                const std::vector<TensorView>& in) const override {
    kt::check_arity(p, in.size(), "generate");
    if (!kt::fill_norm_rows(in[0], p.dtype, p.dim("D"), derive_seed(seed, 0), regime))
      kt::throw_unknown_regime(
          name(), regime,
          {"normal", "near_max", "large_mean", "tiny", "subnormal", "all_equal", "pm300"});
    fill_normal(in[1], derive_seed(seed, 1), 1.0, 0.5);
    fill_normal(in[2], derive_seed(seed, 2), 0.0, 0.5);
  }

  // Two-pass statistics in fp64: mean, then Σ(x - mean)² / D.
  void reference(const Problem& p, const std::vector<Array64>& in,
                 std::vector<Array64>& out) const override {
    kt::check_arity(p, in.size(), "reference");
    const std::int64_t B = p.dim("B"), D = p.dim("D");
    const double eps = p.attr("eps");
    out.assign(1, kt::make_output({B, D}));
    const double* x = in[0].v.data();
    const double* w = in[1].v.data();
    const double* b = in[2].v.data();
    double* y = out[0].v.data();
    kt::parallel_rows(B, D, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const double* xr = x + r * D;
        double* yr = y + r * D;
        double s = 0;
        for (std::int64_t j = 0; j < D; ++j) s += xr[j];
        const double mean = s / static_cast<double>(D);
        double ss = 0;
        for (std::int64_t j = 0; j < D; ++j) ss += (xr[j] - mean) * (xr[j] - mean);
        const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
        for (std::int64_t j = 0; j < D; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
      }
    });
  }

  // 8 per element (VladBud convention): mean 1 (add), variance 3 (subtract, multiply, add),
  // output 4 (subtract mean, multiply by rstd, multiply by weight, add bias).
  double flops(const Problem& p) const override {
    return 8.0 * static_cast<double>(p.dim("B")) * static_cast<double>(p.dim("D"));
  }

  Size smoke_size() const override { return bd("32x256", 32, 256); }

  // Hidden sizes of BERT-base/GPT-2 (768), BERT-large/GPT-2 medium (1024), LLaMA-7B (4096),
  // LLaMA-13B (5120), LLaMA-65B/70B (8192).
  std::vector<Size> test_sizes() const override {
    return {bd("512x768", 512, 768), bd("2048x1024", 2048, 1024), bd("256x4096", 256, 4096),
            bd("128x5120", 128, 5120), bd("64x8192", 64, 8192)};
  }

  std::vector<Size> edge_sizes() const override {
    std::vector<Size> v = {bd("edge-1x1", 1, 1),           bd("edge-3x127", 3, 127),
                           bd("edge-127x1023", 127, 1023), bd("edge-1023x3", 1023, 3),
                           bd("edge-13x4097", 13, 4097),   bd("edge-251x1021", 251, 1021)};
    for (std::int64_t d : kt::tail_lengths())
      v.push_back(bd(fmt::format("tail-3x{}", d), 3, d));
    return v;
  }

  std::vector<StabilityCase> stability_cases() const override {
    const Size s = bd("stab-32x4096", 32, 4096);
    return {{"values near the dtype's max (fp32 statistics stay finite)", s, "near_max", {}},
            // fp16/bf16 only: see kt::fill_norm_rows (fp32 tolerances cannot absorb the
            // rounding of a mean of 2000 at unit spread).
            {"large-mean rows (2000 + N(0,1)): one-pass variance fails",
             s,
             "large_mean",
             {DType::F16, DType::BF16}},
            {"tiny values (variance below eps)", s, "tiny", {}},
            // Non-default eps where it matters (variance ~1e-6): a kernel that hard-codes 1e-5
            // instead of reading attrs[0] fails.
            {"tiny values, eps 1e-6", with_eps(s, 1e-6), "tiny", {}},
            {"tiny values, eps 1e-12 (BERT's layer_norm_eps)", with_eps(s, 1e-12), "tiny", {}},
            {"subnormal values", s, "subnormal", {}},
            {"all-equal rows (zero variance: y = bias)", s, "all_equal", {}},
            {"values ±300, D = 4096: sum of squares > 65504 (fp16 bug report)", s, "pm300", {}}};
  }

  // Host CPU: 4096×4096 (16.8M elements). GPUs: 8192×8192 (67M elements).
  Size benchmark_size(DeviceKind device) const override {
    if (device == DeviceKind::Host) return bd("4096x4096", 4096, 4096);
    return bd("8192x8192", 8192, 8192);
  }

  /// Reduced-size screens shrink the rows (B); never the normalised length D.
  std::vector<std::string> screen_dims() const override { return {"B"}; }

 private:
  static Size bd(std::string label, std::int64_t B, std::int64_t D) {
    return make_size(std::move(label), {{"B", B}, {"D", D}});
  }
  // `s` with eps overridden; the label gains "-eps<value>".
  static Size with_eps(Size s, double eps) {
    s.label += fmt::format("-eps{:g}", eps);
    s.attrs["eps"] = eps;
    return s;
  }
};

}  // namespace

const KernelType& layernorm_type() {
  static const LayerNormType type;
  return type;
}

}  // namespace vb
