// `vladbud optimize --workers / --scheduler` (issue 21): the experiments fanned out over a local
// Dask cluster of CPU workers on loopback that the test starts through the CLI, with a
// deterministic stand-in measurer on the workers (python/tests/fixtures/standin_measure.py,
// VB_POOL_TASK_CMD): decisions identical to a one-worker run for a fixed seed; a worker killed
// mid-task loses no recorded result; a worker that dies every time is recorded as lost and the
// run goes on; bad flags and an unreachable scheduler are refused clearly. Skips (with the
// reason) where the project's Python has no Dask.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/cuda/gpu_ceilings.h"
#include "core/paths.h"
#include "core/process.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* kSource =
    "// @vb-param UNROLL 1 {1,2,4,8}  unroll factor\n#ifndef UNROLL\n#define UNROLL 1\n#endif\n"
    "// @vb-param MODE 0 {0,1,2}  0 honest, 1 broken, 2 cheating\n#ifndef MODE\n#define MODE 0\n"
    "#endif\nextern \"C\" int body() { return UNROLL + MODE; }\n";

std::string bin() { return vb::test::binary_dir() + "/vladbud"; }

// Why the pool cannot be tested here ("" when it can).
std::string no_dask() {
  static const std::string why = [] {
    const std::string py = project_python();
    if (!have_program(py)) return "no Python (" + py + "): run scripts/setup.sh";
    const ProcessResult r = run_process({py, "-c", "import distributed"}, std::chrono::seconds(60));
    return r.ok() ? std::string() : "Dask distributed is not installed in " + py + ": run scripts/setup.sh";
  }();
  return why;
}

fs::path folder(const std::string& name) {
  const fs::path ws = fs::temp_directory_path() / ("vb-pool-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(ws);
  const fs::path d = ws / "kernels" / "01_softmax";
  fs::create_directories(d);
  std::ofstream(d / "problem.json")
      << R"({"kernel":"softmax","dtype":"fp32","backend":"cpu","size":{"label":"t","dims":{"R":8,"C":64}},"time_share":0.5,"model":"pooltest"})";
  std::ofstream(d / "softmax.cpp") << kSource;
  return d;
}

ProcessResult optimize(const fs::path& d, std::vector<std::string> extra,
                       std::vector<std::string> env = {}) {
  std::vector<std::string> argv = {"env",
                                   "VB_POOL_TASK_CMD=" + project_python() + " " +
                                       (vladbud_home() / "python" / "tests" / "fixtures" /
                                        "standin_measure.py")
                                           .string()};
  for (auto& e : env) argv.push_back(e);
  for (const std::string& a : {bin(), std::string("optimize"), std::string("--kernel"), d.string(),
                              std::string("--budget"), std::string("5m"), std::string("--seed"),
                              std::string("5"), std::string("--no-git"), std::string("--no-pytorch"),
                              std::string("--json"), std::string("--connect-timeout"),
                              std::string("60")})
    argv.push_back(a);
  for (auto& e : extra) argv.push_back(e);
  return run_process(argv, std::chrono::minutes(5));
}

// (tag, description without the reproduce path) of every results.tsv row: the decisions.
std::vector<std::string> decisions(const fs::path& d) {
  std::vector<std::string> out;
  std::ifstream in(d.parent_path().parent_path() / "results.tsv");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> c;
    std::string f;
    std::istringstream ls(line);
    while (std::getline(ls, f, '\t')) c.push_back(f);
    if (c.size() < 10) {
      out.push_back("TORN: " + line);
      continue;
    }
    out.push_back(c[1] + " " + c[7] + " " + c[9].substr(0, c[9].find("; reproduce")));
  }
  return out;
}

json last_json(const std::string& out) {
  const auto p = out.find('{');
  return p == std::string::npos ? json() : json::parse(out.substr(p));
}

