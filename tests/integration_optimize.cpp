// `vladbud optimize` / `status` / `report` as subprocesses on real CPU kernels: kill -9 in the
// middle of an experiment then resume (no lost or torn row, the best kernel intact and
// correct), broken and cheating agent candidates never kept, bad input refused, and the
// orchestrator over a hand-made workspace.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bridge/pipeline.h"
#include "core/paths.h"
#include "core/process.h"
#include "support.h"

extern char** environ;

namespace vb {
namespace {

namespace fs = std::filesystem;

std::string bin() { return vb::test::binary_dir() + "/vladbud"; }

ProcessResult vladbud(std::vector<std::string> args, const fs::path& cwd = {}) {
  args.insert(args.begin(), bin());
  return run_process(args, std::chrono::minutes(10), cwd);
}

fs::path temp_ws(const std::string& name) {
  auto d = fs::temp_directory_path() / ("vb-opt-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

fs::path kernel_folder(const fs::path& ws, const std::string& name, const std::string& type,
                       const std::string& dims, double share) {
  const fs::path d = ws / "kernels" / name;
  fs::create_directories(d);
  std::ofstream(d / "problem.json")
      << R"({"kernel":")" << type << R"(","dtype":"fp32","backend":"cpu","size":{"label":"t","dims":)"
      << dims << R"(},"time_share":)" << share << R"(,"model":"itest"})";
  fs::copy_file(test::starter(type), d / (type + ".cpp"));
  return d;
}

std::vector<std::string> lines_of(const fs::path& f) {
  std::vector<std::string> out;
  std::ifstream in(f);
  std::string l;
  while (std::getline(in, l)) out.push_back(l);
  return out;
}

int fields(const std::string& l) {
  int n = 1;
  for (char c : l) n += c == '\t';
  return n;
}

}  // namespace

TEST(OptimizeCli, KillNineMidExperimentThenResume) {
  const fs::path ws = temp_ws("kill");
  const fs::path d = kernel_folder(ws, "01_softmax", "softmax", R"({"R":256,"C":1024})", 0.3);
  const std::string dir = d.string();
  std::vector<std::string> args = {bin(), "optimize", "--kernel", dir, "--budget", "5m", "--no-git"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  // Wait for the baseline and two experiments, then kill at an arbitrary point of the next.
  const auto t0 = std::chrono::steady_clock::now();
  while (lines_of(ws / "results.tsv").size() < 4 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::minutes(4))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  const auto rows = lines_of(ws / "results.tsv");
  ASSERT_GE(rows.size(), 4u) << "the loop did not get through two experiments";
  const std::string raw = read_file(ws / "results.tsv");
  EXPECT_EQ(raw.back(), '\n') << "torn last row";
  for (const auto& r : rows) EXPECT_EQ(fields(r), 14) << r;
  EXPECT_EQ(read_file(d / "softmax.cpp"), read_file(d / "best" / "softmax.cpp"));
  // The best version is intact: all five stages pass.
  auto rep = vladbud({"optimize", "--kernel", dir, "--reproduce", (d / "softmax.cpp").string()});
  EXPECT_EQ(rep.exit_code, 0) << rep.out << rep.err;
  EXPECT_NE(rep.out.find("stage5_edge: PASS"), std::string::npos) << rep.out;
  // Resume: two more experiments, numbered after the last finished one.
  auto r = vladbud({"optimize", "--kernel", dir, "--budget", "5m", "--max-experiments", "2",
                    "--no-git", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["experiments_run"].get<int>(), 2);
  // Experiment rows only: a baseline timed in a slow moment may be re-measured, in a row of
  // its own ("baseline" tag, exp=0).
  auto experiments = [](const std::vector<std::string>& ls) {
    std::vector<std::string> e;
    for (std::size_t i = 1; i < ls.size(); ++i)
      if (ls[i].find("\tbaseline\t") == std::string::npos) e.push_back(ls[i]);
    return e;
  };
  const auto before = experiments(rows);
  const auto after = experiments(lines_of(ws / "results.tsv"));
  ASSERT_EQ(after.size(), before.size() + 2);
  const int last_before = static_cast<int>(before.size());
  EXPECT_NE(after.back().find("exp=" + std::to_string(last_before + 2) + " "), std::string::npos)
      << after.back();
  EXPECT_EQ(read_file(d / "softmax.cpp"), read_file(d / "best" / "softmax.cpp"));
  fs::remove_all(ws);
}

TEST(OptimizeCli, BrokenAndCheatingAgentCandidatesAreNeverKept) {
  const fs::path ws = temp_ws("bad");
  const fs::path d = kernel_folder(ws, "01_softmax", "softmax", R"({"R":64,"C":512})", 0.3);
  const std::string starter = read_file(d / "softmax.cpp");
  const std::string bad_dir = test::bad_kernel("x").parent_path().string();
  // The cheat is self-contained (bad_common.h inlined) so that it compiles anywhere.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"compile_error", "cp " + bad_dir + "/compile_error.cpp softmax.cpp"},
      {"caches_result", "{ cat " + bad_dir + "/bad_common.h; grep -v 'bad_common.h' " + bad_dir +
                            "/caches_result.cpp; } > softmax.cpp"},
      {"writes_nothing", "{ cat " + bad_dir + "/bad_common.h; grep -v 'bad_common.h' " + bad_dir +
                             "/writes_nothing.cpp; } > softmax.cpp"}};
  for (const auto& [name, cmd] : cases) {
    auto r = vladbud({"optimize", "--kernel", d.string(), "--proposer", "agent", "--agent-cmd", cmd,
                      "--max-experiments", "1", "--no-git", "--json"});
    ASSERT_EQ(r.exit_code, 0) << name << r.out << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["kept"].get<int>(), 0) << name;
    // Whether the figures were timed under contention (best.json's flags) is in the JSON.
    EXPECT_EQ(nlohmann::json::parse(r.out).value("best_contended", !best_figure_contended(d)),
              best_figure_contended(d))
        << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out).value("baseline_contended",
                                                 !baseline_figure_contended(d)),
              baseline_figure_contended(d))
        << r.out;
    const auto last = lines_of(ws / "results.tsv").back();
    EXPECT_NE(last.find("\trevert\t"), std::string::npos) << name << ": " << last;
    EXPECT_NE(last.find("\tFAIL\t"), std::string::npos) << name << ": " << last;
    EXPECT_EQ(read_file(d / "softmax.cpp"), starter) << name;
  }
  fs::remove_all(ws);
}

// Issue 16: on a shared 2-core machine the keep rule must keep a 2x faster candidate and not
// keep an equal one, with the other core busy. The planted kernels are the rmsnorm starter
// (one thread) run REPS times per call: the best and the "equal" candidate (a comment apart)
// run it twice, the fast candidate once.
TEST(OptimizeCli, UnderLoadA2xFasterCandidateIsKeptAndAnEqualOneIsNot) {
  const fs::path ws = temp_ws("load");
  const fs::path d = kernel_folder(ws, "01_rmsnorm", "rmsnorm", R"({"M":256,"N":4096})", 0.5);
  std::string text = read_file(d / "rmsnorm.cpp");
  const auto at = text.find("#define NUM_THREADS 0");
  ASSERT_NE(at, std::string::npos) << "the rmsnorm starter no longer defines NUM_THREADS 0";
  text.replace(at, 21, "#define NUM_THREADS 1");
  auto planted = [&](int reps, const std::string& note) {
    return "// planted (issue 16 test): the starter run " + std::to_string(reps) + " time(s) per call" +
           note + "\n#define vb_kernel_run vb_planted_once\n" + text +
           "\n#undef vb_kernel_run\n"
           "extern \"C\" int vb_kernel_run(const DLTensor* i, int ni, DLTensor* o, int no,\n"
           "                             const double* a, int na, void* s) {\n"
           "  int e = 0;\n"
           "  for (int r = 0; r < " + std::to_string(reps) + " && e == 0; ++r) {\n"
           "    e = vb_planted_once(i, ni, o, no, a, na, s);\n"
           "    asm volatile(\"\" ::: \"memory\");\n"
           "  }\n"
           "  return e;\n"
           "}\n";
  };
  std::ofstream(d / "rmsnorm.cpp") << planted(2, "");
  std::ofstream(ws / "equal.cpp") << planted(2, " (the same, another comment)");
  std::ofstream(ws / "fast.cpp") << planted(1, "");
  // The artificial load: a thread spinning on the other core for the whole comparison.
  std::atomic<bool> stop{false};
  std::thread load([&] {
    volatile unsigned long x = 0;
    while (!stop.load(std::memory_order_relaxed)) x = x + 1;
  });
  auto propose = [&](const fs::path& f) {
    return vladbud({"optimize", "--kernel", d.string(), "--proposer", "agent", "--agent-cmd",
                    "cp " + f.string() + " rmsnorm.cpp", "--max-experiments", "1", "--no-git",
                    "--json"});
  };
  const auto eq = propose(ws / "equal.cpp");
  const auto fast = propose(ws / "fast.cpp");
  stop = true;
  load.join();
  ASSERT_EQ(eq.exit_code, 0) << eq.out << eq.err;
  ASSERT_EQ(fast.exit_code, 0) << fast.out << fast.err;
  std::vector<std::string> rows;  // experiment rows (a re-measured baseline has a row too)
  for (const auto& l : lines_of(ws / "results.tsv"))
    if (l.find("\tbaseline\t") == std::string::npos) rows.push_back(l);
  ASSERT_GE(rows.size(), 3u);  // the header and the two experiments
  const std::string& eq_row = rows[rows.size() - 2];
  const std::string& fast_row = rows.back();
  EXPECT_EQ(nlohmann::json::parse(eq.out)["kept"].get<int>(), 0) << eq_row;
  EXPECT_NE(eq_row.find("\trevert\t"), std::string::npos) << eq_row;
  EXPECT_EQ(nlohmann::json::parse(fast.out)["kept"].get<int>(), 1) << fast_row;
  EXPECT_NE(fast_row.find("\tkeep\t"), std::string::npos) << fast_row;
  EXPECT_EQ(read_file(d / "best" / "rmsnorm.cpp"), read_file(ws / "fast.cpp"));
  fs::remove_all(ws);
}

TEST(OptimizeCli, BadInputIsRefusedClearly) {
  const fs::path ws = temp_ws("input");
  auto r = vladbud({"optimize", "--kernel", (ws / "missing").string(), "--budget", "1m"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  const fs::path d = kernel_folder(ws, "01_rmsnorm", "rmsnorm", R"({"M":8,"N":64})", 0.1);
  r = vladbud({"optimize", "--kernel", d.string(), "--budget", "10x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--budget"), std::string::npos) << r.err;
  r = vladbud({"optimize", "--kernel", d.string(), "--proposer", "agent"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--agent-cmd"), std::string::npos) << r.err;
  for (const char* bad : {"2", "61"}) {  // fewer than --rounds (3); over the cap
    r = vladbud({"optimize", "--kernel", d.string(), "--max-rounds", bad, "--budget", "1m"});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--max-rounds must be"), std::string::npos) << r.err;
  }
  r = vladbud({"optimize", "--kernel", d.string(), "--first-round", "3", "--budget", "1m"});
  EXPECT_EQ(r.exit_code, 2);  // only a compare task's
  EXPECT_NE(r.err.find("--first-round belongs"), std::string::npos) << r.err;
  fs::remove(d / "rmsnorm.cpp");
  r = vladbud({"optimize", "--kernel", d.string(), "--budget", "1m"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no editable source"), std::string::npos) << r.err;
  r = vladbud({"optimize", "--workspace", (ws / "nope").string(), "--budget", "1m"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("vladbud extract"), std::string::npos) << r.err;
  fs::remove_all(ws);
}

// A new user's `--budget 3` meant three seconds without a word: the meaning stays, with a
// warning first that says so and how to write minutes.
TEST(OptimizeCli, ABareBudgetBelowAMinuteIsWarnedAboutFirst) {
  const fs::path ws = temp_ws("budget-warning");
  auto r = vladbud({"optimize", "--workspace", (ws / "nope").string(), "--budget", "3"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("warning: --budget 3 is 3 seconds (a bare number is seconds); for "
                        "minutes write 3m\n",
                        0),
            0u)
      << r.err;
  for (const char* quiet : {"3m", "3s", "90"}) {
    r = vladbud({"optimize", "--workspace", (ws / "nope").string(), "--budget", quiet});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.find("warning: --budget"), std::string::npos) << quiet << ": " << r.err;
  }
  fs::remove_all(ws);
}

// `vladbud status` with nothing to show is an error (exit 2, documented in its --help) whose
// hint works for status: it named optimize's --kernel, which status does not take.
TEST(StatusCli, AWorkspaceWithoutKernelsIsAnErrorNamingAFixThatWorks) {
  const fs::path ws = temp_ws("status-empty");
  fs::create_directories(ws / ".bridge");  // an autotune run that stopped in its profile stage
  for (const bool as_json : {false, true}) {
    std::vector<std::string> args = {"status", "--workspace", ws.string()};
    if (as_json) args.push_back("--json");
    const auto r = vladbud(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "") << r.out;
    EXPECT_NE(r.err.find("vladbud status: " + (ws / "kernels").string() + " does not exist"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("`vladbud extract --workspace " + ws.string() + "`"), std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("--kernel"), std::string::npos) << "status has no --kernel: " << r.err;
  }
  auto r = vladbud({"status", "--workspace", (ws / "nope").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--kernel"), std::string::npos) << r.err;
  fs::create_directories(ws / "kernels");
  r = vladbud({"status", "--workspace", ws.string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("holds no kernel folder"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("vladbud extract"), std::string::npos) << r.err;
  r = vladbud({"status", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("2 nothing to show"), std::string::npos) << r.out;
  fs::remove_all(ws);
}

TEST(OptimizeCli, OrchestratorStatusAndReport) {
  const fs::path ws = temp_ws("orch");
  kernel_folder(ws, "01_softmax", "softmax", R"({"R":128,"C":1024})", 0.2);
  kernel_folder(ws, "02_rmsnorm", "rmsnorm", R"({"M":128,"N":1024})", 0.1);
  auto r = vladbud({"optimize", "--workspace", ws.string(), "--budget", "40s", "--plateau", "4",
                    "--no-git"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto o = nlohmann::json::parse(read_file(ws / "orchestration.json"));
  ASSERT_EQ(o["kernels"].size(), 2u);
  EXPECT_EQ(o["kernels"][0]["dir"], "01_softmax");
  EXPECT_GT(o["kernels"][0]["experiments"].get<int>(), 0) << o.dump(2);
  auto s = vladbud({"status", "--workspace", ws.string()});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("01_softmax"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("Amdahl"), std::string::npos) << s.out;
  auto rep = vladbud({"report", "--workspace", ws.string()});
  EXPECT_EQ(rep.exit_code, 0) << rep.err;
  const std::string md = read_file(ws / "report.md");
  EXPECT_NE(md.find("| 01_softmax |"), std::string::npos) << md;
  EXPECT_NE(md.find("Model-level speedup implied by the optimizer's keeps over the starter "
                    "kernels"),
            std::string::npos)
      << md;
  EXPECT_NE(s.out.find("model-level speedup implied by the optimizer's keeps"), std::string::npos)
      << s.out;
  EXPECT_NE(md.find("verify.json does not exist"), std::string::npos);
  fs::remove_all(ws);
}

}  // namespace vb
