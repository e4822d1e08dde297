// The CUDA backend without a GPU: registry, architecture flags, nvcc diagnostics and the
// build cache (when nvcc is installed), compute-sanitizer log parsing, and the runner's cuda
// path reporting "no GPU" cleanly when the driver cannot be loaded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "backends/backend.h"
#include "backends/cuda/cuda_backend.h"
#include "eval/evaluator.h"
#include "kernels/kernel_type.h"
#include "runner/client.h"
#include "support.h"
#include "backends/cuda/gpu_ceilings.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(CudaBackend, IsRegisteredWithItsSurface) {
  const Backend* be = find_backend("cuda");
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->name(), "cuda");
  EXPECT_EQ(be->source_extension(), ".cu");
  EXPECT_EQ(be->starter_source("softmax").filename(), "softmax.cu");
  EXPECT_EQ(be->starter_source("softmax").parent_path().filename(), "cuda");
  EXPECT_NE(backend_names().find("cuda"), std::string::npos);
  EXPECT_NE(backend_names().find("cpu"), std::string::npos);
}

TEST(CudaBackend, ArchitectureNamesBecomeGencodeFlags) {
  EXPECT_EQ(cuda_gencode_flags("sm_90a"),
            (std::vector<std::string>{"-gencode", "arch=compute_90a,code=sm_90a"}));
  EXPECT_EQ(cuda_gencode_flags("sm_80"),
            (std::vector<std::string>{"-gencode", "arch=compute_80,code=sm_80"}));
  EXPECT_THROW(cuda_gencode_flags("hopper"), std::invalid_argument);
  EXPECT_THROW(set_cuda_arch("sm90"), std::invalid_argument);
  set_cuda_arch("sm_86");
  EXPECT_EQ(cuda_arch(), "sm_86");
  set_cuda_arch("");
}

TEST(CudaBackend, GpuBenchmarkSizesAmortizeTheLaunch) {
  // On an H200 (4.8 TB/s) 256 MB take ~55 us, so a ~5 us launch is under 10% of the time.
  for (const char* name :
       {"softmax", "layernorm", "rmsnorm", "reduce", "cross_entropy", "rotary_embedding"}) {
    const KernelType* t = find_kernel_type(name);
    ASSERT_NE(t, nullptr) << name;
    const Problem p = t->make_problem(t->benchmark_size(DeviceKind::Gpu), DType::F32);
    EXPECT_GE(t->min_bytes(p), 256e6) << name << " " << p.size.label;
  }
  EXPECT_EQ(find_kernel_type("matmul")->benchmark_size(DeviceKind::Gpu).label, "4096x4096x4096");
}

TEST(CudaBackend, NvccDiagnosticsAreRewrittenToFileColonLine) {
  const std::string nvcc =
      "k.cu(12): error: identifier \"x\" is undefined\n    x = 1;\n    ^\n"
      "dir/k (2).cu(7): warning #177-D: variable \"y\" was declared but never referenced\n"
      "k.cu:3:10: fatal error: missing.h: No such file or directory\n";
  const std::string out = normalize_nvcc_diagnostics(nvcc);
  EXPECT_NE(out.find("k.cu:12: error: identifier \"x\" is undefined"), std::string::npos) << out;
  EXPECT_NE(out.find("dir/k (2).cu:7: warning #177-D"), std::string::npos) << out;
  EXPECT_NE(out.find("k.cu:3:10: fatal error: missing.h"), std::string::npos) << out;
  EXPECT_NE(out.find("    x = 1;"), std::string::npos) << out;
}

TEST(CudaBackend, SanitizerLogFindingsAndSummary) {
  const std::string log =
      "========= COMPUTE-SANITIZER\n"
      "runner noise without the prefix\n"
      "========= Invalid __global__ write of size 4 bytes\n"
      "=========     at write_wild(float *)+0x70 in illegal_address.cu:9\n"
      "=========     by thread (0,0,0) in block (0,0,0)\n"
      "=========     Address 0x10 is out of bounds\n"
      "========= \n"
      "========= ERROR SUMMARY: 1 error\n";
  const SanitizerFindings f = parse_sanitizer_log(log);
  EXPECT_EQ(f.errors, 1);
  EXPECT_TRUE(f.saw_summary);
  EXPECT_EQ(f.first.rfind("Invalid __global__ write of size 4 bytes", 0), 0u) << f.first;
  EXPECT_NE(f.first.find("illegal_address.cu:9"), std::string::npos) << f.first;
  const SanitizerFindings clean =
      parse_sanitizer_log("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n");
  EXPECT_EQ(clean.errors, 0);
  EXPECT_TRUE(clean.saw_summary);
  EXPECT_TRUE(clean.first.empty()) << clean.first;
}

