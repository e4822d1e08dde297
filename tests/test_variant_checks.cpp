// Unit tests: the ABI checks the CPU ranking variants share (kernels/include/vb_variant.h):
// each accepts a well-formed call and fills its arguments, and refuses a malformed one with a
// message that names the argument.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#define VBK_NO_LAST_ERROR_IMPL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#include "../kernels/include/vb_variant.h"
#pragma GCC diagnostic pop

namespace {

/// A dense CPU tensor over `data` (not owned) with the given shape; `shape` must outlive it.
DLTensor tensor(void* data, std::vector<std::int64_t>& shape, DLDataTypeCode code, int bits) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int>(shape.size());
  t.dtype = {static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bits), 1};
  t.shape = shape.data();
  return t;
}

std::string last_error() { return vbk::error_buffer(); }

TEST(VariantChecks, CrossEntropyKeepsTheNonIgnoredRowsAndNamesABadTarget) {
  std::vector<float> logits(3 * 5, 0.0f);
  std::vector<std::int64_t> targets = {1, -100, 4};
  float loss = 0;
  std::vector<std::int64_t> s_logits = {3, 5}, s_tg = {3}, s_loss = {};
  DLTensor in[2] = {tensor(logits.data(), s_logits, kDLFloat, 32),
                    tensor(targets.data(), s_tg, kDLInt, 64)};
  DLTensor out[1] = {tensor(&loss, s_loss, kDLFloat, 32)};
  double ignore = -100;
  vbv::CrossEntropyArgs a;
  ASSERT_EQ(vbv::check_cross_entropy(in, 2, out, 1, &ignore, 1, a), 0) << last_error();
  EXPECT_EQ(a.B, 3);
  EXPECT_EQ(a.V, 5);
  EXPECT_EQ(a.rows, (std::vector<std::int64_t>{0, 2}));
  targets[1] = 5;
  EXPECT_EQ(vbv::check_cross_entropy(in, 2, out, 1, &ignore, 1, a), 1);
  EXPECT_NE(last_error().find("targets[1] = 5 is outside [0, 5)"), std::string::npos) << last_error();
  targets[1] = 0;
  double half = 0.5;
  EXPECT_EQ(vbv::check_cross_entropy(in, 2, out, 1, &half, 1, a), 1);
  EXPECT_NE(last_error().find("ignore_index must be an integer"), std::string::npos) << last_error();
  out[0].dtype.bits = 16;  // an fp16 loss
  EXPECT_EQ(vbv::check_cross_entropy(in, 2, out, 1, &ignore, 1, a), 1);
  EXPECT_NE(last_error().find("loss"), std::string::npos) << last_error();
}

TEST(VariantChecks, AttentionRefusesABadCausalFlagScaleOrShape) {
  std::vector<float> q(2 * 3 * 4 * 8), k(q.size()), v(q.size()), o(q.size());
  std::vector<std::int64_t> s = {2, 3, 4, 8}, s_bad = {2, 3, 5, 8};
  DLTensor in[3] = {tensor(q.data(), s, kDLFloat, 32), tensor(k.data(), s, kDLFloat, 32),
                    tensor(v.data(), s, kDLFloat, 32)};
  DLTensor out[1] = {tensor(o.data(), s, kDLFloat, 32)};
  double attrs[2] = {1.0, 0.125};
  vbv::AttentionArgs a;
  ASSERT_EQ(vbv::check_attention(in, 3, out, 1, attrs, 2, a), 0) << last_error();
  EXPECT_TRUE(a.causal);
  EXPECT_FLOAT_EQ(a.scale, 0.125f);
  EXPECT_EQ(a.S, 4);
  EXPECT_EQ(a.D, 8);
  attrs[0] = 2.0;
  EXPECT_EQ(vbv::check_attention(in, 3, out, 1, attrs, 2, a), 1);
  EXPECT_NE(last_error().find("causal must be 0 or 1"), std::string::npos) << last_error();
  attrs[0] = 0.0;
  attrs[1] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(vbv::check_attention(in, 3, out, 1, attrs, 2, a), 1);
  EXPECT_NE(last_error().find("sm_scale must be finite"), std::string::npos) << last_error();
  attrs[1] = 0.125;
  in[1] = tensor(k.data(), s_bad, kDLFloat, 32);
  EXPECT_EQ(vbv::check_attention(in, 3, out, 1, attrs, 2, a), 1);
  EXPECT_EQ(last_error().rfind("k:", 0), 0u) << last_error();
}

