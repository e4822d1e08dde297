// The triton backend without a GPU (issue 17 step 2): the nine Triton starters PASS every stage
// in fp32 under Triton's interpreter, hosted by the Python runner behind the same evaluator
// (runner isolation, fp64 oracle, guards); deliberately bad Triton kernels fail their guards;
// bf16 cases the interpreter cannot compute are INCONCLUSIVE, never PASS or FAIL; and `vladbud
// rank --backend triton` reaches rung 1 on AMD targets with VGPR and occupancy evidence and on
// NVIDIA targets with register, SASS and occupancy evidence (compile-only, no GPU).
// Integration tests (each starter ~15-40 s of interpreter time on two cores, --quick sizes).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "core/process.h"
#include "eval/evaluator.h"
#include "core/paths.h"
#include "kernels/kernel_type.h"
#include "ladder/ladder.h"
#include "runner/client.h"
#include "optimize/params.h"
#include "targets/spec_db.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

const Backend& triton() {
  const Backend* b = find_backend("triton");
  if (!b) throw std::runtime_error("no triton backend registered");
  return *b;
}

// Quick sizes, fp32 only, no timing (an emulator is never timed).
EvalOptions interpreter_options() {
  EvalOptions o = test::test_options(/*timing=*/false);
  o.quick = true;
  o.dtypes = {DType::F32};
  o.call_timeout_s = 300;
  return o;
}

fs::path bad(const std::string& name) {
  return test::repo_root() / "kernels" / "bad" / "triton" / (name + ".py");
}

std::string why(const EvalReport& r) {
  return r.failed_stage + " " + r.failed_size + " " + r.failed_dtype + " [" + r.guard + "] " +
         r.reason;
}

class TritonStarter : public ::testing::TestWithParam<std::string> {};

TEST_P(TritonStarter, PassesEveryStageInFp32UnderTheInterpreter) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const KernelType* kt = find_kernel_type(GetParam());
  ASSERT_NE(kt, nullptr);
  const EvalReport r = evaluate(*kt, triton(), triton().starter_source(GetParam()),
                                interpreter_options());
  EXPECT_EQ(r.verdict, "PASS") << why(r);
  for (const auto& s : r.stages) {
    EXPECT_EQ(s.status, "PASS") << s.name << ": " << s.detail;
    EXPECT_GT(s.cases, 0) << s.name;
  }
  EXPECT_FALSE(r.timing.has_value()) << "the interpreter's times must not be reported";
}

INSTANTIATE_TEST_SUITE_P(AllNine, TritonStarter,
                         ::testing::Values("matmul", "softmax", "layernorm", "rmsnorm",
                                           "flash_attention", "fused_mlp", "cross_entropy",
                                           "rotary_embedding", "reduce"));

TEST(TritonGuards, AnUnmaskedStoreFailsTheGuardBand) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const EvalReport r = evaluate(*find_kernel_type("softmax"), triton(), bad("softmax_oob"),
                                interpreter_options());
  EXPECT_EQ(r.verdict, "FAIL") << why(r);
  EXPECT_EQ(r.guard, "guard_band") << why(r);
}

TEST(TritonGuards, Tf32ForAnFp32ProblemFailsAccuracy) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const EvalReport r = evaluate(*find_kernel_type("matmul"), triton(), bad("matmul_tf32"),
                                interpreter_options());
  EXPECT_EQ(r.verdict, "FAIL") << why(r);
  EXPECT_EQ(r.guard, "accuracy") << why(r);
}

TEST(TritonGuards, Bf16DotIsInconclusiveNeverPassOrFail) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  auto o = interpreter_options();
  o.dtypes = {DType::BF16};
  const EvalReport r =
      evaluate(*find_kernel_type("matmul"), triton(), triton().starter_source("matmul"), o);
  EXPECT_EQ(r.verdict, "INCONCLUSIVE") << why(r);
  EXPECT_EQ(r.guard, "inconclusive");
  EXPECT_FALSE(r.correct());
  EXPECT_NE(r.reason.find("tl.dot"), std::string::npos) << r.reason;
  for (const auto& s : r.stages) EXPECT_EQ(s.status, "INCONCLUSIVE") << s.name << ": " << s.detail;
}