TEST(PoolCli, ABuildDoneAheadIsReusedByTheMeasuringTask) {
  // The H200 run of 2026-12-04: every quick task rebuilt its candidate (16 s each) because the
  // CUDA build key held the task's temporary folder. Here pool.py's own run_task runs a build
  // task, then a quick task of the same text (each in its own temporary folder, as on two
  // workers), both with the VB_CUDA_ARCH a local pool gives every worker: the quick task must
  // find the build in the cache. No GPU is needed: the build happens before the runner starts.
  if (find_nvcc().empty()) GTEST_SKIP() << "nvcc not installed (set VB_NVCC)";
  const std::string py = project_python();
  if (!have_program(py)) GTEST_SKIP() << "no Python (" << py << "): run scripts/setup.sh";
  const fs::path cache = fs::temp_directory_path() / ("vb-pool-ahead-" + std::to_string(::getpid()));
  fs::remove_all(cache);
  const std::string code = R"(
import json, sys
from vladbud import pool
src = open(sys.argv[1]).read()
problem = {"kernel": "softmax", "dtype": "fp32", "backend": "cuda", "time_share": 1.0,
           "size": {"label": "t", "dims": {"R": 64, "C": 256}}}
task = {"problem": problem, "ext": ".cu", "source": src, "vladbud": sys.argv[2]}
print(json.dumps([pool.run_task(dict(task, op=op), 600) for op in ("build", "quick")]))
)";
  const ProcessResult r = run_process(
      {"env", "PYTHONPATH=" + (vladbud_home() / "python").string(), "VB_CACHE_DIR=" + cache.string(),
       "VB_CUDA_ARCH=sm_90a", "VB=" + bin(), "VB_POOL_TASK_CMD=", py, "-c", code,
       (vladbud_home() / "kernels" / "cuda" / "softmax.cu").string(), bin()},
      std::chrono::minutes(5));
  fs::remove_all(cache);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out.substr(r.out.rfind('[')));
  ASSERT_EQ(j.size(), 2u) << r.out;
  ASSERT_TRUE(j[0].value("ok", false)) << j[0].dump();
  EXPECT_FALSE(j[0].value("cached", true)) << "a fresh cache: the build task compiles";
  ASSERT_TRUE(j[1].contains("build_cached")) << j[1].dump();
  EXPECT_TRUE(j[1]["build_cached"].get<bool>())
      << "the quick task rebuilt what the build task had built: " << j[1].dump();
  EXPECT_EQ(j[1].value("build_seconds", -1.0), 0.0) << j[1].dump();
}

