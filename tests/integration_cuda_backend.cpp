// The CUDA backend on a real GPU (DESIGN §4 on device memory): every deliberately bad CUDA
// kernel in kernels/bad/cuda/ is rejected with its guard named, a correct one passes all
// stages and is timed on rotating sets larger than 2x the GPU's L2, and compute-sanitizer
// findings fail a candidate. Every test skips with the detection's reason without a GPU.
#include <gtest/gtest.h>

#include "backends/backend.h"
#include "backends/cuda/cuda_backend.h"
#include "eval/evaluator.h"
#include "kernels/kernel_type.h"
#include "support.h"
#include "targets/gpu_ceilings.h"
#include "targets/nvidia_detect.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

// "" when a GPU and nvcc are usable, else why not.
std::string why_no_cuda() {
  static const std::string why = [] {
    std::string w;
    if (detect_nvidia_gpus(&w).empty()) return "no CUDA GPU: " + (w.empty() ? "none found" : w);
    if (find_nvcc().empty()) return std::string("no CUDA GPU toolchain: nvcc not found");
    return std::string();
  }();
  return why;
}

#define VB_REQUIRE_GPU()                                    \
  do {                                                      \
    if (const std::string w = why_no_cuda(); !w.empty()) {  \
      GTEST_SKIP() << w;                                    \
    }                                                       \
  } while (0)

fs::path bad_cuda(const std::string& name) {
  return test::repo_root() / "kernels" / "bad" / "cuda" / (name + ".cu");
}
fs::path good_cuda() {
  return test::repo_root() / "tests" / "fixtures" / "cuda" / "softmax_small.cu";
}

EvalReport eval_softmax(const fs::path& src, const EvalOptions& o) {
  return evaluate(*find_kernel_type("softmax"), *find_backend("cuda"), src, o);
}

struct BadCudaCase {
  const char* file;
  const char* verdict;
  const char* guard;
  const char* stage;
  bool timing;  // the guard fires in the timing protocol
};

void PrintTo(const BadCudaCase& c, std::ostream* os) { *os << c.file; }

class BadCudaKernel : public ::testing::TestWithParam<BadCudaCase> {};

TEST_P(BadCudaKernel, IsRejectedByItsGuard) {
  VB_REQUIRE_GPU();
  const BadCudaCase c = GetParam();
  auto o = test::test_options(c.timing);
  o.call_timeout_s = 5;
  o.quick = true;
  if (c.timing) o.timing_size = find_kernel_type("softmax")->find_size("1024x1024", "cuda");
  const EvalReport r = eval_softmax(bad_cuda(c.file), o);
  EXPECT_EQ(r.verdict, c.verdict) << r.reason;
  EXPECT_EQ(r.guard, c.guard) << r.reason;
  EXPECT_EQ(r.failed_stage, c.stage) << r.reason;
  EXPECT_FALSE(r.reason.empty());
  EXPECT_FALSE(r.verdict == "PASS");
  if (std::string(c.file) == "illegal_address") {
    EXPECT_NE(r.reason.find("ILLEGAL_ADDRESS"), std::string::npos)
        << "the CUDA error must be named: " << r.reason;
  }
  if (c.timing) {
    EXPECT_FALSE(r.timing.has_value()) << "no latency from escaped timing";
  }
}

INSTANTIATE_TEST_SUITE_P(
    CudaEvaluator, BadCudaKernel,
    ::testing::Values(
        BadCudaCase{"writes_past_end", "FAIL", "guard_band", "smoke", false},
        BadCudaCase{"skips_last_element", "FAIL", "poisoned_output", "smoke", false},
        BadCudaCase{"wrong_dtype", "FAIL", "output_dtype_shape", "smoke", false},
        BadCudaCase{"spins_forever", "TIMEOUT", "timeout", "smoke", false},
        BadCudaCase{"illegal_address", "CRASH", "crash", "smoke", false},
        BadCudaCase{"side_stream", "INVALID", "timer_cross_check", "timing", true},
        BadCudaCase{"compile_error", "FAIL", "build", "build", false}),
    [](const auto& info) { return std::string(info.param.file); });

TEST(CudaEvaluator, ACorrectKernelPassesAndIsTimedBeyondTheL2) {
  VB_REQUIRE_GPU();
  auto o = test::test_options(/*timing=*/true);
  o.timing_size = find_kernel_type("softmax")->find_size("1024x1024", "cuda");
  const EvalReport r = eval_softmax(good_cuda(), o);
  ASSERT_EQ(r.verdict, "PASS") << r.guard << ": " << r.reason;
  for (const auto& s : r.stages) EXPECT_EQ(s.status, "PASS") << s.name << ": " << s.detail;
  ASSERT_TRUE(r.timing.has_value());
  EXPECT_GT(r.timing->median_us, 0.0);
  EXPECT_GE(r.timing->reps, 3);
  const auto gpus = detect_nvidia_gpus();
  ASSERT_FALSE(gpus.empty());
  // 1024x1024 fp32 in + out = 8 MiB a set: the rotation must exceed 2x L2 (not capped here).
  EXPECT_GT(r.timing->rotation_bytes, 2.0 * static_cast<double>(gpus.front().l2_bytes))
      << r.timing->rotation_sets << " sets";
}

TEST(CudaEvaluator, TheNextCandidateRunsAfterAFault) {
  VB_REQUIRE_GPU();
  auto o = test::test_options();
  o.quick = true;
  const EvalReport crash = eval_softmax(bad_cuda("illegal_address"), o);
  EXPECT_EQ(crash.verdict, "CRASH") << crash.reason;
  const EvalReport ok = eval_softmax(good_cuda(), o);
  EXPECT_EQ(ok.verdict, "PASS") << ok.guard << ": " << ok.reason;
}

TEST(CudaEvaluator, SanitizerFindingsFailTheCandidate) {
  VB_REQUIRE_GPU();
  if (find_compute_sanitizer().empty()) GTEST_SKIP() << "compute-sanitizer not installed";
  auto o = test::test_options();
  o.quick = true;
  o.dtypes = {DType::F32};
  o.sanitizer = "memcheck";
  const EvalReport bad = eval_softmax(bad_cuda("illegal_address"), o);
  EXPECT_EQ(bad.verdict, "FAIL") << bad.reason;
  EXPECT_EQ(bad.guard, "sanitizer") << bad.reason;
  EXPECT_NE(bad.reason.find("Invalid"), std::string::npos) << bad.reason;
  // A clean kernel has no findings under the sanitizer.
  const EvalReport good = eval_softmax(good_cuda(), o);
  EXPECT_EQ(good.verdict, "PASS") << good.guard << ": " << good.reason;
}

}  // namespace
}  // namespace vb
