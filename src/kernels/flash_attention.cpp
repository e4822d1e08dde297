// flash_attention: O = softmax(Q·Kᵀ·sm_scale + mask)·V per (batch, head) (DESIGN §2), the
// forward pass of scaled dot-product attention (Vaswani et al. 2017; FlashAttention, Dao et al.
// 2022). The causal mask is top-left aligned as in PyTorch SDPA: key j is visible to query i iff
// j <= i. With equal query and key lengths no row is fully masked.
//
// Grouped-query attention (GQA, Ainslie et al. 2023; MQA when HKV = 1): K and V have HKV heads,
// a divisor of the H query heads, and query head h reads KV head h / (H/HKV), as PyTorch SDPA
// with enable_gqa=True. Shapes: q, o [B,H,S,D]; k, v [B,HKV,S,D] (HKV is DESIGN §2's H_kv).
// The size dimension HKV is optional and defaults to H (plain multi-head attention); size labels
// spell it between h and s, e.g. "b1h8hkv2s256d64". Over the flattened head index bh = b·H + h
// of q/o, the KV head is bh / (H/HKV) = b·HKV + h/(H/HKV) of k/v (H/HKV divides H, so the batch
// term stays exact).
#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/parallel.h"
#include "core/random.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

using kt::make_size;

constexpr std::int64_t kQueryBlock = 128;  // oracle: query rows per score block

class FlashAttentionType final : public KernelType {
 public:
  std::string name() const override { return "flash_attention"; }
  std::string summary() const override {
    return "O[B,H,S,D] = softmax(Q K^T * sm_scale + causal mask) V, per (batch, head); K,V "
           "[B,HKV,S,D] (GQA: query head h reads KV head h/(H/HKV); HKV defaults to H)";
  }
  std::vector<AttrSpec> attributes() const override {
    return {{"causal", 1.0, "1: key j visible to query i iff j <= i (top-left aligned); 0: none"},
            {"sm_scale", std::numeric_limits<double>::quiet_NaN(),
             "score scale; NaN (default) resolves to 1/sqrt(D)"}};
  }

  // Dimensions B, H, S, D and the optional HKV (KV heads, default H). Throws
  // std::invalid_argument naming 'HKV' when HKV < 1 or H % HKV != 0.
  Problem make_problem(const Size& size, DType dtype) const override {
    Problem p = kt::start_problem(*this, size, dtype, {"B", "H", "S", "D"}, {"HKV"});
    const std::int64_t B = p.dim("B"), H = p.dim("H"), S = p.dim("S"), D = p.dim("D");
    const std::int64_t HKV = kv_heads(p);
    if (H % HKV != 0)
      kt::throw_field(
          p.kernel, "dimension 'HKV'",
          fmt::format("H = {} query heads is not a multiple of HKV = {} KV heads; grouped-query "
                      "attention needs H % HKV == 0 (query head h reads KV head h/(H/HKV)): "
                      "choose HKV among the divisors of H, or leave HKV out for H KV heads",
                      H, HKV));
    kt::require_flag(p, "causal");
    for (std::size_t i = 0; i < p.attr_names.size(); ++i)
      if (p.attr_names[i] == "sm_scale" && std::isnan(p.attrs[i]))
        p.attrs[i] = 1.0 / std::sqrt(static_cast<double>(D));
    kt::require_finite(p, "sm_scale", false);
    const std::vector<std::int64_t> shape = {B, H, S, D}, kv_shape = {B, HKV, S, D};
    p.inputs = {kt::tensor("q", dtype, shape), kt::tensor("k", dtype, kv_shape),
                kt::tensor("v", dtype, kv_shape)};
    p.outputs = {kt::tensor("o", dtype, shape)};
    return p;
  }

