// cross_entropy: loss = mean over rows r with targets[r] != ignore_index of
// logsumexp(logits[r,:]) - logits[r, targets[r]] (torch.nn.functional.cross_entropy with
// reduction='mean') (DESIGN §2). The loss is a 0-d fp32 tensor whatever the logits' dtype; if
// every row is ignored it is NaN (0/0), as in PyTorch.
#include <fmt/format.h>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/random.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

using kt::make_size;

class CrossEntropyType final : public KernelType {
 public:
  std::string name() const override { return "cross_entropy"; }
  std::string summary() const override {
    return "loss (0-d fp32) = mean over non-ignored rows of logsumexp(logits[r]) - "
           "logits[r, targets[r]]";
  }
  std::vector<AttrSpec> attributes() const override {
    return {{"ignore_index", -100.0, "rows whose target equals it are excluded (PyTorch -100)"}};
  }

  Problem make_problem(const Size& size, DType dtype) const override {
    Problem p = kt::start_problem(*this, size, dtype, {"B", "V"});
    const double ig = p.attr("ignore_index");
    if (!std::isfinite(ig) || ig != std::trunc(ig) || std::fabs(ig) > 9.0e15)
      kt::throw_field(name(), "attribute 'ignore_index'", "must be an integer");
    const std::int64_t B = p.dim("B"), V = p.dim("V");
    p.inputs = {kt::tensor("logits", dtype, {B, V}), kt::tensor("targets", DType::I64, {B})};
    p.outputs = {kt::tensor("loss", DType::F32, {})};
    return p;
  }

