// The CUDA backend on a real GPU (DESIGN §4 on device memory): every deliberately bad CUDA
// kernel in kernels/bad/cuda/ is rejected with its guard named, a correct one passes all
// stages and is timed on rotating sets larger than 2x the GPU's L2, and compute-sanitizer
// findings fail a candidate. Every test skips with the detection's reason without a GPU --
// except CudaRunnerMock, which drives the runner's cuda path through a stand-in driver
// (tests/fixtures/cuda/mock_libcuda.cpp) on any machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "backends/backend.h"
#include "backends/cuda/cuda_backend.h"
#include "eval/evaluator.h"
#include "kernels/kernel_type.h"
#include "support.h"
#include "backends/cuda/gpu_ceilings.h"
#include "targets/nvidia_detect.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

// "" when a GPU and nvcc are usable, else why not.
std::string why_no_cuda() {
  static const std::string why = [] {
    std::string w;
    if (detect_nvidia_gpus(&w).empty()) {
      if (w.rfind("no GPU: ", 0) == 0) w = w.substr(8);
      return "no CUDA GPU: " + (w.empty() ? std::string("none found") : w);
    }
    if (find_nvcc().empty()) return std::string("no CUDA GPU toolchain: nvcc not found");
    return std::string();
  }();
  return why;
}

#define VB_REQUIRE_GPU()                                   \
  do {                                                     \
    if (const std::string w = why_no_cuda(); !w.empty()) { \
      GTEST_SKIP() << w;                                   \
    }                                                      \
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

void PrintTo(const BadCudaCase& c, std::ostream* os) {
  *os << c.file;
}

class BadCudaKernel : public ::testing::TestWithParam<BadCudaCase> {};

TEST_P(BadCudaKernel, IsRejectedByItsGuard) {
  VB_REQUIRE_GPU();
  const BadCudaCase c = GetParam();
  auto o = test::test_options(c.timing);
  o.call_timeout_s = 5;
  o.quick = true;
  if (c.timing) o.timing_size = find_kernel_type("softmax")->find_size("1024x1024", DeviceKind::Gpu);
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
    ::testing::Values(BadCudaCase{"writes_past_end", "FAIL", "guard_band", "smoke", false},
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
  o.timing_size = find_kernel_type("softmax")->find_size("1024x1024", DeviceKind::Gpu);
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
  o.call_timeout_s = 3;  // x20 under the sanitizer
  o.sanitizer = "memcheck";
  const EvalReport bad = eval_softmax(bad_cuda("illegal_address"), o);
  EXPECT_EQ(bad.verdict, "FAIL") << bad.reason;
  EXPECT_EQ(bad.guard, "sanitizer") << bad.reason;
  EXPECT_NE(bad.reason.find("Invalid"), std::string::npos) << bad.reason;
  // A clean kernel has no findings under the sanitizer.
  const EvalReport good = eval_softmax(good_cuda(), o);
  EXPECT_EQ(good.verdict, "PASS") << good.guard << ": " << good.reason;
}

// ---- the runner's cuda path under the mock driver (no GPU needed) -----------------------------

// The "cuda" runner flavour with libraries built by the CPU backend: the mock driver's device
// memory is host memory, so a host-compiled kernel can play a GPU kernel.
class MockCudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  std::string source_extension() const override { return ".cpp"; }
  const Device& device() const override { return find_backend("cuda")->device(); }
  const Sanitizer* sanitizer() const override { return find_backend("cuda")->sanitizer(); }
  BuildResult build(const fs::path& source) const override {
    return find_backend("cpu")->build(source);
  }
  std::string toolchain_description() const override {
    return "mock: " + find_backend("cpu")->toolchain_description();
  }
};

class CudaRunnerMock : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = std::getenv("VB_LIBCUDA") ? std::getenv("VB_LIBCUDA") : "";
    ::setenv("VB_LIBCUDA", vb::test::mock_libcuda().c_str(), 1);
  }
  void TearDown() override {
    if (old_.empty())
      ::unsetenv("VB_LIBCUDA");
    else
      ::setenv("VB_LIBCUDA", old_.c_str(), 1);
  }
  // mock_device_softmax.cpp in mode `mode` (see there), evaluated on the mock cuda runner.
  static EvalReport eval_mode(int mode, bool timing, const std::string& sanitizer = "") {
    const fs::path dir = fs::temp_directory_path() / ("vb-mockcuda-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path src = dir / ("mode" + std::to_string(mode) + ".cpp");
    std::ofstream(src)
        << "#define VB_MOCK_MODE " << mode << "\n#include \""
        << (test::repo_root() / "tests/fixtures/cuda/mock_device_softmax.cpp").string() << "\"\n";
    auto o = test::test_options(timing);
    o.quick = true;
    o.call_timeout_s = 10;
    o.timing_size = find_kernel_type("softmax")->find_size("32x128", DeviceKind::Gpu);
    o.sanitizer = sanitizer;
    static const MockCudaBackend be;
    return evaluate(*find_kernel_type("softmax"), be, src, o);
  }

 private:
  std::string old_;
};