TEST(TritonGuards, AnInconclusiveClaimForAnFp32ProblemIsAFailure) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const EvalReport r = evaluate(*find_kernel_type("reduce"), triton(), bad("reduce_bf16_math"),
                                interpreter_options());
  EXPECT_EQ(r.verdict, "FAIL") << why(r);
  EXPECT_EQ(r.failed_stage, "smoke") << why(r);
  // Failed by the rule (the runner said inconclusive), not by some other error.
  EXPECT_NE(r.reason.find("called a fp32 case inconclusive"), std::string::npos) << r.reason;
}

TEST(TritonGuards, RunnersCannotReachEachOther) {
  // The pool runs evaluators side by side. A Triton interpreter runner (a Python script,
  // started through a launcher: dumpable until it closes itself) is the victim, alive and
  // idle; a C++ candidate and then a Triton one try to open its /proc entries, signal it and
  // change its limits, priority or affinity (kernels/bad/{cpu,triton}/reaches_other_runners):
  // both must have tried it and reached nothing, and the victim still answers. Each runner's
  // own uid needs root.
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  if (::geteuid() != 0) GTEST_SKIP() << "runners get uids of their own only under root";
  if (!RunnerClient::sandbox_ids().per_runner) GTEST_SKIP() << RunnerClient::sandbox_ids().note;
  RunnerClient victim(triton().device().runner_flavour());
  const auto rp = triton().device().runner_program();
  victim.set_launcher(rp.launcher, rp.program);
  victim.set_reachable(rp.reachable);
  const RunnerReply started =
      victim.start(triton().starter_source("softmax").string(), std::chrono::seconds(120));
  ASSERT_EQ(started.kind, RunnerReply::Kind::Ok) << started.message << "\n" << victim.output_tail();
  auto o = test::test_options(/*timing=*/false);
  o.dtypes = {DType::F32};
  o.quick = true;
  const EvalReport c = evaluate(*find_kernel_type("softmax"), *find_backend("cpu"),
                                test::bad_kernel("reaches_other_runners"), o);
  EXPECT_EQ(c.verdict, "FAIL") << why(c);
  EXPECT_EQ(c.guard, "kernel_error") << why(c);
  EXPECT_TRUE(test::tried_pid(c.reason, victim.pid())) << victim.pid() << ": " << why(c);
  const EvalReport t = evaluate(*find_kernel_type("softmax"), triton(), bad("reaches_other_runners"),
                                interpreter_options());
  EXPECT_EQ(t.verdict, "FAIL") << why(t);
  EXPECT_EQ(t.guard, "kernel_error") << why(t);
  EXPECT_TRUE(test::tried_pid(t.reason, victim.pid())) << victim.pid() << ": " << why(t);
  const RunnerReply pong = victim.command({{"op", "ping"}, {"nonce", 9}}, std::chrono::seconds(30));
  EXPECT_EQ(pong.kind, RunnerReply::Kind::Ok) << pong.message << "\n" << victim.output_tail();
  EXPECT_EQ(pong.body.value("pong", 0), 9);
  victim.stop();
}

TEST(TritonBuild, ASourceWithoutTheEntryPointFailsToBuildAndSaysWhy) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const BuildResult b = triton().build(bad("no_entry"));
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.diagnostics.find("vb_kernel_run"), std::string::npos) << b.diagnostics;
  const BuildResult s = triton().build(triton().starter_source("softmax"));
  EXPECT_TRUE(s.ok) << s.diagnostics;
}

ProcessResult vladbud(std::vector<std::string> args) {
  args.insert(args.begin(), test::binary_dir() + "/vladbud");
  return run_process(args, std::chrono::minutes(10));
}

