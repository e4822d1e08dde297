// `vladbud autotune` through the binary: the whole pipeline (profile -> extract -> optimize ->
// verify -> rank -> report) on a tiny GPT-2 with a tiny budget, bad input refused before
// anything is written, and a failing stage named with its fix while the earlier run is kept.
// The pipeline tests need a Python with torch (skipped with the reason when there is none).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bridge/bridge.h"
#include "bridge/pipeline.h"
#include "core/paths.h"
#include "core/process.h"
#include "ladder/rank.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

ProcessResult vladbud(std::vector<std::string> args, const fs::path& cwd) {
  args.insert(args.begin(), vb::test::binary_dir() + "/vladbud");
  return run_process(args, std::chrono::minutes(10), cwd);
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("vb-autotune-it-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

bool have_torch() {
  static const bool ok = [] {
    try {
      return run_process({bridge_python(), "-c", "import torch"}, std::chrono::minutes(1)).ok();
    } catch (const std::exception&) {
      return false;
    }
  }();
  return ok;
}

std::string gpt2() { return (vladbud_home() / "models" / "gpt2.py").string(); }

// Folders next to `ws` named <ws>.prev-*.
int archived_runs(const fs::path& ws) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(ws.parent_path()))
    n += e.path().filename().string().rfind(ws.filename().string() + ".prev-", 0) == 0;
  return n;
}

