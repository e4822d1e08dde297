// Tests of the nine kernel types (src/kernels/): registry, ABI contract, sizes, FLOP/byte model,
// hand-computed fp64 references, input regimes, and the fp64 GEMM helper.
#include <gtest/gtest.h>

#include "eval/compare.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/random.h"
#include "core/tensor.h"
#include "kernels/kernel_type.h"
#include "kernels/ref_math.h"
#include "kernels/types.h"

namespace vb {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<DType> kDtypes = {DType::F16, DType::BF16, DType::F32};

const KernelType& type_named(std::string_view name) {
  const KernelType* t = find_kernel_type(name);
  if (!t) throw std::runtime_error("no kernel type " + std::string(name));
  return *t;
}

// Generated inputs of one problem, held in their own dtype and upcast to double.
struct Sample {
  Problem p;
  std::vector<std::vector<unsigned char>> bufs;
  std::vector<TensorView> views;
  std::vector<Array64> in;
};

Sample make_sample(const KernelType& t, const Size& size, DType dtype, std::string_view regime,
                   std::uint64_t seed = 42) {
  Sample s;
  s.p = t.make_problem(size, dtype);
  for (const auto& d : s.p.inputs) s.bufs.emplace_back(d.nbytes());
  for (std::size_t i = 0; i < s.p.inputs.size(); ++i)
    s.views.push_back(TensorView{s.p.inputs[i], s.bufs[i].data()});
  t.generate(s.p, seed, regime, s.views);
  for (const auto& v : s.views) s.in.push_back(to_array64(v));
  return s;
}

std::vector<Array64> run_ref(const KernelType& t, const Problem& p,
                             const std::vector<Array64>& in) {
  std::vector<Array64> out;
  t.reference(p, in, out);
  return out;
}

Array64 arr(std::vector<std::int64_t> shape, std::vector<double> v) {
  Array64 a;
  a.shape = std::move(shape);
  a.v = std::move(v);
  return a;
}

Size sz(std::string label, std::map<std::string, std::int64_t> dims,
        std::map<std::string, double> attrs = {}) {
  return kt::make_size(std::move(label), std::move(dims), std::move(attrs));
}

// "h<H>hkv<HKV>": how a flash_attention size label spells its query and KV heads.
std::string fmt_hkv(const Size& s) {
  return "h" + std::to_string(s.dims.at("H")) + "hkv" + std::to_string(s.dims.at("HKV"));
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

// ---- registry and contract -------------------------------------------------------------------

TEST(KernelTypes, RegistryHasNineTypesInDesignOrder) {
  const std::vector<std::string> expected = {"matmul",        "softmax",          "layernorm",
                                             "rmsnorm",       "flash_attention",  "fused_mlp",
                                             "cross_entropy", "rotary_embedding", "reduce"};
  const auto& all = all_kernel_types();
  ASSERT_EQ(all.size(), expected.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i]->name(), expected[i]);
    EXPECT_EQ(find_kernel_type(expected[i]), all[i]);
    EXPECT_FALSE(all[i]->summary().empty());
  }
  EXPECT_EQ(find_kernel_type("conv2d"), nullptr);
  EXPECT_EQ(kernel_type_names(),
            "matmul, softmax, layernorm, rmsnorm, flash_attention, fused_mlp, cross_entropy, "
            "rotary_embedding, reduce");
  EXPECT_EQ(&matmul_type(), all[0]);
  EXPECT_EQ(&reduce_type(), all[8]);
}

struct AbiRow {
  std::string type;
  std::vector<std::string> inputs, outputs, attrs;
  std::vector<double> defaults;  // NaN = derived
};

TEST(KernelTypes, AbiNamesOrderAndAttributes) {
  const std::vector<AbiRow> table = {
      {"matmul", {"A", "B"}, {"C"}, {}, {}},
      {"softmax", {"x"}, {"y"}, {}, {}},
      {"layernorm", {"x", "weight", "bias"}, {"y"}, {"eps"}, {1e-5}},
      {"rmsnorm", {"x", "weight"}, {"y"}, {"eps"}, {1e-6}},
      {"flash_attention", {"q", "k", "v"}, {"o"}, {"causal", "sm_scale"}, {1.0, kNaN}},
      {"fused_mlp", {"x", "w_gate", "w_up", "w_down"}, {"y"}, {}, {}},
      {"cross_entropy", {"logits", "targets"}, {"loss"}, {"ignore_index"}, {-100.0}},
      {"rotary_embedding", {"x", "cos", "sin"}, {"y"}, {"interleaved"}, {0.0}},
      {"reduce", {"x"}, {"y"}, {}, {}},
  };
  for (const auto& row : table) {
    SCOPED_TRACE(row.type);
    const KernelType& t = type_named(row.type);
    const auto specs = t.attributes();
    ASSERT_EQ(specs.size(), row.attrs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      EXPECT_EQ(specs[i].name, row.attrs[i]);
      if (std::isnan(row.defaults[i]))
        EXPECT_TRUE(std::isnan(specs[i].default_value));
      else
        EXPECT_EQ(specs[i].default_value, row.defaults[i]);
    }
    for (DType dt : kDtypes) {
      const Problem p = t.make_problem(t.smoke_size(), dt);
      EXPECT_EQ(p.kernel, row.type);
      EXPECT_EQ(p.dtype, dt);
      ASSERT_EQ(p.inputs.size(), row.inputs.size());
      ASSERT_EQ(p.outputs.size(), row.outputs.size());
      for (std::size_t i = 0; i < p.inputs.size(); ++i) {
        EXPECT_EQ(p.inputs[i].name, row.inputs[i]);
        const bool is_targets = row.type == "cross_entropy" && i == 1;
        EXPECT_EQ(p.inputs[i].dtype, is_targets ? DType::I64 : dt);
      }
      for (std::size_t i = 0; i < p.outputs.size(); ++i) {
        EXPECT_EQ(p.outputs[i].name, row.outputs[i]);
        EXPECT_EQ(p.outputs[i].dtype, row.type == "cross_entropy" ? DType::F32 : dt);
      }
      EXPECT_EQ(p.attr_names, row.attrs);
      ASSERT_EQ(p.attrs.size(), row.attrs.size());
      for (double a : p.attrs) EXPECT_FALSE(std::isnan(a));
    }
  }
}

