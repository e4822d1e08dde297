// The `vladbud` command line: exit codes, greppable output, JSON, results.tsv, clear errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "core/paths.h"
#include "core/process.h"
#include "backends/cuda/gpu_ceilings.h"
#include "support.h"
#include "targets/nvidia_detect.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

ProcessResult vladbud(std::vector<std::string> args, const fs::path& cwd) {
  args.insert(args.begin(), vb::test::binary_dir() + "/vladbud");
  return run_process(args, std::chrono::minutes(10), cwd);
}

fs::path repo_root_cuda_starter(const std::string& type) {
  return test::repo_root() / "kernels" / "cuda" / (type + ".cu");
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("vb-cli-" + std::to_string(::getpid()) + "-" + name);
  fs::create_directories(d);
  return d;
}

TEST(Cli, BenchPrintsGreppableLinesAndAppendsAResultsRow) {
  const auto d = temp_dir("bench");
  auto r = vladbud({"bench", "--kernel", "rmsnorm", "--quick"}, d);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* key :
       {"correctness: PASS", "stage1_smoke: PASS", "stage2_shape_sweep: PASS",
        "stage3_stability: PASS", "stage4_determinism: PASS", "stage5_edge: PASS",
        "latency_us: ", "throughput_tflops: ", "bandwidth_gb_s: ", "pct_peak: ", "bound: memory"})
    EXPECT_NE(r.out.find(key), std::string::npos) << key << "\n" << r.out;
  EXPECT_TRUE(fs::exists(d / "results.tsv"));
  EXPECT_NE(read_file(d / "results.tsv").find("\trmsnorm\t"), std::string::npos);
  // The in-use check ran and agreed (issue 18 class 6).
  EXPECT_EQ(r.out.find("in-use check skipped"), std::string::npos) << r.out;
}

// A kernel that detects the harness passes the sandboxed stages and fails in use (class 6).
TEST(Cli, BenchFailsAKernelThatBehavesDifferentlyInUse) {
  const auto d = temp_dir("in-use");
  auto r = vladbud({"bench", "--kernel", "softmax", "--source",
                    test::bad_kernel("detects_harness").string(), "--quick", "--no-timing",
                    "--no-pytorch"},
                   d);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("guard: in_use"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage1_smoke: PASS"), std::string::npos) << r.out;
  auto skip = vladbud({"bench", "--kernel", "softmax", "--source",
                       test::bad_kernel("detects_harness").string(), "--quick", "--no-timing",
                       "--no-pytorch", "--no-in-use"},
                      d);
  EXPECT_EQ(skip.exit_code, 0) << skip.out;  // the sandbox alone cannot tell
}

TEST(Cli, BenchOnABadKernelExitsNonzeroNamingTheGuard) {
  const auto d = temp_dir("bad");
  auto r = vladbud({"bench", "--kernel", "softmax", "--source",
                    test::bad_kernel("writes_past_end").string(), "--quick"},
                   d);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("guard: guard_band"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("correctness: FAIL"), std::string::npos) << r.out;
  auto t = vladbud({"bench", "--kernel", "softmax", "--timeout", "2", "--source",
                    test::bad_kernel("sleeps_forever").string()},
                   d);
  EXPECT_EQ(t.exit_code, 3) << t.out;
  EXPECT_NE(t.out.find("guard: timeout"), std::string::npos) << t.out;
}

TEST(Cli, RankCalibrationFromAMeasuredFileCorrectsSiblingsAndOtherFamilies) {
  // Issue 20 item 2: the H200's measured times (a file) correct the H100 (same family) and the
  // B200 (another family of the vendor, band widened), and rank says which measurement did.
  if (find_nvcc().empty()) GTEST_SKIP() << "nvcc not installed (compile-only rungs)";
  const auto d = temp_dir("rank-cal");
  fs::create_directories(d / "v");
  const fs::path fx = test::repo_root() / "tests" / "fixtures" / "cuda" / "launch_geometry.cu";
  fs::copy_file(fx, d / "v" / "a.cu");
  fs::copy_file(fx, d / "v" / "b.cu");
  const nlohmann::json m{{"target", "h200"},
                         {"date", "2026-12-04T00:00:00Z"},
                         {"types",
                          {{"softmax",
                            {{"a", {{"verdict", "PASS"}, {"median_us", 500.0}}},
                             {"b", {{"verdict", "FAIL"}, {"median_us", 1.0}}}}}}}};
  write_file_atomic(d / "m.json", m.dump());
  auto r = vladbud({"rank", "softmax", "--targets", "h200,h100-sxm,b200", "--variants",
                    (d / "v").string(), "--max-rung", "3", "--dtype", "bf16", "--calibration",
                    (d / "m.json").string(), "--json"},
                   d);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["targets"].size(), 3u);
  const auto& h200 = j["targets"][0];
  const auto& h100 = j["targets"][1];
  const auto& b200 = j["targets"][2];
  EXPECT_TRUE(h200["calibration"].is_null());
  // Only the PASS time counts: "a" is measured, "b" (FAIL) keeps its estimate.
  for (const auto& e : h200["ranking"])
    EXPECT_EQ(e["confidence"], e["variant"] == "a" ? "measured" : "analytical") << e.dump();
  ASSERT_FALSE(h100["calibration"].is_null());
  EXPECT_EQ(h100["calibration"]["by"], "h200");
  EXPECT_EQ(h100["calibration"]["samples"], 1);
  EXPECT_NE(h100["calibration"]["source"].get<std::string>().find("m.json"), std::string::npos);
  EXPECT_EQ(h100["calibration"]["source"].get<std::string>().find("cross-family"), std::string::npos);
  ASSERT_FALSE(b200["calibration"].is_null());
  EXPECT_NE(b200["calibration"]["source"].get<std::string>().find("cross-family"), std::string::npos);
  // The factor is measured / estimated of the H200's variant "a".
  double est = 0;
  for (const auto& e : h200["ranking"])
    for (const auto& ev : e["evidence"])
      if (e["variant"] == "a" && ev["rung"] == 3) est = ev["data"]["estimate_us"].get<double>();
  ASSERT_GT(est, 0);
  EXPECT_NEAR(h100["calibration"]["factor"].get<double>(), 500.0 / est, 1e-6 * 500.0 / est);
  fs::remove_all(d);
}

