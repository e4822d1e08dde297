// rmsnorm: y[M,N] = x / sqrt(mean(x²) + eps) · weight over the last dimension
// (Zhang & Sennrich 2019; LLaMA's RMSNorm) (DESIGN §2). Kernels keep the statistic in fp32.
#include <fmt/format.h>
#include <cmath>

#include "core/random.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

using kt::make_size;

class RmsNormType final : public KernelType {
 public:
  std::string name() const override { return "rmsnorm"; }
  std::string summary() const override {
    return "y[M,N] = x / sqrt(mean(x^2) + eps) * weight (last dim, fp32 statistics)";
  }
  std::vector<AttrSpec> attributes() const override {
    return {{"eps", 1e-6, "added to mean(x²) (LLaMA rms_norm_eps 1e-6)"}};
  }

  Problem make_problem(const Size& size, DType dtype) const override {
    Problem p = kt::start_problem(*this, size, dtype, {"M", "N"});
    kt::require_finite(p, "eps", true);
    const std::int64_t M = p.dim("M"), N = p.dim("N");
    p.inputs = {kt::tensor("x", dtype, {M, N}), kt::tensor("weight", dtype, {N})};
    p.outputs = {kt::tensor("y", dtype, {M, N})};
    return p;
  }

  // x follows kt::fill_norm_rows (normal, near_max, large_mean, tiny, subnormal, all_equal,
  // pm300); weight ~ 1 + 0.5·N(0,1) in every regime, so a kernel that ignores it fails.
  void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                const std::vector<TensorView>& in) const override {
    kt::check_arity(p, in.size(), "generate");
    if (!kt::fill_norm_rows(in[0], p.dtype, p.dim("N"), derive_seed(seed, 0), regime))
      kt::throw_unknown_regime(
          name(), regime,
          {"normal", "near_max", "large_mean", "tiny", "subnormal", "all_equal", "pm300"});
    fill_normal(in[1], derive_seed(seed, 1), 1.0, 0.5);
  }

  void reference(const Problem& p, const std::vector<Array64>& in,
                 std::vector<Array64>& out) const override {
    kt::check_arity(p, in.size(), "reference");
    const std::int64_t M = p.dim("M"), N = p.dim("N");
    const double eps = p.attr("eps");
    out.assign(1, kt::make_output({M, N}));
    const double* x = in[0].v.data();
    const double* w = in[1].v.data();
    double* y = out[0].v.data();
    kt::parallel_rows(M, N, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const double* xr = x + r * N;
        double* yr = y + r * N;
        double ss = 0;
        for (std::int64_t j = 0; j < N; ++j) ss += xr[j] * xr[j];
        const double rrms = 1.0 / std::sqrt(ss / static_cast<double>(N) + eps);
        for (std::int64_t j = 0; j < N; ++j) yr[j] = xr[j] * rrms * w[j];
      }
    });
  }

  // 4 per element (VladBud convention): square and add for mean(x²), multiply by 1/rms,
  // multiply by weight.
  double flops(const Problem& p) const override {
    return 4.0 * static_cast<double>(p.dim("M")) * static_cast<double>(p.dim("N"));
  }

  Size smoke_size() const override { return mn("32x256", 32, 256); }

  // Hidden sizes of LLaMA-7B (4096), LLaMA-13B (5120), LLaMA-70B (8192), TinyLlama (2048) and
  // BERT/GPT-2 (768).
  std::vector<Size> test_sizes() const override {
    return {mn("256x4096", 256, 4096), mn("128x5120", 128, 5120), mn("128x8192", 128, 8192),
            mn("512x2048", 512, 2048), mn("1024x768", 1024, 768)};
  }

  std::vector<Size> edge_sizes() const override {
    std::vector<Size> v = {mn("edge-1x1", 1, 1),           mn("edge-3x127", 3, 127),
                           mn("edge-127x1023", 127, 1023), mn("edge-1023x3", 1023, 3),
                           mn("edge-13x4097", 13, 4097),   mn("edge-251x1021", 251, 1021)};
    for (std::int64_t n : kt::tail_lengths())
      v.push_back(mn(fmt::format("tail-3x{}", n), 3, n));
    return v;
  }

  std::vector<StabilityCase> stability_cases() const override {
    const Size s = mn("stab-32x4096", 32, 4096);
    return {{"values near the dtype's max (fp32 statistic stays finite)", s, "near_max", {}},
            {"tiny values (mean(x²) comparable to eps)", s, "tiny", {}},
            // Non-default eps where it matters: a kernel that hard-codes 1e-6 instead of
            // reading attrs[0] fails.
            {"tiny values, eps 1e-5 (LLaMA-2's rms_norm_eps)", with_eps(s, 1e-5), "tiny", {}},
            {"subnormal values", s, "subnormal", {}},
            {"all-equal rows", s, "all_equal", {}},
            {"values ±300, N = 4096: sum of squares > 65504 (fp16 bug report)", s, "pm300", {}}};
  }

  // Host CPU: 4096×4096 (16.8M elements). GPUs: 8192×8192 (67M elements).
  Size benchmark_size(DeviceKind device) const override {
    if (device == DeviceKind::Host) return mn("4096x4096", 4096, 4096);
    return mn("8192x8192", 8192, 8192);
  }

  /// Reduced-size screens shrink the rows (M); never the normalised length N.
  std::vector<std::string> screen_dims() const override { return {"M"}; }

 private:
  static Size mn(std::string label, std::int64_t M, std::int64_t N) {
    return make_size(std::move(label), {{"M", M}, {"N", N}});
  }
  // `s` with eps overridden; the label gains "-eps<value>".
  static Size with_eps(Size s, double eps) {
    s.label += fmt::format("-eps{:g}", eps);
    s.attrs["eps"] = eps;
    return s;
  }
};

}  // namespace

const KernelType& rmsnorm_type() {
  static const RmsNormType type;
  return type;
}

}  // namespace vb