TEST(TritonCli, WithoutTritonTheBackendIsAUsageErrorNamingTheFix) {
  const auto r = run_process({"env", "VB_PYTHON=/nonexistent/python3",
                              test::binary_dir() + "/vladbud", "bench", "--kernel", "softmax",
                              "--backend", "triton", "--no-pytorch", "--results",
                              (fs::temp_directory_path() / "vb-triton-none.tsv").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("VB_PYTHON"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("setup.sh"), std::string::npos) << r.err;
}

// The optimizer's variant of a Triton starter (every tunable moved off its default through the
// backend's ParamSyntax) is still correct: the softmax with MAX_BLOCK 256 sends the quick sizes'
// 1023- and 1024-column rows through the two-pass path in 512-column chunks, whose -inf handling
// the stability stage checks.
TEST(TritonParams, AVariantWithEveryTunableChangedStillPassesEveryStageInFp32) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const ParamSyntax& py = triton().param_syntax();
  const std::string src = read_file(triton().starter_source("softmax"));
  const auto ps = opt::parse_params(src, py);
  const opt::Config cfg{{"MAX_BLOCK", "256"}, {"CHUNK", "512"}, {"NUM_WARPS", "16"},
                        {"SMALL_NUM_WARPS", "1"}};
  ASSERT_EQ(ps.size(), cfg.size()) << "a new softmax tunable: set it here too";
  const std::string variant = opt::apply_config(src, cfg, py);
  ASSERT_EQ(opt::current_config(variant, ps, py), cfg);
  const fs::path f = fs::temp_directory_path() /
                     ("vb-triton-variant-" + std::to_string(::getpid()) + "-softmax.py");
  write_file_atomic(f, variant);
  const EvalReport r = evaluate(*find_kernel_type("softmax"), triton(), f, interpreter_options());
  fs::remove(f);
  EXPECT_EQ(r.verdict, "PASS") << why(r);
  for (const auto& s : r.stages) EXPECT_EQ(s.status, "PASS") << s.name << ": " << s.detail;
}

// The interpreter is never timed, so neither `optimize` nor `autotune --backend triton` can
// compare candidates here: both stop before timing anything, naming the problem and the fix.
TEST(TritonCli, OptimizeAndAutotuneOnTheInterpreterRefuseNamingWhatWouldTimeThem) {
  const fs::path ws = fs::temp_directory_path() / ("vb-triton-opt-" + std::to_string(::getpid()));
  const fs::path d = ws / "kernels" / "01_softmax";
  fs::create_directories(d);
  fs::copy_file(triton().starter_source("softmax"), d / "softmax.py");
  write_file_atomic(d / "problem.json",
                    R"({"kernel":"softmax","dtype":"fp32","backend":"triton",)"
                    R"("size":{"label":"t","dims":{"R":8,"C":64}},"time_share":0.3})");
  auto refused = [](const ProcessResult& r, const std::string& what) {
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("only checks correctness"), std::string::npos) << what << ": " << r.err;
    EXPECT_NE(r.err.find("needs an NVIDIA or AMD GPU"), std::string::npos) << what << ": " << r.err;
  };
  refused(vladbud({"optimize", "--kernel", d.string(), "--budget", "1m", "--no-pytorch"}),
          "optimize --kernel");
  refused(vladbud({"optimize", "--workspace", ws.string(), "--budget", "1m", "--no-pytorch"}),
          "optimize --workspace");
  EXPECT_FALSE(fs::exists(ws / "results.tsv")) << "nothing may be timed or recorded";
  const fs::path aws = ws / "autotune";
  refused(vladbud({"autotune", "--backend", "triton", "--workspace", aws.string()}),
          "autotune --backend triton");
  EXPECT_FALSE(fs::exists(aws)) << "refused before profiling";
  // A backend whose device is not the model's is refused too, naming the --device to pass.
  const auto cuda = vladbud({"autotune", "--backend", "cuda", "--workspace", aws.string()});
  EXPECT_EQ(cuda.exit_code, 2) << cuda.err;
  EXPECT_NE(cuda.err.find("pass --device cuda"), std::string::npos) << cuda.err;
  EXPECT_FALSE(fs::exists(aws));
  fs::remove_all(ws);
}

