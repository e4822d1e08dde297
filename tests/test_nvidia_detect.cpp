// Tests of NVIDIA detection through the run-time-loaded CUDA driver (src/targets/nvidia_detect.h)
// and of the GPU ceilings probe's build (src/backends/cuda/gpu_ceilings.h). This machine has no GPU:
// detection must say so plainly; the probe must still compile for sm_90a with nvcc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/process.h"
#include "backends/cuda/gpu_ceilings.h"
#include "targets/nvidia_detect.h"

namespace fs = std::filesystem;

namespace vb {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

TEST(NvidiaDetect, ThisMachineSaysNoGpuPlainlyOrListsRealGpus) {
  std::string why = "unset";
  const auto gpus = detect_nvidia_gpus(&why);
  if (gpus.empty()) {
    EXPECT_TRUE(starts_with(why, "no GPU: ")) << why;
    // Either the driver is absent or it reports an error/no device; the reason names it.
    EXPECT_TRUE(why.find("libcuda.so.1") != std::string::npos ||
                why.find("cuInit") != std::string::npos ||
                why.find("0 devices") != std::string::npos)
        << why;
  } else {
    for (const auto& g : gpus) {
      EXPECT_FALSE(g.name.empty());
      EXPECT_GT(g.cc_major, 0);
      EXPECT_GT(g.sm_count, 0);
      EXPECT_GT(g.total_mem_bytes, 0u);
    }
  }
}

TEST(NvidiaDetect, MissingLibraryPathSaysNotFound) {
  std::string why;
  const std::string fake = "/nonexistent/vladbud-test/libcuda.so.1";
  const auto gpus = detect_nvidia_gpus(&why, fake);
  EXPECT_TRUE(gpus.empty());
  EXPECT_TRUE(starts_with(why, "no GPU: " + fake + " not found")) << why;
}

TEST(NvidiaDetect, EnvironmentOverrideIsUsed) {
  ScopedEnv env("VB_LIBCUDA", "/nonexistent/override/libcuda.so.1");
  std::string why;
  EXPECT_TRUE(detect_nvidia_gpus(&why).empty());
  EXPECT_TRUE(starts_with(why, "no GPU: /nonexistent/override/libcuda.so.1 not found")) << why;
}

TEST(NvidiaDetect, LibraryWithoutDriverEntryPointsIsRefused) {
  std::string why;
  const auto gpus = detect_nvidia_gpus(&why, "libm.so.6");  // loads, but is not a CUDA driver
  EXPECT_TRUE(gpus.empty());
  EXPECT_TRUE(starts_with(why, "no GPU: libm.so.6 lacks the CUDA driver entry points")) << why;
}

TEST(NvidiaDetect, NullReasonPointerIsAccepted) {
  EXPECT_TRUE(detect_nvidia_gpus(nullptr, "/nonexistent/libcuda.so.1").empty());
}

GpuInfo h100_like() {
  GpuInfo g;
  g.name = "NVIDIA H100 80GB HBM3";
  g.cc_major = 9;
  g.cc_minor = 0;
  g.sm_count = 132;
  g.total_mem_bytes = 85'000'000'000ull;
  g.l2_bytes = 50u << 20;
  g.mem_clock_khz = 2'619'000;
  g.mem_bus_width_bits = 5120;
  g.clock_khz = 1'980'000;
  return g;
}

TEST(GpuInfo, DerivedQuantities) {
  const GpuInfo g = h100_like();
  EXPECT_EQ(g.sm_arch(), "sm_90");
  // 2 x 2.619 GHz x 640 B = 3352.3 GB/s (the H100 SXM datasheet's 3.35 TB/s).
  EXPECT_NEAR(g.theoretical_mem_bw_gbs(), 3352.32, 0.01);
  GpuInfo unknown;
  EXPECT_EQ(unknown.theoretical_mem_bw_gbs(), 0.0);
  const nlohmann::json j = g;
  EXPECT_EQ(j.at("compute_capability"), "9.0");
  EXPECT_EQ(j.at("sm_arch"), "sm_90");
  EXPECT_EQ(j.at("sm_count"), 132);
}

TEST(GpuInfo, MachineIdIsStableAndDistinguishesModels) {
  const GpuInfo a = h100_like();
  GpuInfo b = a;
  EXPECT_EQ(gpu_machine_id(a), gpu_machine_id(b));
  EXPECT_TRUE(starts_with(gpu_machine_id(a), "gpu-"));
  EXPECT_EQ(gpu_machine_id(a).size(), 4u + 16u);
  b.name = "NVIDIA H200";
  EXPECT_NE(gpu_machine_id(a), gpu_machine_id(b));
  b = a;
  b.ordinal = 3;  // a second identical card shares the id (same model, same ceilings)
  EXPECT_EQ(gpu_machine_id(a), gpu_machine_id(b));
}

TEST(GpuCeilings, ArchFlagsUseTheArchitectureSpecificHopperTarget) {
  EXPECT_EQ(nvcc_arch_flags(9, 0),
            (std::vector<std::string>{"-gencode", "arch=compute_90a,code=sm_90a"}));
  EXPECT_EQ(nvcc_arch_flags(8, 0),
            (std::vector<std::string>{"-gencode", "arch=compute_80,code=sm_80"}));
  EXPECT_EQ(nvcc_arch_flags(12, 0),
            (std::vector<std::string>{"-gencode", "arch=compute_120,code=sm_120"}));
}

TEST(GpuCeilings, MissingNvccIsReportedPlainly) {
  ScopedEnv env("VB_NVCC", "/nonexistent/bin/nvcc");
  EXPECT_EQ(find_nvcc(), "");
  try {
    build_gpu_probe(9, 0);
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nvcc not found"), std::string::npos) << e.what();
  }
}

// The probe must compile for Hopper (sm_90a, with the wgmma path) and plain sm_80 here, where
// there is no GPU to run it on.
TEST(GpuCeilings, ProbeCompilesForHopperAndAmpere) {
  if (find_nvcc().empty()) GTEST_SKIP() << "nvcc not installed";
  const fs::path exe90 = build_gpu_probe(9, 0);
  EXPECT_TRUE(fs::exists(exe90)) << exe90;
  EXPECT_TRUE(have_program(exe90.string()));
  const fs::path exe80 = build_gpu_probe(8, 0);
  EXPECT_TRUE(fs::exists(exe80));
  EXPECT_NE(exe90, exe80);                  // cached per target flags
  EXPECT_EQ(build_gpu_probe(9, 0), exe90);  // second call: the cached build
}

}  // namespace
}  // namespace vb