TEST(Cli, RankRefusesACalibrationFileItCannotUse) {
  const auto d = temp_dir("rank-cal-bad");
  write_file_atomic(d / "notjson.json", "{ nope");
  write_file_atomic(d / "other.json", R"({"target": "h200", "types": {"matmul": {"x": {"verdict": "PASS", "median_us": 3}}}})");
  write_file_atomic(d / "absent.json", R"({"target": "a100-sxm", "types": {"softmax": {"x": {"verdict": "PASS", "median_us": 3}}}})");
  auto bad = vladbud({"rank", "softmax", "--targets", "h200", "--calibration", (d / "notjson.json").string()}, d);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("cannot read it as JSON"), std::string::npos) << bad.err;
  auto other = vladbud({"rank", "softmax", "--targets", "h200", "--calibration", (d / "other.json").string()}, d);
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("no passing measured time of softmax"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("matmul"), std::string::npos) << "the error lists what the file holds";
  auto absent = vladbud({"rank", "softmax", "--targets", "h200", "--calibration", (d / "absent.json").string()}, d);
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_NE(absent.err.find("add it to --targets"), std::string::npos) << absent.err;
  fs::remove_all(d);
}

TEST(Cli, BadArgumentsGetAClearErrorAndExitCode2) {
  const auto d = temp_dir("args");
  auto r = vladbud({"bench", "--kernel", "convolution"}, d);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown kernel type 'convolution'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("softmax"), std::string::npos) << "the error must list the choices";
  auto s = vladbud({"bench", "--kernel", "softmax", "--size", "huge"}, d);
  EXPECT_EQ(s.exit_code, 2);
  EXPECT_NE(s.err.find("unknown size"), std::string::npos) << s.err;
  auto m = vladbud({"bench", "--kernel", "softmax", "--source", "/no/such/file.cpp"}, d);
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_NE(m.err.find("does not exist"), std::string::npos) << m.err;
  auto both = vladbud({"bench", "--source", "/no/such/file.cpp"}, d);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--kernel is required"), std::string::npos) << both.err;
  EXPECT_NE(both.err.find("--source '/no/such/file.cpp' does not exist"), std::string::npos) << both.err;
  auto dt = vladbud({"bench", "--kernel", "softmax", "--dtype", "fp8"}, d);
  EXPECT_EQ(dt.exit_code, 2);
  // An unknown backend names every registered one (issue 17: the registry is the one list).
  auto be = vladbud({"bench", "--kernel", "softmax", "--backend", "triton-nope"}, d);
  EXPECT_EQ(be.exit_code, 2);
  EXPECT_NE(be.err.find("unknown backend 'triton-nope'; available: " + backend_names()),
            std::string::npos)
      << be.err;
  // --arch and --sanitize name the backends that take them.
  auto arch = vladbud({"bench", "--kernel", "softmax", "--arch", "sm_90a"}, d);
  EXPECT_EQ(arch.exit_code, 2);
  EXPECT_NE(arch.err.find("--arch applies to --backend cuda only"), std::string::npos) << arch.err;
  // A misspelt command or option is named with the closest real one (a new user's `rnu --all`
  // got only "A subcommand is required").
  auto cmd = vladbud({"rnu", "--all"}, d);
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_NE(cmd.err.find("unknown command 'rnu'; did you mean 'run'?"), std::string::npos) << cmd.err;
  auto opt = vladbud({"bench", "--kernal", "softmax"}, d);
  EXPECT_EQ(opt.exit_code, 2);
  EXPECT_NE(opt.err.find("unknown option '--kernal'; did you mean '--kernel'?"), std::string::npos)
      << opt.err;
  auto nested = vladbud({"kernelbench", "lsit"}, d);  // a subcommand's subcommand
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_NE(nested.err.find("vladbud kernelbench: unknown command 'lsit'; did you mean 'list'?"),
            std::string::npos)
      << nested.err;
  auto after = vladbud({"bench", "--kernel", "softmax", "--", "--kernal"}, d);  // after --: no guess
  EXPECT_EQ(after.exit_code, 2);
  EXPECT_EQ(after.err.find("did you mean"), std::string::npos) << after.err;
  auto far = vladbud({"bench", "--xyzzy-plugh"}, d);  // nothing close: no guess
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_NE(far.err.find("unknown option '--xyzzy-plugh' (`vladbud bench --help`"), std::string::npos)
      << far.err;
  EXPECT_FALSE(fs::exists(d / "results.tsv")) << "a refused command must not log a row";
}

