// reduce: y[M] = sum over the last dimension of x[M,N], fp32 accumulation expected of kernels,
// output in the input dtype (DESIGN §2).
#include <algorithm>
#include <fmt/format.h>
#include <cmath>
#include <stdexcept>

#include "core/random.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

using kt::make_size;

class ReduceType final : public KernelType {
 public:
  std::string name() const override { return "reduce"; }
  std::string summary() const override {
    return "y[M] = sum of x[M,N] over the last dim (fp32 accumulation, output in input dtype)";
  }
  std::vector<AttrSpec> attributes() const override { return {}; }

  Problem make_problem(const Size& size, DType dtype) const override {
    Problem p = kt::start_problem(*this, size, dtype, {"M", "N"});
    const std::int64_t M = p.dim("M"), N = p.dim("N");
    p.inputs = {kt::tensor("x", dtype, {M, N})};
    p.outputs = {kt::tensor("y", dtype, {M})};
    return p;
  }

  // Regimes:
  //  normal      N(0,1).
  //  near_max    row r all of one random sign, |x| ~ U(0.5,1)·0.9·min(max, FLT_MAX)/N: the row
  //              sums lie in [0.45, 0.9]·max, every partial sum is smaller (no overflow in any
  //              order), and a kernel that overflows an intermediate fails.
  //  large_mean  μ + (μ/2000)·N(0,1) with μ = min(2000, max/(4N)) (fp16 at N=4096: μ = 4): the
  //              sum stays finite in the dtype, and an fp16 accumulator swamps.
  //  subnormal   U(-1,1)·min_normal (the dtype's subnormals).
  //  all_equal   row r constant c_r ~ U(-b,b), b = min(4, max/(4N)).
  //  pm32000     needs N = 8. Even rows: four 32000 and four -32000, shuffled (sum exactly 0);
  //              odd rows: four 32000 and four -16000, shuffled (sum 64000, finite in fp16).
  //              An fp16 accumulator overflows on either (the PyTorch fp16 sum bug report).
  void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                const std::vector<TensorView>& in) const override {
    kt::check_arity(p, in.size(), "generate");
    const std::int64_t M = p.dim("M"), N = p.dim("N");
    const double n = static_cast<double>(N);
    const std::uint64_t s0 = derive_seed(seed, 0), s1 = derive_seed(seed, 1);
    const TensorView& x = in[0];
    if (regime == kt::kNormal) {
      fill_normal(x, s0);
    } else if (regime == "near_max") {
      const double a = 0.9 * kt::max_without_fp32_overflow(p.dtype, 1.0) / n;
      kt::fill_each(x, [&](std::int64_t i) {
        const double m = a * (0.5 + 0.5 * uniform01(s0, static_cast<std::uint64_t>(i)));
        return uniform01(s1, static_cast<std::uint64_t>(i / N)) < 0.5 ? -m : m;
      });
    } else if (regime == "large_mean") {
      const double mu = std::min(2000.0, dtype_max(p.dtype) / (4.0 * n));
      fill_normal(x, s0, mu, mu / 2000.0);
    } else if (regime == "subnormal") {
      const double t = dtype_min_normal(p.dtype);
      fill_uniform(x, s0, -t, t);
    } else if (regime == "all_equal") {
      const double b = std::min(4.0, dtype_max(p.dtype) / (4.0 * n));
      kt::fill_each(x, [&](std::int64_t i) {
        return b * (2.0 * uniform01(s1, static_cast<std::uint64_t>(i / N)) - 1.0);
      });
    } else if (regime == "pm32000") {
      if (N != 8)
        kt::throw_field(name(), "regime 'pm32000'", "needs N = 8, got " + std::to_string(N));
      std::vector<double> v(static_cast<std::size_t>(M * N));
      for (std::int64_t r = 0; r < M; ++r) {
        const auto perm = kt::permutation(N, derive_seed(s0, static_cast<std::uint64_t>(r)));
        for (std::int64_t j = 0; j < N; ++j) {
          const std::int64_t k = perm[static_cast<std::size_t>(j)];
          v[static_cast<std::size_t>(r * N + j)] = k < 4 ? 32000.0 : (r % 2 ? -16000.0 : -32000.0);
        }
      }
      kt::fill_each(x, [&](std::int64_t i) { return v[static_cast<std::size_t>(i)]; });
    } else {
      kt::throw_unknown_regime(
          name(), regime,
          {"normal", "near_max", "large_mean", "subnormal", "all_equal", "pm32000"});
    }
  }

  // Neumaier-compensated sums (kt::sum64): exact cancellation stays exact. Each output's
  // magnitude floor (Array64::scale) is its row's 2-norm ‖x_r‖₂: an fp32 sum's rounding error
  // grows with its inputs (a random walk of ~ε·‖x_r‖₂ for blocked lanes), not with the sum,
  // which may cancel to near 0; a dropped or wrong element of a row of N(0,1) values is
  // still ≥ ~1/‖x_r‖₂ = 1e-3 off at N = 10^6, 100x the fp32 threshold.
  void reference(const Problem& p, const std::vector<Array64>& in,
                 std::vector<Array64>& out) const override {
    kt::check_arity(p, in.size(), "reference");
    const std::int64_t M = p.dim("M"), N = p.dim("N");
    out.assign(1, kt::make_output({M}));
    out[0].scale.assign(static_cast<std::size_t>(M), 0.0);
    const double* x = in[0].v.data();
    double* y = out[0].v.data();
    double* fl = out[0].scale.data();
    kt::parallel_rows(M, N, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        y[r] = kt::sum64(x + r * N, N);
        double q = 0;
        for (std::int64_t j = 0; j < N; ++j) q += x[r * N + j] * x[r * N + j];
        fl[r] = std::sqrt(q);
      }
    });
  }

  // M·N: one add per element (the usual reduction convention).
  double flops(const Problem& p) const override {
    return static_cast<double>(p.dim("M")) * static_cast<double>(p.dim("N"));
  }

  // Each output is an independent scalar: compare element by element.
  std::int64_t compare_row_length(const Problem&, int) const override { return 1; }

  Size smoke_size() const override { return mn("32x256", 32, 256); }

  // Hidden-width rows (1024, 4096), many short rows (8192×128) and vocabulary rows (128256).
  std::vector<Size> test_sizes() const override {
    return {mn("1024x4096", 1024, 4096), mn("4096x1024", 4096, 1024), mn("8192x128", 8192, 128),
            mn("32x128256", 32, 128256)};
  }

  // Tails everywhere, N = 1 (a copy), and one long prime row.
  std::vector<Size> edge_sizes() const override {
    std::vector<Size> v = {mn("edge-1x1", 1, 1),           mn("edge-3x127", 3, 127),
                           mn("edge-127x1023", 127, 1023), mn("edge-1023x3", 1023, 3),
                           mn("edge-13x4097", 13, 4097),   mn("edge-251x1021", 251, 1021),
                           mn("edge-4097x1", 4097, 1),     mn("edge-1x1000003", 1, 1000003)};
    for (std::int64_t n : kt::tail_lengths())
      v.push_back(mn(fmt::format("tail-3x{}", n), 3, n));
    return v;
  }

  std::vector<StabilityCase> stability_cases() const override {
    const Size s = mn("stab-64x4096", 64, 4096);
    const Size s8 = mn("stab-64x8", 64, 8);
    return {{"row sums near the dtype's max", s8, "near_max", {}},
            {"large-mean rows (mean >> spread)", s, "large_mean", {}},
            {"subnormal values", s, "subnormal", {}},
            {"all-equal rows", s, "all_equal", {}},
            {"rows of ±32000 (sums 0 and 64000; fp16 accumulation overflows)", s8, "pm32000", {}}};
  }

  // Host CPU: 4096×4096 (16.8M elements). GPUs: 8192×8192 (67M elements).
  Size benchmark_size(DeviceKind device) const override {
    if (device == DeviceKind::Host) return mn("4096x4096", 4096, 4096);
    return mn("8192x8192", 8192, 8192);
  }

  /// Reduced-size screens shrink the rows (M); never the reduced length N.
  std::vector<std::string> screen_dims() const override { return {"M"}; }

 private:
  static Size mn(std::string label, std::int64_t M, std::int64_t N) {
    return make_size(std::move(label), {{"M", M}, {"N", N}});
  }
};

}  // namespace

const KernelType& reduce_type() {
  static const ReduceType type;
  return type;
}

}  // namespace vb
