// The CPU backend: content-hash build cache (including headers the kernel includes) and the
// vectorization-report parser on recorded compiler output.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cpu/toolchain.h"
#include "backends/triton/aot.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

TEST(CpuBackend, CacheHitsForTheSameSourceAndMissesWhenAnIncludedHeaderChanges) {
  const fs::path dir = fs::temp_directory_path() / ("vb-backend-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "scale.h") << "#define VB_TEST_SCALE 1\n";
  // A token unique to this run keeps earlier runs' cache entries from matching.
  const std::string run_id = std::to_string(::getpid()) + "-" + std::to_string(std::time(nullptr));
  std::ofstream(dir / "k.cpp")
      << "#include \"vb_kernel.h\"\n#include \"scale.h\"\n"
      << "static const char* vb_test_run_id = \"" << run_id
      << "\";\n"
         "extern \"C\" int vb_kernel_run(const DLTensor*, int, DLTensor*,"
         " int, const double*, int, void*) { return VB_TEST_SCALE - 1; }\n";
  const Backend& be = *find_backend("cpu");
  const BuildResult a = be.build(dir / "k.cpp");
  ASSERT_TRUE(a.ok) << a.diagnostics;
  const BuildResult b = be.build(dir / "k.cpp");
  EXPECT_TRUE(b.cached);
  EXPECT_EQ(a.cache_key, b.cache_key);
  std::ofstream(dir / "scale.h") << "#define VB_TEST_SCALE 2\n";
  const BuildResult c = be.build(dir / "k.cpp");
  ASSERT_TRUE(c.ok) << c.diagnostics;
  EXPECT_FALSE(c.cached) << "an edited header must not reuse the stale library";
  EXPECT_NE(c.cache_key, a.cache_key);
  fs::remove_all(dir);
}

TEST(CpuBackend, TheCacheKeyIsTheResolvedCpuNotTheLiteralMarchNative) {
  // Issue 18: a cache shared between machines must not hand a binary built for one CPU's
  // instructions to another. -march=native enters the key as what it resolves to.
  const CpuToolchain& tc = cpu_toolchain();
  ASSERT_FALSE(tc.native_target.empty()) << "could not resolve -march=native";
  EXPECT_EQ(tc.native_target.find("-march=native"), std::string::npos) << tc.native_target;
  if (tc.cxx.find("g++") != std::string::npos) {
    EXPECT_FALSE(tc.native_cpu().empty()) << tc.native_target;
    EXPECT_NE(tc.native_target.find("avx"), std::string::npos)
        << "the feature list (-mavx2 / -mno-avx512f ...) is part of the key: " << tc.native_target;
  }
  EXPECT_EQ(resolve_native_target(tc.cxx), tc.native_target) << "stable across runs";
  // Same source and flags, another CPU (one feature fewer): another key.
  CpuToolchain other = tc;
  other.native_target += " -mno-avx512f-for-test";
  EXPECT_EQ(cpu_build_key("int x;", tc), cpu_build_key("int x;", tc));
  EXPECT_NE(cpu_build_key("int x;", tc), cpu_build_key("int x;", other));
  EXPECT_NE(cpu_build_key("int x;", tc), cpu_build_key("int y;", tc));
  // Reports name the resolved CPU.
  if (!tc.native_cpu().empty())
    EXPECT_NE(find_backend("cpu")->toolchain_description().find(tc.native_cpu()),
              std::string::npos);
}

TEST(CpuBackend, ACachedBuildNamesTheLoopsOfTheSourceAskedFor) {
  // Two files with the same content share a cache entry; the vectorization report of the hit
  // must name the file asked for, not the one first built (an optimizer candidate, a copy).
  const fs::path dir = fs::temp_directory_path() / ("vb-backend-copy-" + std::to_string(::getpid()));
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  const std::string run_id = std::to_string(::getpid()) + "-" + std::to_string(std::time(nullptr));
  const std::string text =
      "#include \"vb_kernel.h\"\nstatic const char* vb_test_run_id = \"" + run_id +
      "\";\nextern \"C\" void vb_test_axpy(float* y, const float* x, int n) {\n"
      "  for (int i = 0; i < n; ++i) y[i] += 2.0f * x[i];\n}\n"
      "extern \"C\" int vb_kernel_run(const DLTensor*, int, DLTensor*, int, const double*, int,"
      " void*) { return 0; }\n";
  std::ofstream(dir / "a" / "k.cpp") << text;
  std::ofstream(dir / "b" / "k.cpp") << text;
  const Backend& be = *find_backend("cpu");
  const BuildResult a = be.build(dir / "a" / "k.cpp");
  ASSERT_TRUE(a.ok) << a.diagnostics;
  ASSERT_FALSE(a.vectorized_loops.empty()) << "the axpy loop should vectorize at -O3";
  const BuildResult b = be.build(dir / "b" / "k.cpp");
  ASSERT_TRUE(b.cached);
  int in_b = 0;
  for (const auto& l : b.vectorized_loops) in_b += l.file.find("/b/k.cpp") != std::string::npos;
  EXPECT_GT(in_b, 0) << "the cached report still names " << b.vectorized_loops.front().file;
  fs::remove_all(dir);
}

TEST(CpuBackend, UnknownBackendIsNull) {
  EXPECT_EQ(find_backend("tpu"), nullptr);
}

TEST(VectorizationReport, ParsesGccAndClangRemarks) {
  const std::string gcc =
      "kernels/cpu/softmax.cpp:41:23: optimized: loop vectorized using 64 byte vectors\n"
      "kernels/cpu/softmax.cpp:41:23: optimized:  loop versioned for vectorization because of "
      "possible aliasing\n"
      "kernels/include/vb_kernel.h:186:22: optimized: loop vectorized using 32 byte vectors\n"
      "kernels/cpu/softmax.cpp:77:5: optimized: basic block part vectorized using 64 byte "
      "vectors\n";
  const auto loops = parse_vectorization_report(gcc);
  ASSERT_EQ(loops.size(), 2u);
  EXPECT_EQ(loops[0].file, "kernels/cpu/softmax.cpp");
  EXPECT_EQ(loops[0].line, 41);
  EXPECT_EQ(loops[0].vector_bytes, 64);
  EXPECT_EQ(loops[1].vector_bytes, 32);
  const std::string clang =
      "k.cpp:12:3: remark: vectorized loop (vectorization width: 16, interleaved count: 2) "
      "[-Rpass=loop-vectorize]\n";
  const auto cl = parse_vectorization_report(clang);
  ASSERT_EQ(cl.size(), 1u);
  EXPECT_EQ(cl[0].line, 12);
  EXPECT_TRUE(parse_vectorization_report("k.cpp:3:1: missed: couldn't vectorize loop\n").empty());
}

}  // namespace
}  // namespace vb

