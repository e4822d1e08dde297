// Integration tests of the NVIDIA climber (src/ladder/nvidia.cpp) with the real nvcc/ptxas and
// cuobjdump of this machine: compile-only rungs for every NVIDIA architecture in the spec DB
// (sm_80, sm_89, sm_90a, sm_100a, sm_120a, sm_121a), no GPU needed. Also climbs every CUDA
// starter kernels/cuda/<type>.cu that exists (skipping, by name, those that do not yet).
// Builds are cached under the VladBud cache dir keyed by content hash; a cold run compiles each
// (source, arch) once (about 2-5 s each on 2 cores).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "analysis/ptxas_report.h"
#include "core/paths.h"
#include "kernels/kernel_type.h"
#include "ladder/nvidia.h"
#include "support.h"
#include "backends/cuda/gpu_ceilings.h"
#include "bridge/kernelbench.h"
#include "core/process.h"
#include "targets/spec_db.h"

namespace vb {
namespace {

namespace fs = std::filesystem;
using ladder::ClimbOptions;
using ladder::ClimbResult;
using ladder::RungEvidence;

// One target per architecture of the spec DB.
const std::vector<std::string> kTargets = {"a100-sxm", "rtx-4090", "h100-sxm",
                                           "b200",     "rtx-5090", "gb10"};

const TargetSpec& spec(const std::string& id) {
  static const std::vector<TargetSpec> db = load_spec_db();
  const TargetSpec* t = find_target(db, id);
  if (!t) throw std::runtime_error("no target " + id);
  return *t;
}

fs::path fixture(const std::string& name) {
  return test::repo_root() / "tests" / "fixtures" / "cuda" / name;
}

const RungEvidence& rung(const ClimbResult& r, int n) {
  for (const auto& e : r.evidence)
    if (e.rung == n) return e;
  throw std::runtime_error("climb has no rung " + std::to_string(n) + " (" + r.target_id + ")");
}

#define REQUIRE_NVCC()                                                     \
  do {                                                                     \
    if (find_nvcc().empty()) GTEST_SKIP() << "nvcc not installed";         \
  } while (0)

// Climbs `source` for all kTargets, two at a time (the machine has 2 cores).
std::vector<ClimbResult> climb_all(const fs::path& source, const KernelType& type, DType dt) {
  ClimbOptions o;
  o.dtype = dt;
  std::vector<ClimbResult> out;
  for (std::size_t i = 0; i < kTargets.size(); i += 2) {
    auto a = std::async(std::launch::async, [&, i] {
      return ladder::nvidia_climb_source(source, type, spec(kTargets[i]), o);
    });
    ClimbResult b;
    if (i + 1 < kTargets.size())
      b = ladder::nvidia_climb_source(source, type, spec(kTargets[i + 1]), o);
    out.push_back(a.get());
    if (i + 1 < kTargets.size()) out.push_back(std::move(b));
  }
  return out;
}

TEST(CudaStatic, GencodeFromIsa) {
  EXPECT_EQ(ladder::nvcc_gencode_for_isa("sm_90a"), "-gencode=arch=compute_90a,code=sm_90a");
  EXPECT_EQ(ladder::nvcc_gencode_for_isa("sm_80"), "-gencode=arch=compute_80,code=sm_80");
  EXPECT_EQ(ladder::nvcc_gencode_for_isa("sm_121a"), "-gencode=arch=compute_121a,code=sm_121a");
  EXPECT_THROW(ladder::nvcc_gencode_for_isa("gfx942"), std::invalid_argument);
  EXPECT_TRUE(ladder::nvidia_climber().handles(spec("h100-sxm")));
  EXPECT_FALSE(ladder::nvidia_climber().handles(spec("mi300x")));
  EXPECT_FALSE(ladder::nvidia_climber().handles(spec("neoverse-v2")));
}

TEST(CudaStatic, FixtureKernelClimbsEveryArchitecture) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("rmsnorm");
  const bool sass = !ladder::find_cuobjdump().empty();
  const auto results = climb_all(fixture("rmsnorm_abi.cu"), type, DType::BF16);
  ASSERT_EQ(results.size(), kTargets.size());
  for (const ClimbResult& r : results) {
    SCOPED_TRACE(r.target_id);
    const TargetSpec& t = spec(r.target_id);
    EXPECT_FALSE(r.rejected) << r.stop_reason;
    ASSERT_EQ(r.evidence.size(), 6u);
    const RungEvidence& r0 = rung(r, 0);
    EXPECT_EQ(r0.status, "pass") << r0.summary;
    EXPECT_NE(r0.tool.find("code=" + t.isa), std::string::npos) << r0.tool;
    EXPECT_NE(r0.tool_version.find("release"), std::string::npos) << r0.tool_version;
    const RungEvidence& r1 = rung(r, 1);
    EXPECT_EQ(r1.status, "pass") << r1.summary;
    ASSERT_EQ(r1.data["kernels"].size(), 3u);  // fp16, bf16, fp32 instantiations
    EXPECT_NE(r1.data["main_kernel_demangled"].get<std::string>().find("__nv_bfloat16"),
              std::string::npos);
    EXPECT_EQ(r1.data["block_threads"], 256);
    for (const auto& k : r1.data["kernels"]) {
      EXPECT_EQ(k["arch"], t.isa);
      EXPECT_GT(k["registers"].get<int>(), 8);
      EXPECT_EQ(k["smem_bytes"], 32);  // float part[256 / 32]
      EXPECT_FALSE(r1.data["spills"].get<bool>());
      if (sass) {
        EXPECT_EQ(k["launch_bounds_max_threads"], 256);
        EXPECT_GT(k["sass"]["ldg"].get<long>(), 0);
        EXPECT_GT(k["sass"]["mufu"].get<long>(), 0);  // rsqrtf
      }
    }
    // The launch record (the launcher run under the stand-in runtime) gives the block size;
    // without it, the kernel's __launch_bounds__.
    if (r1.data["launch_record"]["available"].get<bool>() && r1.data["launch_record"]["ok"].get<bool>())
      EXPECT_EQ(r1.data["block_threads_source"], "launch record");
    else if (sass)
      EXPECT_EQ(r1.data["block_threads_source"], "__launch_bounds__ (EIATTR_MAX_THREADS)");
    EXPECT_GT(r1.data["occupancy"]["occupancy"].get<double>(), 0.4);
    EXPECT_EQ(rung(r, 2).status, "unavailable");
    EXPECT_NE(rung(r, 2).summary.find("no NVIDIA GPU emulator"), std::string::npos);
    const RungEvidence& r3 = rung(r, 3);
    EXPECT_EQ(r3.status, "pass");
    EXPECT_EQ(r3.data["bound"], "memory");  // rmsnorm: ~1 FLOP per 2 bytes
    EXPECT_EQ(rung(r, 4).status, "unavailable");
    EXPECT_EQ(rung(r, 5).status, "unavailable");
    ASSERT_TRUE(r.estimate.has_value());
    EXPECT_EQ(r.estimate->rung, 3);
    EXPECT_LT(r.estimate->low_us, r.estimate->time_us);
    EXPECT_GT(r.estimate->high_us, r.estimate->time_us);
    // Never faster than the datasheet roofline.
    EXPECT_GE(r.estimate->time_us, r3.data["roofline_memory_us"].get<double>());
    EXPECT_EQ(r.highest_rung, 3);
    EXPECT_EQ(r.confidence, "analytical");
  }
  // More bandwidth, faster: B200 (8 TB/s) beats GB10 (273 GB/s) by far.
  double b200 = 0, gb10 = 0;
  for (const auto& r : results) {
    if (r.target_id == "b200") b200 = r.estimate->time_us;
    if (r.target_id == "gb10") gb10 = r.estimate->time_us;
  }
  EXPECT_GT(gb10, 10 * b200);
  // Second climb comes from the cache.
  ClimbOptions bf16;
  bf16.dtype = DType::BF16;
  const auto again = ladder::nvidia_climb_source(fixture("rmsnorm_abi.cu"), type, spec("b200"), bf16);
  EXPECT_TRUE(rung(again, 0).data["cached"].get<bool>());
  EXPECT_DOUBLE_EQ(again.estimate->time_us, b200);
}

TEST(CudaStatic, MaxRungStopsTheClimb) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("rmsnorm");
  ClimbOptions o;
  o.max_rung = 1;
  const ClimbResult r =
      ladder::nvidia_climb_source(fixture("rmsnorm_abi.cu"), type, spec("rtx-5090"), o);
  ASSERT_EQ(r.evidence.size(), 2u);
  EXPECT_EQ(r.highest_rung, 1);
  EXPECT_FALSE(r.estimate.has_value());
  EXPECT_EQ(r.confidence, "static");
  EXPECT_EQ(r.stop_reason, "max rung reached");
}