  // Regimes:
  //  normal        q, k, v ~ N(0,1): logits ~ N(0,1) at the default scale.
  //  near_max      q, k ~ N(0,1); v ~ U(-a,a), a = min(max/2, FLT_MAX/(8·S)): O is a convex
  //                combination of V rows, so |O| <= a, and an unnormalised fp32 accumulator
  //                (≤ S·a) cannot overflow.
  //  large_logits  q, k ~ N(0,σ²) with σ² = 30/(|sm_scale|·sqrt(D)): logits have std ≈ 30, so
  //                exp without running-max subtraction overflows fp32.
  //  huge_logits   q, k ~ U(σ/2, σ) (all positive) with σ² = 2^32 / (0.5625·D·|sm_scale|), capped
  //                at half the dtype's max: scaled logits near ±2^32 whose row maxima stand far
  //                apart from the rest, so softmax is one-hot to fp64 precision. A kernel that
  //                computes 2^(s·c - fl(m·c)) in one FMA (FlashAttention-2/3's trick) gets the
  //                row maximum's weight 2^e with e the rounding error of fl(m·c), up to 2^7 at
  //                these magnitudes: inf or 0, and NaN rows (found by review, 2026-12-07).
  //  all_equal     every key row of a KV head equal (all S rows of k[b, g]; rows differ between
  //                KV heads): uniform attention over the visible keys for every query head
  //                (O row i = mean of V rows 0..i of its KV head when causal).
  void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                const std::vector<TensorView>& in) const override {
    kt::check_arity(p, in.size(), "generate");
    const std::int64_t S = p.dim("S"), D = p.dim("D");
    const std::uint64_t sq = derive_seed(seed, 0), sk = derive_seed(seed, 1),
                        sv = derive_seed(seed, 2);
    if (regime == kt::kNormal) {
      fill_normal(in[0], sq);
      fill_normal(in[1], sk);
      fill_normal(in[2], sv);
    } else if (regime == "near_max") {
      const double a =
          std::min(0.5 * dtype_max(p.dtype),
                   kt::max_without_fp32_overflow(p.dtype, 8.0 * static_cast<double>(S)));
      fill_normal(in[0], sq);
      fill_normal(in[1], sk);
      fill_uniform(in[2], sv, -a, a);
    } else if (regime == "large_logits") {
      const double scale = std::fabs(p.attr("sm_scale"));
      const double sigma =
          std::sqrt(30.0 / (std::max(scale, 1e-30) * std::sqrt(static_cast<double>(D))));
      fill_normal(in[0], sq, 0.0, sigma);
      fill_normal(in[1], sk, 0.0, sigma);
      fill_normal(in[2], sv);
    } else if (regime == "huge_logits") {
      const double scale = std::max(std::fabs(p.attr("sm_scale")), 1e-30);
      const double sigma = std::min(
          std::sqrt(4294967296.0 / (0.5625 * static_cast<double>(D) * scale)), 0.5 * dtype_max(p.dtype));
      fill_uniform(in[0], sq, 0.5 * sigma, sigma);
      fill_uniform(in[1], sk, 0.5 * sigma, sigma);
      fill_normal(in[2], sv);
    } else if (regime == "all_equal") {
      fill_normal(in[0], sq);
      kt::fill_each(in[1], [&](std::int64_t i) {  // k is [B,HKV,S,D]: head = b·HKV + g
        const std::int64_t head = i / (S * D), d = i % D;
        return normal01(sk, static_cast<std::uint64_t>(head * D + d));
      });
      fill_normal(in[2], sv);
    } else {
      kt::throw_unknown_regime(name(), regime,
                               {"normal", "near_max", "large_logits", "huge_logits", "all_equal"});
    }
  }

  // Per query head, query blocks of kQueryBlock rows: scores = Q_blk·Kᵀ through gemm64 (only the
  // visible key prefix when causal), scale + mask + softmax in fp64, O_blk = P·V through gemm64,
  // with K and V of KV head bh / (H/HKV) for flattened query head bh = b·H + h.
  // Heads run in parallel when there are at least as many as threads, else the GEMMs do.
  void reference(const Problem& p, const std::vector<Array64>& in,
                 std::vector<Array64>& out) const override {
    kt::check_arity(p, in.size(), "reference");
    const std::int64_t B = p.dim("B"), H = p.dim("H"), S = p.dim("S"), D = p.dim("D");
    const std::int64_t group = H / kv_heads(p);  // query heads per KV head
    const bool causal = p.attr("causal") != 0.0;
    const double scale = p.attr("sm_scale");
    out.assign(1, kt::make_output({B, H, S, D}));
    const double* Q = in[0].v.data();
    const double* K = in[1].v.data();
    const double* V = in[2].v.data();
    double* O = out[0].v.data();
    const double neg_inf = -std::numeric_limits<double>::infinity();

    auto run_head = [&](std::int64_t h, bool threaded, std::vector<double>& sc) {
      const double* q = Q + h * S * D;
      const double* k = K + (h / group) * S * D;  // = (b·HKV + h_in_batch/group)·S·D
      const double* v = V + (h / group) * S * D;
      double* o = O + h * S * D;
      for (std::int64_t r0 = 0; r0 < S; r0 += kQueryBlock) {
        const std::int64_t r1 = std::min(S, r0 + kQueryBlock), nq = r1 - r0;
        const std::int64_t nk = causal ? r1 : S;
        sc.resize(static_cast<std::size_t>(nq * nk));
        gemm64(nq, nk, D, q + r0 * D, D, k, D, sc.data(), nk, true, threaded);
        for (std::int64_t i = 0; i < nq; ++i) {
          double* row = sc.data() + i * nk;
          for (std::int64_t j = 0; j < nk; ++j)
            row[j] = (causal && j > r0 + i) ? neg_inf : row[j] * scale;
          kt::softmax_row64(row, nk);
        }
        gemm64(nq, D, nk, sc.data(), nk, v, D, o + r0 * D, D, false, threaded);
      }
    };
    const std::int64_t heads = B * H;
    if (heads >= hardware_threads()) {
      parallel_for(heads, 1, [&](std::int64_t lo, std::int64_t hi) {
        std::vector<double> sc;
        for (std::int64_t h = lo; h < hi; ++h) run_head(h, false, sc);
      });
    } else {
      std::vector<double> sc;
      for (std::int64_t h = 0; h < heads; ++h) run_head(h, true, sc);
    }
  }

  // 4·B·H·S²·D (two GEMMs, Q·Kᵀ and P·V, of 2·S²·D each, per query head whatever HKV),
  // halved when causal: the convention of
  // the FlashAttention benchmarks (Dao-AILab/flash-attention, benchmarks/
  // benchmark_flash_attention.py: flops(...) = 4·batch·seqlen²·nheads·headdim // (2 if causal)).
  // Softmax FLOPs are not counted.
  // A CTA holds BQ = B*H*S/ctas query rows and streams all of K and V (S x D each) past them:
  // 2*S*D*elem bytes for 4*BQ*S*D FLOPs (causal halves both) = elem / (2*BQ).
  double operand_bytes_per_flop(const Problem& p, double ctas) const override {
    if (!(ctas > 0)) return 0;
    const double bq = std::max(1.0, static_cast<double>(p.dim("B")) *
                                        static_cast<double>(p.dim("H")) *
                                        static_cast<double>(p.dim("S")) / ctas);
    return static_cast<double>(dtype_size(p.dtype)) / (2 * bq);
  }

  double flops(const Problem& p) const override {
    const double S = static_cast<double>(p.dim("S"));
    const double f = 4.0 * static_cast<double>(p.dim("B")) * static_cast<double>(p.dim("H")) * S *
                     S * static_cast<double>(p.dim("D"));
    return p.attr("causal") != 0.0 ? f / 2.0 : f;
  }

  // Grouped-query (4 query heads on 2 KV heads): the smoke stage runs in every mode, --quick
  // included, so a kernel that maps query heads to KV heads wrongly (h % HKV instead of
  // h / (H/HKV)) fails there even when the quick subset of the later stages has no GQA size.
  Size smoke_size() const override { return gqa("b1h4hkv2s64d64", 1, 4, 2, 64, 64); }

  // head_dim 64 (GPT-2, BERT) and 128 (LLaMA), sequence 128…1024, small B·H so the fp64
  // oracle stays under ~0.5 GFLOP per size; causal (default), non-causal and a custom scale.
  std::vector<Size> test_sizes() const override {
    return {bhsd("b1h4s512d128", 1, 4, 512, 128),
            bhsd("b1h4s512d128-noncausal", 1, 4, 512, 128, {{"causal", 0.0}}),
            bhsd("b2h4s256d64-scale0.05", 2, 4, 256, 64, {{"sm_scale", 0.05}}),
            bhsd("b1h2s1024d64", 1, 2, 1024, 64),
            bhsd("b4h8s128d64", 4, 8, 128, 64),
            bhsd("b1h8s256d128-noncausal", 1, 8, 256, 128, {{"causal", 0.0}}),
            // GQA (LLaMA-2/3, Mistral: 4 query heads per KV head) and MQA (one KV head).
            gqa("b1h8hkv2s256d64", 1, 8, 2, 256, 64),
            gqa("b2h4hkv1s256d128-noncausal", 2, 4, 1, 256, 128, {{"causal", 0.0}})};
  }

  // S = 1 and 3, tails at 127/1023/251/13, unusual head dims 80 and 96; GQA/MQA with a tail
  // (causal and not), 3 query heads per KV head, and B > 1 (the KV head index spans batches).
  std::vector<Size> edge_sizes() const override {
    std::vector<Size> v = {bhsd("edge-b1h1s1d64", 1, 1, 1, 64),
                           bhsd("edge-b3h1s1d128-noncausal", 3, 1, 1, 128, {{"causal", 0.0}}),
                           bhsd("edge-b1h2s3d128", 1, 2, 3, 128),
                           bhsd("edge-b1h2s127d64", 1, 2, 127, 64),
                           bhsd("edge-b2h3s13d96", 2, 3, 13, 96),
                           bhsd("edge-b1h1s127d80-noncausal", 1, 1, 127, 80, {{"causal", 0.0}}),
                           bhsd("edge-b1h1s251d128-noncausal", 1, 1, 251, 128, {{"causal", 0.0}}),
                           bhsd("edge-b1h1s1023d64", 1, 1, 1023, 64),
                           // Scales other than 1/sqrt(D), causal and not: T5 does not
                           // scale (1.0); 1/16 at D = 64 is Gemma's query_pre_attn_scalar
                           // style (1/sqrt(256)).
                           bhsd("edge-b1h2s33d64-scale1", 1, 2, 33, 64, {{"sm_scale", 1.0}}),
                           bhsd("edge-b1h2s77d64-noncausal-scale0.0625", 1, 2, 77, 64,
                                {{"causal", 0.0}, {"sm_scale", 0.0625}}),
                           gqa("edge-b2h6hkv2s127d64", 2, 6, 2, 127, 64),
                           gqa("edge-b1h4hkv2s251d80-noncausal", 1, 4, 2, 251, 80,
                               {{"causal", 0.0}}),
                           gqa("edge-b3h3hkv1s13d96-noncausal-scale0.1", 3, 3, 1, 13, 96,
                               {{"causal", 0.0}, {"sm_scale", 0.1}})};
    // Head dim D and sequence S both sweep every remainder mod 16 (S paired through
    // kt::tail_partner); every other size is non-causal, every fourth has sm_scale 0.1.
    const auto tails = kt::tail_lengths();
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const std::int64_t D = tails[i], S = kt::tail_partner(i);
      std::map<std::string, double> attrs;
      if (i % 2 == 1) attrs["causal"] = 0.0;
      if (i % 4 == 3) attrs["sm_scale"] = 0.1;
      v.push_back(bhsd(fmt::format("tail-b1h2s{}d{}{}{}", S, D, i % 2 ? "-noncausal" : "",
                                   i % 4 == 3 ? "-scale0.1" : ""),
                       1, 2, S, D, std::move(attrs)));
    }
    return v;
  }

  std::vector<StabilityCase> stability_cases() const override {
    const Size s = bhsd("stab-b1h2s128d64", 1, 2, 128, 64);
    return {
        {"V near the dtype's max", s, "near_max", {}},
        {"large logits (std ≈ 30): exp overflows without max subtraction", s, "large_logits", {}},
        {"huge logits (≈ 2^32 after sm_scale, one-hot rows): the max subtraction must be exact "
         "for the row maximum", s, "huge_logits", {}},
        {"all-equal keys (uniform attention over the visible prefix)", s, "all_equal", {}},
        {"all-equal keys, GQA (4 query heads over 2 KV heads, each query head reads its own "
         "KV head's values)",
         gqa("stab-b1h4hkv2s128d64", 1, 4, 2, 128, 64), "all_equal", {}}};
  }

  // Host CPU: b1h8s1024d64 causal (2.1 GFLOP by the model). GPUs: b2h16s4096d128 causal
  // (137 GFLOP; the fp64 oracle of it takes a few seconds).
  Size benchmark_size(DeviceKind device) const override {
    if (device == DeviceKind::Host) return bhsd("b1h8s1024d64", 1, 8, 1024, 64);
    return bhsd("b2h16s4096d128", 2, 16, 4096, 128);
  }

  /// Reduced-size screens shrink the batch only: H is tied to HKV, S and D shape the tiles.
  std::vector<std::string> screen_dims() const override { return {"B"}; }

 private:
  /// KV heads of p: its HKV dimension, else H (multi-head attention).
  static std::int64_t kv_heads(const Problem& p) {
    const auto it = p.size.dims.find("HKV");
    return it != p.size.dims.end() ? it->second : p.dim("H");
  }

  /// A GQA size: H query heads over HKV KV heads (the label spells "h<H>hkv<HKV>").
  static Size gqa(std::string label, std::int64_t B, std::int64_t H, std::int64_t HKV,
                  std::int64_t S, std::int64_t D, std::map<std::string, double> attrs = {}) {
    return make_size(std::move(label), {{"B", B}, {"H", H}, {"HKV", HKV}, {"S", S}, {"D", D}},
                     std::move(attrs));
  }

  static Size bhsd(std::string label, std::int64_t B, std::int64_t H, std::int64_t S,
                   std::int64_t D, std::map<std::string, double> attrs = {}) {
    return make_size(std::move(label), {{"B", B}, {"H", H}, {"S", S}, {"D", D}}, std::move(attrs));
  }
};

}  // namespace

const KernelType& flash_attention_type() {
  static const FlashAttentionType type;
  return type;
}

}  // namespace vb
