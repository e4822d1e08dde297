// Every CPU starter kernel passes every stage of the evaluator in every dtype, vectorizes, and
// gets timed (DESIGN §4; issue 2).
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

}  // namespace
}  // namespace vb
