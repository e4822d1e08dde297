// The confidence ladder's logic (rung names, ranking with tie groups, calibration arithmetic),
// the rung-1 parsers on recorded clang/GCC/llvm-mca outputs (tests/fixtures/ladder), the
// assembly loop finder and MCA markers, the rung-0 source screen and variant parameters.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "analysis/cpu_asm.h"
#include "core/paths.h"
#include "ladder/cpu.h"
#include "ladder/ladder.h"
#include "ladder/rank.h"

namespace vb::ladder {
namespace {

std::string fixture(const std::string& name) {
  return read_file(vladbud_home() / "tests" / "fixtures" / "ladder" / name);
}

ClimbResult climb(const std::string& variant, double t, double lo, double hi, bool rejected = false) {
  ClimbResult r;
  r.target_id = "sapphirerapids";
  r.kernel = "softmax";
  r.variant = variant;
  r.rejected = rejected;
  r.highest_rung = rejected ? 0 : 3;
  if (!rejected) r.estimate = Estimate{t, lo, hi, 3, "test", "", 1.0};
  return r;
}

TEST(Ladder, RungNamesFollowDesign) {
  EXPECT_EQ(rung_name(0), "static reject");
  EXPECT_EQ(rung_name(1), "static signals");
  EXPECT_EQ(rung_name(2), "correctness");
  EXPECT_EQ(rung_name(3), "analytical");
  EXPECT_EQ(rung_name(4), "simulation");
  EXPECT_EQ(rung_name(5), "real hardware");
}

TEST(Ladder, RankingOrdersByEstimateAndTiesOverlappingBands) {
  auto r = rank_climbs({climb("slow", 100, 90, 120), climb("bad", 0, 0, 0, true),
                        climb("fast", 10, 8, 12), climb("fast2", 11, 9, 15),
                        climb("mid", 50, 40, 60)});
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].result.variant, "fast");
  EXPECT_EQ(r[1].result.variant, "fast2");
  EXPECT_EQ(r[2].result.variant, "mid");
  EXPECT_EQ(r[3].result.variant, "slow");
  EXPECT_EQ(r[4].result.variant, "bad");  // rejected last, no tie group
  EXPECT_EQ(r[0].tie_group, r[1].tie_group);  // bands [8,12] and [9,15] overlap
  EXPECT_NE(r[1].tie_group, r[2].tie_group);
  EXPECT_NE(r[2].tie_group, r[3].tie_group);
  EXPECT_EQ(r[4].tie_group, 0);
  EXPECT_EQ(r[4].position, 5);
}

TEST(Ladder, TieChainsAreTransitive) {
  // a overlaps b, b overlaps c, a does not overlap c: one group (rank, don't promise).
  auto r = rank_climbs({climb("a", 10, 9, 11), climb("b", 12, 10.5, 13), climb("c", 14, 12.5, 16)});
  EXPECT_EQ(r[0].tie_group, 1);
  EXPECT_EQ(r[2].tie_group, 1);
}

ClimbResult measured(const std::string& v, double est, double meas) {
  ClimbResult r;
  r.target_id = "local-cpu";
  r.kernel = "softmax";
  r.variant = v;
  RungEvidence e3;
  e3.rung = 3;
  e3.status = "pass";
  e3.data = {{"estimate_us", est}};
  RungEvidence e5;
  e5.rung = 5;
  e5.status = "pass";
  e5.data = {{"measured_us", meas}};
  r.evidence = {e3, e5};
  r.highest_rung = 5;
  r.estimate = Estimate{meas, meas, meas, 5, "measured", "", 1};
  return r;
}