TEST(KernelTypes, ShapesFollowTheTable) {
  const Problem mm =
      matmul_type().make_problem(sz("t", {{"M", 2}, {"N", 3}, {"K", 5}}), DType::F32);
  EXPECT_EQ(mm.inputs[0].shape, (std::vector<std::int64_t>{2, 5}));
  EXPECT_EQ(mm.inputs[1].shape, (std::vector<std::int64_t>{5, 3}));
  EXPECT_EQ(mm.outputs[0].shape, (std::vector<std::int64_t>{2, 3}));

  const Problem fa = flash_attention_type().make_problem(
      sz("t", {{"B", 2}, {"H", 3}, {"S", 5}, {"D", 16}}), DType::F16);
  for (const auto& d : fa.inputs) EXPECT_EQ(d.shape, (std::vector<std::int64_t>{2, 3, 5, 16}));
  const Problem gqa = flash_attention_type().make_problem(
      sz("g", {{"B", 2}, {"H", 6}, {"HKV", 2}, {"S", 5}, {"D", 16}}), DType::F16);
  EXPECT_EQ(gqa.inputs[0].shape, (std::vector<std::int64_t>{2, 6, 5, 16}));
  EXPECT_EQ(gqa.inputs[1].shape, (std::vector<std::int64_t>{2, 2, 5, 16}));
  EXPECT_EQ(gqa.inputs[2].shape, (std::vector<std::int64_t>{2, 2, 5, 16}));
  EXPECT_EQ(gqa.outputs[0].shape, (std::vector<std::int64_t>{2, 6, 5, 16}));
  EXPECT_DOUBLE_EQ(fa.attr("sm_scale"), 0.25);  // NaN default resolved to 1/sqrt(D)
  EXPECT_EQ(fa.attr("causal"), 1.0);

  const Problem mlp =
      fused_mlp_type().make_problem(sz("t", {{"B", 2}, {"D", 3}, {"H", 7}}), DType::BF16);
  EXPECT_EQ(mlp.inputs[1].shape, (std::vector<std::int64_t>{7, 3}));
  EXPECT_EQ(mlp.inputs[2].shape, (std::vector<std::int64_t>{7, 3}));
  EXPECT_EQ(mlp.inputs[3].shape, (std::vector<std::int64_t>{3, 7}));
  EXPECT_EQ(mlp.outputs[0].shape, (std::vector<std::int64_t>{2, 3}));

  const Problem ce = cross_entropy_type().make_problem(sz("t", {{"B", 4}, {"V", 9}}), DType::F16);
  EXPECT_EQ(ce.inputs[1].shape, (std::vector<std::int64_t>{4}));
  EXPECT_TRUE(ce.outputs[0].shape.empty());

  const Problem rope = rotary_embedding_type().make_problem(
      sz("t", {{"B", 1}, {"H", 2}, {"S", 5}, {"D", 6}}), DType::F32);
  EXPECT_EQ(rope.inputs[1].shape, (std::vector<std::int64_t>{5, 3}));
  EXPECT_EQ(rope.inputs[2].shape, (std::vector<std::int64_t>{5, 3}));

  const Problem red = reduce_type().make_problem(sz("t", {{"M", 4}, {"N", 9}}), DType::F16);
  EXPECT_EQ(red.outputs[0].shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(red.outputs[0].dtype, DType::F16);
}

TEST(KernelTypes, EverySizeResolvesInEveryDtypeAndLabelsAreUnique) {
  for (const KernelType* t : all_kernel_types()) {
    SCOPED_TRACE(t->name());
    std::vector<Size> sizes = {t->smoke_size()};
    for (const auto& s : t->test_sizes()) sizes.push_back(s);
    for (const auto& s : t->edge_sizes()) sizes.push_back(s);
    for (const auto& c : t->stability_cases()) sizes.push_back(c.size);
    sizes.push_back(t->benchmark_size(DeviceKind::Host));
    sizes.push_back(t->benchmark_size(DeviceKind::Gpu));
    EXPECT_GE(t->test_sizes().size(), 3u);
    EXPECT_GE(t->edge_sizes().size(), 5u);
    EXPECT_GE(t->stability_cases().size(), 2u);
    std::map<std::string, Size> by_label;
    for (const auto& s : sizes) {
      SCOPED_TRACE(s.label);
      EXPECT_FALSE(s.label.empty());
      auto [it, inserted] = by_label.emplace(s.label, s);
      if (!inserted) {  // the same label must mean the same size (stability cases share sizes)
        EXPECT_EQ(it->second.dims, s.dims);
        EXPECT_EQ(it->second.attrs, s.attrs);
      }
      for (DType dt : kDtypes) {
        Problem p;
        ASSERT_NO_THROW(p = t->make_problem(s, dt));
        EXPECT_GT(t->flops(p), 0.0);
        EXPECT_GT(t->min_bytes(p), 0.0);
      }
    }
    // test and edge sizes have no duplicate labels among themselves
    std::set<std::string> te;
    for (const auto& s : t->test_sizes()) EXPECT_TRUE(te.insert(s.label).second) << s.label;
    for (const auto& s : t->edge_sizes()) EXPECT_TRUE(te.insert(s.label).second) << s.label;
    EXPECT_NE(t->benchmark_size(DeviceKind::Host).label, t->benchmark_size(DeviceKind::Gpu).label);
    for (const auto& s : t->all_sizes(DeviceKind::Host)) EXPECT_TRUE(t->find_size(s.label, DeviceKind::Host).has_value());
  }
}

TEST(KernelTypes, EdgeSizesHitTailDimensions) {
  // matmul must combine 1023, 4097, 1 and primes in M, N, K.
  std::set<std::int64_t> seen;
  for (const auto& s : matmul_type().edge_sizes())
    for (const auto& [k, v] : s.dims) seen.insert(v);
  for (std::int64_t d : {1, 3, 127, 1023, 4097, 13, 251, 1021}) EXPECT_TRUE(seen.count(d)) << d;
  // Attention covers S = 1, 3, 127 and head dims 64, 128 and an unusual one.
  std::set<std::int64_t> S, D;
  for (const auto& s : flash_attention_type().edge_sizes()) {
    S.insert(s.dims.at("S"));
    D.insert(s.dims.at("D"));
  }
  for (std::int64_t v : {1, 3, 127}) EXPECT_TRUE(S.count(v)) << v;
  for (std::int64_t v : {64, 80, 96, 128}) EXPECT_TRUE(D.count(v)) << v;
}

TEST(KernelTypes, EdgeSizesCoverEveryVectorTailRemainder) {
  // The dimensions kernels vectorize or tile over (contiguous rows, reduction lengths), with
  // the step their values take (RoPE's D is even: D/2 is the table width). Every nonzero
  // remainder modulo 16 -- hence modulo 8, 4, 2 -- must occur at a length of at least 16 steps
  // (a full vector before the tail), so a kernel with a wrong vector tail fails (issue 18).
  struct VecDim {
    std::string dim;
    std::int64_t step;
  };
  const std::map<std::string, std::vector<VecDim>> dims = {
      {"matmul", {{"N", 1}, {"K", 1}}},        {"softmax", {{"C", 1}}},
      {"layernorm", {{"D", 1}}},               {"rmsnorm", {{"N", 1}}},
      {"flash_attention", {{"D", 1}, {"S", 1}}}, {"fused_mlp", {{"D", 1}, {"H", 1}}},
      {"cross_entropy", {{"V", 1}}},           {"rotary_embedding", {{"D", 2}}},
      {"reduce", {{"N", 1}}}};
  for (const KernelType* t : all_kernel_types()) {
    ASSERT_TRUE(dims.count(t->name())) << t->name() << ": declare its vectorized dimensions here";
    for (const VecDim& vd : dims.at(t->name())) {
      std::set<std::int64_t> rem;
      for (const Size& s : t->edge_sizes()) {
        const std::int64_t v = s.dims.at(vd.dim) / vd.step;
        if (v >= 16) rem.insert(v % 16);
      }
      for (std::int64_t r = 1; r < 16; ++r)
        EXPECT_TRUE(rem.count(r)) << t->name() << "." << vd.dim << (vd.step > 1 ? "/2" : "")
                                  << ": no edge size leaves remainder " << r << " mod 16";
    }
  }
}

TEST(KernelTypes, MakeProblemRejectsBadSizesNamingTheField) {
  auto expect_invalid = [](const KernelType& t, const Size& s, const std::string& field) {
    try {
      t.make_problem(s, DType::F32);
      ADD_FAILURE() << t.name() << " accepted " << s.label;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  expect_invalid(rotary_embedding_type(), sz("odd", {{"B", 1}, {"H", 1}, {"S", 4}, {"D", 7}}),
                 "'D'");
  expect_invalid(matmul_type(), sz("missing", {{"M", 4}, {"N", 4}}), "'K'");
  expect_invalid(matmul_type(), sz("zero", {{"M", 4}, {"N", 0}, {"K", 4}}), "'N'");
  expect_invalid(matmul_type(), sz("extra", {{"M", 4}, {"N", 4}, {"K", 4}, {"Q", 1}}), "'Q'");
  expect_invalid(softmax_type(), sz("neg", {{"R", -1}, {"C", 4}}), "'R'");
  expect_invalid(flash_attention_type(),
                 sz("c2", {{"B", 1}, {"H", 1}, {"S", 4}, {"D", 8}}, {{"causal", 2}}), "'causal'");
  expect_invalid(flash_attention_type(),
                 sz("inf", {{"B", 1}, {"H", 1}, {"S", 4}, {"D", 8}}, {{"sm_scale", kInf}}),
                 "'sm_scale'");
  expect_invalid(layernorm_type(), sz("eps", {{"B", 1}, {"D", 8}}, {{"eps", 0.0}}), "'eps'");
  expect_invalid(rmsnorm_type(), sz("attr", {{"M", 1}, {"N", 8}}, {{"epsilon", 1e-6}}),
                 "'epsilon'");
  expect_invalid(cross_entropy_type(), sz("ig", {{"B", 1}, {"V", 8}}, {{"ignore_index", 0.5}}),
                 "'ignore_index'");
  expect_invalid(rotary_embedding_type(),
                 sz("il", {{"B", 1}, {"H", 1}, {"S", 4}, {"D", 8}}, {{"interleaved", 0.5}}),
                 "'interleaved'");
  EXPECT_THROW(reduce_type().make_problem(sz("i", {{"M", 1}, {"N", 1}}), DType::I64),
               std::invalid_argument);
}

TEST(KernelTypes, UnknownRegimeThrows) {
  for (const KernelType* t : all_kernel_types()) {
    SCOPED_TRACE(t->name());
    EXPECT_THROW(make_sample(*t, t->smoke_size(), DType::F32, "no_such_regime"),
                 std::invalid_argument);
  }
}

TEST(KernelTypes, CompareRowLength) {
  const Problem r = reduce_type().make_problem(sz("t", {{"M", 4}, {"N", 9}}), DType::F32);
  EXPECT_EQ(reduce_type().compare_row_length(r, 0), 1);
  const Problem c = cross_entropy_type().make_problem(sz("t", {{"B", 4}, {"V", 9}}), DType::F32);
  EXPECT_EQ(cross_entropy_type().compare_row_length(c, 0), 1);
  const Problem s = softmax_type().make_problem(sz("t", {{"R", 4}, {"C", 9}}), DType::F32);
  EXPECT_EQ(softmax_type().compare_row_length(s, 0), 9);
}

// ---- FLOP and byte model ---------------------------------------------------------------------

TEST(KernelTypes, FlopModel) {
  const auto& mm = matmul_type();
  EXPECT_DOUBLE_EQ(mm.flops(mm.make_problem(sz("t", {{"M", 3}, {"N", 5}, {"K", 7}}), DType::F32)),
                   2.0 * 3 * 5 * 7);
  const auto& fa = flash_attention_type();
  const std::map<std::string, std::int64_t> d = {{"B", 2}, {"H", 3}, {"S", 128}, {"D", 64}};
  const double causal = fa.flops(fa.make_problem(sz("c", d), DType::F16));
  const double full = fa.flops(fa.make_problem(sz("n", d, {{"causal", 0}}), DType::F16));
  EXPECT_DOUBLE_EQ(full, 4.0 * 2 * 3 * 128 * 128 * 64);
  EXPECT_DOUBLE_EQ(causal, full / 2);
  // GQA: FLOPs per query head (unchanged), bytes count K/V at HKV heads.
  std::map<std::string, std::int64_t> g = d;
  g["H"] = 4;
  g["HKV"] = 1;
  std::map<std::string, std::int64_t> m = g;
  m.erase("HKV");
  const Problem gp = fa.make_problem(sz("g", g), DType::F16),
                mp = fa.make_problem(sz("m", m), DType::F16);
  EXPECT_DOUBLE_EQ(fa.flops(gp), fa.flops(mp));
  EXPECT_DOUBLE_EQ(fa.min_bytes(gp), 2.0 * 2 * 128 * 64 * (4 + 1 + 1 + 4));
  const auto& mlp = fused_mlp_type();
  EXPECT_DOUBLE_EQ(mlp.flops(mlp.make_problem(sz("t", {{"B", 2}, {"D", 3}, {"H", 5}}), DType::F32)),
                   6.0 * 2 * 3 * 5);
  const auto& red = reduce_type();
  EXPECT_DOUBLE_EQ(red.flops(red.make_problem(sz("t", {{"M", 4}, {"N", 9}}), DType::F32)), 36.0);
  const auto& rope = rotary_embedding_type();
  EXPECT_DOUBLE_EQ(
      rope.flops(rope.make_problem(sz("t", {{"B", 1}, {"H", 2}, {"S", 3}, {"D", 4}}), DType::F32)),
      3.0 * 24);
}

TEST(KernelTypes, MinBytesCountsInt64TargetsAsEightBytes) {
  const auto& ce = cross_entropy_type();
  const Problem p = ce.make_problem(sz("t", {{"B", 16}, {"V", 1000}}), DType::F16);
  // logits fp16 + targets int64 + 0-d fp32 loss
  EXPECT_DOUBLE_EQ(ce.min_bytes(p), 16.0 * 1000 * 2 + 16.0 * 8 + 4.0);
  const auto& mm = matmul_type();
  const Problem q = mm.make_problem(sz("t", {{"M", 2}, {"N", 3}, {"K", 5}}), DType::BF16);
  EXPECT_DOUBLE_EQ(mm.min_bytes(q), 2.0 * (10 + 15 + 6));
}

// ---- hand-computed references ----------------------------------------------------------------

TEST(KernelTypes, MatmulReferenceByHand) {
  const auto& t = matmul_type();
  const Problem p = t.make_problem(sz("t", {{"M", 2}, {"N", 2}, {"K", 3}}), DType::F32);
  const auto out =
      run_ref(t, p, {arr({2, 3}, {1, 2, 3, 4, 5, 6}), arr({3, 2}, {7, 8, 9, 10, 11, 12})});
  EXPECT_EQ(out[0].shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(out[0].v, (std::vector<double>{58, 64, 139, 154}));
}

TEST(KernelTypes, SoftmaxReferenceByHand) {
  const auto& t = softmax_type();
  const Problem p = t.make_problem(sz("t", {{"R", 3}, {"C", 2}}), DType::F32);
  const auto out = run_ref(t, p, {arr({3, 2}, {0.0, std::log(3.0), -kInf, 5.0, -kInf, -kInf})});
  EXPECT_NEAR(out[0].v[0], 0.25, 1e-15);
  EXPECT_NEAR(out[0].v[1], 0.75, 1e-15);
  EXPECT_EQ(out[0].v[2], 0.0);  // -inf entry -> 0
  EXPECT_EQ(out[0].v[3], 1.0);
  EXPECT_TRUE(std::isnan(out[0].v[4]));  // all -inf row -> NaN (PyTorch)
  EXPECT_TRUE(std::isnan(out[0].v[5]));
}

TEST(KernelTypes, SoftmaxFp16Row12000) {
  const auto& t = softmax_type();
  const Problem p = t.make_problem(sz("t", {{"R", 1}, {"C", 4}}), DType::F16);
  const auto out = run_ref(t, p, {arr({1, 4}, {12, 0, 0, 0})});
  const double first = 1.0 / (1.0 + 3.0 * std::exp(-12.0));
  EXPECT_NEAR(out[0].v[0], first, 1e-15);
  EXPECT_NEAR(first, 0.99998, 1e-5);
  // Rounded to fp16 (spacing 2^-11 below 1) the first entry is 0.99998 to fp16 precision, and
  // the others are 6.14e-6, in fp16's subnormal range, not flushed.
  EXPECT_NEAR(round_to_dtype(out[0].v[0], DType::F16), 0.99998, 5e-4);
  EXPECT_NEAR(round_to_dtype(out[0].v[1], DType::F16), 6.144e-6, 6e-8);
  // The stability regime produces exactly that row (12 rotating through the columns).
  const Sample s = make_sample(t, sz("stab-8x4", {{"R", 8}, {"C", 4}}), DType::F16, "row_12_0_0_0");
  const auto y = run_ref(t, s.p, s.in);
  for (std::int64_t r = 0; r < 8; ++r)
    EXPECT_NEAR(y[0].v[static_cast<std::size_t>(r * 4 + r % 4)], first, 1e-15);
}

TEST(KernelTypes, LayerNormReferenceByHand) {
  const auto& t = layernorm_type();
  const Problem p = t.make_problem(sz("t", {{"B", 1}, {"D", 4}}), DType::F32);
  const auto out = run_ref(
      t, p, {arr({1, 4}, {1, 2, 3, 4}), arr({4}, {1, 2, -1, 0.5}), arr({4}, {0, 1, 0, -2})});
  // mean 2.5, biased variance 1.25
  const double r = 1.0 / std::sqrt(1.25 + 1e-5);
  const std::vector<double> expect = {-1.5 * r * 1 + 0, -0.5 * r * 2 + 1, 0.5 * r * -1 + 0,
                                      1.5 * r * 0.5 - 2};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[0].v[i], expect[i], 1e-14);
}

TEST(KernelTypes, RmsNormReferenceByHand) {
  const auto& t = rmsnorm_type();
  const Problem p = t.make_problem(sz("t", {{"M", 2}, {"N", 2}}, {{"eps", 0.5}}), DType::F32);
  const auto out = run_ref(t, p, {arr({2, 2}, {3, 4, 0, 0}), arr({2}, {2, -1})});
  const double r = 1.0 / std::sqrt(12.5 + 0.5);
  EXPECT_NEAR(out[0].v[0], 3 * r * 2, 1e-14);
  EXPECT_NEAR(out[0].v[1], 4 * r * -1, 1e-14);
  EXPECT_EQ(out[0].v[2], 0.0);
}

TEST(KernelTypes, FlashAttentionReferenceByHand) {
  const auto& t = flash_attention_type();
  const std::map<std::string, std::int64_t> d = {{"B", 1}, {"H", 1}, {"S", 2}, {"D", 1}};
  // q = [1, 1], k = [0, ln 3], v = [10, 20], scale 1/sqrt(1) = 1.
  const std::vector<Array64> in = {arr({1, 1, 2, 1}, {1, 1}), arr({1, 1, 2, 1}, {0, std::log(3.0)}),
                                   arr({1, 1, 2, 1}, {10, 20})};
  const auto causal = run_ref(t, t.make_problem(sz("c", d), DType::F32), in);
  EXPECT_NEAR(causal[0].v[0], 10.0, 1e-13);  // query 0 sees key 0 only
  EXPECT_NEAR(causal[0].v[1], 0.25 * 10 + 0.75 * 20, 1e-13);
  const auto full = run_ref(t, t.make_problem(sz("n", d, {{"causal", 0}}), DType::F32), in);
  EXPECT_NEAR(full[0].v[0], 17.5, 1e-13);
  EXPECT_NEAR(full[0].v[1], 17.5, 1e-13);
  const auto flat =
      run_ref(t, t.make_problem(sz("s", d, {{"causal", 0}, {"sm_scale", 0.0}}), DType::F32), in);
  EXPECT_NEAR(flat[0].v[0], 15.0, 1e-13);  // scale 0: uniform attention
}

TEST(KernelTypes, FlashAttentionAllEqualKeysAverageThePrefix) {
  const auto& t = flash_attention_type();
  const Sample s =
      make_sample(t, sz("t", {{"B", 1}, {"H", 2}, {"S", 33}, {"D", 16}}), DType::F32, "all_equal");
  const auto o = run_ref(t, s.p, s.in);
  const auto& v = s.in[2].v;
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i : {0, 5, 32})
      for (std::int64_t dd = 0; dd < 16; ++dd) {
        double mean = 0;
        for (std::int64_t j = 0; j <= i; ++j)
          mean += v[static_cast<std::size_t>((h * 33 + j) * 16 + dd)];
        mean /= static_cast<double>(i + 1);
        EXPECT_NEAR(o[0].v[static_cast<std::size_t>((h * 33 + i) * 16 + dd)], mean, 1e-12);
      }
}

// GQA: K/V with HKV heads; query head h of batch b reads KV head b·HKV + h/(H/HKV). The oracle
// must equal the multi-head oracle on K/V expanded to H heads (each KV head repeated H/HKV
// times, as PyTorch's repeat_interleave on dim 1), bit for bit, causal and not, over batches.
TEST(KernelTypes, FlashAttentionGqaReferenceEqualsExpandedHeads) {
  const auto& t = flash_attention_type();
  const std::int64_t B = 2, H = 6, S = 37, D = 16;
  for (const std::int64_t HKV : {1, 2, 3, 6}) {
    for (const double causal : {1.0, 0.0}) {
      SCOPED_TRACE("HKV " + std::to_string(HKV) + " causal " + std::to_string(causal));
      const Sample g = make_sample(
          t, sz("gqa", {{"B", B}, {"H", H}, {"HKV", HKV}, {"S", S}, {"D", D}}, {{"causal", causal}}),
          DType::F32, "normal", 7);
      ASSERT_EQ(g.p.inputs[1].shape, (std::vector<std::int64_t>{B, HKV, S, D}));
      ASSERT_EQ(g.p.inputs[2].shape, (std::vector<std::int64_t>{B, HKV, S, D}));
      ASSERT_EQ(g.p.outputs[0].shape, (std::vector<std::int64_t>{B, H, S, D}));
      const Problem mha =
          t.make_problem(sz("mha", {{"B", B}, {"H", H}, {"S", S}, {"D", D}}, {{"causal", causal}}),
                         DType::F32);
      std::vector<Array64> in = {g.in[0], arr({B, H, S, D}, {}), arr({B, H, S, D}, {})};
      for (int x = 1; x <= 2; ++x) {
        auto& e = in[static_cast<std::size_t>(x)].v;
        for (std::int64_t b = 0; b < B; ++b)
          for (std::int64_t h = 0; h < H; ++h) {
            const auto src = g.in[static_cast<std::size_t>(x)].v.begin() +
                             ((b * HKV + h / (H / HKV)) * S * D);
            e.insert(e.end(), src, src + S * D);
          }
      }
      const auto got = run_ref(t, g.p, g.in);
      const auto want = run_ref(t, mha, in);
      ASSERT_EQ(got[0].shape, want[0].shape);
      EXPECT_EQ(got[0].v, want[0].v);
      // The mapping matters: query heads of different KV heads get different outputs.
      if (HKV > 1) EXPECT_NE(got[0].v[0], got[0].v[static_cast<std::size_t>((H - 1) * S * D)]);
    }
  }
  // HKV = H is exactly the default (no HKV dimension): same shapes, same oracle.
  const Sample a = make_sample(t, sz("a", {{"B", 1}, {"H", 2}, {"S", 9}, {"D", 8}}), DType::F32,
                               "normal");
  const Sample b = make_sample(t, sz("b", {{"B", 1}, {"H", 2}, {"HKV", 2}, {"S", 9}, {"D", 8}}),
                               DType::F32, "normal");
  EXPECT_EQ(a.p.inputs[1].shape, b.p.inputs[1].shape);
  EXPECT_EQ(run_ref(t, a.p, a.in)[0].v, run_ref(t, b.p, b.in)[0].v);
}

TEST(KernelTypes, FlashAttentionRefusesKvHeadsThatDoNotDivideH) {
  const auto& t = flash_attention_type();
  auto refused = [&](std::int64_t H, std::int64_t HKV) {
    try {
      t.make_problem(sz("bad", {{"B", 1}, {"H", H}, {"HKV", HKV}, {"S", 4}, {"D", 8}}), DType::F32);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string three = refused(8, 3);
  EXPECT_NE(three.find("flash_attention: dimension 'HKV'"), std::string::npos) << three;
  EXPECT_NE(three.find("H = 8 query heads is not a multiple of HKV = 3"), std::string::npos) << three;
  EXPECT_NE(three.find("divisors of H"), std::string::npos) << three;  // names the fix
  EXPECT_NE(refused(2, 4).find("not a multiple of HKV = 4"), std::string::npos);  // HKV > H
  const std::string zero = refused(8, 0);
  EXPECT_NE(zero.find("dimension 'HKV': must be >= 1, got 0"), std::string::npos) << zero;
  EXPECT_NE(refused(8, -2).find("'HKV'"), std::string::npos);
  // A dimension the type does not have is still refused, and the message lists HKV as optional.
  std::string extra;
  try {
    t.make_problem(sz("x", {{"B", 1}, {"H", 2}, {"S", 4}, {"D", 8}, {"KV", 1}}), DType::F32);
  } catch (const std::invalid_argument& e) {
    extra = e.what();
  }
  EXPECT_NE(extra.find("dimension 'KV': is not a dimension of flash_attention (expected B, H, S, "
                       "D; optional HKV)"),
            std::string::npos)
      << extra;
}

TEST(KernelTypes, FlashAttentionGqaSizesAndAllEqualRegime) {
  const auto& t = flash_attention_type();
  // Test and edge sizes include GQA and MQA, causal and not; labels spell "h<H>hkv<HKV>".
  bool gqa = false, mqa = false, gqa_noncausal_edge = false;
  for (const auto& s : t.test_sizes()) {
    if (!s.dims.count("HKV")) continue;
    EXPECT_NE(s.label.find(fmt_hkv(s)), std::string::npos) << s.label;
    gqa |= s.dims.at("HKV") > 1 && s.dims.at("HKV") < s.dims.at("H");
    mqa |= s.dims.at("HKV") == 1 && s.dims.at("H") > 1;
  }
  for (const auto& s : t.edge_sizes())
    gqa_noncausal_edge |= s.dims.count("HKV") && s.dims.at("HKV") < s.dims.at("H") &&
                          s.attrs.count("causal") && s.attrs.at("causal") == 0.0 &&
                          s.dims.at("S") % 16 != 0;
  EXPECT_TRUE(gqa);
  EXPECT_TRUE(mqa);
  EXPECT_TRUE(gqa_noncausal_edge);
  // all_equal under GQA: every key row of a KV head equal, so every query head attends
  // uniformly and its output row i is the mean of V rows 0..i of ITS KV head.
  const std::int64_t H = 4, HKV = 2, S = 19, D = 8;
  const Sample s = make_sample(t, sz("t", {{"B", 1}, {"H", H}, {"HKV", HKV}, {"S", S}, {"D", D}}),
                               DType::F32, "all_equal");
  const auto& k = s.in[1].v;
  for (std::int64_t g = 0; g < HKV; ++g)
    for (std::int64_t j = 1; j < S; ++j)
      for (std::int64_t d = 0; d < D; ++d)
        ASSERT_EQ(k[static_cast<std::size_t>((g * S + j) * D + d)],
                  k[static_cast<std::size_t>(g * S * D + d)]);
  EXPECT_NE(k[0], k[static_cast<std::size_t>(S * D)]) << "KV heads differ";
  const auto o = run_ref(t, s.p, s.in);
  const auto& v = s.in[2].v;
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t i : {0, 7, 18})
      for (std::int64_t d = 0; d < D; ++d) {
        double mean = 0;
        for (std::int64_t j = 0; j <= i; ++j)
          mean += v[static_cast<std::size_t>(((h / (H / HKV)) * S + j) * D + d)];
        mean /= static_cast<double>(i + 1);
        EXPECT_NEAR(o[0].v[static_cast<std::size_t>((h * S + i) * D + d)], mean, 1e-12);
      }
}

TEST(KernelTypes, FusedMlpReferenceByHand) {
  const auto& t = fused_mlp_type();
  const Problem p = t.make_problem(sz("t", {{"B", 1}, {"D", 1}, {"H", 2}}), DType::F32);
  // x = 2; gate rows [1], [-1]; up rows [3], [1]; w_down [0.5, 4]
  const auto out = run_ref(
      t, p, {arr({1, 1}, {2}), arr({2, 1}, {1, -1}), arr({2, 1}, {3, 1}), arr({1, 2}, {0.5, 4})});
  auto silu = [](double z) { return z / (1.0 + std::exp(-z)); };
  EXPECT_NEAR(out[0].v[0], silu(2) * 6 * 0.5 + silu(-2) * 2 * 4, 1e-13);
}

TEST(KernelTypes, FusedMlpSiluOnUpInsteadOfGateDiffers) {
  const auto& t = fused_mlp_type();
  const Sample s = make_sample(t, t.smoke_size(), DType::F32, "normal");
  const auto right = run_ref(t, s.p, s.in);
  std::vector<Array64> swapped = s.in;
  std::swap(swapped[1], swapped[2]);  // silu(x·w_upᵀ) ⊙ (x·w_gateᵀ)
  const auto wrong = run_ref(t, s.p, swapped);
  EXPECT_GT(rel_diff(wrong[0].v, right[0].v), 0.1);
}

TEST(KernelTypes, CrossEntropyReferenceByHand) {
  const auto& t = cross_entropy_type();
  const Problem p = t.make_problem(sz("t", {{"B", 3}, {"V", 2}}), DType::F32);
  const Array64 logits = arr({3, 2}, {0, std::log(3.0), 1, 1, 7, -2});
  auto loss = [&](std::vector<double> targets) {
    return run_ref(t, p, {logits, arr({3}, std::move(targets))})[0];
  };
  // row 0: ln4 - ln3; row 1: ln2; row 2 ignored (-100)
  const Array64 two = loss({1, 0, -100});
  EXPECT_TRUE(two.shape.empty());
  ASSERT_EQ(two.v.size(), 1u);
  EXPECT_NEAR(two.v[0], (std::log(4.0 / 3.0) + std::log(2.0)) / 2, 1e-15);
  EXPECT_NEAR(loss({1, -100, -100}).v[0], std::log(4.0 / 3.0), 1e-15);
  EXPECT_TRUE(std::isnan(loss({-100, -100, -100}).v[0]));
  // A target outside [0, V) that is not ignore_index is an error, not a silent loss.
  EXPECT_THROW(loss({1, 2, 0}), std::invalid_argument);
  // A non-default ignore_index.
  const Problem q =
      t.make_problem(sz("t", {{"B", 3}, {"V", 2}}, {{"ignore_index", 1}}), DType::F32);
  EXPECT_NEAR(run_ref(t, q, {logits, arr({3}, {1, 0, 1})})[0].v[0], std::log(2.0), 1e-15);
}

TEST(KernelTypes, RotaryReferenceByHandAndLayoutsDiffer) {
  const auto& t = rotary_embedding_type();
  const std::map<std::string, std::int64_t> d = {{"B", 1}, {"H", 1}, {"S", 1}, {"D", 4}};
  const std::vector<Array64> in = {arr({1, 1, 1, 4}, {1, 2, 3, 4}), arr({1, 2}, {0, 1}),
                                   arr({1, 2}, {1, 0})};
  const auto half = run_ref(t, t.make_problem(sz("h", d), DType::F32), in);
  EXPECT_EQ(half[0].v, (std::vector<double>{-3, 2, 1, 4}));
  const auto inter = run_ref(t, t.make_problem(sz("i", d, {{"interleaved", 1}}), DType::F32), in);
  EXPECT_EQ(inter[0].v, (std::vector<double>{-2, 1, 3, 4}));

  // On generated inputs with the real tables the two layouts give different outputs.
  const Size s = sz("g", {{"B", 1}, {"H", 2}, {"S", 32}, {"D", 64}});
  Size si = s;
  si.attrs["interleaved"] = 1;
  const Sample a = make_sample(t, s, DType::F32, "normal");
  const Sample b = make_sample(t, si, DType::F32, "normal");
  ASSERT_EQ(a.in[0].v, b.in[0].v);
  EXPECT_GT(rel_diff(run_ref(t, b.p, b.in)[0].v, run_ref(t, a.p, a.in)[0].v), 0.1);
}

TEST(KernelTypes, RotaryTablesAreRealAndVaryWithSeedAndShape) {
  const auto& t = rotary_embedding_type();
  // The tables follow the family rope_tables_for picks: angle = (offset + s) / scale · inv_freq.
  std::set<std::string> families;
  for (std::uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8}) {
    const Sample s = make_sample(t, sz("g", {{"B", 1}, {"H", 1}, {"S", 16}, {"D", 8}}),
                                 DType::F32, "normal", seed);
    const kt::RopeTables f = kt::rope_tables_for(derive_seed(seed, 1), 16, 8);
    families.insert(f.name.substr(0, f.name.find(',')));
    for (std::int64_t pos : {0, 1, 15})
      for (std::int64_t i = 0; i < 4; ++i) {
        if (f.llama3_factor > 0) continue;  // frequency rescaling: checked below
        const double ang = static_cast<double>(f.offset + pos) / f.position_scale *
                           std::pow(f.base, -2.0 * static_cast<double>(i) / 8.0);
        EXPECT_NEAR(s.in[1].v[static_cast<std::size_t>(pos * 4 + i)], std::cos(ang), 1e-7);
        EXPECT_NEAR(s.in[2].v[static_cast<std::size_t>(pos * 4 + i)], std::sin(ang), 1e-7);
      }
    // Every row lies on the unit circle.
    for (std::size_t k = 0; k < s.in[1].v.size(); ++k)
      EXPECT_NEAR(s.in[1].v[k] * s.in[1].v[k] + s.in[2].v[k] * s.in[2].v[k], 1.0, 1e-6);
  }
  EXPECT_GE(families.size(), 3u) << "eight seeds should draw most of the four table families";
  // LLaMA-3.1: the highest frequency (wavelength 2π < 2048) is unscaled, the lowest
  // (wavelength > 8192) is divided by the factor 8.
  kt::RopeTables l3;
  l3.base = 500000;
  l3.llama3_factor = 8;
  std::vector<float> c(2 * 64), sn(2 * 64);
  const TensorView cv{kt::tensor("cos", DType::F32, {2, 64}), c.data()};
  const TensorView sv{kt::tensor("sin", DType::F32, {2, 64}), sn.data()};
  kt::fill_rope_tables(cv, sv, 2, 128, l3);
  EXPECT_NEAR(sn[64 + 0], std::sin(1.0), 1e-7);
  EXPECT_NEAR(sn[64 + 63], std::sin(std::pow(500000.0, -126.0 / 128.0) / 8.0), 1e-12);
}

TEST(KernelTypes, NoStageEverUsesThePlainBase10000RopeTable) {
  // A kernel that synthesizes cos/sin from base 10000 at positions 0.. (the table most models
  // of 2023 used) must fail: no case of any stage, under the default or a fresh seed, hands it
  // that table.
  const auto& t = rotary_embedding_type();
  std::vector<Size> sizes = t.test_sizes();
  for (const auto& e : t.edge_sizes()) sizes.push_back(e);
  for (const auto& c : t.stability_cases()) sizes.push_back(c.size);
  sizes.push_back(t.smoke_size());
  for (std::uint64_t seed : {42ULL, 1234567ULL})
    for (const Size& size : sizes) {
      SCOPED_TRACE(size.label + " seed " + std::to_string(seed));
      const Sample s = make_sample(t, size, DType::F32, "normal", seed);
      const std::int64_t S = s.p.dim("S"), D = s.p.dim("D"), half = D / 2;
      double diff = 0;
      for (std::int64_t pos = 0; pos < S; ++pos)
        for (std::int64_t i = 0; i < half; ++i) {
          const double ang =
              static_cast<double>(pos) * std::pow(10000.0, -2.0 * static_cast<double>(i) / D);
          diff = std::max(
              diff, std::fabs(s.in[1].v[static_cast<std::size_t>(pos * half + i)] - std::cos(ang)));
        }
      EXPECT_GT(diff, 0.1);
    }
}

TEST(KernelTypes, ReduceReferenceByHand) {
  const auto& t = reduce_type();
  const Problem p = t.make_problem(sz("t", {{"M", 3}, {"N", 8}}), DType::F16);
  const auto out =
      run_ref(t, p, {arr({3, 8}, {1,     2,      3,     0,     0,      0,      0,     0,       //
                                  32000, -32000, 32000, 32000, -32000, -32000, 32000, -32000,  //
                                  0.5,   0.25,   0,     0,     0,      0,      0,     -1})});
  EXPECT_EQ(out[0].v, (std::vector<double>{6, 0, -0.25}));
}

// ---- generated inputs and regimes -------------------------------------------------------------

TEST(KernelTypes, GenerationIsDeterministicAndSeedDependent) {
  for (const KernelType* t : all_kernel_types()) {
    SCOPED_TRACE(t->name());
    const Sample a = make_sample(*t, t->smoke_size(), DType::BF16, "normal", 7);
    const Sample b = make_sample(*t, t->smoke_size(), DType::BF16, "normal", 7);
    const Sample c = make_sample(*t, t->smoke_size(), DType::BF16, "normal", 8);
    EXPECT_EQ(a.bufs, b.bufs);
    EXPECT_NE(a.bufs[0], c.bufs[0]);
  }
}

TEST(KernelTypes, NormWeightsAndBiasAreNotTrivial) {
  // A kernel that ignores weight (or bias) must fail: replacing them by 1 (0) changes y a lot.
  const auto& ln = layernorm_type();
  const Sample s = make_sample(ln, ln.smoke_size(), DType::F32, "normal");
  const auto y = run_ref(ln, s.p, s.in)[0].v;
  auto without = [&](std::size_t which, double value) {
    std::vector<Array64> in = s.in;
    std::fill(in[which].v.begin(), in[which].v.end(), value);
    return run_ref(ln, s.p, in)[0].v;
  };
  EXPECT_GT(rel_diff(without(1, 1.0), y), 0.2);
  EXPECT_GT(rel_diff(without(2, 0.0), y), 0.2);
  const auto& rms = rmsnorm_type();
  const Sample r = make_sample(rms, rms.smoke_size(), DType::F32, "normal");
  std::vector<Array64> ones = r.in;
  std::fill(ones[1].v.begin(), ones[1].v.end(), 1.0);
  EXPECT_GT(rel_diff(run_ref(rms, r.p, ones)[0].v, run_ref(rms, r.p, r.in)[0].v), 0.2);
}

TEST(KernelTypes, CrossEntropyTargets) {
  const auto& t = cross_entropy_type();
  for (const Size& s : {sz("a", {{"B", 2000}, {"V", 50}}),
                        sz("b", {{"B", 2000}, {"V", 50}}, {{"ignore_index", 3}})}) {
    const Sample smp = make_sample(t, s, DType::F16, "normal");
    const auto ig = static_cast<std::int64_t>(smp.p.attr("ignore_index"));
    const auto* tg = static_cast<const std::int64_t*>(smp.views[1].data);
    int ignored = 0;
    EXPECT_NE(tg[0], ig);  // row 0 is never ignored in the normal regime
    for (int r = 0; r < 2000; ++r) {
      if (tg[r] == ig) {
        ++ignored;
      } else {
        EXPECT_GE(tg[r], 0);
        EXPECT_LT(tg[r], 50);
      }
    }
    EXPECT_GT(ignored, 120);  // ~10%
    EXPECT_LT(ignored, 300);
  }
  const Size st = sz("s", {{"B", 64}, {"V", 100}});
  const Sample none = make_sample(t, st, DType::F32, "all_ignored");
  EXPECT_TRUE(std::isnan(run_ref(t, none.p, none.in)[0].v[0]));
  const Sample half = make_sample(t, st, DType::F32, "partial_ignore");
  const auto* tg = static_cast<const std::int64_t*>(half.views[1].data);
  int ignored = 0;
  for (int r = 0; r < 64; ++r) ignored += tg[r] == -100;
  EXPECT_GT(ignored, 16);
  EXPECT_LT(ignored, 48);
  EXPECT_TRUE(std::isfinite(run_ref(t, half.p, half.in)[0].v[0]));
}

TEST(KernelTypes, SoftmaxMaskedInfRegimeHasNaNRowInEveryDtype) {
  const auto& t = softmax_type();
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Sample s = make_sample(t, sz("m", {{"R", 16}, {"C", 10}}), dt, "masked_inf");
    const auto y = run_ref(t, s.p, s.in)[0].v;
    for (std::int64_t j = 0; j < 10; ++j) {
      EXPECT_EQ(s.in[0].v[static_cast<std::size_t>(5 * 10 + j)], -kInf);  // row 5: all -inf
      EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(5 * 10 + j)]));
    }
    EXPECT_EQ(y[6 * 10 + 6], 1.0);  // row 6: single finite entry at column 6
    for (std::int64_t r : {0, 1, 2, 3, 4, 7}) {
      double sum = 0;
      for (std::int64_t j = 0; j < 10; ++j) sum += y[static_cast<std::size_t>(r * 10 + j)];
      EXPECT_NEAR(sum, 1.0, 1e-12) << r;
    }
  }
}