TEST(CudaBackend, BuildsASmallKernelAndHitsTheCache) {
  if (find_nvcc().empty()) GTEST_SKIP() << "nvcc not installed (set VB_NVCC)";
  set_cuda_arch("sm_90a");
  const fs::path dir = fs::temp_directory_path() / ("vb-cuda-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // A token unique to this run keeps earlier runs' cache entries from matching.
  const std::string run_id = std::to_string(::getpid()) + "-" + std::to_string(std::time(nullptr));
  std::ofstream(dir / "k.cu")
      << "#include \"vb_cuda.cuh\"\nstatic const char* vb_test_run_id = \"" << run_id
      << "\";\n__global__ void fill(float* y) { y[threadIdx.x] = 1.f; }\n"
         "extern \"C\" int vb_kernel_run(const DLTensor*, int, DLTensor* out, int, const double*,"
         " int, void* s) {\n  fill<<<1, 32, 0, vbk::as_stream(s)>>>("
         "static_cast<float*>(out[0].data));\n  VBK_CUDA_CHECK_LAUNCH(\"fill\");\n"
         "  return vb_test_run_id[0] == 0;\n}\n";
  const Backend& be = *find_backend("cuda");
  const BuildResult a = be.build(dir / "k.cu");
  ASSERT_TRUE(a.ok) << a.command << "\n" << a.diagnostics;
  EXPECT_FALSE(a.cached);
  EXPECT_TRUE(fs::exists(a.library));
  EXPECT_NE(a.command.find("arch=compute_90a,code=sm_90a"), std::string::npos) << a.command;
  EXPECT_NE(a.command.find("-shared"), std::string::npos) << a.command;
  const BuildResult b = be.build(dir / "k.cu");
  ASSERT_TRUE(b.ok) << b.diagnostics;
  EXPECT_TRUE(b.cached);
  EXPECT_EQ(a.cache_key, b.cache_key);
  EXPECT_EQ(a.library, b.library);
  // Another architecture is another library.
  set_cuda_arch("sm_80");
  const BuildResult c = be.build(dir / "k.cu");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_NE(c.cache_key, a.cache_key);
  set_cuda_arch("");
  fs::remove_all(dir);
}

TEST(CudaBackend, TheBuildKeyIgnoresWhereTheSourceLiesNotWhatItSays) {
  // nvcc -E's line markers and __FILE__ spell the source's path: a pool's build worker and its
  // measuring worker write the same candidate into different temporary folders.
  auto pre = [](const std::string& path, const std::string& body) {
    return "# 0 \"" + path + "\"\n# 1 \"/usr/local/cuda/include/cuda_runtime.h\" 1 3 4\n# 1 \"" +
           path + "\"\n# 1 \"" + fs::path(path).parent_path().string() + "/helper.cuh\"\n" + body +
           "\nconst char* f = \"" + path + "\";\n";
  };
  const std::string flags = "-std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a";
  const std::string nv = "Cuda compilation tools, release 13.0, V13.0.88";
  const std::string a = cuda_build_key(pre("/tmp/vb-pool-x1/cand.cu", "int k;"),
                                       "/tmp/vb-pool-x1/cand.cu", flags, nv);
  EXPECT_EQ(a.size(), 16u);
  // Another folder, another file name, the same text: the same build.
  EXPECT_EQ(a, cuda_build_key(pre("/tmp/vb-pool-y2/cand.cu", "int k;"), "/tmp/vb-pool-y2/cand.cu",
                              flags, nv));
  EXPECT_EQ(a, cuda_build_key(pre("/ws/kernels/01_softmax/tried/0a1b.cu", "int k;"),
                              "/ws/kernels/01_softmax/tried/0a1b.cu", flags, nv));
  // Other text, flags (architecture) or nvcc release: another build.
  EXPECT_NE(a, cuda_build_key(pre("/tmp/vb-pool-x1/cand.cu", "int j;"), "/tmp/vb-pool-x1/cand.cu",
                              flags, nv));
  EXPECT_NE(a, cuda_build_key(pre("/tmp/vb-pool-x1/cand.cu", "int k;"), "/tmp/vb-pool-x1/cand.cu",
                              "-std=c++17 -O3 -gencode arch=compute_90,code=sm_90", nv));
  EXPECT_NE(a, cuda_build_key(pre("/tmp/vb-pool-x1/cand.cu", "int k;"), "/tmp/vb-pool-x1/cand.cu",
                              flags, "Cuda compilation tools, release 12.8, V12.8.93"));
  // Only the source's own location is taken out: a system header moved is a new build.
  std::string moved = pre("/tmp/vb-pool-y2/cand.cu", "int k;");
  moved.replace(moved.find("/usr/local/cuda/"), 16, "/opt/cuda-13.1/");
  EXPECT_NE(a, cuda_build_key(moved, "/tmp/vb-pool-y2/cand.cu", flags, nv));
}

TEST(CudaBackend, CompileErrorIsReportedByFileAndLine) {
  if (find_nvcc().empty()) GTEST_SKIP() << "nvcc not installed (set VB_NVCC)";
  set_cuda_arch("sm_90a");
  const fs::path src = test::repo_root() / "kernels" / "bad" / "cuda" / "compile_error.cu";
  const EvalReport r =
      evaluate(*find_kernel_type("softmax"), *find_backend("cuda"), src, test::test_options());
  set_cuda_arch("");
  EXPECT_EQ(r.verdict, "FAIL");
  EXPECT_EQ(r.failed_stage, "build");
  EXPECT_EQ(r.guard, "build");
  EXPECT_NE(r.build.diagnostics.find("compile_error.cu:5: error"), std::string::npos)
      << r.build.diagnostics;
  EXPECT_NE(r.reason.find("compile_error.cu:5: error"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("undeclared_identifier"), std::string::npos) << r.reason;
}

TEST(CudaBackend, MissingStarterIsABuildFailure) {
  const EvalReport r = evaluate(*find_kernel_type("softmax"), *find_backend("cuda"),
                                "/nonexistent/softmax.cu", test::test_options());
  EXPECT_EQ(r.verdict, "FAIL");
  EXPECT_EQ(r.failed_stage, "build");
  EXPECT_NE(r.build.diagnostics.find("does not exist"), std::string::npos) << r.build.diagnostics;
}

TEST(CudaRunner, WithoutADriverTheRunnerSaysNoGpu) {
  // A driver path that cannot exist: the same answer on machines with and without a GPU.
  ScopedEnv env("VB_LIBCUDA", "/nonexistent/libcuda.so.1");
  RunnerClient runner(vb::runner::Flavour::Cuda);
  // The runner opens the device before loading the library, so any file serves here.
  const fs::path lib = test::repo_root() / "tests" / "fixtures" / "cuda" / "softmax_small.cu";
  const RunnerReply r = runner.start(lib.string(), std::chrono::seconds(20));
  EXPECT_EQ(r.kind, RunnerReply::Kind::Error) << r.message;
  EXPECT_NE(r.message.find("no GPU"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("/nonexistent/libcuda.so.1"), std::string::npos) << r.message;
  // The runner is still alive and in step after refusing: it answers a ping.
  const RunnerReply pong =
      runner.command({{"op", "ping"}, {"nonce", 17}}, std::chrono::seconds(10));
  EXPECT_EQ(pong.kind, RunnerReply::Kind::Ok) << pong.message;
  EXPECT_EQ(pong.body.value("pong", 0), 17);
  // Mapping an arena needs the device too: a clear error naming the reason, not a crash.
  try {
    runner.reset_arena(1 << 20);
    ADD_FAILURE() << "mapping an arena without a GPU succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no GPU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vb