TEST(CudaStatic, ArchitectureTheToolkitDoesNotKnowIsUnavailableNotAReject) {
  REQUIRE_NVCC();
  TargetSpec future = spec("b200");
  future.id = "future-gpu";
  future.isa = "sm_999a";
  const ClimbResult r = ladder::nvidia_climb_source(fixture("vec_scale.cu"),
                                                    *find_kernel_type("softmax"), future);
  EXPECT_FALSE(r.rejected);
  ASSERT_EQ(r.evidence.size(), 1u);
  EXPECT_EQ(r.evidence[0].status, "unavailable");
  EXPECT_NE(r.evidence[0].summary.find("Unsupported gpu architecture"), std::string::npos)
      << r.evidence[0].summary;
  EXPECT_FALSE(r.estimate.has_value());
}

TEST(CudaStatic, WgmmaIsRejectedForSm80WithPtxasReasonAndAcceptedForSm90a) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("matmul");
  const ClimbResult a = ladder::nvidia_climb_source(fixture("wgmma.cu"), type, spec("a100-sxm"));
  EXPECT_TRUE(a.rejected);
  EXPECT_EQ(a.confidence, "rejected");
  EXPECT_FALSE(a.estimate.has_value());
  ASSERT_EQ(a.evidence.size(), 1u);
  EXPECT_EQ(a.evidence[0].status, "reject");
  EXPECT_NE(a.evidence[0].summary.find("Instruction 'wgmma.fence' not supported on .target 'sm_80'"),
            std::string::npos)
      << a.evidence[0].summary;
  EXPECT_GE(a.evidence[0].data["errors"].size(), 4u);
  EXPECT_NE(a.stop_reason.find("wgmma.fence"), std::string::npos) << a.stop_reason;
  const ClimbResult h = ladder::nvidia_climb_source(fixture("wgmma.cu"), type, spec("h100-sxm"));
  EXPECT_FALSE(h.rejected) << h.stop_reason;
  EXPECT_EQ(rung(h, 0).status, "pass");
  if (!ladder::find_cuobjdump().empty()) {
    EXPECT_EQ(rung(h, 1).data["kernels"][0]["sass"]["hgmma"], 1);
  }
}