TEST(KernelTypes, ReducePm32000RegimeIsExactAndBreaksFp16Accumulation) {
  const auto& t = reduce_type();
  const Sample s = make_sample(t, sz("stab-64x8", {{"M", 64}, {"N", 8}}), DType::F16, "pm32000");
  const auto y = run_ref(t, s.p, s.in)[0].v;
  bool fp16_overflowed = false;
  for (std::size_t r = 0; r < 64; ++r) {
    EXPECT_EQ(y[r], r % 2 ? 64000.0 : 0.0);
    double acc16 = 0;  // an fp16 accumulator, rounding after every add
    for (std::size_t j = 0; j < 8; ++j) {
      acc16 = round_to_dtype(acc16 + s.in[0].v[r * 8 + j], DType::F16);
      fp16_overflowed |= !std::isfinite(acc16);
    }
  }
  EXPECT_TRUE(fp16_overflowed);
  EXPECT_THROW(make_sample(t, sz("n", {{"M", 2}, {"N", 9}}), DType::F16, "pm32000"),
               std::invalid_argument);
}

// A layernorm with fp32 statistics over rows of D = 4096, rounding y to the dtype; two-pass
// (mean, then Σ(x-mean)²) or one-pass (E[x²] - E[x]²) with sequential fp32 sums.
std::vector<double> layernorm_fp32_kernel(const Sample& s, bool two_pass) {
  const std::size_t B = 32, D = 4096;
  const auto& x = s.in[0].v;
  std::vector<double> y(B * D);
  for (std::size_t r = 0; r < B; ++r) {
    float sum = 0, sq = 0;
    for (std::size_t j = 0; j < D; ++j) {
      const float v = static_cast<float>(x[r * D + j]);
      sum += v;
      sq += v * v;
    }
    const float mean = sum / static_cast<float>(D);
    float var = std::max(sq / static_cast<float>(D) - mean * mean, 0.0f);
    if (two_pass) {
      float ss = 0;
      for (std::size_t j = 0; j < D; ++j) {
        const float d = static_cast<float>(x[r * D + j]) - mean;
        ss += d * d;
      }
      var = ss / static_cast<float>(D);
    }
    const float rstd = 1.0f / std::sqrt(var + 1e-5f);
    for (std::size_t j = 0; j < D; ++j) {
      const float v =
          (static_cast<float>(x[r * D + j]) - mean) * rstd * static_cast<float>(s.in[1].v[j]) +
          static_cast<float>(s.in[2].v[j]);
      y[r * D + j] = round_to_dtype(v, s.p.dtype);
    }
  }
  return y;
}