TEST(TritonRank, ReachesRungOneOnAmdTargetsWithVgprAndOccupancyEvidence) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const auto r = vladbud({"rank", "softmax", "--backend", "triton", "--targets", "mi300x,mi355x",
                          "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("targets").size(), 2u);
  for (const auto& t : j["targets"]) {
    ASSERT_EQ(t.at("ranking").size(), 1u) << t.dump();
    const auto& v = t["ranking"][0];
    EXPECT_GE(v.at("highest_rung").get<int>(), 1) << v.dump();
    bool rung1 = false;
    for (const auto& e : v.at("evidence")) {
      if (e.at("rung") != 1) continue;
      rung1 = true;
      EXPECT_EQ(e.at("status"), "pass");
      const auto& k = e.at("data").at("kernels").at(0);
      EXPECT_GT(k.at("vgpr").get<int>(), 0) << k.dump();
      EXPECT_GE(k.at("occupancy").get<int>(), 1) << k.dump();
      EXPECT_LE(k.at("occupancy").get<int>(), 8) << k.dump();  // max waves per SIMD on CDNA
    }
    EXPECT_TRUE(rung1) << v.dump();
  }
  EXPECT_EQ(j["targets"][0].at("id"), "mi300x");
}

// The evidence of rung `rung` in one ranking entry (null json when absent).
nlohmann::json rung_evidence(const nlohmann::json& entry, int rung) {
  for (const auto& e : entry.at("evidence"))
    if (e.at("rung") == rung) return e;
  return nullptr;
}

TEST(TritonRank, ReachesRungOneOnTheH200WithRegisterAndOccupancyEvidence) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const auto r = vladbud({"rank", "softmax", "--backend", "triton", "--targets", "h200", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("targets").size(), 1u);
  const auto& t = j["targets"][0];
  EXPECT_EQ(t.at("id"), "h200");
  ASSERT_EQ(t.at("ranking").size(), 1u) << t.dump();
  const auto& v = t["ranking"][0];
  EXPECT_EQ(v.at("backend"), "triton");
  EXPECT_FALSE(v.at("rejected").get<bool>()) << v.dump();
  EXPECT_GE(v.at("highest_rung").get<int>(), 1) << v.dump();
  const auto e0 = rung_evidence(v, 0);
  ASSERT_FALSE(e0.is_null()) << v.dump();
  EXPECT_NE(e0.at("summary").get<std::string>().find("sm_90a"), std::string::npos) << e0.dump();
  const auto e1 = rung_evidence(v, 1);
  ASSERT_FALSE(e1.is_null()) << v.dump();
  EXPECT_EQ(e1.at("status"), "pass");
  const auto& k = e1.at("data").at("kernels").at(0);
  // ptxas: 1..255 registers per thread; the softmax starter keeps rows in registers, no spills.
  EXPECT_GT(k.at("registers").get<int>(), 0) << k.dump();
  EXPECT_LE(k.at("registers").get<int>(), 255) << k.dump();
  EXPECT_EQ(k.at("spill_store_bytes").get<long>(), 0) << k.dump();
  EXPECT_EQ(k.at("threads").get<int>(), 32 * k.at("num_warps").get<int>()) << k.dump();
  const auto& occ = k.at("occupancy");
  EXPECT_GT(occ.at("occupancy").get<double>(), 0) << occ.dump();
  EXPECT_LE(occ.at("occupancy").get<double>(), 1) << occ.dump();
  EXPECT_GT(occ.at("blocks_per_sm").get<int>(), 0) << occ.dump();
  EXPECT_EQ(occ.at("max_warps").get<int>(), 64) << occ.dump();  // H200 (sm_90): 64 warps per SM
  // SASS mix: a row softmax loads and stores global memory and has no tensor-core MMA.
  ASSERT_TRUE(k.at("sass").is_object()) << k.dump();
  EXPECT_GT(k["sass"].at("ldg").get<long>(), 0) << k["sass"].dump();
  EXPECT_GT(k["sass"].at("stg").get<long>(), 0) << k["sass"].dump();
  // Rung 3 from the CUDA climber's model with the captured launch geometry.
  const auto e3 = rung_evidence(v, 3);
  ASSERT_FALSE(e3.is_null()) << v.dump();
  EXPECT_EQ(e3.at("status"), "pass") << e3.dump();
  EXPECT_GT(v.at("estimate").at("time_us").get<double>(), 0) << v.dump();
}

TEST(TritonRank, AKernelTritonCannotCompileForSm80IsRejectedWithTritonsMessage) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const auto dir = fs::temp_directory_path() / ("vb-triton-fp8-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(bad("softmax_fp8_sm89"), dir / "softmax_fp8_sm89.py",
                fs::copy_options::overwrite_existing);
  const auto r = vladbud({"rank", "softmax", "--backend", "triton", "--variants", dir.string(),
                          "--targets", "a100-sxm,rtx-4090", "--max-rung", "1", "--json"});
  fs::remove_all(dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("targets").size(), 2u);
  const auto& a100 = j["targets"][0]["ranking"][0];
  EXPECT_TRUE(a100.at("rejected").get<bool>()) << a100.dump();
  const std::string why = rung_evidence(a100, 0).at("summary");
  EXPECT_NE(why.find("sm_80"), std::string::npos) << why;
  EXPECT_NE(why.find("fp8e4nv not supported"), std::string::npos) << why;
  const auto& ada = j["targets"][1]["ranking"][0];  // sm_89 has the fp8 conversions
  EXPECT_FALSE(ada.at("rejected").get<bool>()) << ada.dump();
  EXPECT_EQ(ada.at("highest_rung"), 1) << ada.dump();
}