// The real ptxas on tests/fixtures/cuda/wgmma_serialized.cu: the wgmma inside a data-dependent
// branch is serialized (C7520), the same wgmma outside it is not; the parser flags exactly the
// first and rung 1 says so in its summary and per-kernel data. Fails when ptxas stops printing
// the line or rewords it (the canned logs in test_cuda_analysis.cpp would not notice). About 1 s.
TEST(CudaStatic, PtxasSerializesTheWgmmaInADataDependentBranchAndRung1SaysSo) {
  REQUIRE_NVCC();
  const fs::path dir = fs::temp_directory_path() / ("vb-wgmma-serial-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto c = run_process({find_nvcc(), "-std=c++17", "-O3", "-cubin", "-gencode",
                              "arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
                              fixture("wgmma_serialized.cu").string(), "-o",
                              (dir / "x.cubin").string()},
                             std::chrono::minutes(2));
  fs::remove_all(dir);
  if (!c.ok() && c.err.find("Unsupported gpu architecture") != std::string::npos)
    GTEST_SKIP() << "this nvcc does not know sm_90a: " << c.err;
  ASSERT_TRUE(c.ok()) << c.err;
  const analysis::PtxasReport r = analysis::parse_ptxas_report(c.out + "\n" + c.err);
  ASSERT_EQ(r.entries().size(), 2u) << c.err;
  std::vector<std::string> serialized;
  for (const auto* f : r.entries())
    if (f->wgmma_serialized()) serialized.push_back(f->mangled);
  ASSERT_EQ(serialized, std::vector<std::string>{"_Z15wgmma_in_branchPfPKi"}) << c.err;
  const analysis::PtxasFunction& f = *r.find("_Z15wgmma_in_branchPfPKi");
  EXPECT_EQ(f.wgmma_serialized_code, "C7520") << c.err;
  EXPECT_NE(f.wgmma_serialized_reason.find("divergent path"), std::string::npos) << c.err;
  EXPECT_TRUE(r.unattached_wgmma_serializations().empty()) << c.err;

  ClimbOptions o;
  o.max_rung = 1;
  const ClimbResult h = ladder::nvidia_climb_source(fixture("wgmma_serialized.cu"),
                                                    *find_kernel_type("matmul"), spec("h200"), o);
  ASSERT_FALSE(h.rejected) << h.stop_reason;
  const RungEvidence& r1 = rung(h, 1);
  int flagged = 0;
  for (const auto& k : r1.data["kernels"]) {
    const bool branch = k["mangled"] == "_Z15wgmma_in_branchPfPKi";
    EXPECT_EQ(k["wgmma_serialized"].get<bool>(), branch) << k.dump();
    flagged += k["wgmma_serialized"].get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(flagged, 1);
  ASSERT_EQ(r1.data["wgmma_serializations"].size(), 1u);
  // The summary names it whichever of the two kernels the estimate rests on.
  const std::string& s = r1.summary;
  if (r1.data["main_kernel"] == "_Z15wgmma_in_branchPfPKi")
    EXPECT_NE(s.find("; wgmma SERIALIZED by ptxas (C7520: program dependence on compiler-inserted "
                     "WG.AR in divergent path)"),
              std::string::npos)
        << s;
  else
    EXPECT_NE(s.find("; ptxas serialized the wgmmas of 1 other function"), std::string::npos) << s;
  // wgmma.cu issues its wgmma unconditionally: nothing said.
  const ClimbResult plain =
      ladder::nvidia_climb_source(fixture("wgmma.cu"), *find_kernel_type("matmul"), spec("h200"), o);
  EXPECT_EQ(rung(plain, 1).summary.find("serialized"), std::string::npos) << rung(plain, 1).summary;
  EXPECT_EQ(rung(plain, 1).summary.find("SERIALIZED"), std::string::npos);
}