TEST(Ladder, CalibrationIsTheGeometricMeanOfMeasuredOverEstimated) {
  ClimbResult no_meas = climb("x", 5, 4, 6);  // no rung-5 evidence: skipped
  auto c = calibration_from({measured("a", 10, 20), measured("b", 10, 80), no_meas}, "fam", "today");
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->factor, 4.0, 1e-12);  // sqrt(2 * 8)
  EXPECT_EQ(c->samples, 2);
  EXPECT_EQ(c->target_id, "local-cpu");
  EXPECT_NE(c->source.find("local-cpu softmax"), std::string::npos);

  ClimbResult sib = climb("a", 10, 5, 20);
  apply_calibration(sib, *c);
  EXPECT_NEAR(sib.estimate->time_us, 40, 1e-9);
  EXPECT_NEAR(sib.estimate->low_us, 20, 1e-9);
  EXPECT_NEAR(sib.estimate->high_us, 80, 1e-9);
  EXPECT_NEAR(sib.estimate->calibration_factor, 4, 1e-12);
  EXPECT_EQ(sib.estimate->calibrated_by, c->source);

  ClimbResult self = measured("a", 10, 20);  // the measured target itself is never corrected
  apply_calibration(self, *c);
  EXPECT_EQ(self.estimate->time_us, 20);
  EXPECT_FALSE(calibration_from({no_meas}, "fam", "today"));
  Calibration bad = *c;
  bad.factor = 0;
  EXPECT_THROW(apply_calibration(sib, bad), std::invalid_argument);
}

TEST(Ladder, ClimbResultJsonCarriesEvidenceAndEstimate) {
  ClimbResult r = measured("a", 10, 20);
  auto j = r.to_json();
  EXPECT_EQ(j["highest_rung_name"], "real hardware");
  EXPECT_EQ(j["evidence"].size(), 2u);
  EXPECT_EQ(j["estimate"]["time_us"], 20);
  r.estimate.reset();
  EXPECT_TRUE(r.to_json()["estimate"].is_null());
}

TEST(Analysis, ClangRemarksGiveWidthsIncludingScalable) {
  auto rs = analysis::parse_loop_remarks(fixture("clang19-neoverse-v2-remarks.txt"));
  int scalable = 0, fixed = 0, missed = 0;
  for (const auto& r : rs) {
    if (r.file.find("softmax/simd.cpp") == std::string::npos) continue;
    if (!r.vectorized) {
      ++missed;
    } else if (r.scalable) {
      ++scalable;
      EXPECT_EQ(r.width, 4);
    } else {
      ++fixed;
    }
  }
  EXPECT_EQ(scalable, 1);  // "vectorization width: vscale x 4"
  EXPECT_EQ(fixed, 1);     // "vectorization width: 4, interleaved count: 2"
  EXPECT_EQ(missed, 1);    // "loop not vectorized (Force=true)"
}

TEST(Analysis, GccReportGivesByteWidths) {
  auto rs = analysis::parse_loop_remarks(fixture("gcc12-vec-report.txt"));
  bool has64 = false, missed = false;
  for (const auto& r : rs) {
    if (r.vectorized && r.vector_bytes == 64) has64 = true;
    if (!r.vectorized) missed = true;
  }
  EXPECT_TRUE(has64);
  EXPECT_TRUE(missed);
}

TEST(Analysis, LlvmMcaReportsCyclesIpcAndBottleneck) {
  auto x = analysis::parse_llvm_mca(fixture("llvm-mca19-sapphirerapids.txt"));
  ASSERT_EQ(x.size(), 1u);
  EXPECT_EQ(x[0].name, "hot");
  EXPECT_EQ(x[0].iterations, 200);
  EXPECT_GT(x[0].cycles_per_iteration, 1.0);
  EXPECT_GT(x[0].ipc, 0.5);
  EXPECT_EQ(x[0].bottleneck_resource.rfind("SPRPort", 0), 0u);
  auto a = analysis::parse_llvm_mca(fixture("llvm-mca19-neoverse-v2.txt"));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].total_cycles, 3341);
  EXPECT_NEAR(a[0].cycles_per_iteration, 3341.0 / 200, 1e-9);
  EXPECT_NEAR(a[0].ipc, 4.55, 1e-9);
  EXPECT_EQ(a[0].bottleneck_resource.rfind("V2Unit", 0), 0u);
  EXPECT_THROW(analysis::parse_llvm_mca("not a report"), std::runtime_error);
}