TEST(TritonRank, AnArchitectureTritonCannotCompileForIsUnavailableNamingItAndTheFix) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  // A future GPU: the H200's spec with an architecture Triton 3.6's ptxas does not know.
  TargetSpec future = *find_target(load_spec_db(), "h200");
  future.id = "future-sm130";
  future.isa = "sm_130a";
  const ladder::TargetClimber* c = ladder::climber_for(future, "triton");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->backend(), "triton");
  const ladder::Variant v{"starter", triton().starter_source("softmax"), "triton", ""};
  const auto r = c->climb(*find_kernel_type("softmax"), v, future, {});
  EXPECT_FALSE(r.rejected) << r.to_json().dump(1);  // not the source's fault
  EXPECT_EQ(r.highest_rung, -1) << r.to_json().dump(1);
  ASSERT_FALSE(r.evidence.empty());
  EXPECT_EQ(r.evidence[0].status, "unavailable");
  EXPECT_NE(r.evidence[0].summary.find("cannot compile for sm_130a"), std::string::npos)
      << r.evidence[0].summary;
  EXPECT_NE(r.evidence[0].summary.find("pip install -U triton"), std::string::npos)
      << r.evidence[0].summary;
  EXPECT_NE(r.stop_reason.find("sm_130a"), std::string::npos) << r.stop_reason;
}