TEST(AutotuneCli, WholePipelineOnATinyGpt2WritesEveryStagesOutput) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("pipeline");
  const fs::path ws = d / "ws";
  // 30 s; under load the budget may run out before the third folder's turn (it did in CI,
  // 2026-12-05): its starter and PyTorch are then measured after the budget (orchestrator.h),
  // so every matmul folder checked below has its speedup vs PyTorch.
  const auto r = vladbud({"autotune", "--model", gpt2(), "--class-name", "GPT2", "--model-args",
                          R"({"n_layer": 1, "n_embd": 64, "n_head": 4, "vocab_size": 512, "n_positions": 64})",
                          "--input-shape", "1,16", "--budget", "30s", "--top", "3", "--reps", "6",
                          "--no-git", "--workspace", ws.string()},
                         d);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Every stage announced in order, and the closing summary.
  std::size_t at = 0;
  for (const char* h : {"[1/6] profile", "[2/6] extract", "[3/6] optimize", "[4/6] verify",
                        "[5/6] rank", "[6/6] report", "== summary"}) {
    const auto p = r.out.find(h, at);
    ASSERT_NE(p, std::string::npos) << h << " missing or out of order:\n" << r.out;
    at = p;
  }
  EXPECT_TRUE(fs::exists(ws / "profile.json"));
  // The ranks follow measured time (noisy on a shared machine); the tiny GPT-2 has two typed
  // groups besides its matmuls (attention, layernorm), so the top 3 hold a tunable matmul.
  int folders = 0, matmuls = 0;
  for (const auto& e : fs::directory_iterator(ws / "kernels")) {
    ++folders;
    EXPECT_TRUE(fs::exists(e.path() / "problem.json")) << e.path();
    matmuls += e.path().filename().string().find("_matmul") != std::string::npos;
  }
  EXPECT_EQ(folders, 3);
  EXPECT_GE(matmuls, 1);
  ASSERT_TRUE(fs::exists(ws / "results.tsv"));
  EXPECT_NE(read_file(ws / "results.tsv").find("baseline"), std::string::npos);
  EXPECT_TRUE(fs::exists(ws / "orchestration.json"));
  const json v = json::parse(read_file(ws / "verify.json"));
  ASSERT_TRUE(v.contains("verdict"));
  EXPECT_EQ(v["verdict"], "PASS") << v.dump(1);
  EXPECT_GT(v["speedup"].get<double>(), 0);
  const json rk = json::parse(read_file(ws / "rank.json"));
  EXPECT_FALSE(rk["targets"].empty()) << rk.dump(1);
  EXPECT_EQ(rk["kernels"].size(), 3u);
  const std::string md = read_file(ws / "report.md");
  EXPECT_NE(md.find("## Kernels"), std::string::npos) << md;
  EXPECT_NE(md.find("## Amdahl breakdown"), std::string::npos) << md;
  // A tuned folder: PyTorch timed at its shape, the report's "speedup vs PyTorch" filled in.
  for (const auto& e : fs::directory_iterator(ws / "kernels")) {
    const std::string dir = e.path().filename().string();
    if (dir.find("_matmul") == std::string::npos) continue;
    const json p = json::parse(read_file(e.path() / "problem.json"));
    EXPECT_GT(p.value("pytorch_us", 0.0), 0) << p.dump(1);
    const auto row = md.find("| " + dir + " |");
    ASSERT_NE(row, std::string::npos) << md;
    std::vector<std::string> cells;
    std::string cell;
    for (char ch : md.substr(row + 1, md.find('\n', row) - row - 1)) {
      if (ch == '|') cells.push_back(cell), cell.clear();
      else cell += ch;
    }
    ASSERT_GE(cells.size(), 5u) << md;
    EXPECT_NE(cells[4].find('x'), std::string::npos) << "speedup vs PyTorch: '" << cells[4] << "'";
    EXPECT_EQ(cells[4].find("n/a"), std::string::npos) << md;
  }
  EXPECT_NE(md.find("## End-to-end verification"), std::string::npos) << md;
  EXPECT_NE(md.find("* verdict: " + v["verdict"].get<std::string>()), std::string::npos) << md;
  EXPECT_NE(md.find("end-to-end speedup"), std::string::npos) << md;
  EXPECT_NE(md.find("## Remote targets"), std::string::npos) << md;
  EXPECT_NE(r.out.find("report: " + (ws / "report.md").string()), std::string::npos) << r.out;
  // The summary's verify line: a verdict on seeds; with nothing handed over it says the model
  // checked is PyTorch's own (a bare PASS read as a check of our kernels; "nothing to check"
  // read as contradicting the verify stage's PASS).
  bool handed = false;
  for (const auto& c : v.value("candidates", json::array())) handed |= c.value("handed_over", false);
  EXPECT_NE(r.out.find("verify: PASS on "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("of PyTorch's own model (nothing handed over)") != std::string::npos, !handed)
      << r.out;
  // The optimize stage's Amdahl figure says what it is (it read as contradicting verify's
  // measured speedup vs PyTorch).
  EXPECT_NE(r.out.find("model-level speedup implied by the optimizer's keeps over the starter "
                       "kernels"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("expected end-to-end (Amdahl)"), std::string::npos) << r.out;
  // A folder whose best figure was timed under contention (best.json) has it marked "*" in the
  // summary and orchestration.json's best_contended; the footnote comes with any mark.
  const json orch = json::parse(read_file(ws / "orchestration.json"));
  const auto summary = r.out.find("== summary");
  bool any = false;
  for (const auto& k : orch["kernels"]) {
    const std::string dir = k.value("dir", "");
    const bool busy = best_figure_contended(ws / "kernels" / dir);
    any = any || busy || baseline_figure_contended(ws / "kernels" / dir);
    EXPECT_EQ(k.value("best_contended", !busy), busy) << k.dump(1);
    const auto row = r.out.find("\n" + dir + " ", summary);
    ASSERT_NE(row, std::string::npos) << r.out;
    std::vector<std::string> cells;
    std::istringstream line(r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1));
    for (std::string c; line >> c;) cells.push_back(c);
    ASSERT_GE(cells.size(), 4u) << r.out;
    EXPECT_EQ(cells[3].back() == '*', busy) << "best_us cell '" << cells[3] << "'\n" << r.out;
  }
  EXPECT_EQ(r.out.find("* timed while other work competed for the cores", summary) !=
                std::string::npos,
            any)
      << r.out;
  // CPU default (--compile auto): torch.compile not timed, and the output says how to time it.
  EXPECT_NE(r.out.find("torch.compile not timed"), std::string::npos) << r.out;
  // The load the run saw, whatever its length (a run under a minute reported 0 before).
  if (fs::exists("/proc/loadavg")) {
    EXPECT_NE(r.out.find("load average (1 min): "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" at the start, up to "), std::string::npos) << r.out;
  }
  fs::remove_all(d);
}