TEST(CudaStatic, StaticSharedMemoryOver48KBIsRejectedEverywhere) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("softmax");
  for (const std::string id : {"a100-sxm", "h100-sxm"}) {
    const ClimbResult r = ladder::nvidia_climb_source(fixture("big_smem.cu"), type, spec(id));
    SCOPED_TRACE(id);
    EXPECT_TRUE(r.rejected);
    ASSERT_EQ(r.evidence.size(), 1u);
    EXPECT_EQ(r.evidence[0].rung, 0);
    const std::string& s = r.evidence[0].summary;
    // sm_80: ptxas itself refuses; sm_90a: ptxas accepts, the 48 KB static limit refuses.
    EXPECT_TRUE(s.find("too much shared data") != std::string::npos ||
                s.find("102400 bytes of static shared memory") != std::string::npos)
        << s;
  }
}

TEST(CudaStatic, SpillingKernelShowsSpillsAtRung1) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("reduce");
  // Compile-only rungs: on a machine with an H200 the climb would otherwise go on to rung 5 and
  // run the fixture, which is not a kernel of the ABI.
  ClimbOptions o;
  o.max_rung = 3;
  const ClimbResult r = ladder::nvidia_climb_source(fixture("spill.cu"), type, spec("h200"), o);
  EXPECT_FALSE(r.rejected) << r.stop_reason;
  const RungEvidence& r1 = rung(r, 1);
  EXPECT_TRUE(r1.data["spills"].get<bool>());
  const auto& k = r1.data["kernels"][0];
  EXPECT_EQ(k["registers"], 32);
  EXPECT_GT(k["spill_store_bytes"].get<long>(), 0);
  EXPECT_GT(k["spill_load_bytes"].get<long>(), 0);
  EXPECT_EQ(r1.data["block_threads"], 1024);
  if (!ladder::find_cuobjdump().empty()) {
    EXPECT_GT(k["sass"]["ldl"].get<long>(), 0);
    EXPECT_GT(k["sass"]["stl"].get<long>(), 0);
    bool local = false;
    for (const auto& f : rung(r, 3).data["factors"]) local = local || f["name"] == "local";
    EXPECT_TRUE(local) << "the local-memory penalty should apply";
  }
}