namespace vb {
namespace {

// triton_aot_source (backends/triton/aot.h) on a hand-written triton_build.py aot answer.
nlohmann::json aot_answer(const std::filesystem::path& cubin, int n_args) {
  nlohmann::json args = nlohmann::json::array();
  args.push_back({{"kind", "input"}, {"index", 0}, {"offset_elems", 3}, {"aligned16", false}, {"name", "x"}});
  for (int i = 1; i < n_args; ++i)
    args.push_back({{"kind", "scalar"}, {"type", "i32"}, {"bytes", 4}, {"bits", "0x2a"}, {"name", "n"}});
  return {{"triton_version", "3.6.0"},
          {"arch", "sm_90a"},
          {"kernels",
           {{{"name", "k"}, {"entry", "k_entry"}, {"cubin", cubin.string()}, {"num_warps", 4},
             {"shared_bytes", 0}, {"constexprs", {{"B", 64}}},
             {"params", {{{"name", "x"}, {"type", "*fp32"}}, {{"name", "n"}, {"type", "i32"}}}}}}},
          {"problems",
           {{{"inputs", {{{"dtype", "fp32"}, {"shape", {7}}}}},
             {"outputs", {{{"dtype", "fp32"}, {"shape", {7}}}}},
             {"attrs", {0.5}},
             {"launches", {{{"kernel", 0}, {"grid", {2}}, {"args", args}}}}}}}};
}

TEST(TritonAotSource, EmbedsTheCubinAndTheLaunchTableAndRefusesAMismatchedBinding) {
  const auto dir = std::filesystem::temp_directory_path() / ("vb-aotsrc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "k.cubin", std::ios::binary) << std::string("\177ELF\2\1\1", 7) << "body";
  const std::string src = triton_aot_source(aot_answer(dir / "k.cubin", 2), "k.py");
  EXPECT_NE(src.find("\\177\\105\\114\\106"), std::string::npos) << "the cubin's bytes";
  EXPECT_NE(src.find("{\"k\", \"k_entry\","), std::string::npos);
  EXPECT_NE(src.find("11, 128, 0, 4}"), std::string::npos) << "11 bytes, 4 warps, 0 shared, 2+2 params";
  EXPECT_NE(src.find("{vbaot::kInput, 0, 3, false, 8, 0, \"x\"}"), std::string::npos) << src;
  EXPECT_NE(src.find("{vbaot::kScalar, 0, 0, false, 4, 0x2aull, \"n\"}"), std::string::npos);
  EXPECT_NE(src.find("{0, {2, 1, 1}, 2, kP0L0Args}"), std::string::npos) << "grid padded to 3-D";
  EXPECT_NE(src.find("static const double kP0Attrs[] = {0.5, }"), std::string::npos);
  // One argument short of the kernel's signature: a generator bug, never a silent launch.
  try {
    triton_aot_source(aot_answer(dir / "k.cubin", 1), "k.py");
    ADD_FAILURE() << "a binding of 1 argument for a 2-parameter kernel was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("binds 1 arguments, kernel 0 takes 2"), std::string::npos)
        << e.what();
  }
  std::ofstream(dir / "k.cubin", std::ios::binary) << "not an elf";
  EXPECT_THROW(triton_aot_source(aot_answer(dir / "k.cubin", 2), "k.py"), std::runtime_error);
  EXPECT_EQ(triton_cuda_target("sm_90a"), "cuda:90:32");
  EXPECT_EQ(triton_cuda_target("sm_120"), "cuda:120:32");
  EXPECT_THROW(triton_cuda_target("gfx942"), std::invalid_argument);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vb
