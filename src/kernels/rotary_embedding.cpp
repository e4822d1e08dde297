// rotary_embedding: rotary position embedding (RoPE; Su et al., "RoFormer", 2021) applied to
// x[B,H,S,D] with tables cos[S,D/2], sin[S,D/2] indexed by position s (DESIGN §2).
//   interleaved = 0 (half-split; GPT-NeoX, HF LLaMA rotate_half), for i < D/2:
//     y[i] = x[i]·c[i] - x[i+D/2]·s[i],  y[i+D/2] = x[i+D/2]·c[i] + x[i]·s[i]
//   interleaved = 1 (GPT-J / Meta LLaMA pairs):
//     y[2i] = x[2i]·c[i] - x[2i+1]·s[i],  y[2i+1] = x[2i+1]·c[i] + x[2i]·s[i]
#include <fmt/format.h>
#include <cmath>

#include "core/random.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

using kt::make_size;

class RotaryEmbeddingType final : public KernelType {
 public:
  std::string name() const override { return "rotary_embedding"; }
  std::string summary() const override {
    return "y[B,H,S,D] = RoPE(x) with cos/sin[S,D/2]; half-split, or GPT-J pairs if interleaved";
  }
  std::vector<AttrSpec> attributes() const override {
    return {{"interleaved", 0.0,
             "0: rotate halves (i, i+D/2) as NeoX/HF LLaMA; 1: rotate pairs (2i, 2i+1) as GPT-J"}};
  }

  Problem make_problem(const Size& size, DType dtype) const override {
    Problem p = kt::start_problem(*this, size, dtype, {"B", "H", "S", "D"});
    kt::require_flag(p, "interleaved");
    const std::int64_t B = p.dim("B"), H = p.dim("H"), S = p.dim("S"), D = p.dim("D");
    if (D % 2 != 0)
      kt::throw_field(name(), "dimension 'D'", "must be even, got " + std::to_string(D));
    p.inputs = {kt::tensor("x", dtype, {B, H, S, D}), kt::tensor("cos", dtype, {S, D / 2}),
                kt::tensor("sin", dtype, {S, D / 2})};
    p.outputs = {kt::tensor("y", dtype, {B, H, S, D})};
    return p;
  }