TEST(CudaStatic, CompileErrorAndWrongBackendAreRejects) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("softmax");
  const ClimbResult r = ladder::nvidia_climb_source(fixture("syntax_error.cu"), type, spec("b200"));
  EXPECT_TRUE(r.rejected);
  EXPECT_NE(r.evidence[0].summary.find("identifier \"undeclared_value\" is undefined"),
            std::string::npos)
      << r.evidence[0].summary;
  ladder::Variant v{"cpu-starter", test::starter("softmax"), "cpu", ""};
  const ClimbResult c = ladder::nvidia_climber().climb(type, v, spec("b200"), {});
  EXPECT_TRUE(c.rejected);
  EXPECT_THROW(ladder::nvidia_climb_source(fixture("missing.cu"), type, spec("b200")),
               std::runtime_error);
  EXPECT_THROW(ladder::nvidia_climb_source(fixture("vec_scale.cu"), type, spec("zen4-epyc")),
               std::invalid_argument);
}

// Every CUDA starter for every architecture, when it exists.
class CudaStarterStatic : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaStarterStatic, ClimbsEveryArchitecture) {
  REQUIRE_NVCC();
  const fs::path src = vladbud_home() / "kernels" / "cuda" / (GetParam() + ".cu");
  if (!fs::exists(src)) GTEST_SKIP() << src.string() << " does not exist yet";
  const KernelType& type = *find_kernel_type(GetParam());
  for (DType dt : {DType::BF16, DType::F32}) {
    for (const ClimbResult& r : climb_all(src, type, dt)) {
      SCOPED_TRACE(r.target_id + " " + std::string(dtype_name(dt)));
      EXPECT_FALSE(r.rejected) << r.stop_reason;
      if (r.rejected) continue;
      EXPECT_EQ(rung(r, 0).status, "pass");
      EXPECT_EQ(rung(r, 1).status, "pass") << rung(r, 1).summary;
      // Hopper's wgmma paths (matmul, fused_mlp, flash_attention on sm_90a): ptxas neither
      // serializes their wgmmas (the first flash_attention version had one in a data-dependent
      // branch and got C7520, 2026-12-07) nor spills them.
      EXPECT_TRUE(rung(r, 1).data["wgmma_serializations"].empty())
          << rung(r, 1).data["wgmma_serializations"].dump();
      for (const auto& k : rung(r, 1).data["kernels"])
        if (k["mangled"].get<std::string>().find("wgmma") != std::string::npos)
          EXPECT_LE(k["spill_store_bytes"].get<long>(), 0) << k["demangled"].get<std::string>();
      ASSERT_TRUE(r.estimate.has_value());
      EXPECT_GT(r.estimate->time_us, 0);
      EXPECT_EQ(r.confidence, "analytical");
    }
  }
}

// The matmul starter carries an mma.sync kernel (more HMMA instructions) beside its wgmma
// kernel: the estimate for sm_90a must rest on the wgmma kernel, which is what runs there, and
// for sm_80 on the mma.sync one (the wgmma path is not compiled for it). Rung 1 also shows the
// cp.async / TMA counts.
TEST(CudaStatic, MatmulEstimateRestsOnTheWgmmaKernelOnHopper) {
  REQUIRE_NVCC();
  if (ladder::find_cuobjdump().empty()) GTEST_SKIP() << "cuobjdump not installed (no SASS mix)";
  const fs::path src = vladbud_home() / "kernels" / "cuda" / "matmul.cu";
  const KernelType& type = *find_kernel_type("matmul");
  ClimbOptions o;
  o.dtype = DType::BF16;
  o.max_rung = 3;
  auto h = std::async(std::launch::async,
                      [&] { return ladder::nvidia_climb_source(src, type, spec("h100-sxm"), o); });
  const ClimbResult a = ladder::nvidia_climb_source(src, type, spec("a100-sxm"), o);
  const ClimbResult hr = h.get();
  ASSERT_FALSE(hr.rejected) << hr.stop_reason;
  ASSERT_FALSE(a.rejected) << a.stop_reason;
  const std::string hk = rung(hr, 1).data["main_kernel_demangled"].get<std::string>();
  EXPECT_NE(hk.find("wgmma_gemm_kernel"), std::string::npos) << hk;
  EXPECT_NE(rung(hr, 1).summary.find(" TMA"), std::string::npos) << rung(hr, 1).summary;
  const std::string ak = rung(a, 1).data["main_kernel_demangled"].get<std::string>();
  EXPECT_NE(ak.find("mma_gemm_kernel"), std::string::npos) << ak;
  EXPECT_EQ(ak.find("wgmma"), std::string::npos) << ak;
  bool wgmma_path = false;
  for (const auto& f : rung(hr, 3).data["factors"])
    if (f["name"] == "path" && f["source"].get<std::string>().find("wgmma") != std::string::npos)
      wgmma_path = true;
  EXPECT_TRUE(wgmma_path) << rung(hr, 3).data.dump();
}

