// The triton backend without a GPU (issue 17 step 2): the nine Triton starters PASS every stage
// in fp32 under Triton's interpreter, hosted by the Python runner behind the same evaluator
// (runner isolation, fp64 oracle, guards); deliberately bad Triton kernels fail their guards;
// bf16 cases the interpreter cannot compute are INCONCLUSIVE, never PASS or FAIL; and `vladbud
// rank --backend triton` reaches rung 1 on AMD targets with VGPR and occupancy evidence.
// Integration tests (each starter ~15-40 s of interpreter time on two cores, --quick sizes).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "core/process.h"
#include "eval/evaluator.h"
#include "kernels/kernel_type.h"
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

TEST(TritonRank, ATritonSourceForAnNvidiaTargetIsRefused) {
  const auto r = vladbud({"rank", "softmax", "--backend", "triton", "--targets", "h200"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("h200"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vb
