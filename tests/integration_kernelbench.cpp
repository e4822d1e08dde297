// `vladbud kernelbench` end to end on the project-written problems of tests/fixtures/kernelbench
// (KernelBench's file format): listing, clear errors for bad input, setup of a mapped problem,
// bench of VladBud's starter through its generated ModelNew, and a hack rejected by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "bridge/kernelbench.h"
#include "bridge/bridge.h"
#include "core/paths.h"
#include "core/process.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

ProcessResult vladbud(std::vector<std::string> args, const fs::path& cwd) {
  args.insert(args.begin(), vb::test::binary_dir() + "/vladbud");
  return run_process(args, std::chrono::minutes(10), cwd);
}

fs::path fixtures() { return test::repo_root() / "tests" / "fixtures" / "kernelbench"; }

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("vb-kb-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(KernelBench, ListsTheProblemsOfALevelSortedById) {
  const auto ps = kb_list(fixtures(), 1);
  ASSERT_GE(ps.size(), 11u);
  EXPECT_EQ(ps.front().id, 1);
  EXPECT_EQ(ps.front().label(), "level1/1_Small_square_matmul");
  for (std::size_t i = 1; i < ps.size(); ++i) EXPECT_LT(ps[i - 1].id, ps[i].id);
  const auto sel = kb_select(fixtures(), 1, "23, 47_Small_sum_over_dim");
  ASSERT_EQ(sel.size(), 2u);
  EXPECT_EQ(sel[1].id, 47);
}

TEST(KernelBench, BadInputGetsAnErrorNamingTheFix) {
  EXPECT_THROW(kb_list("", 1), BridgeUsageError);
  try {
    kb_list("", 0);
  } catch (const BridgeUsageError& e) {
    EXPECT_NE(std::string(e.what()).find("git clone https://github.com/ScalingIntelligence/KernelBench"),
              std::string::npos);
  }
  EXPECT_THROW(kb_list("/no/such/dir", 1), BridgeUsageError);
  EXPECT_THROW(kb_list(fixtures(), 7), BridgeUsageError);
  EXPECT_THROW(kb_select(fixtures(), 1, "999"), BridgeUsageError);
  const auto d = temp_dir("bad");
  auto r = vladbud({"kernelbench", "bench", "--level", "1", "--problem", "23"}, d);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kb-root"), std::string::npos) << r.err;
  // A malformed problem file: the Python side names what is wrong, exit 2.
  auto m = vladbud({"kernelbench", "setup", "--kb-root",
                    (test::repo_root() / "tests" / "fixtures" / "kernelbench_bad").string(), "--level", "1",
                    "--problem", "1"}, d);
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_NE(m.err.find("lacks get_inputs"), std::string::npos) << m.err;
  // bench before setup names the setup command.
  auto b = vladbud({"kernelbench", "bench", "--kb-root", fixtures().string(), "--level", "1",
                    "--problem", "23"}, d);
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("vladbud kernelbench setup"), std::string::npos) << b.err;
}