TEST(VariantChecks, AttentionTakesKvHeadsDividingTheQueryHeads) {
  // q, o [2,6,4,8]; k, v [2,Hkv,4,8]: Hkv 1, 2, 3, 6 are taken, 4 is refused naming the rule.
  std::vector<float> q(2 * 6 * 4 * 8), kv(q.size()), o(q.size());
  std::vector<std::int64_t> sq = {2, 6, 4, 8};
  double attrs[2] = {1.0, 0.125};
  vbv::AttentionArgs a;
  for (std::int64_t hkv : {1, 2, 3, 6, 4}) {
    std::vector<std::int64_t> skv = {2, hkv, 4, 8};
    DLTensor in[3] = {tensor(q.data(), sq, kDLFloat, 32), tensor(kv.data(), skv, kDLFloat, 32),
                      tensor(kv.data(), skv, kDLFloat, 32)};
    DLTensor out[1] = {tensor(o.data(), sq, kDLFloat, 32)};
    const int rc = vbv::check_attention(in, 3, out, 1, attrs, 2, a);
    if (hkv == 4) {
      EXPECT_EQ(rc, 1);
      EXPECT_NE(last_error().find("4 KV heads (dim 1) must be >= 1 and divide the 6 query heads"),
                std::string::npos)
          << last_error();
    } else {
      ASSERT_EQ(rc, 0) << last_error();
      EXPECT_EQ(a.H, 6);
      EXPECT_EQ(a.Hkv, hkv);
      EXPECT_EQ(a.group(), 6 / hkv);
    }
  }
  // v with other heads than k is refused (k fixes H_kv).
  std::vector<std::int64_t> s2 = {2, 2, 4, 8}, s3 = {2, 3, 4, 8};
  DLTensor in[3] = {tensor(q.data(), sq, kDLFloat, 32), tensor(kv.data(), s2, kDLFloat, 32),
                    tensor(kv.data(), s3, kDLFloat, 32)};
  DLTensor out[1] = {tensor(o.data(), sq, kDLFloat, 32)};
  EXPECT_EQ(vbv::check_attention(in, 3, out, 1, attrs, 2, a), 1);
  EXPECT_EQ(last_error().rfind("v:", 0), 0u) << last_error();
}

TEST(VariantChecks, MlpNamesTheMisshapenWeight) {
  std::vector<float> x(4 * 6), wg(10 * 6), wu(10 * 6), wd(6 * 10), y(4 * 6);
  std::vector<std::int64_t> sx = {4, 6}, sw = {10, 6}, sd = {6, 10}, sd_bad = {10, 6};
  DLTensor in[4] = {tensor(x.data(), sx, kDLFloat, 32), tensor(wg.data(), sw, kDLFloat, 32),
                    tensor(wu.data(), sw, kDLFloat, 32), tensor(wd.data(), sd, kDLFloat, 32)};
  DLTensor out[1] = {tensor(y.data(), sx, kDLFloat, 32)};
  vbv::MlpArgs a;
  ASSERT_EQ(vbv::check_mlp(in, 4, out, 1, 0, a), 0) << last_error();
  EXPECT_EQ(a.B, 4);
  EXPECT_EQ(a.D, 6);
  EXPECT_EQ(a.H, 10);
  in[3] = tensor(wd.data(), sd_bad, kDLFloat, 32);
  EXPECT_EQ(vbv::check_mlp(in, 4, out, 1, 0, a), 1);
  EXPECT_EQ(last_error().rfind("w_down:", 0), 0u) << last_error();
}

TEST(VariantChecks, RopeNeedsAnEvenHeadDimAndAFlag) {
  std::vector<float> x(1 * 2 * 3 * 4), c(3 * 2), sn(3 * 2), y(x.size());
  std::vector<std::int64_t> sx = {1, 2, 3, 4}, st = {3, 2}, sx_odd = {1, 2, 3, 5};
  DLTensor in[3] = {tensor(x.data(), sx, kDLFloat, 32), tensor(c.data(), st, kDLFloat, 32),
                    tensor(sn.data(), st, kDLFloat, 32)};
  DLTensor out[1] = {tensor(y.data(), sx, kDLFloat, 32)};
  double interleaved = 1.0;
  vbv::RopeArgs a;
  ASSERT_EQ(vbv::check_rope(in, 3, out, 1, &interleaved, 1, a), 0) << last_error();
  EXPECT_TRUE(a.interleaved);
  EXPECT_EQ(a.S, 3);
  interleaved = 0.5;
  EXPECT_EQ(vbv::check_rope(in, 3, out, 1, &interleaved, 1, a), 1);
  EXPECT_NE(last_error().find("interleaved must be 0 or 1"), std::string::npos) << last_error();
  interleaved = 0.0;
  in[0] = tensor(x.data(), sx_odd, kDLFloat, 32);
  EXPECT_EQ(vbv::check_rope(in, 3, out, 1, &interleaved, 1, a), 1);
  EXPECT_NE(last_error().find("must be even"), std::string::npos) << last_error();
}

}  // namespace