TEST(Cli, BenchOnCudaWithoutAGpuIsAUsageErrorNotAKernelFailure) {
  // Issue 18: no device is the machine's problem, not the kernel's -- exit 2, no FAIL, no row.
  const auto d = temp_dir("nogpu");
  auto r = run_process({"env", "VB_LIBCUDA=/nonexistent/libcuda.so.1",
                        vb::test::binary_dir() + "/vladbud", "bench", "--kernel", "softmax",
                        "--backend", "cuda", "--no-pytorch"},
                       std::chrono::minutes(2), d);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("no device here"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("libcuda.so.1 not found"), std::string::npos)
      << "names the cause: " << r.err;
  EXPECT_NE(r.err.find("--backend cpu"), std::string::npos) << "says what to do: " << r.err;
  EXPECT_EQ(r.out.find("correctness: FAIL"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "results.tsv")) << "a refused command must not log a row";
}

TEST(Cli, TargetsListsALocalAmdGpuThatAmdSmiReportsWithItsSpecEntry) {
  // Issue 17 item 6: a fake amd-smi first on PATH (tests/fixtures/amd/) reports two MI300X.
  const auto d = temp_dir("amd");
  fs::create_symlink(vb::test::repo_root() / "tests" / "fixtures" / "amd" / "fake-amd-smi.sh",
                     d / "amd-smi");
  const char* path = std::getenv("PATH");
  auto r = run_process({"env", "PATH=" + d.string() + ":" + (path ? path : "/usr/bin:/bin"),
                        vb::test::binary_dir() + "/vladbud", "targets", "--json"},
                       std::chrono::minutes(2), d);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int local_amd = 0;
  for (const auto& t : j["targets"]) {
    if (t.value("vendor", "") != "AMD" || !t.value("local", false)) continue;
    ++local_amd;
    EXPECT_EQ(t["id"], "mi300x") << t.dump();
    ASSERT_EQ(t["detected"].size(), 2u) << t.dump();
    EXPECT_EQ(t["detected"][1]["gfx_arch"], "gfx942");
    EXPECT_EQ(t["detected"][1]["detected_by"], "amd-smi static --asic --json");
  }
  EXPECT_EQ(local_amd, 1);
  EXPECT_FALSE(j.contains("amd_detection"));
  r = run_process({"env", "PATH=" + d.string() + ":" + (path ? path : "/usr/bin:/bin"),
                   vb::test::binary_dir() + "/vladbud", "targets"},
                  std::chrono::minutes(2), d);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("local AMD GPU 1: AMD Instinct MI300X (gfx942, 304 CUs; amd-smi static "
                       "--asic --json) -> mi300x"),
            std::string::npos)
      << r.out;
}