TEST(KernelBench, SetupThenBenchRunsVladBudsStarterUnderTheProtocol) {
  const auto d = temp_dir("setup");
  auto s = vladbud({"kernelbench", "setup", "--kb-root", fixtures().string(), "--level", "1",
                    "--problem", "47,19"}, d);
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  const fs::path f = d / "workspace" / "kernelbench" / "level1" / "47_Small_sum_over_dim";
  EXPECT_TRUE(fs::exists(f / "reduce.cpp"));
  EXPECT_TRUE(fs::exists(f / "model_new.py"));
  // The folder is a VladBud kernel folder: its problem.json reads as the reduce type at its shape.
  const auto mp = read_model_problem(f);
  ASSERT_TRUE(mp.has_value());
  EXPECT_EQ(mp->type->name(), "reduce");
  EXPECT_EQ(mp->size.dims.at("M"), 198);
  EXPECT_EQ(mp->size.dims.at("N"), 40);
  EXPECT_NE(s.out.find("not mapped"), std::string::npos) << s.out;  // 19: relu
  EXPECT_TRUE(fs::exists(d / "workspace" / "kernelbench" / "level1" / "19_Small_relu" / "program_kb.md"));

  auto b = vladbud({"kernelbench", "bench", "--kb-root", fixtures().string(), "--level", "1",
                    "--problem", "47", "--reps", "3"}, d);
  EXPECT_EQ(b.exit_code, 0) << b.out << b.err;
  for (const char* key : {"correctness: PASS", "kernel: reduce", "fp64_rel_err: ", "speedup: "})
    EXPECT_NE(b.out.find(key), std::string::npos) << key << "\n" << b.out;
  // The unmapped problem's candidate is the reference renamed: rejected as "no kernel".
  auto n = vladbud({"kernelbench", "bench", "--kb-root", fixtures().string(), "--level", "1",
                    "--problem", "19", "--reps", "-1"}, d);
  EXPECT_EQ(n.exit_code, 1) << n.out << n.err;
  EXPECT_NE(n.out.find("guard: no_kernel"), std::string::npos) << n.out;
}

TEST(KernelBench, Fp32MatmulIsMarkedTf32ButACpuKernelWithoutATf32PathStaysTrueFp32) {
  const auto d = temp_dir("tf32");
  auto s = vladbud({"kernelbench", "setup", "--kb-root", fixtures().string(), "--level", "1",
                    "--problem", "17"}, d);
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  const fs::path f = d / "workspace" / "kernelbench" / "level1" / "17_Small_matmul_transposed_B";
  const auto pj = nlohmann::json::parse(read_file(f / "problem.json"));
  EXPECT_EQ(pj.value("precision", ""), "tf32") << pj.dump();
  EXPECT_TRUE(read_model_problem(f).has_value());  // a KernelBench folder may carry the flag
  EXPECT_NE(s.out.find("B is stored [N,K]"), std::string::npos) << s.out;
  // The CPU starter has no TF32 path (no VB_PRECISION_TF32): built as is, reported as fp32.
  auto b = vladbud({"kernelbench", "bench", "--kb-root", fixtures().string(), "--level", "1",
                    "--problem", "17", "--reps", "-1", "--strict"}, d);
  EXPECT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("correctness: PASS"), std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("precision: TF32"), std::string::npos) << b.out;
}

TEST(KernelBench, ScoreReportsFastPAndTheGuardThatFired) {
  std::vector<nlohmann::json> rs = {
      {{"correct", true}, {"speedup", 1.2}}, {{"correct", true}, {"speedup", 0.9}},
      {{"correct", false}, {"speedup", 3.0}, {"guard", "constant_output"}}, {{"correct", true}, {"speedup", 2.5}}};
  const auto s = kb_fast_p(rs);
  EXPECT_DOUBLE_EQ(s["fast_p"]["0"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(s["fast_p"]["1.0"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["fast_p"]["2.0"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["fast_p"]["3.0"].get<double>(), 0.0);
  const auto d = temp_dir("score");
  auto r = vladbud({"kernelbench", "score", "--kb-root", fixtures().string(), "--level", "1",
                    "--problem", "19", "--setup", "--reps", "-1",
                    "--markdown", (d / "s.md").string()}, d);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fast_1.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no_kernel"), std::string::npos) << r.out;
  // A hack through the CLI: zeros pass KernelBench's tolerance here, VladBud names the guard.
  auto z = vladbud({"kernelbench", "bench", "--kb-root", fixtures().string(), "--level", "1",
                    "--problem", "23", "--reps", "-1", "--candidate",
                    (fixtures() / "candidates" / "softmax_zeros.py").string()}, d);
  EXPECT_EQ(z.exit_code, 1);
  EXPECT_NE(z.out.find("kernelbench_correct: yes"), std::string::npos) << z.out;
  EXPECT_NE(z.out.find("guard: constant_output"), std::string::npos) << z.out;
  EXPECT_TRUE(fs::exists(d / "s.json"));
}

}  // namespace
}  // namespace vb