// ---- launch record (issue 20: rung 1's launch geometry, rung 3's model 2) --------------------

TEST(LaunchRecord, RecordsTheGridTheLauncherComputesForEachTarget) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("softmax");
  ClimbOptions o;
  o.max_rung = 3;
  o.dtype = DType::BF16;
  for (const std::string id : {"h200", "a100-sxm"}) {
    SCOPED_TRACE(id);
    const ClimbResult r =
        ladder::nvidia_climb_source(fixture("launch_geometry.cu"), type, spec(id), o);
    ASSERT_FALSE(r.rejected) << r.stop_reason;
    const auto& rec = rung(r, 1).data["launch_record"];
    if (!rec["available"].get<bool>()) GTEST_SKIP() << rec["why"].get<std::string>();
    ASSERT_TRUE(rec["ok"].get<bool>()) << rec.dump();
    ASSERT_EQ(rec["launches"].size(), 1u) << rec.dump();
    const auto& l = rec["launches"][0];
    // The launcher asked the stand-in runtime for the SM count and the occupancy at 256
    // threads + 4 KiB of dynamic shared memory: both are the target's.
    const long per_sm = rung(r, 1).data["occupancy"]["blocks_per_sm"].get<long>();
    EXPECT_EQ(rung(r, 1).data["dynamic_shared_memory"], 4096);
    EXPECT_EQ(l["block"][0], 256);
    EXPECT_EQ(l["dynamic_smem"], 4096);
    EXPECT_EQ(l["grid"][0].get<long>(), std::min<long>(8192, spec(id).compute_units * per_sm));
    EXPECT_EQ(rec["memset_bytes"].get<long>(), 8192L * 8192 * 2);
    EXPECT_EQ(rung(r, 3).tool_version, "vb-nvidia-model-4");
  }
}