TEST(AutotuneCli, BadInputIsRefusedBeforeAnythingIsWrittenOrMoved) {
  const auto d = temp_dir("bad-input");
  const fs::path ws = d / "ws";
  fs::create_directories(ws / "kernels" / "01_matmul");
  write_file_atomic(ws / "profile.json", "sentinel\n");
  write_file_atomic(ws / "kernels" / "01_matmul" / "matmul.cpp", "keep me\n");
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"--model", (d / "nope.py").string(), "--class-name", "GPT2"}, "does not exist"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--input-shape", "1,x"}, "BATCH,SEQ"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--input-shape", "0,8"}, "BATCH,SEQ"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--budget", "10x"}, "--budget"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--budget", "0s"}, "--budget"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--dtype", "fp8"}, "--dtype"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--top", "0"}, "--top"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--dtype", "half16"}, "--dtype"},
      {{"--class-name", "Llama"}, "pass --model FILE.py"},
      {{"--class-name", "Gpt2"}, "case-sensitive"},
      {{"--model", d.string(), "--class-name", "GPT2"}, "is a folder"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--budget", std::string(400, '9')}, "a week"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--workers", "0"}, "--workers must be at least 1"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--workers", "2", "--scheduler",
        "tcp://127.0.0.1:8786"}, "exclude each other"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--scheduler", "h:1"}, "not a Dask scheduler address"},
      {{"--model", gpt2(), "--class-name", "GPT2", "--batch", "4"}, "--batch needs --workers"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"autotune", "--workspace", ws.string()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = vladbud(args, d);
    EXPECT_EQ(r.exit_code, 2) << c.says << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("vladbud autotune"), std::string::npos) << r.err;
  }
  EXPECT_EQ(read_file(ws / "profile.json"), "sentinel\n");
  EXPECT_EQ(read_file(ws / "kernels" / "01_matmul" / "matmul.cpp"), "keep me\n");
  EXPECT_EQ(archived_runs(ws), 0);
  // A folder that no VladBud run wrote is the user's: refused, never moved aside.
  const fs::path mine = d / "thesis";
  fs::create_directories(mine);
  write_file_atomic(mine / "chapter1.txt", "mine\n");
  auto r = vladbud({"autotune", "--workspace", mine.string(), "--model", gpt2(), "--class-name",
                    "GPT2"}, d);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("no autotune run wrote"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(mine / "chapter1.txt"), "mine\n");
  EXPECT_EQ(archived_runs(mine), 0);
  // results.tsv alone (bench and run append to one anywhere) does not make it a workspace.
  write_file_atomic(mine / "results.tsv", "experiment\ttag\n");
  r = vladbud({"autotune", "--workspace", mine.string(), "--model", gpt2(), "--class-name",
               "GPT2"}, d);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("no autotune run wrote"), std::string::npos) << r.err;
  EXPECT_EQ(archived_runs(mine), 0);
  // A workspace that cannot be created (under a file) is named with the fix.
  write_file_atomic(d / "afile", "x\n");
  r = vladbud({"autotune", "--workspace", (d / "afile" / "ws").string(), "--model", gpt2(),
               "--class-name", "GPT2"}, d);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("cannot be created"), std::string::npos) << r.err;
  fs::remove_all(d);
}

TEST(AutotuneCli, AModelWithAPythonErrorIsNamedAsTheModelsFault) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("syntax");
  write_file_atomic(d / "broken.py", "import torch.nn as nn\nclass Broken(nn.Module:\n    pass\n");
  const auto r = vladbud({"autotune", "--model", (d / "broken.py").string(), "--class-name",
                          "Broken", "--workspace", (d / "ws").string()},
                         d);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("SyntaxError"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fix: the model raised a Python error"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("scripts/setup.sh"), std::string::npos) << "not a torch problem:\n" << r.err;
  fs::remove_all(d);
}

const char* kIdentityModel = R"(import torch.nn as nn


class Identity(nn.Module):
    """Does no tensor work at all: the profiler records no operator."""

    def example_inputs(self, batch, seq, device="cpu"):
        import torch
        return torch.zeros(batch, seq)

    def forward(self, x):
        return x
)";

// Folders next to `ws` named <ws>.new-* (the profile stage's staging folders).
int staging_folders(const fs::path& ws) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(ws.parent_path()))
    n += e.path().filename().string().rfind(ws.filename().string() + ".new-", 0) == 0;
  return n;
}