std::vector<double> rounded(std::vector<double> v, DType t) {
  for (double& x : v) x = round_to_dtype(x, t);
  return v;
}

TEST(KernelTypes, LayerNormLargeMeanDefeatsOnePassVariance) {
  const auto& t = layernorm_type();
  const Size size = sz("stab-32x4096", {{"B", 32}, {"D", 4096}});
  bool listed = false;
  for (const auto& c : t.stability_cases())
    if (c.regime == "large_mean") {
      listed = true;
      EXPECT_EQ(c.dtypes, (std::vector<DType>{DType::F16, DType::BF16}));
      EXPECT_EQ(c.size.dims, size.dims);
    }
  EXPECT_TRUE(listed);
  // Against the evaluator's own tolerances (src/eval/compare.cpp).
  for (const DType dt : {DType::F16, DType::BF16}) {
    const double tol = error_threshold(dt);
    SCOPED_TRACE(dtype_name(dt));
    const Sample s = make_sample(t, size, dt, "large_mean");
    const auto ref = rounded(run_ref(t, s.p, s.in)[0].v, dt);
    EXPECT_LT(rel_diff(layernorm_fp32_kernel(s, true), ref), tol / 4);
    EXPECT_GT(rel_diff(layernorm_fp32_kernel(s, false), ref), tol * 4);
  }
}

