// softmax: y[R,C] = softmax(x[R,C]) over the last dimension, max-subtracted (DESIGN §2).
// PyTorch semantics: -inf entries give 0; a row of all -inf gives a row of NaN.
#include <fmt/format.h>
#include <cmath>
#include <limits>

#include "core/random.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

using kt::make_size;

constexpr double kInf = std::numeric_limits<double>::infinity();

class SoftmaxType final : public KernelType {
 public:
  std::string name() const override { return "softmax"; }
  std::string summary() const override {
    return "y[R,C] = softmax over the last dim (max-subtracted; all -inf row -> NaN)";
  }
  std::vector<AttrSpec> attributes() const override { return {}; }

  Problem make_problem(const Size& size, DType dtype) const override {
    Problem p = kt::start_problem(*this, size, dtype, {"R", "C"});
    const std::int64_t R = p.dim("R"), C = p.dim("C");
    p.inputs = {kt::tensor("x", dtype, {R, C})};
    p.outputs = {kt::tensor("y", dtype, {R, C})};
    return p;
  }

  // Regimes (x only):
  //  normal        N(0,1).
  //  near_max      ±U(0.5,1)·0.9·max: exp without max subtraction overflows; the exact result
  //                is (nearly) one-hot, ties split evenly.
  //  large_offset  200 + 4·N(0,1): beyond exp's fp32 range (88.7) unless max-subtracted.
  //  subnormal     U(-1,1)·min_normal: y ≈ 1/C.
  //  all_equal     row r constant c_r = 3·N(0,1): y = 1/C exactly.
  //  masked_inf    N(0,1) with -inf entries by row pattern (r mod 8): 1,2 random half masked
  //                (entry r mod C kept), 3 causal-like (j > r mod C masked), 5 ALL -inf
  //                (expected output: a NaN row), 6 a single finite entry (expected 1 there);
  //                other rows unmasked.
  //  row_12_0_0_0  row r is 12 at column r mod C, 0 elsewhere: with C = 4 the 12-entry is
  //                1/(1+3e^-12) = 0.9999816 and the others 6.14e-6 (fp16 subnormal range) —
  //                the fp16 softmax bug report case.
  void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                const std::vector<TensorView>& in) const override {
    kt::check_arity(p, in.size(), "generate");
    const std::int64_t C = p.dim("C");
    const std::uint64_t s0 = derive_seed(seed, 0), s1 = derive_seed(seed, 1),
                        s2 = derive_seed(seed, 2);
    const TensorView& x = in[0];
    if (regime == kt::kNormal) {
      fill_normal(x, s0);
    } else if (regime == "near_max") {
      const double a = 0.9 * dtype_max(p.dtype);
      kt::fill_each(x, [&](std::int64_t i) {
        const auto u = static_cast<std::uint64_t>(i);
        const double m = a * (0.5 + 0.5 * uniform01(s0, u));
        return uniform01(s1, u) < 0.5 ? -m : m;
      });
    } else if (regime == "large_offset") {
      fill_normal(x, s0, 200.0, 4.0);
    } else if (regime == "subnormal") {
      const double t = dtype_min_normal(p.dtype);
      fill_uniform(x, s0, -t, t);
    } else if (regime == "all_equal") {
      kt::fill_each(
          x, [&](std::int64_t i) { return 3.0 * normal01(s1, static_cast<std::uint64_t>(i / C)); });
    } else if (regime == "masked_inf") {
      kt::fill_each(x, [&](std::int64_t i) {
        const std::int64_t r = i / C, j = i % C, keep = r % C;
        const double v = normal01(s0, static_cast<std::uint64_t>(i));
        switch (r % 8) {
          case 1:
          case 2:
            return (j != keep && uniform01(s2, static_cast<std::uint64_t>(i)) < 0.5) ? -kInf : v;
          case 3:
            return j > keep ? -kInf : v;
          case 5:
            return -kInf;
          case 6:
            return j == keep ? v : -kInf;
          default:
            return v;
        }
      });
    } else if (regime == "row_12_0_0_0") {
      kt::fill_each(x, [&](std::int64_t i) { return (i % C) == (i / C) % C ? 12.0 : 0.0; });
    } else {
      kt::throw_unknown_regime(name(), regime,
                               {"normal", "near_max", "large_offset", "subnormal", "all_equal",
                                "masked_inf", "row_12_0_0_0"});
    }
  }

  void reference(const Problem& p, const std::vector<Array64>& in,
                 std::vector<Array64>& out) const override {
    kt::check_arity(p, in.size(), "reference");
    const std::int64_t R = p.dim("R"), C = p.dim("C");
    out.assign(1, Array64{{R, C}, in[0].v, {}});
    double* y = out[0].v.data();
    kt::parallel_rows(R, C, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) kt::softmax_row64(y + r * C, C);
    });
  }

  // 5 per element (VladBud convention, exp counted as one FLOP): max-compare, subtract, exp,
  // sum, scale by 1/sum.
  double flops(const Problem& p) const override {
    return 5.0 * static_cast<double>(p.dim("R")) * static_cast<double>(p.dim("C"));
  }

  Size smoke_size() const override { return rc("32x128", 32, 128); }

  // Attention-score rows (S = 1024, 4096), hidden-width rows, and vocabulary rows (LLaMA-2
  // 32000, GPT-2 50257, LLaMA-3 128256).
  std::vector<Size> test_sizes() const override {
    return {rc("1024x1024", 1024, 1024), rc("512x4096", 512, 4096), rc("2048x768", 2048, 768),
            rc("8x32000", 8, 32000),     rc("32x50257", 32, 50257), rc("4x128256", 4, 128256)};
  }

  std::vector<Size> edge_sizes() const override {
    std::vector<Size> v = {rc("edge-1x1", 1, 1),           rc("edge-3x127", 3, 127),
                           rc("edge-127x1023", 127, 1023), rc("edge-1023x3", 1023, 3),
                           rc("edge-13x4097", 13, 4097),   rc("edge-251x1021", 251, 1021),
                           rc("edge-1x100003", 1, 100003)};
    for (std::int64_t c : kt::tail_lengths())
      v.push_back(rc(fmt::format("tail-3x{}", c), 3, c));
    return v;
  }

  std::vector<StabilityCase> stability_cases() const override {
    const Size s = rc("stab-64x1000", 64, 1000);
    return {
        {"values near the dtype's max (one-hot result)", s, "near_max", {}},
        {"large offset 200 + 4·N(0,1) (exp overflow unless max-subtracted)", s, "large_offset", {}},
        {"subnormal values", s, "subnormal", {}},
        {"all-equal rows", s, "all_equal", {}},
        {"-inf masked entries, partial rows and an all -inf row (NaN expected)",
         s,
         "masked_inf",
         {}},
        {"row [12, 0, 0, 0] (fp16 bug report: first ≈ 0.99998)",
         rc("stab-8x4", 8, 4),
         "row_12_0_0_0",
         {}}};
  }

  // Host CPU: 4096×4096 (16.8M elements, ~10-50 ms). GPUs: 8192×8192 (67M elements,
  // 134 MB in fp16: far beyond any GPU's L2).
  Size benchmark_size(DeviceKind device) const override {
    if (device == DeviceKind::Host) return rc("4096x4096", 4096, 4096);
    return rc("8192x8192", 8192, 8192);
  }

  /// Reduced-size screens shrink the rows (R); never the row length C.
  std::vector<std::string> screen_dims() const override { return {"R"}; }

 private:
  static Size rc(std::string label, std::int64_t R, std::int64_t C) {
    return make_size(std::move(label), {{"R", R}, {"C", C}});
  }
};

}  // namespace

const KernelType& softmax_type() {
  static const SoftmaxType type;
  return type;
}

}  // namespace vb