TEST_F(CudaRunnerMock, ACorrectKernelPassesOnDeviceBuffersAndRotatesBeyondTheL2) {
  const EvalReport r = eval_mode(0, /*timing=*/true);
  ASSERT_EQ(r.verdict, "PASS") << r.guard << ": " << r.reason;
  ASSERT_TRUE(r.timing.has_value());
  // The mock reports a 1 MiB L2: the rotating sets must exceed 2 MiB (32x128 fp32 in + out =
  // 32 KiB a set).
  EXPECT_GT(r.timing->rotation_bytes, 2.0 * (1 << 20)) << r.timing->rotation_sets << " sets";
  EXPECT_GT(r.timing->median_us, 0.0);
}

TEST(CudaDevice, ATimedCallKeepsOneHostThreadBusyAndACpuKernelAllCores) {
  // The evaluator's contention check counts other tasks beyond the cores left idle: a GPU
  // timing leaves all but one, a CPU kernel's team none (competing_tasks()).
  EXPECT_EQ(find_backend("cuda")->device().timing_host_threads(), 1);
  EXPECT_EQ(find_backend("cpu")->device().timing_host_threads(), 0);
}

TEST_F(CudaRunnerMock, AWritePastTheEndLandsInTheDeviceGuardBand) {
  const EvalReport r = eval_mode(1, false);
  EXPECT_EQ(r.verdict, "FAIL") << r.reason;
  EXPECT_EQ(r.guard, "guard_band") << r.reason;
  EXPECT_EQ(r.failed_stage, "smoke");
}

TEST_F(CudaRunnerMock, AStickyCudaErrorIsACrashNamingTheError) {
  const EvalReport r = eval_mode(2, false);
  EXPECT_EQ(r.verdict, "CRASH") << r.reason;
  EXPECT_EQ(r.guard, "crash") << r.reason;
  EXPECT_NE(r.reason.find("CUDA_ERROR_ILLEGAL_ADDRESS"), std::string::npos) << r.reason;
}

TEST_F(CudaRunnerMock, WorkTheEventsDoNotSeeFailsTheTimerCrossCheck) {
  const EvalReport r = eval_mode(3, /*timing=*/true);
  EXPECT_EQ(r.verdict, "INVALID") << r.reason;
  EXPECT_EQ(r.guard, "timer_cross_check") << r.reason;
  EXPECT_EQ(r.failed_stage, "timing") << r.reason;
  // The runner's own check (events vs its host clock around each launch) names the escape.
  EXPECT_NE(r.reason.find("device events"), std::string::npos) << r.reason;
  EXPECT_FALSE(r.timing.has_value());
}

TEST_F(CudaRunnerMock, SanitizerFindingsFailTheCandidateAndACleanRunPasses) {
  const std::string fake =
      (test::repo_root() / "tests/fixtures/cuda/fake_compute_sanitizer.sh").string();
  ::setenv("VB_COMPUTE_SANITIZER", fake.c_str(), 1);
  const EvalReport bad = eval_mode(0, /*timing=*/true, "memcheck");
  const EvalReport clean = eval_mode(0, /*timing=*/true, "initcheck");
  ::unsetenv("VB_COMPUTE_SANITIZER");
  EXPECT_EQ(bad.verdict, "FAIL") << bad.reason;
  EXPECT_EQ(bad.guard, "sanitizer") << bad.reason;
  EXPECT_NE(bad.reason.find("Invalid __global__ write"), std::string::npos) << bad.reason;
  EXPECT_NE(bad.reason.find("fake.cu:3"), std::string::npos) << bad.reason;
  EXPECT_EQ(clean.verdict, "PASS") << clean.guard << ": " << clean.reason;
  EXPECT_FALSE(clean.timing.has_value()) << "kernels under the sanitizer are not timed";
  EXPECT_EQ(clean.stages.at(3).status, "PASS") << "determinism restarts the sanitized runner";
}

TEST_F(CudaRunnerMock, AnUnwrittenElementIsStillPoisonAfterTheCopyBack) {
  const EvalReport r = eval_mode(4, false);
  EXPECT_EQ(r.verdict, "FAIL") << r.reason;
  EXPECT_EQ(r.guard, "poisoned_output") << r.reason;
}

}  // namespace
}  // namespace vb