TEST(AutotuneCli, AFailedProfileIsNamedWithItsFixAndLeavesTheEarlierRunInPlace) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("failed-stage");
  const fs::path ws = d / "ws";
  fs::create_directories(ws);
  write_file_atomic(ws / "profile.json", "earlier run\n");
  write_file_atomic(d / "identity.py", kIdentityModel);
  const auto r = vladbud({"autotune", "--model", (d / "identity.py").string(), "--class-name",
                          "Identity", "--input-shape", "1,4", "--workspace", ws.string()},
                         d);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("stage 1/6 (profile) failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("recorded no operator time"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("fix: "), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("[2/6] extract"), std::string::npos) << "a later stage ran:\n" << r.out;
  // The earlier run was neither moved nor overwritten: the profile ran beside it.
  EXPECT_EQ(archived_runs(ws), 0) << r.out << r.err;
  EXPECT_EQ(staging_folders(ws), 0) << r.out << r.err;
  EXPECT_EQ(read_file(ws / "profile.json"), "earlier run\n");
  EXPECT_NE(r.err.find("the earlier run in " + ws.string() + " is as it was"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("move it back"), std::string::npos) << r.err;
  fs::remove_all(d);
}

// A new user's wrong --class-name (Gpt2 for GPT2) moved the earlier run to ws.prev-<time>
// first, then failed, and suggested moving it back to ws, which the failed run had created:
// the `mv` would have nested the old run inside the new folder.
TEST(AutotuneCli, AWrongClassNameMovesNothingAndLosesNothing) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("wrong-class");
  const fs::path ws = d / "ws";
  fs::create_directories(ws / "kernels" / "01_matmul");
  write_file_atomic(ws / "profile.json", "earlier run\n");
  write_file_atomic(ws / "kernels" / "01_matmul" / "matmul.cpp", "keep me\n");
  for (int i = 0; i < 2; ++i) {  // twice: the second failure finds the same earlier run
    const auto r = vladbud({"autotune", "--model", gpt2(), "--class-name", "Gpt2",
                            "--workspace", ws.string()},
                           d);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("class 'Gpt2' not found"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("GPT2"), std::string::npos) << r.err;
    EXPECT_EQ(archived_runs(ws), 0) << r.out << r.err;
    EXPECT_EQ(staging_folders(ws), 0) << r.out << r.err;
    EXPECT_EQ(r.out.find("was moved to"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("is as it was (nothing was moved)"), std::string::npos) << r.err;
    EXPECT_EQ(read_file(ws / "profile.json"), "earlier run\n");
    EXPECT_EQ(read_file(ws / "kernels" / "01_matmul" / "matmul.cpp"), "keep me\n");
    EXPECT_FALSE(fs::exists(ws / ".bridge"));
  }
  // A staging folder a killed run left beside the workspace is cleared by the next run; a
  // live process's (this test's) is not.
  fs::create_directories(d / "ws.new-999999999" / ".bridge");
  fs::create_directories(d / ("ws.new-" + std::to_string(::getpid())) / ".bridge");
  const auto r = vladbud({"autotune", "--model", gpt2(), "--class-name", "Gpt2", "--workspace",
                          ws.string()},
                         d);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_FALSE(fs::exists(d / "ws.new-999999999"));
  EXPECT_TRUE(fs::exists(d / ("ws.new-" + std::to_string(::getpid()))));
  fs::remove_all(d);
}

// After the profile succeeded the earlier run is moved aside; a later stage's failure says
// where it is, and the commands it gives work as written (the swap puts it back in place,
// the failed run beside it, nothing nested).
TEST(AutotuneCli, ALaterStagesFailureGivesAWorkingWayBackToTheEarlierRun) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("later-stage");
  const fs::path ws = d / "ws";
  fs::create_directories(ws);
  write_file_atomic(ws / "profile.json", "earlier run\n");
  // Only an elementwise operator: the profile has time, but none in the nine kernel types.
  write_file_atomic(d / "relu.py", R"(import torch
import torch.nn as nn


class Relu(nn.Module):
    def example_inputs(self, batch, seq, device="cpu"):
        return torch.randn(batch, seq, 256)

    def forward(self, x):
        return torch.relu(x)
)");
  const auto r = vladbud({"autotune", "--model", (d / "relu.py").string(), "--class-name",
                          "Relu", "--input-shape", "1,4", "--workspace", ws.string()},
                         d);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  ASSERT_NE(r.err.find("stage 2/6 (extract) failed"), std::string::npos) << r.out << r.err;
  ASSERT_EQ(archived_runs(ws), 1) << r.out << r.err;
  EXPECT_EQ(staging_folders(ws), 0);
  EXPECT_NE(r.out.find("the earlier run in " + ws.string() + " was moved to " + ws.string() +
                       ".prev-"),
            std::string::npos)
      << r.out;
  EXPECT_NE(read_file(ws / "profile.json"), "earlier run\n");  // the new run's
  // The hint: `... status --workspace OLD` and `mv WS WS.failed-<time> && mv OLD WS`.
  const auto mv = r.err.find("`mv ");
  ASSERT_NE(mv, std::string::npos) << r.err;
  const std::string cmd = r.err.substr(mv + 1, r.err.find('`', mv + 1) - mv - 1);
  EXPECT_NE(r.err.find("status --workspace " + ws.string() + ".prev-"), std::string::npos) << r.err;
  const auto sh = run_process({"/bin/sh", "-c", cmd}, std::chrono::minutes(1), d);
  ASSERT_TRUE(sh.ok()) << cmd << ": " << sh.err;
  EXPECT_EQ(read_file(ws / "profile.json"), "earlier run\n") << cmd;
  EXPECT_EQ(archived_runs(ws), 0) << cmd;
  int failed = 0;
  for (const auto& e : fs::directory_iterator(d))
    if (e.path().filename().string().rfind("ws.failed-", 0) == 0) {
      ++failed;
      EXPECT_TRUE(fs::exists(e.path() / "profile.json")) << "the failed run, whole";
    }
  EXPECT_EQ(failed, 1) << cmd;
  fs::remove_all(d);
}