TEST(LaunchRecord, AnAnonymousNamespaceKernelIsAnsweredWhicheverFileNameBuiltTheRecording) {
  // The recording build is cached by content, so it may come from a copy of the source under
  // another name (CI, stop 17: a copy called a.cu), whose anonymous namespace nvcc names after
  // that file; the ptxas build of the target names it after this one. Both must still meet.
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("softmax");
  const fs::path dir =
      fs::temp_directory_path() / ("vb_anon_ns_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "cache");
  fs::copy_file(fixture("launch_geometry.cu"), dir / "a.cu");
  const char* before = std::getenv("VB_CACHE_DIR");
  const std::string saved = before ? before : "";
  ::setenv("VB_CACHE_DIR", (dir / "cache").c_str(), 1);
  ClimbOptions o;
  o.max_rung = 1;
  o.dtype = DType::BF16;
  const ClimbResult first = ladder::nvidia_climb_source(dir / "a.cu", type, spec("h200"), o);
  const ClimbResult r =
      ladder::nvidia_climb_source(fixture("launch_geometry.cu"), type, spec("a100-sxm"), o);
  if (before) ::setenv("VB_CACHE_DIR", saved.c_str(), 1); else ::unsetenv("VB_CACHE_DIR");
  fs::remove_all(dir);
  ASSERT_FALSE(first.rejected) << first.stop_reason;
  ASSERT_FALSE(r.rejected) << r.stop_reason;
  const auto& rec = rung(r, 1).data["launch_record"];
  if (!rec["available"].get<bool>()) GTEST_SKIP() << rec["why"].get<std::string>();
  ASSERT_TRUE(rec["ok"].get<bool>()) << rec.dump();
  EXPECT_TRUE(rec["unanswered"].empty()) << rec.dump();
  ASSERT_EQ(rec["launches"].size(), 1u) << rec.dump();
  // The launch names the kernel as the target's ptxas build does, so rung 3 can use it.
  EXPECT_EQ(rec["launches"][0]["kernel"], rung(r, 1).data["main_kernel"]) << rung(r, 1).data.dump();
}

TEST(LaunchRecord, TheLaunchersHostCodeRunsUnprivileged) {
  // A candidate's host code runs in vladbud-launch-record as a candidate runs in a runner:
  // under root, as a uid of its own (no root, no writing /root, no signals to the parent).
  // The fixture refuses to launch when it finds any of those.
  REQUIRE_NVCC();
  if (::geteuid() != 0) GTEST_SKIP() << "the recorder drops privileges only under root";
  ClimbOptions o;
  o.max_rung = 1;
  o.dtype = DType::BF16;
  const ClimbResult r = ladder::nvidia_climb_source(fixture("launch_host_privileges.cu"),
                                                    *find_kernel_type("softmax"), spec("h200"), o);
  ASSERT_FALSE(r.rejected) << r.stop_reason;
  const auto& rec = rung(r, 1).data["launch_record"];
  if (!rec["available"].get<bool>()) GTEST_SKIP() << rec["why"].get<std::string>();
  EXPECT_TRUE(rec["ok"].get<bool>()) << rec.dump();
  EXPECT_EQ(rec["launches"].size(), 1u) << rec.dump();
}

TEST(LaunchRecord, DriverEntryPointsAreAnsweredByVersionAndABadQueryIsRefused) {
  // cudaGetDriverEntryPointByVersion (CUDA >= 12.5) is answered as the older call is, an entry
  // point the stand-in lacks is listed under the call that asked for it (it was listed as
  // cudaGetDriverEntryPoint's, the deprecated call the stand-in forwarded to), and a query with
  // no place for its answer is refused as invalid (it crashed the recorder).
  REQUIRE_NVCC();
  ClimbOptions o;
  o.max_rung = 1;
  o.dtype = DType::BF16;
  const ClimbResult r = ladder::nvidia_climb_source(fixture("launch_entry_points.cu"),
                                                    *find_kernel_type("softmax"), spec("h200"), o);
  ASSERT_FALSE(r.rejected) << r.stop_reason;
  const auto& rec = rung(r, 1).data["launch_record"];
  if (!rec["available"].get<bool>()) GTEST_SKIP() << rec["why"].get<std::string>();
  ASSERT_TRUE(rec["ok"].get<bool>()) << rec.dump();  // the launcher returned 0: every answer held
  EXPECT_EQ(rec["launches"].size(), 1u) << rec.dump();
  EXPECT_EQ(rec["unanswered"], nlohmann::json::array({"cudaGetDriverEntryPointByVersion(cuVbNoSuchEntryPoint)"}))
      << rec.dump();
}

TEST(LaunchRecord, ALauncherThatReadsDeviceMemoryIsReportedAndTheModelFallsBack) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("softmax");
  ClimbOptions o;
  o.max_rung = 3;
  const ClimbResult r =
      ladder::nvidia_climb_source(fixture("launch_reads_device.cu"), type, spec("h200"), o);
  ASSERT_FALSE(r.rejected) << r.stop_reason;
  const auto& rec = rung(r, 1).data["launch_record"];
  if (!rec["available"].get<bool>()) GTEST_SKIP() << rec["why"].get<std::string>();
  EXPECT_FALSE(rec["ok"].get<bool>());
  EXPECT_NE(rec["error"].get<std::string>().find("crashed"), std::string::npos) << rec.dump();
  EXPECT_EQ(rung(r, 3).tool_version, "vb-nvidia-model-1");
}