TEST(Cli, AbiJsonGivesTheResolvedProblemOfASizeAndRefusesAnUnknownSize) {
  const auto d = temp_dir("abi");
  auto r = vladbud({"bench", "--kernel", "cross_entropy", "--abi", "--json", "--dtype", "bf16",
                    "--size", "edge-3x127"},
                   d);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel"], "cross_entropy");
  EXPECT_EQ(j["size"], "edge-3x127");
  ASSERT_EQ(j["inputs"].size(), 2u);
  EXPECT_EQ(j["inputs"][0]["dtype"], "bf16");
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::array({3, 127}));
  EXPECT_EQ(j["inputs"][1]["dtype"], "int64");
  EXPECT_EQ(j["attrs"]["ignore_index"], -100.0);
  EXPECT_GT(j["min_bytes"].get<double>(), 0.0);
  auto bad = vladbud({"bench", "--kernel", "cross_entropy", "--abi", "--json", "--size", "9x9"}, d);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown size '9x9'"), std::string::npos) << bad.err;
}

TEST(Cli, TimingOnlySkipsTheStagesAndNeverSaysPass) {
  const auto d = temp_dir("timing-only");
  auto r = vladbud({"bench", "--kernel", "rmsnorm", "--quick", "--timing-only"}, d);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("correctness: UNVERIFIED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("correctness: PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stage1_smoke: SKIP"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("latency_us: "), std::string::npos) << r.out;
  // The timed calls are still verified: a kernel that leaves its last row unwritten fails.
  auto bad = vladbud({"bench", "--kernel", "softmax", "--quick", "--timing-only", "--source",
                      test::bad_kernel("skips_last_row").string()},
                     d);
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("correctness: FAIL"), std::string::npos) << bad.out;
  auto both = vladbud({"bench", "--kernel", "softmax", "--timing-only", "--no-timing"}, d);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("exclude each other"), std::string::npos) << both.err;
}

TEST(Cli, RunJsonHasTargetsWithKernels) {
  const auto d = temp_dir("run");
  auto r = vladbud({"run", "reduce", "--json", "--quick", "--no-gpu"}, d);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("targets").size(), 1u);
  const auto& t = j["targets"][0];
  EXPECT_EQ(t.at("id"), "local-cpu");
  EXPECT_EQ(t.at("local"), true);
  ASSERT_EQ(t.at("kernels").size(), 1u);
  const auto& k = t["kernels"][0];
  EXPECT_EQ(k.at("kernel"), "reduce");
  EXPECT_EQ(k.at("correctness"), "PASS");
  EXPECT_TRUE(k.at("stages").contains("determinism"));
  EXPECT_GT(k.at("latency_us").get<double>(), 0);
  EXPECT_GT(k.at("pct_peak").get<double>(), 0);
  EXPECT_LE(k.at("pct_peak").get<double>(), 100);
  // Whether other work competed for the cores while it was timed is in the JSON; when it did,
  // the run ends with a warning naming the row (a new user's run --all showed such figures
  // unflagged) and the exit code stays the verdicts'.
  ASSERT_TRUE(k.contains("contended")) << k.dump(1);
  EXPECT_EQ(k.at("contended").get<bool>(), k.at("other_runnable_tasks").get<int>() >= 1);
  EXPECT_EQ(r.err.find("warning: reduce on local-cpu") != std::string::npos,
            k.at("contended").get<bool>())
      << r.err;
  EXPECT_EQ(j.contains("warnings"), k.at("contended").get<bool>()) << j.dump(1);
}

TEST(Cli, RunAddsTheLocalGpuOrSaysWhyItIsSkipped) {
  const auto d = temp_dir("run-gpu");
  // A kernel source that does not exist: the cuda row is a build failure, never a crashed run.
  auto r = vladbud({"run", "reduce", "--json", "--quick"}, d);
  const auto j = nlohmann::json::parse(r.out);
  std::string why;
  if (detect_nvidia_gpus(&why).empty()) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("no GPU: cuda backend skipped ("), std::string::npos) << r.err;
    EXPECT_EQ(j.at("targets").size(), 1u);
    return;
  }
  ASSERT_EQ(j.at("targets").size(), 2u) << r.err;
  const auto& g = j["targets"][1];
  EXPECT_EQ(g.at("id"), "local-gpu0");
  EXPECT_EQ(g.at("backend"), "cuda");
  EXPECT_EQ(g.at("local"), true);
  EXPECT_EQ(g.at("rung"), 5);
  ASSERT_EQ(g.at("kernels").size(), 1u);
  const auto& k = g["kernels"][0];
  EXPECT_EQ(k.at("kernel"), "reduce");
  if (!fs::exists(repo_root_cuda_starter("reduce"))) {
    EXPECT_EQ(k.at("failed_stage"), "build") << k.dump();
  }
}

}  // namespace
}  // namespace vb