// A bare --budget below a minute is seconds, as --help says: kept, but said first.
TEST(AutotuneCli, ABareBudgetBelowAMinuteIsWarnedAboutFirst) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("budget-warning");
  write_file_atomic(d / "identity.py", kIdentityModel);
  const auto r = vladbud({"autotune", "--model", (d / "identity.py").string(), "--class-name",
                          "Identity", "--input-shape", "1,4", "--budget", "3", "--workspace",
                          (d / "ws").string()},
                         d);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // the profile stage fails: the model does nothing
  EXPECT_EQ(r.out.rfind("warning: --budget 3 is 3 seconds (a bare number is seconds); for "
                        "minutes write 3m\nvladbud autotune: ",
                        0),
            0u)
      << r.out;
  EXPECT_NE(r.out.find("optimizer budget 3s,"), std::string::npos) << r.out;
  fs::remove_all(d);
}

// The rank stage's climber entry point: each source at its own problem size, and a source of
// the wrong backend for a target refused with the reason instead of compiled.
TEST(AutotuneRank, ClimbKernelsUsesEachKernelsSizeAndRefusesAMismatchedBackend) {
  const KernelType* sm = find_kernel_type("softmax");
  ASSERT_NE(sm, nullptr);
  const ladder::Variant starter{"starter", vladbud_home() / "kernels" / "cpu" / "softmax.cpp", "cpu", ""};
  const Size small{"model-R64xC1024", {{"R", 64}, {"C", 1024}}, {}};
  const Size large{"model-R4096xC4096", {{"R", 4096}, {"C", 4096}}, {}};
  const std::vector<ladder::KernelToClimb> ks = {{sm, starter, small, DType::F32},
                                                 {sm, starter, large, DType::F32}};
  const std::vector<TargetSpec> targets = {ladder::resolve_target("neoverse-v2"),
                                           ladder::resolve_target("h100-sxm")};
  ladder::ClimbOptions o;
  o.max_rung = 3;
  o.skip_emulation = true;
  const auto r = ladder::climb_kernels(ks, targets, o);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].size(), 2u);
  for (const auto& c : r[0]) {
    EXPECT_FALSE(c.rejected) << c.to_json().dump(1);
    EXPECT_EQ(c.highest_rung, 3) << c.to_json().dump(1);
    ASSERT_TRUE(c.estimate.has_value());
  }
  // 256x the elements: the roofline estimate grows with the problem it was asked for.
  EXPECT_GT(r[0][1].estimate->time_us, 20 * r[0][0].estimate->time_us);
  for (const auto& c : r[1]) {
    EXPECT_TRUE(c.rejected);
    EXPECT_NE(c.stop_reason.find("needs a .cu or .py source"), std::string::npos) << c.stop_reason;
  }
  const std::string table = ladder::format_remote_table(targets, r, {"01_softmax", "02_softmax"});
  EXPECT_NE(table.find("01_softmax"), std::string::npos) << table;
  EXPECT_NE(table.find("02_softmax"), std::string::npos) << table;
}

}  // namespace
}  // namespace vb
