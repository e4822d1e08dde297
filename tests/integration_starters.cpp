// Every CPU starter kernel passes every stage of the evaluator in every dtype, vectorizes, and
// gets timed (DESIGN §4; issue 2); so do the correct-but-unusual kernels (issue 18).
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "eval/evaluator.h"
#include "kernels/kernel_type.h"
#include "support.h"

namespace vb {
namespace {

class Starter : public ::testing::TestWithParam<std::string> {};

TEST_P(Starter, PassesEveryStageInEveryDtype) {
  const KernelType* kt = find_kernel_type(GetParam());
  ASSERT_NE(kt, nullptr);
  auto o = test::test_options(/*timing=*/true);
  const EvalReport r = evaluate(*kt, *find_backend("cpu"), test::starter(GetParam()), o);
  EXPECT_EQ(r.verdict, "PASS") << r.failed_stage << " " << r.failed_size << " " << r.failed_dtype
                               << " [" << r.guard << "] " << r.reason;
  for (const auto& s : r.stages) EXPECT_EQ(s.status, "PASS") << s.name << ": " << s.detail;
  ASSERT_TRUE(r.timing.has_value());
  EXPECT_GT(r.timing->median_us, 0);
  EXPECT_GE(r.timing->rotation_sets, 2);
  // Not scalar-only: the compiler reports vectorized loops in the kernel source itself.
  int in_source = 0;
  for (const auto& l : r.build.vectorized_loops)
    if (l.file.find("kernels/cpu/" + GetParam()) != std::string::npos) ++in_source;
  EXPECT_GT(in_source, 0) << "no loop of " << GetParam() << ".cpp vectorized";
}

INSTANTIATE_TEST_SUITE_P(AllNine, Starter,
                         ::testing::Values("matmul", "softmax", "layernorm", "rmsnorm",
                                           "flash_attention", "fused_mlp", "cross_entropy",
                                           "rotary_embedding", "reduce"));

// Grouped-query attention (DESIGN §2): the CPU starter reads K/V [B,H_kv,S,D] with query head h
// on KV head h / (H/H_kv). Every stage runs the GQA/MQA test and edge sizes (in the test
// above); here it is also timed at a GQA size, whose min_bytes count K/V at H_kv heads.
TEST(StarterGqa, FlashAttentionPassesAndIsTimedAtAGqaSize) {
  const KernelType& kt = *find_kernel_type("flash_attention");
  auto o = test::test_options(/*timing=*/true);
  o.dtypes = {DType::F32};
  o.timing_size = kt.find_size("b1h8hkv2s256d64", DeviceKind::Host);
  ASSERT_TRUE(o.timing_size.has_value());
  const EvalReport r = evaluate(kt, *find_backend("cpu"), test::starter("flash_attention"), o);
  EXPECT_EQ(r.verdict, "PASS") << r.failed_stage << " " << r.failed_size << " " << r.failed_dtype
                               << " [" << r.guard << "] " << r.reason;
  ASSERT_TRUE(r.timing.has_value());
  EXPECT_EQ(r.timing->size_label, "b1h8hkv2s256d64");
  EXPECT_GT(r.timing->median_us, 0);
  // q and o at 8 heads, k and v at 2: 4 bytes · 256 · 64 · (8 + 2 + 2 + 8).
  EXPECT_DOUBLE_EQ(r.timing->bytes, 4.0 * 256 * 64 * (8 + 2 + 2 + 8));
}

// Correct kernels written in unusual ways (kernels/unusual/cpu/; issue 18): every stage must
// accept them, so that tightening a guard never rejects an honest kernel. Integration tests,
// like the starters: they run every stage (and so stay out of CI's ASan pass).
struct UnusualCase {
  const char* file;
  const char* kernel;
  std::vector<DType> dtypes = {};  ///< empty = fp16, bf16, fp32
  bool timing = false;             ///< also run the (quick) timing protocol
};
void PrintTo(const UnusualCase& c, std::ostream* os) { *os << c.file; }

class UnusualKernel : public ::testing::TestWithParam<UnusualCase> {};

TEST_P(UnusualKernel, PassesEveryStage) {
  const UnusualCase c = GetParam();
  const KernelType* kt = find_kernel_type(c.kernel);
  ASSERT_NE(kt, nullptr);
  auto o = test::test_options(c.timing);
  o.quick = c.timing;
  if (!c.dtypes.empty()) o.dtypes = c.dtypes;
  const EvalReport r = evaluate(*kt, *find_backend("cpu"), test::unusual_kernel(c.file), o);
  EXPECT_EQ(r.verdict, "PASS") << r.failed_stage << " " << r.failed_size << " " << r.failed_dtype
                               << " [" << r.guard << "] " << r.reason;
  for (const auto& s : r.stages) EXPECT_EQ(s.status, "PASS") << s.name << ": " << s.detail;
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, UnusualKernel,
    ::testing::Values(UnusualCase{"rope_position_major", "rotary_embedding"},
                      UnusualCase{"cross_entropy_masked_reverse", "cross_entropy"},
                      UnusualCase{"softmax_chunks_of_7", "softmax"},
                      UnusualCase{"layernorm_welford", "layernorm"},
                      UnusualCase{"reduce_fixed_tree_mt", "reduce"},
                      // (the thread team is the point, not the dtype)
                      UnusualCase{"softmax_300_threads", "softmax", {DType::F32}},
                      // a scratch file in $TMPDIR reused across calls (issue 18 class 5)
                      UnusualCase{"softmax_tmpdir_workspace", "softmax"},
                      // Allowed across the stepped timing protocol (issue 18 classes 7, 8): a
                      // worker pool asleep between calls, the output used as scratch, a
                      // workspace kept across calls.
                      UnusualCase{"softmax_idle_thread_pool", "softmax", {DType::F32}, true},
                      UnusualCase{"softmax_output_as_scratch", "softmax", {}, true},
                      UnusualCase{"rmsnorm_mmap_workspace", "rmsnorm", {}, true}),
    [](const auto& info) { return std::string(info.param.file); });

}  // namespace
}  // namespace vb