  // cos/sin are real tables of one of four model families picked by (seed, S, D)
  // (kt::rope_tables_for: LLaMA-2 decode with a position offset, LLaMA-3.1 base 500000 with its
  // frequency scaling, linear position interpolation, base 1e6), never the plain base-10000
  // table from position 0: a kernel that recomputes cos/sin instead of reading them fails.
  // Regimes for x:
  //  normal     N(0,1).
  //  near_max   U(-a,a), a = max/2: |y| <= |x|·(|c|+|s|) <= 0.71·max, so y is finite.
  //  subnormal  U(-1,1)·min_normal (the dtype's subnormals): FTZ kernels fail.
  void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                const std::vector<TensorView>& in) const override {
    kt::check_arity(p, in.size(), "generate");
    const std::uint64_t sx = derive_seed(seed, 0);
    if (regime == kt::kNormal) {
      fill_normal(in[0], sx);
    } else if (regime == "near_max") {
      const double a = 0.5 * dtype_max(p.dtype);
      fill_uniform(in[0], sx, -a, a);
    } else if (regime == "subnormal") {
      const double t = dtype_min_normal(p.dtype);
      fill_uniform(in[0], sx, -t, t);
    } else {
      kt::throw_unknown_regime(name(), regime, {"normal", "near_max", "subnormal"});
    }
    const std::int64_t S = p.dim("S"), D = p.dim("D");
    kt::fill_rope_tables(in[1], in[2], S, D, kt::rope_tables_for(derive_seed(seed, 1), S, D));
  }

  void reference(const Problem& p, const std::vector<Array64>& in,
                 std::vector<Array64>& out) const override {
    kt::check_arity(p, in.size(), "reference");
    const std::int64_t B = p.dim("B"), H = p.dim("H"), S = p.dim("S"), D = p.dim("D");
    const std::int64_t half = D / 2;
    const bool interleaved = p.attr("interleaved") != 0.0;
    out.assign(1, kt::make_output({B, H, S, D}));
    const double* x = in[0].v.data();
    const double* cs = in[1].v.data();
    const double* sn = in[2].v.data();
    double* y = out[0].v.data();
    kt::parallel_rows(B * H * S, D, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const double* xr = x + r * D;
        double* yr = y + r * D;
        const double* c = cs + (r % S) * half;
        const double* s = sn + (r % S) * half;
        for (std::int64_t i = 0; i < half; ++i) {
          const std::int64_t a = interleaved ? 2 * i : i;
          const std::int64_t b = interleaved ? 2 * i + 1 : i + half;
          yr[a] = xr[a] * c[i] - xr[b] * s[i];
          yr[b] = xr[b] * c[i] + xr[a] * s[i];
        }
      }
    });
  }

  // 3 per output element (VladBud convention): two multiplies and one add.
  double flops(const Problem& p) const override {
    return 3.0 * static_cast<double>(p.dim("B")) * static_cast<double>(p.dim("H")) *
           static_cast<double>(p.dim("S")) * static_cast<double>(p.dim("D"));
  }

  Size smoke_size() const override { return bhsd("b1h2s16d64", 1, 2, 16, 64); }

  // LLaMA-7B (32 heads × 128), GPT-2/BERT-like (12 × 64) and a longer sequence, each in the
  // half-split and the interleaved layout.
  std::vector<Size> test_sizes() const override {
    return {bhsd("b1h32s512d128", 1, 32, 512, 128),
            bhsd("b1h32s512d128-interleaved", 1, 32, 512, 128, {{"interleaved", 1.0}}),
            bhsd("b2h12s256d64", 2, 12, 256, 64),
            bhsd("b4h16s128d64-interleaved", 4, 16, 128, 64, {{"interleaved", 1.0}}),
            bhsd("b1h8s1024d128", 1, 8, 1024, 128)};
  }

  // D even by definition: D = 2 (a single pair), 6, 130 (not a multiple of any vector width).
  std::vector<Size> edge_sizes() const override {
    std::vector<Size> v = {bhsd("edge-b1h1s1d2", 1, 1, 1, 2),
                           bhsd("edge-b1h3s127d6", 1, 3, 127, 6),
                           bhsd("edge-b1h3s127d6-interleaved", 1, 3, 127, 6,
                                {{"interleaved", 1.0}}),
                           bhsd("edge-b2h1s13d130", 2, 1, 13, 130),
                           bhsd("edge-b1h1s3d130-interleaved", 1, 1, 3, 130,
                                {{"interleaved", 1.0}}),
                           bhsd("edge-b1h2s1023d2", 1, 2, 1023, 2),
                           bhsd("edge-b1h1s4097d64", 1, 1, 4097, 64)};
    // D/2 (the table width and the half-split stride) sweeps every remainder mod 16; the
    // layouts alternate.
    const auto tails = kt::tail_lengths();
    for (std::size_t i = 0; i < tails.size(); ++i) {
      const std::int64_t D = 2 * tails[i];
      v.push_back(bhsd(fmt::format("tail-b1h2s3d{}{}", D, i % 2 ? "-interleaved" : ""), 1, 2, 3,
                       D, i % 2 ? std::map<std::string, double>{{"interleaved", 1.0}}
                                : std::map<std::string, double>{}));
    }
    return v;
  }

  std::vector<StabilityCase> stability_cases() const override {
    const Size s = bhsd("stab-b1h2s64d128", 1, 2, 64, 128);
    const Size si = bhsd("stab-b1h2s64d128-interleaved", 1, 2, 64, 128, {{"interleaved", 1.0}});
    return {{"values near the dtype's max (half-split)", s, "near_max", {}},
            {"values near the dtype's max (interleaved)", si, "near_max", {}},
            {"subnormal values", s, "subnormal", {}}};
  }

  // Host CPU: b1h32s512d128 (2.1M elements). GPUs: b4h32s2048d128 (33.6M elements).
  Size benchmark_size(DeviceKind device) const override {
    if (device == DeviceKind::Host) return bhsd("b1h32s512d128", 1, 32, 512, 128);
    return bhsd("b4h32s2048d128", 4, 32, 2048, 128);
  }

  /// Reduced-size screens shrink the batch, then heads; never S (the tables) or D.
  std::vector<std::string> screen_dims() const override { return {"B", "H"}; }

 private:
  static Size bhsd(std::string label, std::int64_t B, std::int64_t H, std::int64_t S,
                   std::int64_t D, std::map<std::string, double> attrs = {}) {
    return make_size(std::move(label), {{"B", B}, {"H", H}, {"S", S}, {"D", D}}, std::move(attrs));
  }
};

}  // namespace

const KernelType& rotary_embedding_type() {
  static const RotaryEmbeddingType type;
  return type;
}

}  // namespace vb