  // Targets are uniform in [0, V); a fraction of rows (row 0 never, except in all_ignored) get
  // ignore_index instead, and when B >= 2 one more row drawn from [1, B) always does, so every
  // such problem exercises ignore_index; a drawn class equal to ignore_index is moved to the
  // next class.
  // Regimes:
  //  normal          logits ~ 2·N(0,1), ~10% rows ignored.
  //  near_max        logits ~ U(-a,a), a = 0.9·min(max, FLT_MAX/(4B)) (per-row losses ≤ 2a and
  //                  their fp32 sum stay finite), ~10% ignored.
  //  all_equal       row r constant: every non-ignored row's loss is log(V).
  //  masked_inf      ~30% of the logits -inf (never the target's); row 0 is -inf everywhere
  //                  except at its target (loss 0 for that row). ~10% ignored.
  //  partial_ignore  ~50% of the rows ignored: the mean runs over the rest.
  //  all_ignored     every row ignored: the expected loss is NaN.
  void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                const std::vector<TensorView>& in) const override {
    kt::check_arity(p, in.size(), "generate");
    const std::int64_t B = p.dim("B"), V = p.dim("V");
    const auto ig = static_cast<std::int64_t>(p.attr("ignore_index"));
    const std::uint64_t sl = derive_seed(seed, 0), st = derive_seed(seed, 1),
                        si = derive_seed(seed, 2), sm = derive_seed(seed, 3);
    double ignore_fraction = 0.1;
    if (regime == "partial_ignore") ignore_fraction = 0.5;
    const bool all_ignored = regime == "all_ignored";
    const double u_forced = uniform01(si, static_cast<std::uint64_t>(B) + (1ULL << 40));
    const auto span = static_cast<double>(B - 1);
    const std::int64_t forced =  // the row always ignored when B >= 2
        B >= 2 ? 1 + std::min(B - 2, static_cast<std::int64_t>(u_forced * span)) : -1;
    auto target_of = [&](std::int64_t r) -> std::int64_t {
      const auto u = static_cast<std::uint64_t>(r);
      if (all_ignored || r == forced || (r != 0 && uniform01(si, u) < ignore_fraction)) return ig;
      auto t =
          std::min(V - 1, static_cast<std::int64_t>(uniform01(st, u) * static_cast<double>(V)));
      if (t == ig) t = (t + 1) % V;
      return t;
    };
    kt::fill_each(in[1], [&](std::int64_t r) { return static_cast<double>(target_of(r)); });

    const TensorView& x = in[0];
    if (regime == kt::kNormal || regime == "partial_ignore" || regime == "all_ignored") {
      fill_normal(x, sl, 0.0, 2.0);
    } else if (regime == "near_max") {
      const double a = 0.9 * kt::max_without_fp32_overflow(p.dtype, 4.0 * static_cast<double>(B));
      fill_uniform(x, sl, -a, a);
    } else if (regime == "all_equal") {
      kt::fill_each(
          x, [&](std::int64_t i) { return 3.0 * normal01(sm, static_cast<std::uint64_t>(i / V)); });
    } else if (regime == "masked_inf") {
      const double neg_inf = -std::numeric_limits<double>::infinity();
      kt::fill_each(x, [&](std::int64_t i) {
        const std::int64_t r = i / V, j = i % V;
        if (j == target_of(r)) return 2.0 * normal01(sl, static_cast<std::uint64_t>(i));
        if (r == 0 || uniform01(sm, static_cast<std::uint64_t>(i)) < 0.3) return neg_inf;
        return 2.0 * normal01(sl, static_cast<std::uint64_t>(i));
      });
    } else {
      kt::throw_unknown_regime(
          name(), regime,
          {"normal", "near_max", "all_equal", "masked_inf", "partial_ignore", "all_ignored"});
    }
  }

  // Per-row losses in parallel (logsumexp with max subtraction), then a compensated sum over
  // the non-ignored rows in row order. Throws std::invalid_argument for a target outside
  // [0, V) that is not ignore_index.
  void reference(const Problem& p, const std::vector<Array64>& in,
                 std::vector<Array64>& out) const override {
    kt::check_arity(p, in.size(), "reference");
    const std::int64_t B = p.dim("B"), V = p.dim("V");
    const auto ig = static_cast<std::int64_t>(p.attr("ignore_index"));
    const double* x = in[0].v.data();
    const double* tv = in[1].v.data();
    std::vector<std::int64_t> rows;  // non-ignored rows
    for (std::int64_t r = 0; r < B; ++r) {
      const auto t = static_cast<std::int64_t>(tv[r]);
      if (t == ig) continue;
      if (t < 0 || t >= V)
        throw std::invalid_argument("cross_entropy: targets[" + std::to_string(r) +
                                    "] = " + std::to_string(t) + " is outside [0, " +
                                    std::to_string(V) + ") and is not ignore_index");
      rows.push_back(r);
    }
    std::vector<double> loss(rows.size());
    kt::parallel_rows(static_cast<std::int64_t>(rows.size()), V,
                      [&](std::int64_t lo, std::int64_t hi) {
                        for (std::int64_t k = lo; k < hi; ++k) {
                          const std::int64_t r = rows[static_cast<std::size_t>(k)];
                          const double* xr = x + r * V;
                          loss[static_cast<std::size_t>(k)] =
                              kt::logsumexp64(xr, V) - xr[static_cast<std::int64_t>(tv[r])];
                        }
                      });
    out.assign(1, kt::make_output({}));
    out[0].v[0] = rows.empty() ? std::numeric_limits<double>::quiet_NaN()
                               : kt::sum64(loss.data(), static_cast<std::int64_t>(loss.size())) /
                                     static_cast<double>(rows.size());
  }

  // 4 per logit (VladBud convention, exp counted as one FLOP): max-compare, subtract, exp, add.
  // The per-row log, the target gather and the mean are not counted.
  double flops(const Problem& p) const override {
    return 4.0 * static_cast<double>(p.dim("B")) * static_cast<double>(p.dim("V"));
  }

  // The loss is one scalar: compare it as its own row.
  std::int64_t compare_row_length(const Problem&, int) const override { return 1; }

  Size smoke_size() const override { return bv("8x512", 8, 512); }

  // Vocabularies of LLaMA-2 (32000), GPT-2 (50257) and LLaMA-3 (128256), few rows each, and
  // non-default ignore_index values so that a kernel hard-coding -100, or treating every
  // negative target as ignored, fails: -1, and a class id inside the vocabulary (0, the pad id
  // of BERT's 30522-token vocabulary).
  std::vector<Size> test_sizes() const override {
    return {bv("8x128256", 8, 128256), bv("32x50257", 32, 50257), bv("64x32000", 64, 32000),
            bv("16x32000-ignore-1", 16, 32000, {{"ignore_index", -1.0}}),
            bv("16x30522-ignore0", 16, 30522, {{"ignore_index", 0.0}})};
  }

  // V = 1 is left out on purpose: its loss is exactly 0 for every input (logsumexp of one
  // logit is that logit), which tests nothing and gives a zero-norm reference.
  std::vector<Size> edge_sizes() const override {
    std::vector<Size> v = {bv("edge-1x3", 1, 3),
                           bv("edge-3x127", 3, 127),
                           bv("edge-1x4097", 1, 4097),
                           bv("edge-13x1023", 13, 1023),
                           bv("edge-127x251", 127, 251),
                           bv("edge-1023x3", 1023, 3),
                           // GPT-2 pads with its eos token 50256, the last class, and ignores it.
                           bv("edge-5x50257-ignore50256", 5, 50257, {{"ignore_index", 50256.0}})};
    // The ignored class varies too: PyTorch's -100, a pad id 0, the last class.
    const auto tails = kt::tail_lengths();
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const std::int64_t V = tails[i];
      const double ig = i % 3 == 0 ? -100.0 : i % 3 == 1 ? 0.0 : static_cast<double>(V - 1);
      v.push_back(bv(fmt::format("tail-4x{}{}", V, i % 3 == 0 ? "" : fmt::format("-ignore{}", ig)),
                     4, V, i % 3 == 0 ? std::map<std::string, double>{}
                                      : std::map<std::string, double>{{"ignore_index", ig}}));
    }
    return v;
  }

  std::vector<StabilityCase> stability_cases() const override {
    const Size s = bv("stab-64x4096", 64, 4096);
    const Size v = bv("stab-4x50304", 4, 50304);
    return {{"logits near the dtype's max", s, "near_max", {}},
            {"all-equal rows (loss = log V)", s, "all_equal", {}},
            {"-inf logits (never at the target); a row with only its target finite",
             s,
             "masked_inf",
             {}},
            {"half of the rows ignore_index (mean over the rest)", s, "partial_ignore", {}},
            {"all rows ignore_index (NaN expected)", s, "all_ignored", {}},
            // Vocabulary rows (V > 4096, a multiple of 8 but not of a 1024-logit chunk): the
            // split-row path of a GPU kernel, which the 4096-wide cases above do not reach.
            {"vocabulary rows, logits near the dtype's max", v, "near_max", {}},
            {"vocabulary rows, -inf logits and a row with only its target finite", v,
             "masked_inf", {}}};
  }

  // Host CPU: 32×128256 (4.1M logits). GPUs: 512×128256 (66M logits, 263 MB of fp32 read:
  // on an H200 (4.8 TB/s) ~55 us, so a ~5 us launch is under 10% of it).
  Size benchmark_size(DeviceKind device) const override {
    if (device == DeviceKind::Host) return bv("32x128256", 32, 128256);
    return bv("512x128256", 512, 128256);
  }

  /// Reduced-size screens shrink the rows (B); never the vocabulary V.
  std::vector<std::string> screen_dims() const override { return {"B"}; }

 private:
  static Size bv(std::string label, std::int64_t B, std::int64_t V,
                 std::map<std::string, double> attrs = {}) {
    return make_size(std::move(label), {{"B", B}, {"V", V}}, std::move(attrs));
  }
};

}  // namespace

const KernelType& cross_entropy_type() {
  static const CrossEntropyType type;
  return type;
}

}  // namespace vb