TEST(KernelTypes, LayerNormAllEqualRowsAreExactWithFp32Statistics) {
  const auto& t = layernorm_type();
  for (DType dt : kDtypes) {
    SCOPED_TRACE(dtype_name(dt));
    const Sample s = make_sample(t, sz("stab-32x4096", {{"B", 32}, {"D", 4096}}), dt, "all_equal");
    const auto ref = rounded(run_ref(t, s.p, s.in)[0].v, dt);
    for (std::size_t j = 0; j < 4096; ++j) ASSERT_EQ(ref[j], s.in[2].v[j]);  // y = bias
    EXPECT_EQ(layernorm_fp32_kernel(s, true), ref);
  }
}

TEST(KernelTypes, Pm300RegimeOverflowsFp16SumOfSquares) {
  for (const KernelType* t : {&layernorm_type(), &rmsnorm_type()}) {
    SCOPED_TRACE(t->name());
    const Sample s = make_sample(*t, t->stability_cases().back().size, DType::F16, "pm300");
    ASSERT_EQ(s.p.size.dims.begin()->second, 32);
    double sumsq = 0;
    for (std::size_t j = 0; j < 4096; ++j) sumsq += s.in[0].v[j] * s.in[0].v[j];
    EXPECT_GT(sumsq, 65504.0 * 100);
    const auto y = run_ref(*t, s.p, s.in)[0].v;
    for (double v : y) ASSERT_TRUE(std::isfinite(round_to_dtype(v, DType::F16)));
  }
}