TEST(Analysis, InnermostLoopsAndMarkersInTheAssembly) {
  const std::string s = fixture("reduce-unroll-sapphirerapids.s");
  auto loops = analysis::find_innermost_loops(s, analysis::AsmIsa::X86_64);
  ASSERT_FALSE(loops.empty());
  const auto* hot = analysis::hot_loop(loops);
  ASSERT_NE(hot, nullptr);
  EXPECT_GT(hot->flops_per_iteration, 0);
  EXPECT_GT(hot->vector_instructions, 0);
  const std::string m = analysis::insert_mca_markers(s, *hot, analysis::AsmIsa::X86_64);
  const auto b = m.find("# LLVM-MCA-BEGIN hot\n" + hot->label + ":");
  const auto e = m.find("# LLVM-MCA-END hot");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_LT(b, e);
  // A tiny AArch64 loop: the backward b.ne closes it; the FMA on .4s counts 8 FLOP.
  const std::string arm =
      "f:\n.LBB0_1:\n\tldr q0, [x0], #16\n\tfmla v1.4s, v0.4s, v2.4s\n\tsubs x1, x1, #4\n"
      "\tb.ne .LBB0_1\n\tret\n";
  auto al = analysis::find_innermost_loops(arm, analysis::AsmIsa::AArch64);
  ASSERT_EQ(al.size(), 1u);
  EXPECT_EQ(al[0].label, ".LBB0_1");
  EXPECT_EQ(al[0].flops_per_iteration, 8);
  EXPECT_EQ(al[0].max_vector_bytes, 16);
}

TEST(Screen, ForbiddenCallsAndWrongIsaAreNamed) {
  EXPECT_TRUE(screen_cpu_source("#include \"vb_kernel.h\"\nint f(){return 0;} // system(\"x\")\n", true).empty());
  auto p = screen_cpu_source("int f(){ system(\"rm -rf /\"); return 0; }\n", false);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("line 1"), std::string::npos);
  EXPECT_FALSE(screen_cpu_source("void g(){ fopen(0,0); }", false).empty());
  EXPECT_FALSE(screen_cpu_source("void g(){ dlopen(0,0); }", false).empty());
  EXPECT_FALSE(screen_cpu_source("void g(){ execvp(0,0); }", false).empty());
  EXPECT_FALSE(screen_cpu_source("void g(){ socket(0,0,0); }", false).empty());
  const std::string intr = "#include <immintrin.h>\nint f(){return 0;}\n";
  auto a = screen_cpu_source(intr, true);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_NE(a[0].find("x86 intrinsics"), std::string::npos);
  EXPECT_TRUE(screen_cpu_source(intr, false).empty());
  EXPECT_TRUE(screen_cpu_source("#if defined(__x86_64__)\n#include <immintrin.h>\n#endif\n", true).empty());
  EXPECT_FALSE(screen_cpu_source("void g(){ asm volatile(\"vzeroupper\" ::: \"%xmm0\"); }", true).empty());
}

TEST(Variants, ThreadedDetection) {
  EXPECT_TRUE(variant_is_threaded("#pragma omp parallel for\nfor(;;){}"));
  EXPECT_FALSE(variant_is_threaded("#pragma omp simd\nfor(;;){}"));
  EXPECT_FALSE(variant_is_threaded("// #pragma omp parallel\n"));
}

TEST(Variants, ParamsAreInstantiatedFromTheCard) {
  const std::string src =
      "// @vb-param VEC_BYTES 64 {16,32,64}  width\n#ifndef VEC_BYTES\n#define VEC_BYTES 64\n#endif\n"
      "// @vb-param L1D_BYTES 49152  L1\n#ifndef L1D_BYTES\n#define L1D_BYTES 49152\n#endif\n";
  auto ps = parse_variant_params(src);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].allowed, (std::vector<long long>{16, 32, 64}));
  TargetSpec t;
  t.id = "neoverse-v2";
  t.raw = {{"vector_width", {{"bits", 128}}}, {"caches", {{"l1d_kb_per_core", 64}}}};
  const std::string out = instantiate_variant(src, t);
  EXPECT_NE(out.find("#define VEC_BYTES 16"), std::string::npos) << out;
  EXPECT_NE(out.find("#define L1D_BYTES 65536"), std::string::npos) << out;
  EXPECT_THROW(parse_variant_params("// @vb-param X\n"), std::invalid_argument);
  EXPECT_THROW(parse_variant_params("// @vb-param X 1 {1,2}\n"), std::invalid_argument);
}