TEST(PoolCli, BadFlagsAreRefusedBeforeAnythingStarts) {
  const fs::path d = folder("bad");
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {bin(), "optimize", "--kernel", d.string(), "--no-pytorch"});
    return run_process(args, std::chrono::minutes(1));
  };
  ProcessResult r = run({"--workers", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--workers must be at least 1"), std::string::npos) << r.err;
  r = run({"--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exclude each other"), std::string::npos) << r.err;
  r = run({"--scheduler", "localhost"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not a Dask scheduler address"), std::string::npos) << r.err;
  r = run({"--batch", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--batch needs --workers"), std::string::npos) << r.err;
  // Nothing was measured or written.
  EXPECT_FALSE(fs::exists(d.parent_path().parent_path() / "results.tsv"));
  fs::remove_all(d.parent_path().parent_path());
}

TEST(PoolCli, UnreachableSchedulerIsAClearError) {
  if (!no_dask().empty()) GTEST_SKIP() << no_dask();
  const fs::path d = folder("unreach");
  // Port 9 (discard) on loopback: nothing listens there.
  const ProcessResult r = run_process({bin(), "optimize", "--kernel", d.string(), "--no-pytorch",
                                       "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "3"},
                                      std::chrono::minutes(2));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot reach the Dask scheduler at tcp://127.0.0.1:9"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(d.parent_path().parent_path() / "results.tsv"));
  fs::remove_all(d.parent_path().parent_path());
}

TEST(PoolCli, DecisionsIdenticalToOneWorkerAndAKilledWorkerLosesNothing) {
  if (!no_dask().empty()) GTEST_SKIP() << no_dask();
  const fs::path one = folder("one"), three = folder("three"), killed = folder("killed");
  const ProcessResult r1 = optimize(one, {"--workers", "1", "--batch", "3", "--max-experiments", "7"});
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  const ProcessResult r3 = optimize(three, {"--workers", "3", "--batch", "3", "--max-experiments", "7"});
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  const auto d1 = decisions(one), d3 = decisions(three);
  ASSERT_EQ(d1.size(), 8u);  // the baseline + 7 experiments
  EXPECT_EQ(d1, d3);
  const json j3 = last_json(r3.out);
  EXPECT_EQ(j3["pool"]["workers"], 3);
  EXPECT_EQ(j3["lost"], 0);
  // The search found the real gain (UNROLL=4) and never kept a broken or cheating candidate.
  int keeps = 0;
  for (const auto& s : d1) {
    if (s.rfind("keep", 0) != 0) continue;
    ++keeps;
    EXPECT_EQ(s.find("MODE=1"), std::string::npos) << s;
    EXPECT_EQ(s.find("MODE=2"), std::string::npos) << s;
  }
  EXPECT_GE(keeps, 1);

  // A worker SIGKILLed in the middle of a quick screen (once): Dask reruns the task on another
  // worker; every experiment is recorded, with the same decisions, and the report says so.
  const fs::path mark = killed.parent_path().parent_path() / "killed.mark";
  const ProcessResult rk =
      optimize(killed, {"--workers", "2", "--batch", "3", "--max-experiments", "7"},
               {"VB_STANDIN_KILL_ON=UNROLL 4", "VB_STANDIN_KILL_ONCE=" + mark.string()});
  ASSERT_EQ(rk.exit_code, 0) << rk.err;
  EXPECT_TRUE(fs::exists(mark)) << "the stand-in never killed its worker";
  EXPECT_EQ(decisions(killed), d1);
  const json jk = last_json(rk.out);
  EXPECT_EQ(jk["lost"], 0);
  bool left = false;
  for (const auto& e : jk["pool"]["events"]) left = left || e.value("event", "") == "worker-left";
  EXPECT_TRUE(left) << jk.dump();
  // state.json agrees with results.tsv.
  const json st = json::parse(read_file(killed / "state.json"));
  EXPECT_EQ(st["experiments"], 7);
  for (const auto& d : {one, three, killed}) fs::remove_all(d.parent_path().parent_path());
}

TEST(PoolCli, AWorkerThatDiesEveryTimeIsRecordedLostAndTheRunGoesOn) {
  if (!no_dask().empty()) GTEST_SKIP() << no_dask();
  const fs::path d = folder("lost");
  const ProcessResult r =
      optimize(d, {"--workers", "2", "--batch", "3", "--max-experiments", "6"},
               {"VB_STANDIN_KILL_ON=UNROLL 4", "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = decisions(d);
  ASSERT_EQ(rows.size(), 7u);  // baseline + 6: nothing torn, nothing missing
  int lost = 0;
  for (const auto& s : rows) {
    EXPECT_EQ(s.rfind("TORN", 0), std::string::npos) << s;
    if (s.rfind("lost LOST", 0) == 0) {
      ++lost;
      EXPECT_NE(s.find("died"), std::string::npos) << s;
    }
  }
  EXPECT_GE(lost, 1);
  const json j = last_json(r.out);
  EXPECT_EQ(j["lost"], lost);
  // The lost candidate is not the best, and nothing about it was cached.
  EXPECT_EQ(read_file(d / "softmax.cpp").find("#define UNROLL 4"), std::string::npos);
  const std::string cache = read_file(d.parent_path().parent_path() / "cache" / "measurements.jsonl");
  EXPECT_EQ(cache.find("LOST"), std::string::npos);
  EXPECT_EQ(json::parse(read_file(d / "state.json"))["experiments"], 6);
  fs::remove_all(d.parent_path().parent_path());
}

TEST(PoolCli, TheOrchestratorOptimizesSeveralFoldersAtOnce) {
  if (!no_dask().empty()) GTEST_SKIP() << no_dask();
  const fs::path d1 = folder("orch");
  const fs::path ws = d1.parent_path().parent_path();
  fs::copy(d1, ws / "kernels" / "02_softmax");
  const ProcessResult r = run_process(
      {"env",
       "VB_POOL_TASK_CMD=" + project_python() + " " +
           (vladbud_home() / "python" / "tests" / "fixtures" / "standin_measure.py").string(),
       bin(), "optimize", "--workspace", ws.string(), "--budget", "3m", "--seed", "5", "--no-git",
       "--no-pytorch", "--json", "--workers", "2", "--batch", "3"},
      std::chrono::minutes(4));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json orch = json::parse(read_file(ws / "orchestration.json"));
  ASSERT_EQ(orch["kernels"].size(), 2u);
  for (const auto& k : orch["kernels"]) {
    EXPECT_EQ(k["status"], "exhausted") << k.dump();
    EXPECT_EQ(k["experiments"], 11);
    const std::string best = read_file(ws / "kernels" / k["dir"].get<std::string>() / "softmax.cpp");
    EXPECT_NE(best.find("#define UNROLL 4"), std::string::npos) << best;
  }
  // Both ran at once: their experiments interleave in results.tsv.
  const auto rows = decisions(d1);
  ASSERT_EQ(rows.size(), 24u);
  int switches = 0;
  for (std::size_t i = 1; i < rows.size(); ++i)
    switches += (rows[i].find("kdir=01") == std::string::npos) != (rows[i - 1].find("kdir=01") == std::string::npos);
  EXPECT_GT(switches, 1) << "the folders ran one after the other";
  EXPECT_EQ(last_json(r.out)["pool"]["workers"], 2) << r.out;
  fs::remove_all(ws);
}

}  // namespace
}  // namespace vb