// Every stability case in every dtype it runs in: inputs are finite (apart from the -inf of
// masked regimes), the reference is nonzero and finite after rounding (apart from the NaN that
// the masked/all-ignored regimes expect), and stays well inside the dtype's range (no overflow
// race that summation order could decide).
TEST(KernelTypes, StabilityCasesAreWellDefined) {
  for (const KernelType* t : all_kernel_types()) {
    for (const auto& c : t->stability_cases()) {
      const auto dts = c.dtypes.empty() ? kDtypes : c.dtypes;
      for (DType dt : dts) {
        SCOPED_TRACE(t->name() + " " + c.regime + " " + std::string(dtype_name(dt)));
        const Sample s = make_sample(*t, c.size, dt, c.regime);
        const bool masked = c.regime == "masked_inf";
        for (const auto& a : s.in)
          for (double v : a.v) ASSERT_TRUE(std::isfinite(v) || (masked && v == -kInf));
        const auto out = run_ref(*t, s.p, s.in);
        const DType odt = s.p.outputs[0].dtype;
        const bool expect_nan = (t->name() == "softmax" && masked) || c.regime == "all_ignored";
        bool saw_nan = false;
        double norm = 0;
        for (double v : out[0].v) {
          const double r = round_to_dtype(v, odt);
          if (std::isnan(r)) {
            saw_nan = true;
            continue;
          }
          ASSERT_TRUE(std::isfinite(r)) << v;
          EXPECT_LE(std::fabs(v), 0.98 * dtype_max(odt));  // pm32000 reaches 64000 exactly
          norm += r * r;
        }
        EXPECT_EQ(saw_nan, expect_nan);
        if (c.regime != "all_ignored") {
          EXPECT_GT(norm, 0.0);
        }
      }
    }
  }
}