// `vladbud run --remote amd` climbs the Triton starters on the spec DB's AMD GPUs (their only
// climber takes Triton sources); with --remote-backend triton the CPU family's targets get
// rejected rows that say why instead of climbing another backend's starters.
TEST(TritonRun, RemoteFamiliesClimbTheTritonStartersOnAmdGpusAndRejectThemOnCpus) {
  if (const std::string no = triton().device_unavailable(); !no.empty()) GTEST_SKIP() << no;
  const fs::path tsv = fs::temp_directory_path() / ("vb-triton-run-" + std::to_string(::getpid()) + ".tsv");
  const auto r = vladbud({"run", "softmax", "--no-cpu", "--remote", "amd,cpu", "--remote-backend",
                          "triton", "--json", "--results", tsv.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int amd = 0, cpu = 0;
  for (const auto& t : j.at("targets")) {
    ASSERT_EQ(t.at("kernels").size(), 1u) << t.dump();
    const auto& k = t["kernels"][0];
    EXPECT_EQ(k.at("kernel"), "softmax");
    // The backend of a target's row is its climber's: triton on the AMD GPUs, cpu on CPUs.
    if (t.at("backend") == "triton") {
      ++amd;
      EXPECT_FALSE(k.at("rejected").get<bool>()) << k.dump();
      EXPECT_GE(k.at("rung").get<int>(), 1) << k.dump();
      EXPECT_TRUE(k.at("estimate_us").is_number()) << k.dump();
    } else {
      ++cpu;
      EXPECT_TRUE(k.at("rejected").get<bool>()) << k.dump();
      EXPECT_NE(k.at("stop_reason").get<std::string>().find("a triton source cannot run on"),
                std::string::npos)
          << k.dump();
    }
  }
  EXPECT_GE(amd, 2) << r.out;  // mi300x and mi355x at least
  EXPECT_GE(cpu, 1) << r.out;
  EXPECT_NE(r.err.find("triton starters"), std::string::npos) << r.err;
  fs::remove(tsv);
}

TEST(TritonRun, AnUnknownRemoteFamilyOrBackendIsAUsageErrorNamingTheKnownOnes) {
  const auto fam = vladbud({"run", "softmax", "--no-cpu", "--remote", "amd,tpu9"});
  EXPECT_EQ(fam.exit_code, 2) << fam.out << fam.err;
  EXPECT_NE(fam.err.find("no remote targets of family 'tpu9'"), std::string::npos) << fam.err;
  EXPECT_NE(fam.err.find("amd"), std::string::npos) << fam.err;
  const auto be =
      vladbud({"run", "softmax", "--no-cpu", "--remote", "amd", "--remote-backend", "pallas"});
  EXPECT_EQ(be.exit_code, 2) << be.out << be.err;
  EXPECT_NE(be.err.find("unknown --remote-backend 'pallas'"), std::string::npos) << be.err;
  EXPECT_NE(be.err.find("triton"), std::string::npos) << be.err;
  // Checked before any local work: nothing was evaluated or detected first.
  for (const auto* r : {&fam, &be})
    EXPECT_EQ(r->err.find("local target"), std::string::npos) << r->err;
  // none with families, and a --remote-backend that would climb nothing, are refused too.
  const auto mixed = vladbud({"run", "softmax", "--no-cpu", "--remote", "none,amd"});
  EXPECT_EQ(mixed.exit_code, 2) << mixed.err;
  EXPECT_NE(mixed.err.find("--remote none cannot be combined"), std::string::npos) << mixed.err;
  const auto idle = vladbud({"run", "softmax", "--no-cpu", "--remote-backend", "triton"});
  EXPECT_EQ(idle.exit_code, 2) << idle.err;
  EXPECT_NE(idle.err.find("give --remote FAMILY"), std::string::npos) << idle.err;
}

TEST(TritonRank, AnUnknownTargetIsAUsageErrorListingTheKnownOnes) {
  const auto r = vladbud({"rank", "softmax", "--backend", "triton", "--targets", "h999"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("unknown target 'h999'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("h200"), std::string::npos) << r.err;
}

TEST(TritonRank, NvidiaTargetsHaveOneClimberPerBackend) {
  const TargetSpec h200 = *find_target(load_spec_db(), "h200");
  EXPECT_EQ(ladder::climber_for(h200, "cuda")->backend(), "cuda");
  EXPECT_EQ(ladder::climber_for(h200, "triton")->backend(), "triton");
  EXPECT_EQ(ladder::climber_for(h200)->backend(), "cuda");  // the target's default climber
  EXPECT_EQ(ladder::climber_extensions_for(h200), ".cu or .py");
}

}  // namespace
}  // namespace vb