// A study of CUDA sources says nothing about a ranking of Triton sources on the same family.
TEST(RankingTrust, StudiesCoverOnlyTheBackendTheyRanked) {
  const auto cuda = ranking_trust("nvidia-hopper", "softmax", "cuda");
  const auto triton = ranking_trust("nvidia-hopper", "softmax", "triton");
  ASSERT_FALSE(cuda.empty());
  ASSERT_FALSE(triton.empty());  // the Triton blind study (bench/results/ranking-triton-h100-sxm.md)
  EXPECT_GT(ranking_trust("nvidia-hopper", "softmax").size(), cuda.size());  // any backend: both
  for (const auto& t : cuda) EXPECT_EQ(t.study.find("triton"), std::string::npos) << t.study;
  for (const auto& t : triton) EXPECT_NE(t.study.find("triton"), std::string::npos) << t.study;
  // The newest model's record of the kernel itself comes first (Triton blind study 2, model 5,
  // bench/results/ranking-triton-blind2-h200.md), then the older model's.
  EXPECT_EQ(triton.front().kernel, "softmax");
  EXPECT_EQ(triton.front().model, "vb-nvidia-model-5");
  EXPECT_EQ(triton.back().model, "vb-nvidia-model-4");
  // CUDA softmax: study 4 (model 4) did not measure softmax, so its "all" record comes first,
  // then model 3's softmax record (newest model first).
  EXPECT_EQ(cuda.front().model, "vb-nvidia-model-4");
  EXPECT_EQ(cuda.front().kernel, "all");
  for (std::size_t i = 1; i < cuda.size(); ++i) EXPECT_GE(cuda[i - 1].model, cuda[i].model);
  // A family no study measured: nothing, so rank says the order is untested.
  EXPECT_TRUE(ranking_trust("amd-cdna3", "softmax", "triton").empty());
}

}  // namespace
}  // namespace vb::ladder

// The compile-only rungs' build cache keys on every local header a kernel may include, not on
// vb_kernel.h alone (a review found an edit to kernels/include/vb_cpu_exp.h served a stale build).
TEST(LadderCpu, TheBuildKeyCoversEveryLocalHeader) {
  const auto home = std::filesystem::temp_directory_path() /
                    ("vb-include-key-" + std::to_string(::getpid()));
  std::filesystem::create_directories(home / "kernels" / "include" / "sub");
  auto write = [](const std::filesystem::path& p, const std::string& t) { std::ofstream(p) << t; };
  write(home / "kernels" / "include" / "vb_kernel.h", "abi\n");
  write(home / "kernels" / "include" / "vb_cpu_exp.h", "exp v1\n");
  write(home / "kernels" / "include" / "sub" / "x.cuh", "x\n");
  const char* old = std::getenv("VLADBUD_HOME");
  const std::string saved = old ? old : "";
  ::setenv("VLADBUD_HOME", home.c_str(), 1);
  const std::string a = vb::ladder::local_include_text();
  write(home / "kernels" / "include" / "vb_cpu_exp.h", "exp v2\n");
  const std::string b = vb::ladder::local_include_text();
  EXPECT_NE(a, b);
  EXPECT_NE(b.find("== sub/x.cuh\nx\n"), std::string::npos) << b;
  EXPECT_LT(b.find("== sub/x.cuh"), b.find("== vb_cpu_exp.h")) << "name order: " << b;
  // No SDK folder: nothing to key on, and no error.
  std::filesystem::remove_all(home / "kernels");
  EXPECT_EQ(vb::ladder::local_include_text(), "");
  if (old) ::setenv("VLADBUD_HOME", saved.c_str(), 1);
  else ::unsetenv("VLADBUD_HOME");
  std::filesystem::remove_all(home);
}