TEST(LaunchRecord, ALauncherCannotCreateAProcess) {
  REQUIRE_NVCC();
  const KernelType& type = *find_kernel_type("softmax");
  ClimbOptions o;
  o.max_rung = 3;
  const ClimbResult r =
      ladder::nvidia_climb_source(fixture("launch_spawns.cu"), type, spec("h200"), o);
  ASSERT_FALSE(r.rejected) << r.stop_reason;
  const auto& rec = rung(r, 1).data["launch_record"];
  if (!rec["available"].get<bool>()) GTEST_SKIP() << rec["why"].get<std::string>();
  EXPECT_FALSE(rec["ok"].get<bool>());
  EXPECT_NE(rec["error"].get<std::string>().find("fork refused"), std::string::npos) << rec.dump();
}

TEST(LaunchRecord, ACappedGridIsEstimatedSlowerThanAFullOne) {
  // Model 2 sees what model 1 could not: the same row kernel with its grid capped at 2 blocks
  // per SM supplies fewer bytes in flight than with 16 (bench/results/ranking-h200.md: such
  // variants ran at 13 % of the copy bandwidth).
  REQUIRE_NVCC();
  if (ladder::find_cuobjdump().empty()) GTEST_SKIP() << "cuobjdump not installed (no SASS mix)";
  const KernelType& type = *find_kernel_type("rmsnorm");
  const std::string starter = read_file(vladbud_home() / "kernels" / "cuda" / "rmsnorm.cu");
  const fs::path dir = fs::temp_directory_path() / ("vb_launch_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_file_atomic(dir / "capped.cu", "#define MAX_BLOCKS_PER_SM 2\n#define BLOCK_THREADS 64\n" + starter);
  ClimbOptions o;
  o.max_rung = 3;
  o.dtype = DType::BF16;
  auto f = std::async(std::launch::async, [&] {
    return ladder::nvidia_climb_source(vladbud_home() / "kernels" / "cuda" / "rmsnorm.cu", type,
                                       spec("h200"), o);
  });
  const ClimbResult capped = ladder::nvidia_climb_source(dir / "capped.cu", type, spec("h200"), o);
  const ClimbResult full = f.get();
  fs::remove_all(dir);
  ASSERT_TRUE(capped.estimate && full.estimate);
  if (rung(full, 3).tool_version != "vb-nvidia-model-4") GTEST_SKIP() << "no launch record";
  EXPECT_GT(capped.estimate->time_us, 1.5 * full.estimate->time_us)
      << rung(capped, 3).summary << "\n" << rung(full, 3).summary;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaStarterStatic,
                         ::testing::Values("matmul", "softmax", "layernorm", "rmsnorm",
                                           "flash_attention", "fused_mlp", "cross_entropy",
                                           "rotary_embedding", "reduce"));


// The CUDA matmul's TF32 path exists only in the copy `kernelbench bench` builds for an fp32
// matmul folder ("precision": "tf32"): real nvcc PTX for sm_90a of both builds.
TEST(CudaStatic, MatmulTf32PathIsCompiledOnlyInTheKernelBenchCopy) {
  REQUIRE_NVCC();
  const fs::path src = test::repo_root() / "kernels" / "cuda" / "matmul.cu";
  const fs::path dir = fs::temp_directory_path() / ("vb-tf32-static-" + std::to_string(::getpid()));
  const fs::path copy = kb_tf32_source(src, dir);
  auto ptx = [&](const fs::path& in, const std::string& name) {
    const fs::path out = dir / name;
    const auto r = run_process({find_nvcc(), "-std=c++17", "-O3", "-arch=sm_90a", "-ptx",
                                "-I" + (test::repo_root() / "kernels" / "include").string(), in.string(),
                                "-o", out.string()});
    EXPECT_TRUE(r.ok()) << r.err;
    return r.ok() ? read_file(out) : std::string();
  };
  const std::string tf32 = ptx(copy, "tf32.ptx"), plain = ptx(src, "plain.ptx");
  EXPECT_NE(tf32.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), std::string::npos);
  EXPECT_NE(tf32.find("cvt.rna.tf32.f32"), std::string::npos);
  EXPECT_FALSE(plain.empty());
  EXPECT_EQ(plain.find(".tf32"), std::string::npos) << "the default build must stay true fp32 (DESIGN §2)";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vb