// ---- attributes and inputs exercised beyond their defaults (issue 18, class 1) ------------------

// One case the evaluator's stages run: a size, a regime, the dtypes it runs in.
struct StageCase {
  Size size;
  std::string regime;
  std::vector<DType> dtypes;
};

std::vector<StageCase> stage_cases(const KernelType& t) {
  std::vector<StageCase> cs{{t.smoke_size(), "normal", kDtypes}};
  for (const auto& s : t.test_sizes()) cs.push_back({s, "normal", kDtypes});
  for (const auto& c : t.stability_cases())
    cs.push_back({c.size, c.regime, c.dtypes.empty() ? kDtypes : c.dtypes});
  for (const auto& s : t.edge_sizes()) cs.push_back({s, "normal", kDtypes});
  return cs;
}

std::int64_t input_elements(const Problem& p) {
  std::int64_t n = 0;
  for (const auto& d : p.inputs) n += d.numel();
  return n;
}

// Relative Frobenius distance of two oracle outputs after rounding to `dt` (finite elements).
double rounded_rel_diff(const Array64& a, const Array64& b, DType dt) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.v.size(); ++i) {
    const double x = round_to_dtype(a.v[i], dt), y = round_to_dtype(b.v[i], dt);
    if (!std::isfinite(x) || !std::isfinite(y)) {
      if (std::isnan(x) != std::isnan(y) || (!std::isnan(x) && x != y)) return kInf;
      continue;
    }
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

TEST(KernelTypes, EveryAttributeIsExercisedAtANonDefaultValueWhereItMatters) {
  // For every attribute of every type, some case of the stages sets it to a non-default value
  // on inputs where the oracle at the default differs by more than 2x the dtype's threshold --
  // in every dtype -- so a kernel that ignores the attribute (uses the default) must fail.
  for (const KernelType* t : all_kernel_types()) {
    const auto cases = stage_cases(*t);
    for (const AttrSpec& a : t->attributes()) {
      for (DType dt : kDtypes) {
        SCOPED_TRACE(t->name() + "." + a.name + " " + std::string(dtype_name(dt)));
        // Qualifying cases, cheapest oracle first; the first one where the attribute matters
        // settles it (e.g. causal = 0 at S = 1 changes nothing, at S = 13 it does).
        std::vector<std::pair<std::int64_t, const StageCase*>> cands;
        for (const auto& c : cases) {
          if (!c.size.attrs.count(a.name)) continue;
          if (std::find(c.dtypes.begin(), c.dtypes.end(), dt) == c.dtypes.end()) continue;
          Size plain = c.size;
          plain.attrs.erase(a.name);
          const Problem p = t->make_problem(c.size, dt), q = t->make_problem(plain, dt);
          if (p.attr(a.name) == q.attr(a.name)) continue;
          cands.push_back({input_elements(p), &c});
        }
        ASSERT_FALSE(cands.empty()) << "no case of any stage sets " << a.name
                                    << " to a non-default value";
        std::stable_sort(cands.begin(), cands.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
        bool matters = false;
        std::string tried;
        for (const auto& [n, c] : cands) {
          const Sample s = make_sample(*t, c->size, dt, c->regime);
          Size plain = c->size;
          plain.attrs.erase(a.name);
          const Problem q = t->make_problem(plain, dt);
          const auto want = run_ref(*t, s.p, s.in);
          double d = kInf;  // a default under which the inputs are invalid counts as mattering
          try {
            d = rounded_rel_diff(run_ref(*t, q, s.in)[0], want[0], s.p.outputs[0].dtype);
          } catch (const std::invalid_argument&) {
          }
          tried += " " + c->size.label + "[" + c->regime + "]";
          if (d > 2 * error_threshold(s.p.outputs[0].dtype)) {
            matters = true;
            break;
          }
        }
        EXPECT_TRUE(matters) << "in every case that sets " << a.name << " (" << tried
                             << ") the default gives nearly the same output, so a kernel "
                                "ignoring the attribute would pass";
      }
    }
  }
}

TEST(KernelTypes, RealisticNonDefaultAttributeValuesAreCovered) {
  // The values real models use (issue 18): eps 1e-5 and 1e-6 for both norms, ignore_index 0
  // and a class id inside the vocabulary, causal and non-causal attention with a scale other
  // than 1/sqrt(D), both RoPE layouts.
  auto values = [](const KernelType& t, const std::string& attr, bool causal_only = false,
                   bool noncausal_only = false) {
    std::set<double> v;
    for (const auto& c : stage_cases(t)) {
      const Problem p = t.make_problem(c.size, DType::F32);
      if (attr == "sm_scale") {
        const bool causal = p.attr("causal") != 0;
        if ((causal_only && !causal) || (noncausal_only && causal)) continue;
        if (p.attr("sm_scale") != 1.0 / std::sqrt(static_cast<double>(p.dim("D"))))
          v.insert(p.attr("sm_scale"));
        continue;
      }
      v.insert(p.attr(attr));
    }
    return v;
  };
  for (const char* norm : {"layernorm", "rmsnorm"}) {
    const auto eps = values(type_named(norm), "eps");
    EXPECT_TRUE(eps.count(1e-5) && eps.count(1e-6)) << norm;
  }
  const auto& ce = cross_entropy_type();
  const auto ig = values(ce, "ignore_index");
  EXPECT_TRUE(ig.count(-100) && ig.count(0)) << "ignore_index 0 (a pad id) must be tested";
  bool inside = false;
  for (const auto& c : stage_cases(ce)) {
    const Problem p = ce.make_problem(c.size, DType::F32);
    inside |= p.attr("ignore_index") > 0 && p.attr("ignore_index") < p.dim("V");
  }
  EXPECT_TRUE(inside) << "an ignore_index that is a class id inside the vocabulary";
  const auto& fa = flash_attention_type();
  EXPECT_FALSE(values(fa, "sm_scale", true, false).empty()) << "causal, custom sm_scale";
  EXPECT_FALSE(values(fa, "sm_scale", false, true).empty()) << "non-causal, custom sm_scale";
  EXPECT_EQ(values(fa, "causal"), (std::set<double>{0, 1}));
  EXPECT_EQ(values(rotary_embedding_type(), "interleaved"), (std::set<double>{0, 1}));
}

TEST(KernelTypes, NoInputIsAFunctionOfTheShapeAlone) {
  // Every input tensor (data and tables alike) changes with the seed, so a kernel cannot
  // synthesize an input it is handed instead of reading it.
  // Edge sizes up to 2^18 input elements: every type's inputs at small shapes (generation is
  // shape-generic, so larger sizes add time, not coverage).
  for (const KernelType* t : all_kernel_types()) {
    for (const auto& c : stage_cases(*t)) {
      if (c.regime != "normal" || c.size.label.rfind("edge-", 0) != 0) continue;
      if (input_elements(t->make_problem(c.size, DType::F32)) > (1 << 18)) continue;
      SCOPED_TRACE(t->name() + " " + c.size.label);
      const Sample a = make_sample(*t, c.size, DType::F32, "normal", 42);
      const Sample b = make_sample(*t, c.size, DType::F32, "normal", 43);
      for (std::size_t i = 0; i < a.bufs.size(); ++i) {
        // (an integer input of a few elements, such as 3 targets, may repeat by chance)
        if (!is_floating(a.p.inputs[i].dtype) && a.p.inputs[i].numel() < 16) continue;
        EXPECT_NE(a.bufs[i], b.bufs[i])
            << "input '" << a.p.inputs[i].name << "' does not depend on the seed";
      }
    }
  }
}

// ---- gemm64 ----------------------------------------------------------------------------------

TEST(Gemm64, MatchesNaiveTripleLoopOnOddSizes) {
  struct Case {
    std::int64_t M, N, K;
  };
  for (const Case c : {Case{1, 1, 1}, Case{7, 13, 5}, Case{97, 131, 263}, Case{6, 8, 256},
                       Case{1, 4097, 3}, Case{300, 1, 517}, Case{101, 2100, 17}, Case{5, 3, 0}}) {
    for (bool trans_b : {false, true}) {
      for (bool threaded : {false, true}) {
        SCOPED_TRACE(std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
                     (trans_b ? " T" : " N") + (threaded ? " mt" : " st"));
        // Leading dimensions larger than the widths, to test strided submatrices.
        const std::int64_t lda = c.K + 3, ldb = (trans_b ? c.K : c.N) + 2, ldc = c.N + 1;
        const std::int64_t b_rows = trans_b ? c.N : c.K;
        std::vector<double> A(static_cast<std::size_t>(c.M * lda)),
            B(static_cast<std::size_t>(b_rows * ldb)), C(static_cast<std::size_t>(c.M * ldc), 7.0);
        for (std::size_t i = 0; i < A.size(); ++i) A[i] = std::sin(0.37 * static_cast<double>(i));
        for (std::size_t i = 0; i < B.size(); ++i) B[i] = std::cos(0.11 * static_cast<double>(i));
        gemm64(c.M, c.N, c.K, A.data(), lda, B.data(), ldb, C.data(), ldc, trans_b, threaded);
        for (std::int64_t i = 0; i < c.M; ++i) {
          for (std::int64_t j = 0; j < c.N; ++j) {
            double r = 0;
            for (std::int64_t k = 0; k < c.K; ++k)
              r += A[static_cast<std::size_t>(i * lda + k)] *
                   B[static_cast<std::size_t>(trans_b ? j * ldb + k : k * ldb + j)];
            ASSERT_NEAR(C[static_cast<std::size_t>(i * ldc + j)], r, 1e-12 * (1 + c.K))
                << i << "," << j;
          }
          // padding columns of C are untouched
          ASSERT_EQ(C[static_cast<std::size_t>(i * ldc + c.N)], 7.0);
        }
      }
    }
  }
}

TEST(KernelTypes, MatmulReferenceUsesBothOperands) {
  // A generated problem: the reference equals a naive product of the generated inputs.
  const auto& t = matmul_type();
  const Sample s =
      make_sample(t, sz("t", {{"M", 13}, {"N", 27}, {"K", 300}}), DType::BF16, "normal");
  const auto C = run_ref(t, s.p, s.in)[0].v;
  for (std::int64_t i = 0; i < 13; i += 4)
    for (std::int64_t j = 0; j < 27; j += 5) {
      double r = 0;
      for (std::int64_t k = 0; k < 300; ++k)
        r += s.in[0].v[static_cast<std::size_t>(i * 300 + k)] *
             s.in[1].v[static_cast<std::size_t>(k * 27 + j)];
      EXPECT_NEAR(C[static_cast<std::size_t>(i * 27 + j)], r, 1e-12);
    }
}

// Issue 16: large problems are screened at a reduced size along screen_dims() only.
TEST(ScreenSize, TheGpt2LmHeadIsScreenedWithFewerOutputColumnsAndTheSameKAndM) {
  const KernelType& mm = type_named("matmul");
  Size lm{"model-M64xN50257xK768", {{"M", 64}, {"N", 50257}, {"K", 768}}, {}};
  const Size s = screen_size(mm, lm, DType::F32, 16u << 20);
  EXPECT_EQ(s.dims.at("M"), 64);
  EXPECT_EQ(s.dims.at("K"), 768);
  EXPECT_EQ(s.dims.at("N"), 3142);  // 50257 halved (rounded up) four times
  EXPECT_EQ(s.label, "model-M64xN50257xK768-screen-N3142");
  const Problem p = mm.make_problem(s, DType::F32);
  std::size_t bytes = 0;
  for (const auto& t : p.inputs) bytes += t.nbytes();
  for (const auto& t : p.outputs) bytes += t.nbytes();
  EXPECT_LE(bytes, 16u << 20);
  // The same size when it fits, when the device screens at full size (0), or in bf16 where
  // half the bytes fit at one halving fewer.
  Size small{"s", {{"M", 64}, {"N", 3072}, {"K", 768}}, {}};
  EXPECT_EQ(screen_size(mm, small, DType::F32, 16u << 20).label, "s");
  EXPECT_EQ(screen_size(mm, lm, DType::F32, 0).label, lm.label);
  EXPECT_EQ(screen_size(mm, lm, DType::BF16, 16u << 20).dims.at("N"), 6283);
  // No degenerate screens: a size that fits only past 16x less work, or below 1/16 of a
  // dimension, is not screened reduced (4096^3: A alone is 64 MiB; fused_mlp's weights do
  // not shrink with the tokens).
  Size cube{"4096x4096x4096", {{"M", 4096}, {"N", 4096}, {"K", 4096}}, {}};
  EXPECT_EQ(screen_size(mm, cube, DType::F32, 16u << 20).label, cube.label);
  const KernelType& mlp = type_named("fused_mlp");
  const Size llama = mlp.benchmark_size(DeviceKind::Gpu);
  EXPECT_EQ(screen_size(mlp, llama, DType::BF16, 16u << 20).label, llama.label);
}

TEST(ScreenSize, EveryTypeShrinksOnlyDimensionsItHasAndNeverItsRowOrReductionLength) {
  // Each type's screen dims exist in its benchmark size; a huge problem shrinks to fit and
  // keeps every other dimension.
  const std::map<std::string, std::set<std::string>> keep{
      {"matmul", {"K"}},          {"softmax", {"C"}},         {"layernorm", {"D"}},
      {"rmsnorm", {"N"}},         {"reduce", {"N"}},          {"cross_entropy", {"V"}},
      {"fused_mlp", {"D", "H"}},  {"flash_attention", {"H", "S", "D"}},
      {"rotary_embedding", {"S", "D"}}};
  for (const KernelType* t : all_kernel_types()) {
    const auto dims = t->screen_dims();
    ASSERT_FALSE(dims.empty()) << t->name();
    Size big = t->benchmark_size(DeviceKind::Gpu);
    for (const auto& d : dims) {
      ASSERT_TRUE(big.dims.count(d)) << t->name() << " has no dimension " << d;
      big.dims[d] *= 64;
    }
    const Problem bp = t->make_problem(big, DType::F32);
    std::size_t bytes = 0;
    for (const auto& x : bp.inputs) bytes += x.nbytes();
    for (const auto& x : bp.outputs) bytes += x.nbytes();
    const Size s = screen_size(*t, big, DType::F32, bytes / 4 * 3);
    for (const auto& k : keep.at(t->name())) {
      ASSERT_TRUE(big.dims.count(k)) << t->name() << " " << k;
      EXPECT_EQ(s.dims.at(k), big.dims.at(k)) << t->name() << " shrank " << k;
    }
    EXPECT_NE(s.label, big.label) << t->name();
  }
}

}  // namespace
}  // namespace vb
