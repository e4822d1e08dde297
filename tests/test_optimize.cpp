// The optimizer (src/optimize): keep/revert on synthetic timings, @vb-param parsing and
// candidate writing, the pruning hook, problem.json, budgets, the orchestrator's choice, and the
// loop itself driven by a synthetic measurer (no compiler): broken and cheating candidates are
// never kept, the replay cache makes re-runs cheap, the agent proposer is checked by checksum.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <future>
#include <map>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "backends/backend.h"
#include "core/paths.h"
#include "eval/report.h"
#include "optimize/decision.h"
#include "optimize/loop.h"
#include "optimize/orchestrator.h"
#include "optimize/params.h"
#include "optimize/pool.h"
#include "optimize/problem_file.h"
#include "optimize/proposer.h"
#include "optimize/report_md.h"

namespace fs = std::filesystem;
using namespace vb;
using namespace vb::opt;

namespace {

fs::path temp_dir(const std::string& tag) {
  static std::mt19937_64 r(std::random_device{}());
  const fs::path d = fs::temp_directory_path() / fmt::format("vb_opt_{}_{:x}", tag, r());
  fs::create_directories(d);
  return d;
}

std::vector<TimingSample> rounds(std::mt19937_64& rng, double median, double noise, int n) {
  std::normal_distribution<double> g(0, noise);
  std::vector<TimingSample> out;
  for (int i = 0; i < n; ++i) out.push_back({median * (1 + g(rng)), noise, 20});
  return out;
}

}  // namespace

TEST(OptimizeDecision, NoiseAloneNeverCausesAKeep) {
  std::mt19937_64 rng(7);
  int keeps = 0;
  for (int t = 0; t < 2000; ++t) {
    const auto a = rounds(rng, 100, 0.03, 3), b = rounds(rng, 100, 0.03, 3);
    keeps += decide_keep(a, b).keep;
  }
  EXPECT_LE(keeps, 4) << "identical distributions kept " << keeps << " times in 2000";
}

TEST(OptimizeDecision, ARealGainIsKept) {
  std::mt19937_64 rng(8);
  int keeps = 0;
  for (int t = 0; t < 500; ++t)
    keeps += decide_keep(rounds(rng, 100, 0.02, 3), rounds(rng, 80, 0.02, 3)).keep;
  EXPECT_GE(keeps, 475);  // >= 95 % power for a 20 % gain at 2 % noise, 3 rounds
  const auto d = decide_keep({{100, 0.01, 20}, {101, 0.01, 20}, {99, 0.01, 20}},
                             {{90, 0.01, 20}, {91, 0.01, 20}, {89, 0.01, 20}});
  EXPECT_TRUE(d.keep) << d.reason;
  EXPECT_NEAR(d.gain, 0.1, 1e-9);
  EXPECT_NE(d.reason.find("keep"), std::string::npos);
}

TEST(OptimizeDecision, WithinRoundSpreadRaisesTheBar) {
  // 5 % faster with steady round medians but calls spread by 40 %: not significant.
  const std::vector<TimingSample> a(3, {100, 0.4, 5}), b(3, {95, 0.4, 5});
  EXPECT_FALSE(decide_keep(a, b).keep);
  const std::vector<TimingSample> c(3, {100, 0.005, 50}), d(3, {95, 0.005, 50});
  EXPECT_TRUE(decide_keep(c, d).keep);
  EXPECT_THROW(decide_keep({}, {}), std::invalid_argument);
}

TEST(OptimizeDecision, SignedRankPValuesAreExact) {
  // Every pair won: 2^-n. Ranks 1..8 with rank 1 lost (W+ = 35): the sign sets with W+ >= 35
  // are "none lost" and "only rank 1 lost", 2 of 256.
  EXPECT_DOUBLE_EQ(signed_rank_upper_p({1, 2, 3, 4, 5}, 15), 1.0 / 32);
  EXPECT_DOUBLE_EQ(signed_rank_upper_p({1, 2, 3, 4, 5, 6, 7, 8}, 35), 2.0 / 256);
  EXPECT_DOUBLE_EQ(signed_rank_upper_p({1, 2, 3}, 0), 1.0);
  EXPECT_DOUBLE_EQ(signed_rank_upper_p({1.5, 1.5}, 3), 0.25);  // tied ranks averaged
  EXPECT_DOUBLE_EQ(signed_rank_upper_p({}, 0), 1.0);
}

namespace {

// Round medians on a shared machine (issue 16): mostly a few percent of spread, but a round
// that another process preempts runs 20-100 % slower, and the within-round spread says 50 %
// over few calls (the LM-head experiment: 3 calls of ~30 ms). Each side and round independent:
// the worst case for the pairing.
std::vector<TimingSample> loaded_rounds(std::mt19937_64& rng, double median, int n) {
  std::normal_distribution<double> g(0, 0.04);
  std::uniform_real_distribution<double> u(0, 1), slow(0.2, 1.0);
  std::vector<TimingSample> out;
  for (int i = 0; i < n; ++i)
    out.push_back({median * (1 + std::fabs(g(rng)) + (u(rng) < 0.1 ? slow(rng) : 0.0)), 0.5, 3});
  return out;
}

// The loop's schedule (loop.cpp): `rounds`, then `rounds` more while decide_keep says more
// rounds could keep, up to 4 x rounds.
KeepDecision decide_with_more_rounds(std::mt19937_64& rng, double base, double cand, int rounds,
                                     int* used = nullptr) {
  std::vector<TimingSample> a = loaded_rounds(rng, base, rounds), b = loaded_rounds(rng, cand, rounds);
  KeepDecision d = decide_keep(a, b, 1.0, 4 * rounds);
  while (!d.keep && d.more_rounds) {
    const auto ma = loaded_rounds(rng, base, rounds), mb = loaded_rounds(rng, cand, rounds);
    a.insert(a.end(), ma.begin(), ma.end());
    b.insert(b.end(), mb.begin(), mb.end());
    d = decide_keep(a, b, 1.0, 4 * rounds, /*threshold_test=*/false);  // later looks: rank only
  }
  if (used) *used = static_cast<int>(a.size());
  return d;
}

}  // namespace

TEST(OptimizeDecision, OnALoadedMachineA2xFasterCandidateIsKeptAndAnEqualOneIsNot) {
  // The noise threshold alone rejects the 2x candidate here (issue 16: thresholds of 25-212 %
  // rejected a candidate that measured 15.5 vs 32.0 ms); the signed-rank test, given more
  // rounds, keeps it.
  std::mt19937_64 rng(16);
  int threshold_keeps = 0, keeps = 0, rounds_used = 0;
  for (int t = 0; t < 500; ++t) {
    threshold_keeps += decide_keep(loaded_rounds(rng, 32.0, 3), loaded_rounds(rng, 15.5, 3)).keep;
    int used = 0;
    const KeepDecision d = decide_with_more_rounds(rng, 32.0, 15.5, 3, &used);
    keeps += d.keep;
    rounds_used += used;
  }
  EXPECT_LE(threshold_keeps, 50) << "3 rounds and the noise threshold: the old rule";
  EXPECT_GE(keeps, 475) << "a 2x faster candidate kept in " << keeps << " of 500";
  int equal_keeps = 0, equal_rounds = 0;
  for (int t = 0; t < 10000; ++t) {
    int used = 0;
    equal_keeps += decide_with_more_rounds(rng, 32.0, 32.0, 3, &used).keep;
    equal_rounds += used;
  }
  // At most 0.5 % (the level is 0.2 % per look; a comparison looks at 9 and 12 rounds; 12 in
  // 10000 when written).
  EXPECT_LE(equal_keeps, 50) << "an equal candidate kept " << equal_keeps << " times in 10000";
  // The extra rounds are spent on the winners, not on every equal candidate.
  EXPECT_LT(equal_rounds / 10000.0, 6.0) << "mean rounds per equal candidate";
  std::printf("2x kept %d/500 (mean %.1f rounds), equal kept %d/10000 (mean %.2f rounds)\n",
              keeps, rounds_used / 500.0, equal_keeps, equal_rounds / 10000.0);
}

TEST(OptimizeDecision, MoreRoundsDoNotRaiseTheFalseKeepRateUnderIidNoise) {
  // A review's case: 2 % iid noise per round, the loop's schedule (3 rounds, then 3 more while
  // undecided, up to 12). Re-running the noise threshold at every look kept an equal candidate
  // 0.73 % of the time (0.40 % with no extra rounds); only the first look may use it now.
  std::mt19937_64 rng(23);
  int keeps = 0;
  for (int t = 0; t < 20000; ++t) {
    std::vector<TimingSample> a = rounds(rng, 100, 0.02, 3), b = rounds(rng, 100, 0.02, 3);
    KeepDecision d = decide_keep(a, b, 1.0, 12);
    while (!d.keep && d.more_rounds) {
      const auto ma = rounds(rng, 100, 0.02, 3), mb = rounds(rng, 100, 0.02, 3);
      a.insert(a.end(), ma.begin(), ma.end());
      b.insert(b.end(), mb.begin(), mb.end());
      d = decide_keep(a, b, 1.0, 12, false);
    }
    keeps += d.keep;
  }
  EXPECT_LE(keeps, 100) << "an equal candidate kept " << keeps << " times in 20000";
  std::printf("iid 2 %%: equal kept %d/20000\n", keeps);
}

TEST(OptimizeDecision, TheRankTestNeverKeepsACandidateWhoseMedianIsSlower) {
  // Found by a review: rounds drifting a lot between pairs; the candidate wins 11 of 13 pairs
  // (signed-rank p 0.0006) but its median over rounds is 3.8 % slower.
  const std::vector<double> b{78.5, 39.2, 102.0, 80.4, 189.2, 132.3, 124.0, 43.8, 62.3, 62.8, 61.3, 148.8, 184.9};
  const std::vector<double> c{53.9, 23.9, 105.2, 83.5, 129.6, 108.8, 90.3, 37.4, 34.9, 49.1, 43.4, 97.0, 114.3};
  std::vector<TimingSample> sb, sc;
  for (std::size_t i = 0; i < b.size(); ++i) sb.push_back({b[i], 0.5, 3}), sc.push_back({c[i], 0.5, 3});
  const KeepDecision d = decide_keep(sb, sc, 1.0, 13);
  EXPECT_LE(d.p_value, kRankAlpha);
  EXPECT_LT(d.gain, 0);
  EXPECT_FALSE(d.keep) << d.reason;
}

TEST(OptimizeDecision, MoreRoundsOnlyWhileTheRankTestCanStillKeep) {
  const std::vector<TimingSample> a(3, {100, 0.5, 3}), b(3, {50, 0.5, 3});
  KeepDecision d = decide_keep(a, b, 1.0, 12);
  EXPECT_FALSE(d.keep) << d.reason;  // 3 won pairs: p = 1/8
  EXPECT_TRUE(d.more_rounds) << d.reason;
  EXPECT_FALSE(decide_keep(a, b, 1.0, 3).more_rounds) << "max_rounds already in";
  EXPECT_FALSE(decide_keep(b, a, 1.0, 12).more_rounds) << "the candidate is slower";
  const std::vector<TimingSample> a9(9, {100, 0.5, 3}), b9(9, {50, 0.5, 3});
  d = decide_keep(a9, b9, 1.0, 12);
  EXPECT_TRUE(d.keep) << d.reason;
  EXPECT_EQ(d.test, "signed-rank");
  EXPECT_NEAR(d.p_value, 1.0 / 512, 1e-12);
  EXPECT_NE(d.reason.find("signed-rank"), std::string::npos) << d.reason;
  // Stricter: the level halves, 9 won pairs no longer suffice.
  EXPECT_FALSE(decide_keep(a9, b9, 2.0, 12).keep);
  // Lost pairs beyond 20 % of max_rounds: no more rounds can make it consistent.
  std::vector<TimingSample> c = a, e = b;
  for (int i = 0; i < 3; ++i) c.push_back({50, 0.5, 3}), e.push_back({100, 0.5, 3});
  c.push_back({100, 0.5, 3}), e.push_back({50, 0.5, 3});
  EXPECT_FALSE(decide_keep(c, e, 1.0, 12).more_rounds);
  // A latency that is not positive: no decision, said so.
  d = decide_keep({{0, 0, 1}}, {{1, 0, 1}});
  EXPECT_FALSE(d.keep);
  EXPECT_NE(d.reason.find("not positive"), std::string::npos) << d.reason;
}

TEST(OptimizeParams, ParseApplyAndCurrentConfig) {
  const std::string src =
      "// @vb-param BLOCK_THREADS 256 {64,128,256,512,1024}  threads per block\n"
      "#ifndef BLOCK_THREADS\n#define BLOCK_THREADS 256\n#endif\n"
      "// @vb-param ALGO 0 {0,1,2} 0 scalar, 1 omp simd, 2 blocked\n"
      "int f() { return BLOCK_THREADS; }\n";
  const auto ps = parse_params(src);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].name, "BLOCK_THREADS");
  EXPECT_EQ(ps[0].domain.size(), 5u);
  EXPECT_EQ(ps[0].description, "threads per block");
  EXPECT_EQ(ps[1].description, "0 scalar, 1 omp simd, 2 blocked");
  EXPECT_EQ(current_config(src, ps), (Config{{"ALGO", "0"}, {"BLOCK_THREADS", "256"}}));
  const std::string c = apply_config(src, {{"ALGO", "2"}, {"BLOCK_THREADS", "64"}});
  EXPECT_NE(c.find("#define BLOCK_THREADS 64\n"), std::string::npos);
  EXPECT_EQ(c.find("#define BLOCK_THREADS 256"), std::string::npos);
  EXPECT_EQ(c.rfind("#define ALGO 2\n", 0), 0u) << "a name without #define is prepended";
  EXPECT_EQ(current_config(c, ps), (Config{{"ALGO", "2"}, {"BLOCK_THREADS", "64"}}));
  EXPECT_THROW(parse_params("// @vb-param X 3 {1,2}\n"), std::invalid_argument);
  EXPECT_THROW(parse_params("// @vb-param X 1\n"), std::invalid_argument);
  EXPECT_THROW(parse_params("// @vb-param X 1 {1}\n// @vb-param X 1 {1}\n"), std::invalid_argument);
  EXPECT_THROW(parse_params("// @vb-param 9X 1 {1}\n"), std::invalid_argument);
}

TEST(OptimizeParams, StartersDeclareTunablesWithTheirDefaults) {
  for (const char* k : {"softmax", "rmsnorm"}) {
    const std::string src = read_file(vladbud_home() / "kernels" / "cpu" / (std::string(k) + ".cpp"));
    const auto ps = parse_params(src);
    ASSERT_GE(ps.size(), 3u) << k;
    for (const auto& p : ps)
      EXPECT_EQ(current_config(src, ps).at(p.name), p.default_value) << k << " " << p.name;
  }
}

// The triton backend's binding: a module-level `NAME = VALUE` under its `# @vb-param` line.
const ParamSyntax& python_syntax() { return require_backend("triton").param_syntax(); }

TEST(OptimizeParams, ATritonSourceBindsItsTunablesByModuleLevelAssignments) {
  const ParamSyntax& py = python_syntax();
  const std::string src =
      "import triton\n"
      "# @vb-param BLOCK 1024 {256,512,1024,2048}  columns per program\n"
      "BLOCK = 1024  # kept\n"
      "# @vb-param NUM_WARPS 4 {2,4,8}  warps\n"
      "NUM_WARPS=4\n"
      "def run(x):\n"
      "    BLOCK = 64  # a local: not the tunable\n"
      "    if BLOCK == 64:\n"
      "        return BLOCK\n";
  const auto ps = parse_params(src, py);
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].name, "BLOCK");
  EXPECT_EQ(ps[0].line, 2);
  EXPECT_EQ(ps[1].description, "warps");
  EXPECT_EQ(current_config(src, ps, py), (Config{{"BLOCK", "1024"}, {"NUM_WARPS", "4"}}));
  const std::string v = apply_config(src, {{"BLOCK", "256"}, {"NUM_WARPS", "8"}}, py);
  EXPECT_NE(v.find("\nBLOCK = 256  # kept\n"), std::string::npos) << v;
  EXPECT_NE(v.find("\nNUM_WARPS = 8\n"), std::string::npos) << v;
  EXPECT_NE(v.find("\n    BLOCK = 64  # a local"), std::string::npos) << "indented lines stay: " << v;
  EXPECT_EQ(v.rfind("import triton\n", 0), 0u) << "nothing is prepended: " << v;
  EXPECT_EQ(current_config(v, ps, py), (Config{{"BLOCK", "256"}, {"NUM_WARPS", "8"}}));
  // The C form is not a Python binding, and the Python form is not a C one.
  EXPECT_EQ(current_config("#define BLOCK 256\n", ps, py).at("BLOCK"), "1024");
  EXPECT_EQ(current_config(src, ps).at("BLOCK"), "1024");  // no #define: the declared default
}

TEST(OptimizeParams, AMalformedOrUnboundTunableInAPythonSourceIsAClearError) {
  const ParamSyntax& py = python_syntax();
  auto error = [&](const std::string& src) {
    try {
      parse_params(src, py);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // No domain, a default outside it, no module-level assignment (an indented one is a local).
  EXPECT_EQ(error("x = 1\n# @vb-param BLOCK 1024\nBLOCK = 1024\n"),
            "line 2: @vb-param BLOCK has no domain {V1,V2,...}");
  EXPECT_NE(error("# @vb-param BLOCK 1024 {256,512}\nBLOCK = 1024\n").find("not in its domain"),
            std::string::npos);
  const std::string unbound = error("# @vb-param BLOCK 256 {256,512}\ndef f():\n    BLOCK = 256\n");
  EXPECT_NE(unbound.find("line 1: @vb-param BLOCK has no binding to rewrite"), std::string::npos)
      << unbound;
  EXPECT_NE(unbound.find("module-level assignment 'NAME = DEFAULT'"), std::string::npos) << unbound;
  // A configuration naming a parameter the source does not bind is refused, never prepended.
  EXPECT_THROW(apply_config("BLOCK = 1\n", {{"OTHER", "2"}}, py), std::invalid_argument);
}

TEST(OptimizeParams, EveryTritonStarterDeclaresBlockSizesOrWarpsWithTheirDefaults) {
  const Backend& tr = require_backend("triton");
  for (const char* k : {"matmul", "softmax", "layernorm", "rmsnorm", "flash_attention",
                        "fused_mlp", "cross_entropy", "rotary_embedding", "reduce"}) {
    const std::string src = read_file(tr.starter_source(k));
    const auto ps = parse_params(src, tr.param_syntax());
    ASSERT_GE(ps.size(), 2u) << k;
    bool warps = false, block = false;
    for (const auto& p : ps) {
      EXPECT_EQ(current_config(src, ps, tr.param_syntax()).at(p.name), p.default_value)
          << k << " " << p.name;
      warps = warps || p.name.find("NUM_WARPS") != std::string::npos;
      block = block || p.name.find("BLOCK") != std::string::npos || p.name == "CHUNK" ||
              p.name == "ROWS";
    }
    EXPECT_TRUE(warps) << k << " declares no num_warps tunable";
    EXPECT_TRUE(block) << k << " declares no block-size tunable";
  }
}

TEST(OptimizeParams, BuiltinPrunerRespectsDomainsAndLimits) {
  const auto ps = parse_params(
      "// @vb-param NUM_THREADS 0 {0,1,2,64} threads\n// @vb-param VEC_BYTES 32 {16,32,64,128} v\n"
      "// @vb-param BLOCK_THREADS 256 {256,1024} b\n// @vb-param SMEM_BYTES 0 {0,65536} s\n");
  TargetLimits l;
  l.logical_cores = 2;
  l.vector_width_bytes = 32;
  const auto cpu = builtin_pruner(ps, l);
  Config ok{{"NUM_THREADS", "2"}, {"VEC_BYTES", "32"}};
  EXPECT_FALSE(cpu("", ok));
  auto r = cpu("", {{"NUM_THREADS", "64"}});
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("logical cores"), std::string::npos);
  r = cpu("", {{"VEC_BYTES", "64"}});
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("vector width"), std::string::npos);
  EXPECT_TRUE(cpu("", {{"VEC_BYTES", "48"}}));  // outside the domain
  // A GPU's limits (the cuda device's, with a shared-memory limit): the host's cores and SIMD
  // width do not apply there.
  TargetLimits g = find_backend("cuda")->device().limits();
  EXPECT_EQ(g.vector_width_bytes, 16);
  EXPECT_EQ(g.max_threads_per_block, 1024);
  EXPECT_EQ(g.logical_cores, 0);
  g.shared_memory_per_block_bytes = 49152;
  const auto cuda = builtin_pruner(ps, g);
  EXPECT_FALSE(cuda("", {{"NUM_THREADS", "64"}}));  // no core limit on a GPU
  EXPECT_TRUE(cuda("", {{"SMEM_BYTES", "65536"}}));
  EXPECT_FALSE(cuda("", {{"BLOCK_THREADS", "1024"}, {"SMEM_BYTES", "0"}}));
  EXPECT_TRUE(cuda("", {{"VEC_BYTES", "32"}}));  // wider than LDG.128
  // One block size per launch path (the CUDA softmax starter has three): each must fit alone;
  // the dimensions of one block multiply.
  const auto paths = parse_params(
      "// @vb-param WARP_BLOCK_THREADS 256 {256,2048} a\n// @vb-param BLOCK_THREADS 256 {256} b\n"
      "// @vb-param LONG_BLOCK_THREADS 1024 {1024} c\n// @vb-param BLOCK_X 32 {32,64} x\n"
      "// @vb-param BLOCK_Y 32 {16,32} y\n");
  const auto cuda2 = builtin_pruner(paths, g);
  EXPECT_FALSE(cuda2("", {{"WARP_BLOCK_THREADS", "256"}, {"BLOCK_THREADS", "256"},
                          {"LONG_BLOCK_THREADS", "1024"}, {"BLOCK_X", "32"}, {"BLOCK_Y", "32"}}));
  r = cuda2("", {{"WARP_BLOCK_THREADS", "2048"}});
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("WARP_BLOCK_THREADS=2048"), std::string::npos) << *r;
  r = cuda2("", {{"BLOCK_X", "64"}, {"BLOCK_Y", "32"}});
  ASSERT_TRUE(r);
  EXPECT_NE(r->find("2048 threads per block"), std::string::npos) << *r;
  // A hook (the ladder's screen) chained after the built-in one.
  const auto chained = chain_pruners(
      {cpu, [](const std::string& s, const Config&) -> std::optional<std::string> {
         if (s.find("forbidden") != std::string::npos) return "forbidden call";
         return std::nullopt;
       }});
  EXPECT_EQ(chained("forbidden()", ok).value_or(""), "forbidden call");
}

// A new user's `--budget 3` meant 3 seconds (0 experiments) without a word: a bare number
// below a minute is kept as seconds but warned about, with the spelling for minutes.
TEST(OptimizeInput, ABareBudgetBelowAMinuteIsWarnedAbout) {
  EXPECT_EQ(budget_warning("3"),
            "warning: --budget 3 is 3 seconds (a bare number is seconds); for minutes write 3m");
  EXPECT_EQ(budget_warning(" 45 "),
            "warning: --budget 45 is 45 seconds (a bare number is seconds); for minutes write 45m");
  EXPECT_EQ(budget_warning("1"),
            "warning: --budget 1 is 1 second (a bare number is seconds); for minutes write 1m");
  EXPECT_NE(budget_warning("0.5").find("0.5 seconds"), std::string::npos);
  for (const std::string& quiet : {"60", "90", "3s", "3m", "1h", "1h30m", "", "abc", "0", "-3"})
    EXPECT_EQ(budget_warning(quiet), "") << quiet;
}

TEST(OptimizeInput, BudgetsAndProblemFiles) {
  EXPECT_EQ(parse_budget("30m"), 1800);
  EXPECT_EQ(parse_budget("1h30m"), 5400);
  EXPECT_EQ(parse_budget("90s"), 90);
  EXPECT_EQ(parse_budget("45"), 45);
  EXPECT_EQ(parse_budget("168h"), 168 * 3600);
  const std::string huge(400, '9');
  for (const std::string& bad :
       {std::string(""), std::string("abc"), std::string("10x"), std::string("-5m"),
        std::string("0"), std::string("m30"), std::string("169h"), huge, huge + "h"})
    EXPECT_THROW(parse_budget(bad), std::invalid_argument) << bad;
  const fs::path d = temp_dir("problem");
  std::ofstream(d / "problem.json")
      << R"({"kernel":"rmsnorm","dtype":"bf16","backend":"cpu","extra":[1,2],)"
         R"("size":{"label":"m","dims":{"M":4,"N":8},"attrs":{"eps":1e-5}},"time_share":0.25})";
  const auto p = read_problem_file(d);
  EXPECT_EQ(p.kernel, "rmsnorm");
  EXPECT_EQ(p.dtype, DType::BF16);
  EXPECT_EQ(p.size.dims.at("N"), 8);
  EXPECT_EQ(p.size.attrs.at("eps"), 1e-5);
  EXPECT_EQ(p.time_share, 0.25);
  std::ofstream(d / "problem.json", std::ios::trunc)
      << R"({"kernel":"rmsnorm","dtype":"fp32","backend":"cpu","size":{"label":"m"},"time_share":0.1})";
  try {
    read_problem_file(d);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing field 'size.dims'"), std::string::npos) << e.what();
  }
  std::ofstream(d / "problem.json", std::ios::trunc)
      << R"({"kernel":"rmsnorm","dtype":"fp32","backend":"cpu","size":{"label":"m","dims":{"M":4}},"time_share":0.1})";
  EXPECT_THROW(read_problem_file(d), std::runtime_error);  // N missing for rmsnorm
  // The form `vladbud extract` writes: top-level dims/attrs/size_label, "share", model object.
  std::ofstream(d / "problem.json", std::ios::trunc)
      << R"({"kernel":"rmsnorm","dims":{"M":4,"N":8},"attrs":{"eps":1e-6},"dtype":"fp32",)"
         R"("size_label":"","share":0.4,"backend":"cpu","model":{"name":"gpt2"}})";
  const auto q = read_problem_file(d);
  EXPECT_EQ(q.size.dims.at("M"), 4);
  EXPECT_EQ(q.size.label, "M4-N8");
  EXPECT_EQ(q.time_share, 0.4);
  EXPECT_EQ(q.model, "gpt2");
  fs::remove_all(d);
  EXPECT_THROW(read_problem_file(d), std::runtime_error);
}

TEST(OptimizeOrchestrator, ChoosesByExpectedEndToEndGain) {
  std::vector<KernelEntry> e(3);
  e[0] = {"01_softmax", "softmax", 0.10};
  e[1] = {"02_matmul", "matmul", 0.60};
  e[2] = {"03_rmsnorm", "rmsnorm", 0.05};
  EXPECT_EQ(choose_next(e).value(), 1u);  // the largest share first
  // matmul at 85 % of a 90 % target has little headroom left; softmax has more to give.
  e[1].pct_peak = 85;
  e[1].baseline_us = 100;
  e[1].best_us = 50;
  e[1].speedup_x = 2;
  EXPECT_NEAR(expected_gain(e[1]), 0.3 * (1 - 85.0 / 90), 1e-12);
  EXPECT_EQ(choose_next(e).value(), 0u);
  e[0].status = "plateau";
  EXPECT_EQ(choose_next(e).value(), 2u);  // rmsnorm's 5 % beats matmul's 1.7 % of headroom
  e[2].budget_s = 10;
  e[2].spent_s = 10;
  EXPECT_EQ(choose_next(e).value(), 1u);
  e[1].status = "ceiling";
  EXPECT_FALSE(choose_next(e));
  EXPECT_NEAR(amdahl_speedup(e), 1.0 / (0.25 + 0.1 + 0.3 + 0.05), 1e-12);
  assign_budgets(e, 600);
  double sum = 0;
  for (const auto& x : e) sum += x.budget_s;
  EXPECT_NEAR(sum, 600, 1e-9);
  EXPECT_GT(e[1].budget_s, e[0].budget_s);
}

TEST(OptimizeOrchestrator, ALoopsEndSetsItsFoldersStatusByWhyItStopped) {
  OrchestratorOptions o;
  auto end = [&](double spent, const char* why, bool cut, double given) {
    KernelEntry e;
    e.dir = "01_matmul";
    e.budget_s = 60 + given;
    e.status = "active";
    KernelSummary s;
    s.seconds = spent;
    s.stop_reason = why;
    record_loop_end(e, s, o, cut, given);
    return e;
  };
  // Its own budget spent.
  EXPECT_EQ(end(60.5, "budget", false, 0).status, "budget");
  EXPECT_EQ(end(60.5, "budget", false, 0).reason, "spent its 60 s budget");
  // Stopped early because its last 20 s would not cover another experiment: finished for this
  // run, not picked again (a review found such a folder re-picked, its setup re-run, in a loop
  // that starved the others once unspent budget could be passed on).
  const KernelEntry early = end(40, "budget", false, 0);
  EXPECT_EQ(early.status, "budget");
  EXPECT_NE(early.reason.find("would not cover another experiment"), std::string::npos) << early.reason;
  EXPECT_FALSE(choose_next({early}));
  // Given 30 s by a folder that finished early while it ran: its turn comes again.
  const KernelEntry given = end(61, "budget", false, 30);
  EXPECT_EQ(given.status, "active");
  EXPECT_TRUE(choose_next({given}));
  // Cut by the run's end.
  const KernelEntry cut = end(20, "budget", true, 0);
  EXPECT_EQ(cut.status, "budget");
  EXPECT_NE(cut.reason.find("the run's budget ended during its turn"), std::string::npos) << cut.reason;
  EXPECT_EQ(end(20, "plateau", false, 0).status, "plateau");
  EXPECT_EQ(end(20, "exhausted", false, 0).status, "exhausted");
  EXPECT_EQ(end(20, "interrupted", false, 0).status, "interrupted");
  // The --max-experiments cap: finished for this run (it was left "active" and re-picked).
  const KernelEntry capped = end(20, "max_experiments", false, 0);
  EXPECT_EQ(capped.status, "budget");
  EXPECT_NE(capped.reason.find("--max-experiments"), std::string::npos) << capped.reason;
  EXPECT_FALSE(choose_next({capped}));
}

TEST(OptimizeOrchestrator, ReadsAHandMadeWorkspace) {
  const fs::path ws = temp_dir("ws");
  auto mk = [&](const std::string& name, const std::string& k, const std::string& dims, double sh) {
    fs::create_directories(ws / "kernels" / name);
    std::ofstream(ws / "kernels" / name / "problem.json")
        << fmt::format(R"({{"kernel":"{}","dtype":"fp32","backend":"cpu","size":{{"label":"x","dims":{}}},"time_share":{}}})",
                       k, dims, sh);
  };
  mk("01_softmax", "softmax", R"({"R":64,"C":512})", 0.05);
  mk("02_matmul", "matmul", R"({"M":64,"N":64,"K":64})", 0.55);
  mk("03_rmsnorm", "rmsnorm", R"({"M":64,"N":512})", 0.10);
  const auto entries = load_entries(ws);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[choose_next(entries).value()].dir, "02_matmul");
  EXPECT_NE(format_status(ws).find("02_matmul"), std::string::npos);
  const nlohmann::json none = status_json(ws);  // no run yet: no orchestration record
  EXPECT_TRUE(none["updated_at"].is_null());
  EXPECT_EQ(none["kernels"].size(), 3u);
  // After a run, the text and the JSON both give the run's record of each folder (a review
  // found --json printing "active" with zero budgets beside the text's "budget").
  std::ofstream(ws / "orchestration.json") << R"({"updated_at": "2026-12-07T05:00:00Z",
      "budget_s": 180, "spent_s": 190, "current": "",
      "kernels": [{"dir": "02_matmul", "status": "budget", "reason": "spent its 66 s budget",
                   "budget_s": 66, "spent_s": 70}]})";
  const nlohmann::json j = status_json(ws);
  EXPECT_EQ(j["updated_at"], "2026-12-07T05:00:00Z");
  EXPECT_EQ(j["budget_s"], 180.0);
  EXPECT_EQ(j["spent_s"], 190.0);
  bool seen = false;
  for (const auto& k : j["kernels"])
    if (k["dir"] == "02_matmul") {
      seen = true;
      EXPECT_EQ(k["status"], "budget");
      EXPECT_EQ(k["budget_s"], 66.0);
      EXPECT_EQ(k["spent_s"], 70.0);
    }
  EXPECT_TRUE(seen);
  EXPECT_NE(format_status(ws).find("budget (spent its 66 s budget)"), std::string::npos)
      << format_status(ws);
  // A damaged record never stops status: wrong-typed fields and non-objects fall back to the
  // folders' own state (a review found `[]`, nulls and strings throwing json type errors).
  for (const char* bad : {"[]", R"({"budget_s": null, "current": null, "updated_at": 5})",
                          R"({"kernels": [{"dir": "02_matmul", "budget_s": "66", "status": 3}]})",
                          R"({"kernels": {"dir": 1}})", "{not json"}) {
    std::ofstream(ws / "orchestration.json", std::ios::trunc) << bad;
    EXPECT_NO_THROW(status_json(ws)) << bad;
    EXPECT_NE(format_status(ws).find("02_matmul"), std::string::npos) << bad;
  }
  fs::remove_all(ws / "kernels");
  EXPECT_THROW(load_entries(ws), std::runtime_error);
  EXPECT_THROW(status_json(ws), std::runtime_error);
  fs::remove_all(ws);
}

namespace {

// A kernel folder whose source declares UNROLL {1,2,4,8} and MODE {0,1,2}; the synthetic
// measurer derives the latency from the #defines: UNROLL=4 is 20 % faster (a real gain),
// UNROLL=2 1 % (noise), MODE=1 fails to build, MODE=2 cheats: very fast and passes the screen,
// but fails the full stages (guard fresh_inputs).
const char* kSource =
    "// @vb-param UNROLL 1 {1,2,4,8}  unroll factor\n#ifndef UNROLL\n#define UNROLL 1\n#endif\n"
    "// @vb-param MODE 0 {0,1,2}  0 honest, 1 broken, 2 cheating\n#ifndef MODE\n#define MODE 0\n"
    "#endif\nint body() { return UNROLL + MODE; }\n";

class SyntheticMeasurer : public Measurer {
 public:
  /// `syntax`: how the sources bind their parameters (default C's #define).
  explicit SyntheticMeasurer(double noise, std::uint64_t seed = 3,
                             const ParamSyntax& syntax = preprocessor_param_syntax())
      : noise_(noise), rng_(seed), syntax_(&syntax) {}
  Measurement measure(const fs::path& f, EvalMode mode) override {
    ++calls;
    const std::string s = read_file(f);
    const Config c = current_config(s, parse_params(s, *syntax_), *syntax_);
    Measurement m;
    if (c.at("MODE") == "1") {
      m.verdict = "FAIL", m.guard = "build", m.failed_stage = "build",
      m.reason = "compilation failed: error: expected ';'";
      return m;
    }
    if (c.at("MODE") == "2" && mode == EvalMode::Full) {
      m.verdict = "FAIL", m.guard = "fresh_inputs", m.failed_stage = "smoke",
      m.reason = "stale output for fresh inputs";
      return m;
    }
    if (mode == EvalMode::Full) return m;
    const std::map<std::string, double> lat{{"1", 100}, {"2", 99}, {"4", 80}, {"8", 101}};
    double us = lat.at(c.at("UNROLL"));
    if (c.at("MODE") == "2") us = 10;
    std::normal_distribution<double> g(0, noise_);
    m.timed = true;
    m.median_us = us * (1 + g(rng_));
    m.noise = noise_;
    m.reps = 20;
    m.pct_peak = 40 * 100 / us;
    return m;
  }
  std::string target() const override { return "synthetic"; }
  int calls = 0;

 private:
  double noise_;
  std::mt19937_64 rng_;
  const ParamSyntax* syntax_;
};

fs::path make_kernel_folder(const fs::path& ws, const std::string& src = kSource) {
  const fs::path d = ws / "kernels" / "01_softmax";
  fs::create_directories(d);
  std::ofstream(d / "problem.json")
      << R"({"kernel":"softmax","dtype":"fp32","backend":"cpu","size":{"label":"t","dims":{"R":8,"C":64}},"time_share":0.3,"model":"unit"})";
  std::ofstream(d / "softmax.cpp") << src;
  return d;
}

std::vector<std::vector<std::string>> rows_of(const fs::path& tsv) {
  std::vector<std::vector<std::string>> out;
  std::ifstream in(tsv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> c;
    std::string f;
    std::istringstream ls(line);
    while (std::getline(ls, f, '\t')) c.push_back(f);
    out.push_back(c);
  }
  return out;
}

}  // namespace

namespace {

// SyntheticMeasurer's answers, but the first `contended` measurements are timed "while other
// tasks compete for the cores": 300x slower and flagged (issue 16: a starter recorded at
// 7990.5 us under load measures 26 us).
class ContendedMeasurer : public SyntheticMeasurer {
 public:
  explicit ContendedMeasurer(int contended) : SyntheticMeasurer(0.0), left_(contended) {}
  Measurement measure(const fs::path& f, EvalMode mode) override {
    Measurement m = SyntheticMeasurer::measure(f, mode);
    if (left_ > 0 && m.timed) {
      --left_;
      m.median_us *= 300;
      m.other_runnable = 2;
    }
    return m;
  }

 private:
  int left_;
};

}  // namespace

TEST(OptimizeLoop, ABaselineTimedUnderContentionIsRetriedFlaggedAndReplacedByARerun) {
  const fs::path ws = temp_dir("contended");
  // No candidate is faster (UNROLL=8 is 1 % slower), so nothing is ever kept.
  const std::string src =
      "// @vb-param UNROLL 1 {1,8}  unroll factor\n#ifndef UNROLL\n#define UNROLL 1\n#endif\n"
      "// @vb-param MODE 0 {0,1}  0 honest, 1 broken\n#ifndef MODE\n#define MODE 0\n#endif\n";
  const fs::path d = make_kernel_folder(ws, src);
  OptimizeOptions o;
  o.budget_s = 1e-3;  // setup, and at most an experiment that started before the budget ran out
  auto baseline_rows = [&] {
    std::vector<std::vector<std::string>> b;
    for (const auto& r : rows_of(ws / "results.tsv"))
      if (r[1] == "baseline") b.push_back(r);
    return b;
  };
  o.git = false;
  {
    // Contended once: the second try is quiet and becomes the baseline.
    ContendedMeasurer m(1);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_NEAR(s.baseline_us, 100, 1e-9);
    EXPECT_GE(m.calls, 2);
  }
  fs::remove_all(ws);
  const fs::path d2 = make_kernel_folder(ws, src);
  {
    // Contended at all three tries: stored, but flagged in best.json and in the row.
    ContendedMeasurer m(3);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d2, o);
    EXPECT_NEAR(s.baseline_us, 30000, 1e-6);
    EXPECT_GE(m.calls, 3);
    const auto meta = nlohmann::json::parse(read_file(d2 / "best" / "best.json"));
    EXPECT_TRUE(meta["baseline_contended"].get<bool>());
    const auto rows = baseline_rows();
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_NE(rows[0][9].find("suspect"), std::string::npos) << rows[0][9];
    // Every summary that shows the figure marks it (a new user read "1534.26 us" and its
    // ratio to PyTorch as measured): `status`/`optimize`'s table, its JSON (orchestration.json's
    // fields), report.md and progress.json (the plot's title).
    const std::string st = format_status(ws);
    EXPECT_NE(st.find("30000.00*"), std::string::npos) << st;
    EXPECT_NE(st.find("\n* timed while other work competed for the cores: not trustworthy; the "
                      "next run re-measures it\n"),
              std::string::npos)
        << st;
    const auto sj = status_json(ws);
    EXPECT_TRUE(sj["kernels"][0]["best_contended"].get<bool>()) << sj.dump(1);
    EXPECT_TRUE(sj["kernels"][0]["baseline_contended"].get<bool>()) << sj.dump(1);
    write_report(ws, "/nonexistent/python");
    const std::string md = read_file(ws / "report.md");
    EXPECT_NE(md.find("| 01_softmax | 30000.00* | 30000.00* |"), std::string::npos) << md;
    EXPECT_NE(md.find("\\* timed while other work competed for the cores"), std::string::npos) << md;
    EXPECT_TRUE(nlohmann::json::parse(read_file(ws / "progress.json"))["01_softmax"]
                    ["baseline_contended"].get<bool>());
  }
  {
    // The re-run times it quietly: that figure replaces it everywhere the summary, state,
    // best.json and report read.
    ContendedMeasurer m(0);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d2, o);
    EXPECT_NEAR(s.baseline_us, 100, 1e-9);
    const auto meta = nlohmann::json::parse(read_file(d2 / "best" / "best.json"));
    EXPECT_FALSE(meta["baseline_contended"].get<bool>());
    EXPECT_NEAR(meta["baseline_us"].get<double>(), 100, 1e-9);
    const auto rows = baseline_rows();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[1][1], "baseline");
    EXPECT_NE(rows[1][9].find("re-measured"), std::string::npos) << rows[1][9];
    write_report(ws);
    const std::string md = read_file(ws / "report.md");
    EXPECT_NE(md.find("| 100.00 | 100.00 |"), std::string::npos) << md;
    EXPECT_EQ(md.find("30000.00"), std::string::npos) << md;
    EXPECT_EQ(md.find("competed for the cores"), std::string::npos) << md;  // nothing marked
    EXPECT_EQ(format_status(ws).find('*'), std::string::npos) << format_status(ws);
    EXPECT_FALSE(status_json(ws)["kernels"][0]["best_contended"].get<bool>());
  }
  {
    // A quiet baseline is never replaced by a re-run.
    ContendedMeasurer m(5);
    o.measurer = &m;
    EXPECT_NEAR(optimize_kernel(d2, o).baseline_us, 100, 1e-9);
    EXPECT_EQ(baseline_rows().size(), 2u);
  }
  fs::remove_all(ws);
}

// A new user saw "02_matmul: the starting source was timed while 1 other task(s) competed for
// the cores: measuring it again" twice, word for word, and never the figure the tries ended
// with: each try now says which it is, and the kept figure is said after them.
TEST(OptimizeLoop, EachRetryOfAContendedBaselineSaysWhichTryAndTheFigureItEndedWith) {
  const fs::path ws = temp_dir("contended-lines");
  const std::string src =
      "// @vb-param UNROLL 1 {1,8}  unroll factor\n#ifndef UNROLL\n#define UNROLL 1\n#endif\n"
      "// @vb-param MODE 0 {0,1}  0 honest, 1 broken\n#ifndef MODE\n#define MODE 0\n#endif\n";
  OptimizeOptions o;
  o.budget_s = 1e-3;
  o.git = false;
  std::vector<std::string> lines;
  o.progress = [&](const std::string& l) { lines.push_back(l); };
  auto count = [&](const std::string& what) {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(what) != std::string::npos; });
  };
  auto all = [&] {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  };
  {
    // Contended at every try: two distinct retry lines, then the figure kept.
    const fs::path d = make_kernel_folder(ws, src);
    ContendedMeasurer m(3);
    o.measurer = &m;
    optimize_kernel(d, o);
    EXPECT_EQ(count("measuring it again (try 1 of 2)"), 1) << all();
    EXPECT_EQ(count("measuring it again (try 2 of 2)"), 1) << all();
    EXPECT_EQ(count("timed at 30000.00 us while 2 other task(s)"), 2) << all();
    EXPECT_EQ(count("01_softmax: starting source: 30000.00 us (2 other tasks competed in the "
                    "quietest of 3 timings)"),
              1)
        << all();
  }
  fs::remove_all(ws);
  lines.clear();
  {
    // Quiet at the second timing: one retry, and the quiet figure.
    const fs::path d = make_kernel_folder(ws, src);
    ContendedMeasurer m(1);
    o.measurer = &m;
    optimize_kernel(d, o);
    EXPECT_EQ(count("(try 1 of 2)"), 1) << all();
    EXPECT_EQ(count("(try 2 of 2)"), 0) << all();
    EXPECT_EQ(count("01_softmax: starting source: 100.00 us (0 other tasks competed in the "
                    "quietest of 2 timings)"),
              1)
        << all();
  }
  fs::remove_all(ws);
  lines.clear();
  {
    // Quiet at once: no retry, no summary line.
    const fs::path d = make_kernel_folder(ws, src);
    ContendedMeasurer m(0);
    o.measurer = &m;
    optimize_kernel(d, o);
    EXPECT_EQ(count("measuring it again"), 0) << all();
    EXPECT_EQ(count("starting source:"), 0) << all();
  }
  fs::remove_all(ws);
}

namespace {

// The thread-count trap: UNROLL=4 stands for "fewer threads". While other tasks compete for the
// cores (the first `contended` timings, flagged) the starter (UNROLL=1) takes 200 us and UNROLL=4
// 100 us; on the quiet machine both take 100 us, or UNROLL=4 50 us when `really_faster`.
class ContentionFavoursMeasurer : public Measurer {
 public:
  ContentionFavoursMeasurer(int contended, bool really_faster)
      : left_(contended), faster_(really_faster) {}
  std::string target() const override { return "synthetic"; }
  Measurement measure(const fs::path& f, EvalMode mode) override {
    Measurement m;  // PASS
    if (mode == EvalMode::Full) return m;
    m.timed = true;
    m.reps = 20;
    m.pct_peak = 40;
    const bool unroll4 = read_file(f).find("#define UNROLL 4") != std::string::npos;
    const bool busy = left_ > 0;
    if (busy) --left_;
    m.median_us = unroll4 ? (busy ? 100 : (faster_ ? 50 : 100)) : (busy ? 200 : 100);
    m.noise = 0.01;
    m.other_runnable = busy ? 1 : 0;
    return m;
  }

 private:
  int left_;
  bool faster_;
};

const char* kTwoWaySource =
    "// @vb-param UNROLL 1 {1,4}  unroll factor\n#ifndef UNROLL\n#define UNROLL 1\n#endif\n";

}  // namespace

namespace {

/// The best (UNROLL 1) measures 100 us, except that its first `slow` timings after the
/// candidate's screen take 400 us: the incumbent alone slowed in the interleaved rounds, with no
/// runnable-task count to show it. The candidate (UNROLL 4) measures `cand_us` throughout.
class SlowIncumbentMeasurer : public Measurer {
 public:
  SlowIncumbentMeasurer(int slow, double cand_us) : slow_(slow), cand_us_(cand_us) {}
  std::string target() const override { return "synthetic"; }
  Measurement measure(const fs::path& f, EvalMode mode) override {
    Measurement m;  // PASS
    if (mode == EvalMode::Full) return m;
    m.timed = true;
    m.reps = 20;
    m.pct_peak = 40;
    m.noise = 0.01;
    if (read_file(f).find("#define UNROLL 4") != std::string::npos) {
      seen_cand_ = true;
      m.median_us = cand_us_;
    } else if (seen_cand_ && slow_ > 0) {
      --slow_;
      m.median_us = 400;
    } else {
      m.median_us = 100;
    }
    return m;
  }

 private:
  int slow_;
  double cand_us_;
  bool seen_cand_ = false;
};

}  // namespace

TEST(OptimizeLoop, AKeepOverAnIncumbentTimedFarAboveItsRecordIsReDecidedOrNotMade) {
  // A new user's GPT-2 run kept a matmul at "4.47x": the best ran 6814 us in the rounds against
  // its recorded 1699 us, the candidate 1524 us.
  const fs::path ws = temp_dir("slow-incumbent");
  OptimizeOptions o;
  o.git = false;
  o.max_experiments = 1;
  o.budget_s = 60;
  o.rounds = 3;
  auto last_row = [&] {
    const auto rows = rows_of(ws / "results.tsv");
    for (auto r = rows.rbegin(); r != rows.rend(); ++r)
      if ((*r)[1] == "keep" || (*r)[1] == "revert") return *r;
    return std::vector<std::string>(10, "(no experiment row)");
  };
  {
    // The slowness passes: the fresh rounds decide, and the speedup is the real 2x, not 8x.
    const fs::path d = make_kernel_folder(ws, kTwoWaySource);
    SlowIncumbentMeasurer m(3, 50);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 1) << last_row()[9];
    EXPECT_NEAR(s.speedup(), 2.0, 0.05) << last_row()[9];
    EXPECT_NE(last_row()[9].find("re-decided on 3 fresh rounds"), std::string::npos) << last_row()[9];
    fs::remove_all(ws);
  }
  {
    // The best stays slow: nothing is kept, and the row says why.
    const fs::path d = make_kernel_folder(ws, kTwoWaySource);
    SlowIncumbentMeasurer m(1000, 95);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 0) << last_row()[9];
    EXPECT_EQ(last_row()[1], "revert");
    EXPECT_NE(last_row()[9].find("not decided: the best ran"), std::string::npos) << last_row()[9];
    EXPECT_NEAR(s.speedup(), 1.0, 1e-9);
    fs::remove_all(ws);
  }
  {
    // A plausible incumbent (no slowdown): decided on the first rounds as before.
    const fs::path d = make_kernel_folder(ws, kTwoWaySource);
    SlowIncumbentMeasurer m(0, 50);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 1) << last_row()[9];
    EXPECT_EQ(last_row()[9].find("fresh rounds"), std::string::npos) << last_row()[9];
    fs::remove_all(ws);
  }
}

TEST(OptimizeLoop, AKeepWonOnlyUnderContentionIsRevertedWhenQuietRoundsDoNotConfirmIt) {
  const fs::path ws = temp_dir("contention-keep");
  OptimizeOptions o;
  o.git = false;
  o.max_experiments = 1;
  o.budget_s = 60;
  o.rounds = 3;
  auto last_row = [&] {  // the experiment's row (a "baseline re-measured" row may follow it)
    const auto rows = rows_of(ws / "results.tsv");
    for (auto r = rows.rbegin(); r != rows.rend(); ++r)
      if ((*r)[1] == "keep" || (*r)[1] == "revert") return *r;
    return std::vector<std::string>(10, "(no experiment row)");
  };
  {
    // Contended through the setup and the first rounds, then quiet: the quiet rounds show no
    // gain, so nothing is kept.
    const fs::path d = make_kernel_folder(ws, kTwoWaySource);
    ContentionFavoursMeasurer m(12, false);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 0) << last_row()[9];
    EXPECT_EQ(last_row()[1], "revert");
    EXPECT_NE(last_row()[9].find("not confirmed without it"), std::string::npos) << last_row()[9];
    fs::remove_all(ws);
  }
  {
    // The same, but the candidate is really faster: the quiet rounds confirm the keep.
    const fs::path d = make_kernel_folder(ws, kTwoWaySource);
    ContentionFavoursMeasurer m(12, true);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 1) << last_row()[9];
    EXPECT_NE(last_row()[9].find("rounds without other tasks on the cores"), std::string::npos)
        << last_row()[9];
    const auto meta = nlohmann::json::parse(read_file(d / "best" / "best.json"));
    EXPECT_FALSE(meta["kept_contended"].get<bool>());
    fs::remove_all(ws);
  }
  {
    // Contended throughout (no quiet round comes): the keep stands, said and flagged.
    const fs::path d = make_kernel_folder(ws, kTwoWaySource);
    ContentionFavoursMeasurer m(1000, false);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 1) << last_row()[9];
    EXPECT_NE(last_row()[9].find("KEPT UNDER CONTENTION"), std::string::npos) << last_row()[9];
    const auto meta = nlohmann::json::parse(read_file(d / "best" / "best.json"));
    EXPECT_TRUE(meta["kept_contended"].get<bool>());
    {
      // The kept version's figure is marked in report.md (best and vs PyTorch cells) and in
      // status until a quiet run re-checks it.
      write_report(ws, "/nonexistent/python");
      const std::string md = read_file(ws / "report.md");
      const auto at = md.find("| 01_softmax | ");
      ASSERT_NE(at, std::string::npos) << md;
      const std::string row = md.substr(at, md.find('\n', at) - at);
      std::vector<std::string> cells;
      for (std::size_t b = 1, e; (e = row.find(" |", b)) != std::string::npos; b = e + 2)
        cells.push_back(row.substr(b + 1, e - b - 1));
      ASSERT_GE(cells.size(), 3u) << row;
      EXPECT_EQ(cells[2].back(), '*') << row;  // best (us)
      EXPECT_NE(md.find("\\* timed while other work competed"), std::string::npos) << md;
      EXPECT_TRUE(status_json(ws)["kernels"][0]["best_contended"].get<bool>());
    }
    // A quiet re-run checks the flagged keep against the starting source (a review found the
    // flag never re-checked and cleared by the next keep): no gain, so the starter is back.
    ContentionFavoursMeasurer quiet(0, false);
    o.measurer = &quiet;
    o.max_experiments = 0;
    o.budget_s = 1e-3;
    const KernelSummary s2 = optimize_kernel(d, o);
    const auto meta2 = nlohmann::json::parse(read_file(d / "best" / "best.json"));
    EXPECT_FALSE(meta2["kept_contended"].get<bool>());
    EXPECT_NEAR(meta2["speedup"].get<double>(), 1.0, 1e-9);
    EXPECT_EQ(read_file(d / "best" / "softmax.cpp"), kTwoWaySource);
    EXPECT_EQ(s2.kept, 0);
    EXPECT_EQ(meta2["experiment"].get<int>(), 0);
    const auto rows = rows_of(ws / "results.tsv");
    EXPECT_NE(rows.back()[9].find("contended keep reverted"), std::string::npos) << rows.back()[9];
    // report.md follows the re-check: the starter is the best again, 1.000x, nothing kept.
    write_report(ws);
    const std::string md = read_file(ws / "report.md");
    EXPECT_NE(md.find("| 01_softmax | 100.00 | 100.00 | 1.000x |"), std::string::npos) << md;
    fs::remove_all(ws);
  }
  {
    // A folder started over has two history/0000_* files: the re-check uses the one best.json
    // names (this start's), never the stale one (a review's finding).
    const fs::path d = make_kernel_folder(ws, kTwoWaySource);
    fs::create_directories(d / "history");
    std::ofstream(d / "history" / "0000_aaaaaaaaaaaaaaaa.cpp") << "// a stale starter\n";
    ContentionFavoursMeasurer busy(1000, false);
    o.measurer = &busy;
    o.max_experiments = 1;
    o.budget_s = 60;
    EXPECT_EQ(optimize_kernel(d, o).kept, 1);
    ContentionFavoursMeasurer quiet(0, false);
    o.measurer = &quiet;
    o.max_experiments = 0;
    o.budget_s = 1e-3;
    optimize_kernel(d, o);
    EXPECT_EQ(read_file(d / "best" / "softmax.cpp"), kTwoWaySource);
    EXPECT_EQ(read_file(d / "softmax.cpp"), kTwoWaySource);
    fs::remove_all(ws);
  }
  {
    // Flagged, then a quiet re-run on which the kept version really is 2x faster: confirmed,
    // the speedup re-anchored on the quiet rounds.
    const fs::path d = make_kernel_folder(ws, kTwoWaySource);
    ContentionFavoursMeasurer busy(1000, true);
    o.measurer = &busy;
    o.max_experiments = 1;
    o.budget_s = 60;
    EXPECT_EQ(optimize_kernel(d, o).kept, 1);
    ContentionFavoursMeasurer quiet(0, true);
    o.measurer = &quiet;
    o.max_experiments = 0;
    o.budget_s = 1e-3;
    optimize_kernel(d, o);
    const auto meta = nlohmann::json::parse(read_file(d / "best" / "best.json"));
    EXPECT_FALSE(meta["kept_contended"].get<bool>());
    EXPECT_NEAR(meta["speedup"].get<double>(), 2.0, 1e-9);
    EXPECT_NE(read_file(d / "best" / "softmax.cpp").find("#define UNROLL 4"), std::string::npos);
    const auto rows = rows_of(ws / "results.tsv");
    EXPECT_NE(rows.back()[9].find("contended keep confirmed"), std::string::npos) << rows.back()[9];
    write_report(ws);  // the quiet figures: starter 100 us, best 50 us, 2.000x
    const std::string md = read_file(ws / "report.md");
    EXPECT_NE(md.find("| 01_softmax | 100.00 | 50.00 | 2.000x |"), std::string::npos) << md;
    fs::remove_all(ws);
  }
}

namespace {

// SyntheticMeasurer's answers, with measurement calls [from, to) (1-based) timed in a "slow
// phase" of the machine: 5x slower, and nothing in the measurement says so (issue 16: on this
// shared VM the same reduce screen measured 1.9 ms and 15 ms minutes apart).
class SlowPhaseMeasurer : public SyntheticMeasurer {
 public:
  SlowPhaseMeasurer(int from, int to) : SyntheticMeasurer(0.0), from_(from), to_(to) {}
  Measurement measure(const fs::path& f, EvalMode mode) override {
    Measurement m = SyntheticMeasurer::measure(f, mode);
    if (calls >= from_ && calls < to_) m.median_us *= 5;
    return m;
  }

 private:
  int from_, to_;
};

}  // namespace

TEST(OptimizeLoop, AScreenLostToASlowPhaseOfTheMachineIsReScreened) {
  const fs::path ws = temp_dir("slowphase");
  auto folder = [&](const std::string& domain) {
    fs::remove_all(ws);
    return make_kernel_folder(
        ws, "// @vb-param UNROLL 1 " + domain + "  unroll factor\n#ifndef UNROLL\n#define UNROLL 1\n"
            "#endif\n// @vb-param MODE 0 {0}  honest\n#ifndef MODE\n#define MODE 0\n#endif\n");
  };
  OptimizeOptions o;
  o.budget_s = 60;
  o.max_experiments = 1;
  o.git = false;
  {
    // The 20 % faster UNROLL=4 is screened (call 2), the best re-timed (3) and the candidate
    // re-screened (4) while the machine runs 5x slow: judged against the fresh best, it goes
    // on to the full stages and the interleaved rounds, and is kept.
    const fs::path d = folder("{1,4}");
    SlowPhaseMeasurer m(2, 5);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 1);
    const auto rows = rows_of(ws / "results.tsv");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[1][1], "keep") << rows[1][9];
  }
  {
    // The 1 % slower UNROLL=8 screened in a slow phase that is over when the best is re-timed:
    // the machine is not slow, the loss stands (one extra measurement, no re-screen).
    const fs::path d = folder("{1,8}");
    SlowPhaseMeasurer m(2, 3);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 0);
    EXPECT_EQ(m.calls, 3);
    const auto rows = rows_of(ws / "results.tsv");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_NE(rows[1][9].find("not faster"), std::string::npos) << rows[1][9];
    EXPECT_EQ(rows[1][9].find("re-screened"), std::string::npos) << rows[1][9];
  }
  {
    // Slow through the re-screen too, and still slower than the fresh best: reverted, saying so.
    const fs::path d = folder("{1,8}");
    SlowPhaseMeasurer m(2, 5);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 0);
    const auto rows = rows_of(ws / "results.tsv");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_NE(rows[1][9].find("re-screened"), std::string::npos) << rows[1][9];
    EXPECT_NE(rows[1][9].find("not faster"), std::string::npos) << rows[1][9];
  }
  {
    // The 20 % faster UNROLL=4 screened 1.3x slow while other tasks competed for the cores
    // (said by the measurement): re-screened back to back with the best, and kept.
    const fs::path d = folder("{1,4}");
    class Loaded : public SyntheticMeasurer {
     public:
      Loaded() : SyntheticMeasurer(0.0) {}
      Measurement measure(const fs::path& f, EvalMode mode) override {
        Measurement m = SyntheticMeasurer::measure(f, mode);
        if (calls == 2) m.median_us *= 1.3, m.other_runnable = 1;
        return m;
      }
    } m;
    o.measurer = &m;
    EXPECT_EQ(optimize_kernel(d, o).kept, 1);
    const auto rows = rows_of(ws / "results.tsv");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_NE(rows[1][9].find("back to back with the best"), std::string::npos) << rows[1][9];
  }
  {
    // The starting source timed in a slow moment (5x) at setup: the first interleaved rounds
    // time it at its real 100 us, which replaces the implausible baseline (a "baseline" row).
    const fs::path d = folder("{1,8}");
    SlowPhaseMeasurer m(1, 2);
    o.measurer = &m;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.kept, 0);
    EXPECT_NEAR(s.baseline_us, 100, 1e-9);
    const auto rows = rows_of(ws / "results.tsv");
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[2][1], "baseline");
    EXPECT_NE(rows[2][9].find("implausible"), std::string::npos) << rows[2][9];
    const auto meta = nlohmann::json::parse(read_file(d / "best" / "best.json"));
    EXPECT_NEAR(meta["baseline_us"].get<double>(), 100, 1e-9);
  }
  {
    // A screen lost in a slow phase that was over when the best was re-timed is cached; the
    // same candidate proposed again later is re-screened rather than replayed, and kept.
    const fs::path d = folder("{1,4}");
    SlowPhaseMeasurer m(2, 3);
    o.measurer = &m;
    EXPECT_EQ(optimize_kernel(d, o).kept, 0);
    const std::string fast = apply_config(read_file(d / "softmax.cpp"), {{"UNROLL", "4"}});
    std::ofstream(ws / "fast.cpp") << fast;
    SlowPhaseMeasurer quiet(0, 0);
    OptimizeOptions a = o;
    a.measurer = &quiet;
    a.proposer = "agent";
    a.agent_cmd = "cp " + (ws / "fast.cpp").string() + " softmax.cpp";
    EXPECT_EQ(optimize_kernel(d, a).kept, 1);
    const auto rows = rows_of(ws / "results.tsv");
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[2][1], "keep") << rows[2][9];
    EXPECT_NE(rows[2][9].find("timed at another moment"), std::string::npos) << rows[2][9];
  }
  fs::remove_all(ws);
}

TEST(OptimizeLoop, KeepsRealGainsOnlyAndNeverBrokenOrCheatingCandidates) {
  const fs::path ws = temp_dir("loop");
  const fs::path d = make_kernel_folder(ws);
  SyntheticMeasurer m(0.02);
  OptimizeOptions o;
  o.budget_s = 60;
  o.max_experiments = 40;
  o.measurer = &m;
  o.git = false;
  o.seed = 5;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(s.stop_reason, "exhausted");  // 12 configurations, all tried
  EXPECT_EQ(s.experiments, 11);
  EXPECT_GE(s.kept, 1);
  const std::string best = read_file(d / "softmax.cpp");
  EXPECT_EQ(best, read_file(d / "best" / "softmax.cpp"));
  const Config c = current_config(best, parse_params(best));
  EXPECT_EQ(c.at("UNROLL"), "4");
  EXPECT_EQ(c.at("MODE"), "0");
  const auto rows = rows_of(ws / "results.tsv");
  ASSERT_EQ(rows.size(), 12u);  // baseline + 11 experiments
  int keeps = 0;
  for (const auto& r : rows) {
    ASSERT_EQ(r.size(), 14u);
    EXPECT_NE(r[9].find("reproduce: vladbud optimize --kernel"), std::string::npos);
    if (r[1] == "keep") {
      ++keeps;
      EXPECT_EQ(r[7], "PASS");
      EXPECT_EQ(r[9].find("MODE=1"), std::string::npos) << r[9];
      EXPECT_EQ(r[9].find("MODE=2"), std::string::npos) << r[9];
    }
    if (r[9].find("MODE=2") != std::string::npos && r[9].find("UNROLL=1 ") != std::string::npos) {
      EXPECT_NE(r[9].find("failed the full stages"), std::string::npos) << r[9];
    }
  }
  EXPECT_EQ(keeps, s.kept);
  // History holds the starter and every kept version; state.json is resumable.
  int hist = 0;
  for (const auto& e : fs::directory_iterator(d / "history")) hist += e.is_regular_file();
  EXPECT_EQ(hist, s.kept + 1);
  EXPECT_EQ(read_kernel_state(d).value("experiments", 0), 11);

  // A re-run in a fresh copy of the folder replays the cache: almost nothing is measured.
  const int first_calls = m.calls;
  fs::remove_all(d);
  make_kernel_folder(ws);
  fs::remove(ws / "results.tsv");
  SyntheticMeasurer m2(0.02);
  o.measurer = &m2;
  const KernelSummary s2 = optimize_kernel(d, o);
  EXPECT_EQ(s2.experiments, 11);
  EXPECT_LT(m2.calls * 3, first_calls) << m2.calls << " vs " << first_calls;
  EXPECT_NE(read_file(ws / "results.tsv").find("[replayed from the cache]"), std::string::npos);

  // The report reads it all.
  const auto rep = write_report(ws, "/nonexistent/python");
  const std::string md = read_file(rep.report_md);
  EXPECT_NE(md.find("| 01_softmax |"), std::string::npos);
  EXPECT_NE(md.find("Amdahl"), std::string::npos);
  // The Amdahl figure says what it is: not an end-to-end comparison with PyTorch (a new user
  // read "Expected end-to-end speedup: 1.000x" as contradicting verify's measured 1.154x).
  EXPECT_EQ(md.find("Expected end-to-end"), std::string::npos) << md;
  EXPECT_NE(md.find("Model-level speedup implied by the optimizer's keeps over the starter "
                    "kernels: **"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("It is not a comparison with PyTorch: the end-to-end speedup measured "
                    "against PyTorch is verify's"),
            std::string::npos)
      << md;
  const std::string st = format_status(ws);
  EXPECT_NE(st.find(amdahl_statement(amdahl_speedup(load_entries(ws)))), std::string::npos) << st;
  EXPECT_EQ(st.find("end-to-end (Amdahl"), std::string::npos) << st;
  EXPECT_FALSE(rep.png_written);
  fs::remove_all(ws);
}

namespace {

// SyntheticMeasurer's answers, with quick screens at a reduced size (screen_label()): 10x
// faster there, labelled so; every other mode at the problem's size "t".
class ReducedScreenMeasurer : public SyntheticMeasurer {
 public:
  ReducedScreenMeasurer() : SyntheticMeasurer(0.0) {}
  Measurement measure(const fs::path& f, EvalMode mode) override {
    Measurement m = SyntheticMeasurer::measure(f, mode);
    if (m.timed) {
      modes.push_back(mode);
      m.size_label = mode == EvalMode::Quick ? "t-screen-R4" : "t";
      if (mode == EvalMode::Quick) m.median_us /= 10;
    }
    return m;
  }
  std::string screen_label() const override { return "t-screen-R4"; }
  std::vector<EvalMode> modes;
};

}  // namespace

TEST(OptimizeLoop, AReducedScreenFiltersButTheBaselineAndKeepsAreAtTheProblemsSize) {
  // Issue 16: large problems are screened at a reduced size. The screen only filters: the
  // baseline, the keeps, the reported latencies and the PyTorch ratios are at the problem's
  // size, and a screen's figure never stands for the problem's.
  const fs::path ws = temp_dir("reduced");
  const fs::path d = make_kernel_folder(ws);
  {
    nlohmann::json pj = nlohmann::json::parse(read_file(d / "problem.json"));
    pj["pytorch_us"] = 200.0;
    std::ofstream(d / "problem.json") << pj.dump();
  }
  ReducedScreenMeasurer m;
  OptimizeOptions o;
  o.budget_s = 60;
  o.max_experiments = 40;
  o.measurer = &m;
  o.git = false;
  o.seed = 5;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(s.kept, 1);
  EXPECT_EQ(current_config(read_file(d / "best" / "softmax.cpp"),
                           parse_params(read_file(d / "best" / "softmax.cpp")))
                .at("UNROLL"),
            "4");
  // The first two timings: the starter's screen, then its timing at the problem's size.
  ASSERT_GE(m.modes.size(), 2u);
  EXPECT_EQ(m.modes[0], EvalMode::Quick);
  EXPECT_EQ(m.modes[1], EvalMode::TimingOnly);
  EXPECT_NEAR(s.baseline_us, 100, 1e-9);
  EXPECT_NEAR(s.best_us, 80, 1e-9);
  const auto rows = rows_of(ws / "results.tsv");
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0][1], "baseline");
  EXPECT_NEAR(std::stod(rows[0][4]), 100, 1e-6);
  EXPECT_EQ(rows[0][6], "2.000");  // PyTorch 200 us / 100 us
  EXPECT_NE(rows[0][9].find("quick screens time t-screen-R4: 10.00 us"), std::string::npos)
      << rows[0][9];
  int screened_out = 0;
  for (const auto& r : rows) {
    if (r[9].find("quick screen: ") != std::string::npos) {  // decided by the screen
      ++screened_out;
      EXPECT_NE(r[9].find("(screened at t-screen-R4)"), std::string::npos) << r[9];
      EXPECT_EQ(r[6], "n/a") << "a screen's figure is not a ratio to PyTorch at the problem";
    }
    if (r[1] == "keep") {
      EXPECT_NEAR(std::stod(r[4]), 80, 1e-6) << r[9];
      EXPECT_EQ(r[6], "2.500");
    }
  }
  EXPECT_GE(screened_out, 1);
  fs::remove_all(ws);
}

TEST(OptimizeLoop, SameSeedSameSequence) {
  auto run = [](std::uint64_t seed) {
    const fs::path ws = temp_dir("seed");
    const fs::path d = make_kernel_folder(ws);
    SyntheticMeasurer m(0.0);
    OptimizeOptions o;
    o.max_experiments = 6;
    o.measurer = &m;
    o.git = false;
    o.seed = seed;
    optimize_kernel(d, o);
    std::vector<std::string> descs;
    for (const auto& r : rows_of(ws / "results.tsv")) descs.push_back(r[9].substr(0, r[9].find(':')));
    fs::remove_all(ws);
    return descs;
  };
  EXPECT_EQ(run(11), run(11));
}

TEST(OptimizeLoop, ResumesWhereItStoppedAndRestoresTheBest) {
  const fs::path ws = temp_dir("resume");
  const fs::path d = make_kernel_folder(ws);
  SyntheticMeasurer m(0.01);
  OptimizeOptions o;
  o.max_experiments = 4;
  o.measurer = &m;
  o.git = false;
  optimize_kernel(d, o);
  // A run killed in the middle of an agent edit left a half-written source behind.
  std::ofstream(d / "softmax.cpp", std::ios::trunc) << "garbage";
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(read_file(d / "softmax.cpp"), read_file(d / "best" / "softmax.cpp"));
  EXPECT_EQ(s.experiments_run, 4);
  EXPECT_EQ(s.experiments, 8);
  const auto rows = rows_of(ws / "results.tsv");
  EXPECT_EQ(rows.size(), 9u);
  EXPECT_NE(rows.back()[9].find("exp=8 "), std::string::npos);
  fs::remove_all(ws);
}

TEST(OptimizeLoop, RefusesBadFolders) {
  const fs::path ws = temp_dir("bad");
  SyntheticMeasurer m(0);
  OptimizeOptions o;
  o.measurer = &m;
  o.git = false;
  auto msg = [&](const fs::path& d) {
    try {
      optimize_kernel(d, o);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg(ws / "nope").find("does not exist"), std::string::npos);
  const fs::path d = make_kernel_folder(ws);
  fs::remove(d / "softmax.cpp");
  EXPECT_NE(msg(d).find("no editable source"), std::string::npos) << msg(d);
  std::ofstream(d / "a.cpp") << kSource;
  std::ofstream(d / "b.cpp") << kSource;
  EXPECT_NE(msg(d).find("several"), std::string::npos);
  fs::remove(d / "b.cpp");
  std::ofstream(d / "a.cpp", std::ios::trunc) << "int f() { return 1; }\n";
  EXPECT_NE(msg(d).find("declares no tunable parameters"), std::string::npos) << msg(d);
  fs::remove(d / "problem.json");
  EXPECT_NE(msg(d).find("problem.json"), std::string::npos);
  fs::remove_all(ws);
}

// A Triton-style kernel folder: kSource's parameters as module-level Python assignments.
const char* kPySource =
    "\"\"\"softmax, Triton form\"\"\"\n"
    "# @vb-param UNROLL 1 {1,2,4,8}  unroll factor\nUNROLL = 1\n"
    "# @vb-param MODE 0 {0,1,2}  0 honest, 1 broken, 2 cheating\nMODE = 0  # the mode\n"
    "def vb_kernel_run(inputs, outputs, attrs):\n    UNROLL = 3\n    return UNROLL + MODE\n";

fs::path make_triton_folder(const fs::path& ws) {
  const fs::path d = ws / "kernels" / "01_softmax";
  fs::create_directories(d);
  std::ofstream(d / "problem.json")
      << R"({"kernel":"softmax","dtype":"fp32","backend":"triton","size":{"label":"t","dims":{"R":8,"C":64}},"time_share":0.3,"model":"unit"})";
  std::ofstream(d / "softmax.py") << kPySource;
  return d;
}

TEST(OptimizeLoop, SearchesATritonSourceThroughItsModuleLevelAssignments) {
  const fs::path ws = temp_dir("triton-search");
  const fs::path d = make_triton_folder(ws);
  SyntheticMeasurer m(0.0, 3, python_syntax());
  OptimizeOptions o;
  o.measurer = &m;  // the interpreter is never timed: the synthetic times stand in for a GPU
  o.git = false;
  o.seed = 5;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(s.stop_reason, "exhausted");
  EXPECT_EQ(s.experiments, 11);
  const std::string best = read_file(d / "softmax.py");
  EXPECT_EQ(best, read_file(d / "best" / "softmax.py"));
  EXPECT_NE(best.find("\nUNROLL = 4\n"), std::string::npos) << best;
  EXPECT_NE(best.find("\nMODE = 0  # the mode\n"), std::string::npos) << best;
  EXPECT_NE(best.find("\n    UNROLL = 3\n"), std::string::npos) << "the local stays: " << best;
  int tried = 0;
  for (const auto& e : fs::directory_iterator(d / "tried")) {
    EXPECT_EQ(e.path().extension(), ".py") << e.path();
    const std::string t = read_file(e.path());
    EXPECT_EQ(parse_params(t, python_syntax()).size(), 2u) << t;
    ++tried;
  }
  EXPECT_EQ(tried, 11);
  fs::remove_all(ws);
}

TEST(OptimizeLoop, ATritonFolderOnTheInterpreterIsRefusedNamingWhatWouldTimeIt) {
  const fs::path ws = temp_dir("triton-refused");
  const fs::path d = make_triton_folder(ws);
  OptimizeOptions o;  // no measurer: the folder's own device (the Triton interpreter here)
  o.git = false;
  for (int orchestrated = 0; orchestrated < 2; ++orchestrated) {
    std::string msg = "no error";
    try {
      if (orchestrated) {
        OrchestratorOptions oo;
        oo.budget_s = 60;
        oo.loop = o;
        run_orchestrator(ws, oo);
      } else {
        optimize_kernel(d, o);
      }
    } catch (const std::runtime_error& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find("cannot optimize " + d.string() + " (backend triton)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("only checks correctness"), std::string::npos) << msg;
    EXPECT_NE(msg.find("needs an NVIDIA or AMD GPU"), std::string::npos) << msg;
  }
  EXPECT_FALSE(fs::exists(ws / "results.tsv")) << "nothing may be timed or recorded";
  EXPECT_FALSE(fs::exists(d / "best"));
  fs::remove_all(ws);
}

TEST(OptimizeAgent, FakeAgentEditIsEvaluatedAndProtectedFilesAreChecked) {
  const fs::path ws = temp_dir("agent");
  const fs::path d = make_kernel_folder(ws);
  SyntheticMeasurer m(0.01);
  OptimizeOptions o;
  o.measurer = &m;
  o.git = false;
  o.proposer = "agent";
  o.max_experiments = 1;
  o.agent_cmd = "sed -i 's/^#define UNROLL .*/#define UNROLL 4/' softmax.cpp";
  KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(s.kept, 1);
  EXPECT_NE(read_file(d / "softmax.cpp").find("#define UNROLL 4"), std::string::npos);
  EXPECT_TRUE(fs::exists(d / "program.md"));
  EXPECT_NE(read_file(d / "program.md").find("What you must not touch"), std::string::npos);
  // The same edit again changes nothing: reverted as such.
  s = optimize_kernel(d, o);
  EXPECT_EQ(s.kept, 1);
  // An agent that also edits problem.json: rejected unevaluated, problem.json restored.
  const std::string problem = read_file(d / "problem.json");
  o.agent_cmd =
      "sed -i 's/^#define UNROLL .*/#define UNROLL 8/' softmax.cpp && echo '{}' > problem.json "
      "&& touch extra.txt";
  const int before = m.calls;
  s = optimize_kernel(d, o);
  EXPECT_EQ(m.calls, before + 1) << "only the best's setup measurement; the candidate is not run";
  EXPECT_EQ(read_file(d / "problem.json"), problem);
  EXPECT_FALSE(fs::exists(d / "extra.txt"));
  EXPECT_NE(read_file(d / "softmax.cpp").find("#define UNROLL 4"), std::string::npos);
  const auto rows = rows_of(ws / "results.tsv");
  EXPECT_NE(rows[rows.size() - 2][9].find("agent_no_change"), std::string::npos);
  EXPECT_NE(rows.back()[9].find("agent_touched_protected"), std::string::npos);
  EXPECT_NE(rows.back()[9].find("problem.json (modified)"), std::string::npos);
  // A broken edit (compile error) is evaluated and reverted.
  o.agent_cmd = "sed -i 's/^#define MODE .*/#define MODE 1/' softmax.cpp";
  s = optimize_kernel(d, o);
  EXPECT_EQ(s.kept, 1);
  EXPECT_EQ(rows_of(ws / "results.tsv").back()[7], "FAIL");
  fs::remove_all(ws);
}

TEST(OptimizeGit, CommitsKeptVersionsOnABranchWithoutTouchingTheCheckout) {
  if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
  const fs::path repo = temp_dir("git");
  ASSERT_EQ(std::system(("cd " + repo.string() +
                         " && git init -q && git -c user.name=t -c user.email=t@t commit -q "
                         "--allow-empty -m init")
                            .c_str()),
            0);
  const fs::path d = make_kernel_folder(repo / "workspace");
  SyntheticMeasurer m(0.01);
  OptimizeOptions o;
  o.measurer = &m;
  o.proposer = "agent";
  o.max_experiments = 1;
  o.agent_cmd = "sed -i 's/^#define UNROLL .*/#define UNROLL 4/' softmax.cpp";
  ASSERT_EQ(optimize_kernel(d, o).kept, 1);
  const std::string branches = [&] {
    std::string out;
    FILE* p = ::popen(("git -C " + repo.string() + " branch --list 'vladbud/*'").c_str(), "r");
    char buf[256];
    while (p && std::fgets(buf, sizeof buf, p)) out += buf;
    if (p) ::pclose(p);
    return out;
  }();
  EXPECT_NE(branches.find("-unit"), std::string::npos) << branches;
  const std::string b = branches.substr(branches.find("vladbud/"));
  const std::string show = "git -C " + repo.string() + " show " + b.substr(0, b.find('\n')) +
                           ":workspace/kernels/01_softmax/softmax.cpp | grep -q 'define UNROLL 4'";
  EXPECT_EQ(std::system(show.c_str()), 0);
  // HEAD and the index are untouched.
  EXPECT_EQ(std::system(("test \"$(git -C " + repo.string() + " rev-list --count HEAD)\" = 1").c_str()), 0);
  fs::remove_all(repo);
}

// ---- batches and lost experiments (issue 21: the loop over a worker pool) ----

namespace {

// Serves SyntheticMeasurer's (noise-free) answers from work started ahead on other threads, as a
// pool does: prefetch() starts every quick screen at once, measure() collects them.
class AheadMeasurer : public Measurer {
 public:
  Measurement measure(const fs::path& f, EvalMode mode) override {
    const std::string key = std::to_string(static_cast<int>(mode)) + read_file(f);
    auto it = ahead_.find(key);
    if (it != ahead_.end()) {
      auto fut = std::move(it->second);
      ahead_.erase(it);
      ++served_ahead;
      return fut.get();
    }
    std::lock_guard<std::mutex> lk(mu_);
    return inner_.measure(f, mode);
  }
  void prefetch(const std::vector<fs::path>& sources, EvalMode mode) override {
    for (const auto& s : sources) {
      const std::string key = std::to_string(static_cast<int>(mode)) + read_file(s);
      ahead_[key] = std::async(std::launch::async, [this, s, mode] {
        std::lock_guard<std::mutex> lk(mu_);
        return inner_.measure(s, mode);
      });
    }
  }
  std::string target() const override { return "synthetic, ahead"; }
  int served_ahead = 0;

 private:
  SyntheticMeasurer inner_{0.0};
  std::mutex mu_;
  std::map<std::string, std::future<Measurement>> ahead_;
};

std::vector<std::string> decisions_of(const fs::path& ws) {
  std::vector<std::string> out;
  for (const auto& r : rows_of(ws / "results.tsv"))
    out.push_back(r[1] + " " + r[7] + " " + r[9].substr(0, r[9].find("; reproduce")));
  return out;
}

}  // namespace

TEST(OptimizeBatch, DecisionsDoNotDependOnWhatServedTheBatch) {
  auto run = [](Measurer& m, int batch) {
    const fs::path ws = temp_dir("batch");
    const fs::path d = make_kernel_folder(ws);
    OptimizeOptions o;
    o.max_experiments = 9;
    o.measurer = &m;
    o.git = false;
    o.seed = 5;
    o.batch = batch;
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.experiments, 9);
    EXPECT_EQ(s.lost, 0);
    const std::string best = read_file(d / "softmax.cpp");
    EXPECT_EQ(current_config(best, parse_params(best)).at("UNROLL"), "4");
    EXPECT_EQ(current_config(best, parse_params(best)).at("MODE"), "0");
    auto out = decisions_of(ws);
    fs::remove_all(ws);
    return out;
  };
  SyntheticMeasurer plain(0.0);
  AheadMeasurer ahead;
  const auto a = run(plain, 3), b = run(ahead, 3);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 10u);
  EXPECT_GT(ahead.served_ahead, 0) << "nothing was measured ahead: the batch did not prefetch";
  for (const auto& s : a)
    if (s.rfind("keep", 0) == 0) {
      EXPECT_EQ(s.find("MODE=1"), std::string::npos) << s;
      EXPECT_EQ(s.find("MODE=2"), std::string::npos) << s;
    }
}

TEST(OptimizeBatch, ALostExperimentIsOneRowNeverCachedAndTheRunGoesOn) {
  // The quick screen of UNROLL=4 never comes back the first time it is asked for.
  class Losing : public SyntheticMeasurer {
   public:
    Losing() : SyntheticMeasurer(0.0) {}
    Measurement measure(const fs::path& f, EvalMode mode) override {
      const std::string s = read_file(f);
      if (mode == EvalMode::Quick && s.find("#define UNROLL 4") != std::string::npos && !lost_once) {
        lost_once = true;
        Measurement m;
        m.verdict = "LOST";
        m.reason = "its worker died while running it, every time it was retried";
        return m;
      }
      return SyntheticMeasurer::measure(f, mode);
    }
    bool lost_once = false;
  } m;
  const fs::path ws = temp_dir("lost");
  const fs::path d = make_kernel_folder(ws);
  OptimizeOptions o;
  o.max_experiments = 6;
  o.measurer = &m;
  o.git = false;
  o.seed = 5;
  o.batch = 2;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_TRUE(m.lost_once);
  EXPECT_EQ(s.lost, 1);
  EXPECT_EQ(s.experiments, 6);
  const auto rows = rows_of(ws / "results.tsv");
  ASSERT_EQ(rows.size(), 7u);
  int lost = 0;
  for (const auto& r : rows)
    if (r[1] == "lost") {
      ++lost;
      EXPECT_EQ(r[7], "LOST");
      EXPECT_NE(r[9].find("lost: its worker died"), std::string::npos) << r[9];
      EXPECT_NE(r[9].find("UNROLL=4"), std::string::npos) << r[9];
    }
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(read_file(ws / "cache" / "measurements.jsonl").find("LOST"), std::string::npos);
  EXPECT_EQ(read_kernel_state(d).value("experiments", 0), 6);
  fs::remove_all(ws);
}

TEST(OptimizeBatch, EachCandidateIsJudgedAsSoonAsItsScreenIsBackAndTheNextJoins) {
  // The order in which the loop starts screens ahead (P, prefetch) and collects them (M,
  // measure): with a window of 2, two candidates go ahead, then each judgement lets one more
  // join, so the device always has the next screen queued (never a whole batch judged before
  // the next is proposed: P P M M P P M M).
  class Recorder : public SyntheticMeasurer {
   public:
    Recorder() : SyntheticMeasurer(0.0) {}
    Measurement measure(const fs::path& f, EvalMode mode) override {
      if (mode == EvalMode::Quick) events += "M";
      return SyntheticMeasurer::measure(f, mode);
    }
    void prefetch(const std::vector<fs::path>& sources, EvalMode mode) override {
      if (mode == EvalMode::Quick) events += std::string(sources.size(), 'P');
    }
    std::string events;
  } m;
  const fs::path ws = temp_dir("window");
  const fs::path d = make_kernel_folder(ws);
  OptimizeOptions o;
  o.max_experiments = 8;
  o.measurer = &m;
  o.git = false;
  o.seed = 5;
  o.batch = 2;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(s.experiments, 8);
  // The starter (built ahead, then screened), then the window.
  EXPECT_EQ(m.events, "PM" "PPM" "PMPMPMPMPMPM" "M");
  fs::remove_all(ws);
}

TEST(OptimizeBatch, TheFirstWindowIsProposedAndBuiltWhileTheStarterIsMeasured) {
  // A fresh start with a window: right after the starter's prefetch the loop proposes the
  // first window and hands it to prebuild() (a pool builds it on any worker while the starter
  // builds and is screened); those candidates then join the window in that order (their screens
  // prefetched only then), and the decisions are those of a measurer that builds nothing ahead.
  class Recorder : public SyntheticMeasurer {
   public:
    Recorder() : SyntheticMeasurer(0.0) {}
    Measurement measure(const fs::path& f, EvalMode mode) override {
      if (mode == EvalMode::Quick) events += "M";
      return SyntheticMeasurer::measure(f, mode);
    }
    void prefetch(const std::vector<fs::path>& sources, EvalMode mode) override {
      if (mode != EvalMode::Quick) return;
      events += std::string(sources.size(), 'P');
      for (const auto& s : sources) prefetched.push_back(read_file(s));
    }
    void prebuild(const std::vector<fs::path>& sources) override {
      events += std::string(sources.size(), 'B');
      for (const auto& s : sources) built.push_back(read_file(s));
    }
    std::string events;
    std::vector<std::string> prefetched, built;
  };
  auto run = [](Measurer& m, int batch, const std::string& proposer = "search") {
    const fs::path ws = temp_dir("prebuild");
    const fs::path d = make_kernel_folder(ws);
    OptimizeOptions o;
    o.max_experiments = 8;
    o.measurer = &m;
    o.git = false;
    o.seed = 5;
    o.batch = batch;
    o.proposer = proposer;
    o.agent_cmd = "sed -i 's/^#define UNROLL .*/#define UNROLL 4/' softmax.cpp";
    const KernelSummary s = optimize_kernel(d, o);
    EXPECT_EQ(s.experiments, proposer == "search" ? 8 : s.experiments);
    auto out = decisions_of(ws);
    fs::remove_all(ws);
    return out;
  };
  Recorder r;
  const auto with = run(r, 3);
  // Starter prefetched, 3 built ahead, the starter judged, then the window as before.
  EXPECT_EQ(r.events.substr(0, 5), "PBBBM") << r.events;
  ASSERT_EQ(r.built.size(), 3u);
  ASSERT_GE(r.prefetched.size(), 4u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(r.built[i], r.prefetched[i + 1]) << i;
  // The same decisions as a measurer that ignores prebuild (a plain synthetic one).
  SyntheticMeasurer plain(0.0);
  EXPECT_EQ(with, run(plain, 3));
  // Nothing is built ahead without a window, nor for the agent proposer (it reads the results).
  Recorder one, agent;
  run(one, 1);
  EXPECT_TRUE(one.built.empty()) << one.events;
  run(agent, 3, "agent");
  EXPECT_TRUE(agent.built.empty()) << agent.events;
}

TEST(OptimizeBatch, OnAGpuWithAWindowPyTorchIsTimedWhileTheStarterBuilds) {
  // PyTorch's figure fills a column only: on a GPU device with a window (a pool) it is timed
  // after the starter and the first window went to the workers (their builds use the host's
  // cores while PyTorch times on the device); on the CPU (the builds would share the cores it
  // is timed on) and without a window it is timed first, as before. Either way it is stored
  // in problem.json and the baseline row carries the ratio.
  class Recorder : public SyntheticMeasurer {
   public:
    explicit Recorder(std::string* ev) : SyntheticMeasurer(0.0), ev_(ev) {}
    void prefetch(const std::vector<fs::path>& s, EvalMode mode) override {
      if (mode == EvalMode::Quick) *ev_ += std::string(s.size(), 'P');
    }
    void prebuild(const std::vector<fs::path>& s) override { *ev_ += std::string(s.size(), 'B'); }

   private:
    std::string* ev_;
  };
  auto run = [](const std::string& backend, int batch) {
    std::string ev;
    Recorder m(&ev);
    const fs::path ws = temp_dir("torch-order");
    const fs::path d = ws / "kernels" / "01_softmax";
    fs::create_directories(d);
    std::ofstream(d / "problem.json")
        << R"({"kernel":"softmax","dtype":"fp32","backend":")" << backend
        << R"(","size":{"label":"t","dims":{"R":8,"C":64}},"time_share":0.3,"model":"unit"})";
    std::ofstream(d / ("softmax" + find_backend(backend)->source_extension())) << kSource;
    OptimizeOptions o;
    o.max_experiments = 3;
    o.measurer = &m;
    o.git = false;
    o.seed = 5;
    o.batch = batch;
    o.pytorch_baseline = [&ev](const KernelProblem&, std::string* op, std::string*) {
      ev += "T";
      *op = "F.softmax";
      return std::optional<double>(50.0);
    };
    optimize_kernel(d, o);
    EXPECT_DOUBLE_EQ(read_problem_file(d).raw.value("pytorch_us", 0.0), 50.0) << backend;
    const auto rows = rows_of(ws / "results.tsv");
    EXPECT_TRUE(!rows.empty() && rows[0][1] == "baseline" && rows[0][6] == "0.500")
        << backend << ": " << (rows.empty() ? "" : rows[0][6]);
    fs::remove_all(ws);
    return ev;
  };
  EXPECT_EQ(run("cuda", 3).substr(0, 5), "BBBBT");
  EXPECT_EQ(run("cpu", 3).substr(0, 5), "TPBBB");
  EXPECT_EQ(run("cuda", 1).substr(0, 1), "T");
}

TEST(OptimizeBatch, OnAGpuNoScreenSharesTheDeviceWithPyTorchsTimingNorCountsIt) {
  // While PyTorch times on the GPU only builds may be queued (host cores): a screen queued
  // before (the starter's prefetch: its build may be a cache hit) would run on the device
  // beside PyTorch's timing and skew both figures. And PyTorch's seconds are not an
  // experiment's: the first window's budget rule (setup_quick_s_) must not count them, or a
  // slow PyTorch start shrinks the first window (here 1 s of PyTorch, 3.5 s of budget: the
  // whole window of 3 fits instant experiments, 2 if the second counted).
  class Recorder : public SyntheticMeasurer {
   public:
    explicit Recorder(std::string* ev) : SyntheticMeasurer(0.0), ev_(ev) {}
    Measurement measure(const fs::path& f, EvalMode mode) override {
      if (mode == EvalMode::Quick) *ev_ += "M";
      return SyntheticMeasurer::measure(f, mode);
    }
    void prefetch(const std::vector<fs::path>& s, EvalMode mode) override {
      if (mode == EvalMode::Quick) *ev_ += std::string(s.size(), 'P');
    }
    void prebuild(const std::vector<fs::path>& s) override { *ev_ += std::string(s.size(), 'B'); }

   private:
    std::string* ev_;
  };
  std::string ev;
  Recorder m(&ev);
  const fs::path ws = temp_dir("torch-alone");
  const fs::path d = ws / "kernels" / "01_softmax";
  fs::create_directories(d);
  std::ofstream(d / "problem.json")
      << R"({"kernel":"softmax","dtype":"fp32","backend":"cuda","size":{"label":"t","dims":{"R":8,"C":64}},"time_share":0.3,"model":"unit"})";
  std::ofstream(d / ("softmax" + find_backend("cuda")->source_extension())) << kSource;
  OptimizeOptions o;
  o.max_experiments = 3;
  o.budget_s = 3.5;
  o.measurer = &m;
  o.git = false;
  o.seed = 5;
  o.batch = 3;
  o.pytorch_baseline = [&ev](const KernelProblem&, std::string* op, std::string*) {
    ev += "T";
    std::this_thread::sleep_for(std::chrono::seconds(1));
    *op = "F.softmax";
    return std::optional<double>(50.0);
  };
  const KernelSummary s = optimize_kernel(d, o);
  fs::remove_all(ws);
  const auto t = ev.find('T');
  ASSERT_NE(t, std::string::npos) << ev;
  EXPECT_EQ(ev.substr(0, t).find_first_of("PM"), std::string::npos)
      << "a screen was queued before PyTorch's timing: " << ev;
  EXPECT_GE(std::count(ev.begin(), ev.begin() + static_cast<long>(t), 'B'), 1) << ev;
  // After the starter's screen the whole first window joins before the first judgement.
  const auto starter = ev.find('M', t);
  ASSERT_NE(starter, std::string::npos) << ev;
  EXPECT_EQ(ev.substr(starter, 5), "MPPPM") << ev;
  EXPECT_EQ(s.experiments, 3) << ev;
}

namespace {

// A device queue like a pool's: one thread runs the quick screens one at a time, each taking
// `task_s`, the most recently queued first (Dask ran the H200 run's queued screens in no
// particular order); measure() of a prefetched screen waits for it until the deadline, then
// answers CANCELLED, as the pool's measurer does; discard_prefetched() drops queued screens.
class QueueMeasurer : public Measurer {
 public:
  explicit QueueMeasurer(double task_s) : task_s_(task_s), worker_([this] { serve(); }) {}
  ~QueueMeasurer() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  Measurement measure(const fs::path& f, EvalMode mode) override {
    if (mode != EvalMode::Quick) {
      std::lock_guard<std::mutex> lk(mu_);
      return inner_.measure(f, mode);
    }
    std::unique_lock<std::mutex> lk(mu_);
    std::shared_ptr<Job> j = take_or_queue(f, lk);
    const bool done = deadline_ ? cv_.wait_until(lk, *deadline_, [&] { return j->done; })
                                : (cv_.wait(lk, [&] { return j->done; }), true);
    if (!done) {
      j->dropped = true;
      Measurement m;
      m.verdict = "CANCELLED";
      m.reason = "deadline";
      return m;
    }
    return j->result;
  }
  void prefetch(const std::vector<fs::path>& sources, EvalMode mode) override {
    if (mode != EvalMode::Quick) return;
    std::unique_lock<std::mutex> lk(mu_);
    for (const auto& f : sources) ahead_[read_file(f)] = queue(f);
    cv_.notify_all();
  }
  void discard_prefetched() override {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [k, j] : ahead_) j->dropped = true;
    ahead_.clear();
  }
  void set_deadline(std::chrono::steady_clock::time_point d) override {
    std::lock_guard<std::mutex> lk(mu_);
    deadline_ = d;
  }
  std::string target() const override { return "synthetic device queue"; }
  int started = 0, started_after_deadline = 0;  ///< read after optimize_kernel returned

 private:
  struct Job {
    fs::path file;
    bool done = false, dropped = false;
    Measurement result;
  };
  std::shared_ptr<Job> queue(const fs::path& f) {
    auto j = std::make_shared<Job>();
    j->file = f;
    jobs_.push_back(j);
    return j;
  }
  std::shared_ptr<Job> take_or_queue(const fs::path& f, std::unique_lock<std::mutex>&) {
    auto it = ahead_.find(read_file(f));
    if (it != ahead_.end()) {
      auto j = it->second;
      ahead_.erase(it);
      return j;
    }
    auto j = queue(f);
    cv_.notify_all();
    return j;
  }
  void serve() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait(lk, [&] {
        if (quit_) return true;
        for (const auto& j : jobs_)
          if (!j->dropped) return true;
        return false;
      });
      if (quit_) return;
      std::shared_ptr<Job> j;
      for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it)
        if (!(*it)->dropped) {
          j = *it;
          jobs_.erase(std::next(it).base());
          break;
        }
      ++started;
      if (deadline_ && std::chrono::steady_clock::now() > *deadline_) ++started_after_deadline;
      lk.unlock();
      std::this_thread::sleep_for(std::chrono::duration<double>(task_s_));
      lk.lock();
      // A screen given up meanwhile is not read (the test may have removed its workspace).
      if (!j->dropped) j->result = inner_.measure(j->file, EvalMode::Quick);
      j->done = true;
      cv_.notify_all();
    }
  }
  double task_s_;
  SyntheticMeasurer inner_{0.0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Job>> jobs_;
  std::map<std::string, std::shared_ptr<Job>> ahead_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  bool quit_ = false;
  std::thread worker_;
};

}  // namespace

TEST(OptimizeBatch, AQueuedDeviceNeverTakesTheRunPastItsBudgetByMoreThanOneTask) {
  // 0.3 s screens, 1.5 s budget, a window of 8 on a queue that serves the newest first: the
  // oldest candidate (judged first) would come back last, ~2.7 s in. Candidates join only
  // while the budget covers their wait, and the wait ends at the deadline.
  const double task = 0.3, budget = 1.5;
  QueueMeasurer m(task);
  const fs::path ws = temp_dir("deadline");
  const fs::path d = make_kernel_folder(ws);
  OptimizeOptions o;
  o.budget_s = budget;
  o.measurer = &m;
  o.git = false;
  o.seed = 5;
  o.batch = 8;
  const auto t0 = std::chrono::steady_clock::now();
  const KernelSummary s = optimize_kernel(d, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(s.stop_reason, "budget");
  EXPECT_LT(wall, budget + task + 0.6) << "the run overshot its budget by more than one task";
  EXPECT_LE(m.started_after_deadline, 1) << "screens kept starting after the budget ran out";
  // Not a whole window of screens queued: the budget covered ~4 at the start (0.3 s each).
  EXPECT_LE(m.started, 1 + 5);
  // Nothing half-done was recorded: every row is a decision, state.json agrees.
  const auto rows = rows_of(ws / "results.tsv");
  ASSERT_GE(rows.size(), 1u);
  for (const auto& r : rows) EXPECT_NE(r[7], "CANCELLED") << r[9];
  EXPECT_EQ(read_kernel_state(d).value("experiments", -1), static_cast<int>(rows.size()) - 1);
  EXPECT_EQ(read_file(ws / "cache" / "measurements.jsonl").find("CANCELLED"), std::string::npos);
  fs::remove_all(ws);
}

TEST(OptimizePool, FlagsAreCheckedWithTheFix) {
  PoolOptions o;
  EXPECT_FALSE(pool_requested(o));
  EXPECT_NO_THROW(check_pool_options(o, false));
  o.workers = 0;
  try {
    check_pool_options(o, true);
    ADD_FAILURE() << "--workers 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--workers must be at least 1"), std::string::npos);
  }
  o.workers = 2;
  o.scheduler = "tcp://10.0.0.5:8786";
  EXPECT_THROW(check_pool_options(o, true), std::invalid_argument);
  o.workers = 0;
  EXPECT_NO_THROW(check_pool_options(o, false));
  EXPECT_TRUE(pool_requested(o));
  for (const char* bad : {"10.0.0.5:8786", "tcp://host", "http://h:1", "tcp://h:123456"}) {
    o.scheduler = bad;
    EXPECT_THROW(check_pool_options(o, false), std::invalid_argument) << bad;
  }
  o.scheduler = "tls://sched.cluster.local:8786";
  EXPECT_NO_THROW(check_pool_options(o, false));
  o.task_timeout_s = 0;
  EXPECT_THROW(check_pool_options(o, false), std::invalid_argument);
}

TEST(OptimizeOrchestrator, SeveralFoldersAtOnceDecideAsOneAtATime) {
  // A thread-safe stand-in (the pool's measurer is): SyntheticMeasurer without noise, locked.
  class Locked : public Measurer {
   public:
    Measurement measure(const fs::path& f, EvalMode mode) override {
      std::lock_guard<std::mutex> lk(mu_);
      ++calls;
      return inner_.measure(f, mode);
    }
    std::string target() const override { return "synthetic, locked"; }
    int calls = 0;

   private:
    SyntheticMeasurer inner_{0.0};
    std::mutex mu_;
  };
  auto run = [](int parallel) {
    const fs::path ws = temp_dir("orchpar");
    make_kernel_folder(ws);
    fs::copy(ws / "kernels" / "01_softmax", ws / "kernels" / "02_softmax");
    Locked m;
    OrchestratorOptions o;
    o.budget_s = 120;
    o.parallel = parallel;
    o.loop.measurer = &m;
    o.loop.git = false;
    o.loop.seed = 5;
    o.loop.batch = 2;
    const auto orch = run_orchestrator(ws, o);
    std::map<std::string, std::vector<std::string>> per;
    for (const auto& r : rows_of(ws / "results.tsv")) {
      EXPECT_EQ(r.size(), 14u);
      const std::string k = r[9].substr(5, r[9].find(' ') - 5);
      // The decision without the cache note: run one at a time, the second folder replays what
      // the first measured (same source, shape and machine); at once, both measure.
      std::string what = r[9].substr(r[9].find(' ') + 1, r[9].find("; reproduce") - r[9].find(' ') - 1);
      const auto note = what.find(" [replayed from the cache]");
      if (note != std::string::npos) what.erase(note);
      per[k].push_back(r[1] + " " + what);
    }
    for (const auto& k : orch["kernels"]) {
      EXPECT_EQ(k["status"], "exhausted") << k.dump();
      EXPECT_EQ(k["experiments"], 11);
    }
    for (const char* d : {"01_softmax", "02_softmax"}) {
      const std::string best = read_file(ws / "kernels" / d / "softmax.cpp");
      EXPECT_EQ(current_config(best, parse_params(best)).at("UNROLL"), "4") << d;
    }
    fs::remove_all(ws);
    return per;
  };
  const auto one = run(1), two = run(2);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one.at("01_softmax").size(), 12u);
  EXPECT_EQ(one, two);
}

TEST(OptimizeOrchestrator, AFolderTheBudgetNeverReachedStillGetsItsStarterMeasured) {
  // Each measurement takes 40 ms, the budget 10 ms: the first folder's setup spends it all, so
  // the main loop never reaches the second; the pass after the budget measures its starter.
  class Slow : public Measurer {
   public:
    Measurement measure(const fs::path& f, EvalMode mode) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      for (const char* d : {"01_softmax", "02_softmax"})
        if (fs::absolute(f).string().find(d) != std::string::npos) measured.insert(d);
      return inner_.measure(f, mode);
    }
    std::string target() const override { return "synthetic, slow"; }
    std::set<std::string> measured;

   private:
    SyntheticMeasurer inner_{0.0};
  };
  const fs::path ws = temp_dir("orchlate");
  make_kernel_folder(ws);
  fs::copy(ws / "kernels" / "01_softmax", ws / "kernels" / "02_softmax");
  Slow m;
  OrchestratorOptions o;
  o.budget_s = 0.01;
  o.loop.measurer = &m;
  o.loop.git = false;
  const auto orch = run_orchestrator(ws, o);
  ASSERT_EQ(orch["kernels"].size(), 2u);
  for (const auto& k : orch["kernels"]) {
    EXPECT_GT(k["baseline_us"].get<double>(), 0) << k.dump();
    EXPECT_EQ(k["status"], "budget") << k.dump();
    EXPECT_EQ(k["experiments"], 0) << k.dump();
  }
  EXPECT_NE(orch["kernels"][1]["reason"].get<std::string>().find("before its turn"),
            std::string::npos)
      << orch.dump(1);
  EXPECT_EQ(m.measured.size(), 2u);
  // A stop request skips the pass: the folder the budget did not reach stays without a baseline.
  const fs::path ws2 = temp_dir("orchstop");
  make_kernel_folder(ws2);
  fs::copy(ws2 / "kernels" / "01_softmax", ws2 / "kernels" / "02_softmax");
  std::atomic<bool> stop{true};
  Slow m2;
  o.loop.measurer = &m2;
  o.loop.stop = &stop;
  const auto orch2 = run_orchestrator(ws2, o);
  for (const auto& k : orch2["kernels"]) EXPECT_EQ(k["baseline_us"].get<double>(), 0) << k.dump();
  EXPECT_TRUE(m2.measured.empty());
  fs::remove_all(ws);
  fs::remove_all(ws2);
}

TEST(OptimizeOrchestrator, AFolderThatFinishesEarlyPassesItsUnspentBudgetOn) {
  // 01 exhausts its 12 configurations at once (no sleep); 02 has 400 (PAD is ignored by the
  // measurer) at 20 ms a measurement, so only the budget stops it. Each gets half of the run's
  // 2 s; 01's unspent part goes to 02, which then runs past its own half (the loop stops when
  // the time left no longer covers a mean experiment) instead of stopping at it
  // (a user's 3-minute autotune lost a plateaued folder's unspent budget).
  class SlowSecond : public Measurer {
   public:
    Measurement measure(const fs::path& f, EvalMode mode) override {
      if (fs::absolute(f).string().find("02_softmax") != std::string::npos)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return inner_.measure(f, mode);
    }
    std::string target() const override { return "synthetic, second slow"; }

   private:
    SyntheticMeasurer inner_{0.0};
  };
  const fs::path ws = temp_dir("orchpass");
  make_kernel_folder(ws);
  const fs::path d2 = ws / "kernels" / "02_softmax";
  fs::copy(ws / "kernels" / "01_softmax", d2);
  std::ofstream(d2 / "softmax.cpp", std::ios::trunc)
      << "// @vb-param UNROLL 1 {1,2,4,8}  unroll factor\n#ifndef UNROLL\n#define UNROLL 1\n#endif\n"
         "// @vb-param MODE 0 {0}  honest\n#ifndef MODE\n#define MODE 0\n#endif\n"
         "// @vb-param PAD 0 {0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,"
         "26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,"
         "55,56,57,58,59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,"
         "84,85,86,87,88,89,90,91,92,93,94,95,96,97,98,99}  ignored\n#ifndef PAD\n#define PAD 0\n#endif\n";
  SlowSecond m;
  OrchestratorOptions o;
  o.budget_s = 2;
  o.plateau_k = 100000;  // only the budget stops 02
  o.loop.measurer = &m;
  o.loop.git = false;
  const auto t0 = std::chrono::steady_clock::now();
  const auto orch = run_orchestrator(ws, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& k1 = orch["kernels"][0];
  const auto& k2 = orch["kernels"][1];
  EXPECT_EQ(k1["status"], "exhausted") << orch.dump(1);
  EXPECT_NEAR(k1["budget_s"].get<double>(), k1["spent_s"].get<double>(), 1e-9) << orch.dump(1);
  EXPECT_GT(k2["budget_s"].get<double>(), 0.9 * o.budget_s) << orch.dump(1);
  EXPECT_GT(k2["spent_s"].get<double>(), 0.6 * o.budget_s) << orch.dump(1);
  EXPECT_NE(k2["status"], "active") << orch.dump(1);
  EXPECT_GE(wall, 0.6 * o.budget_s);
  fs::remove_all(ws);
}

TEST(OptimizeOrchestrator, AFolderCutByTheRunsBudgetEndsAsBudgetNotActive) {
  // Run budget 3 s, two equal folders (1.5 s each). The first folder's starter takes 2 s to
  // measure (an overrun its loop cannot stop), so the second gets the run's remaining ~1 s,
  // less than its own 1.5 s, and is cut by the run's end. A new user found such a folder left
  // "active" (which `status` reads as a loop still running) after the run had finished.
  class FirstSlow : public Measurer {
   public:
    Measurement measure(const fs::path& f, EvalMode mode) override {
      const bool first = fs::absolute(f).string().find("01_softmax") != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(first && !slept_ ? 2000 : 100));
      if (first) slept_ = true;
      return inner_.measure(f, mode);
    }
    std::string target() const override { return "synthetic, first slow"; }

   private:
    bool slept_ = false;
    SyntheticMeasurer inner_{0.0};
  };
  const fs::path ws = temp_dir("orchcut");
  make_kernel_folder(ws);
  fs::copy(ws / "kernels" / "01_softmax", ws / "kernels" / "02_softmax");
  FirstSlow m;
  OrchestratorOptions o;
  o.budget_s = 3;
  o.loop.measurer = &m;
  o.loop.git = false;
  const auto orch = run_orchestrator(ws, o);
  ASSERT_EQ(orch["kernels"].size(), 2u);
  for (const auto& k : orch["kernels"]) {
    EXPECT_NE(k["status"], "active") << k.dump();
    EXPECT_NE(k["status"], "running") << k.dump();
  }
  EXPECT_EQ(orch["kernels"][0]["status"], "budget") << orch.dump(1);
  EXPECT_NE(orch["kernels"][0]["reason"].get<std::string>().find("spent its"), std::string::npos)
      << orch.dump(1);
  EXPECT_EQ(orch["kernels"][1]["status"], "budget") << orch.dump(1);
  EXPECT_NE(orch["kernels"][1]["reason"].get<std::string>().find("the run's budget ended during its turn"),
            std::string::npos)
      << orch.dump(1);
  EXPECT_GT(orch["kernels"][1]["experiments"].get<int>(), 0) << orch.dump(1);
  // The next invocation resumes the cut folder (budget is not a finished state).
  const auto again = load_entries(ws);
  EXPECT_EQ(again[1].status, "active");
  fs::remove_all(ws);
}

TEST(OptimizeOrchestrator, AFolderPickedAgainWithAGiftOfBudgetDoesNotMeasureItsBestAgain) {
  // Three folders, two at once, 3 s of run budget (2 s each). 01 and 03 try all 12
  // configurations at once and pass their unspent budget to 02 (400 configurations, 20 ms a
  // measurement) while its loop runs; its turn ends at its own 2 s and it is picked again for
  // the run's last second. That second turn used to start by measuring its best again (the
  // setup of a new run): nothing changed since its first turn ended, so it must not.
  class Counting : public Measurer {
   public:
    Measurement measure(const fs::path& f, EvalMode mode) override {
      const std::string p = fs::absolute(f).string();
      const bool second = p.find("02_softmax") != std::string::npos;
      if (second) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::lock_guard<std::mutex> lk(mu_);
      if (second && mode == EvalMode::Quick && p.find("/best/") != std::string::npos) ++best_quick;
      return inner_.measure(f, mode);
    }
    std::string target() const override { return "synthetic, counting"; }
    int best_quick = 0;  ///< quick measurements of 02's best/ version

   private:
    SyntheticMeasurer inner_{0.0};
    std::mutex mu_;
  };
  const fs::path ws = temp_dir("orchgift");
  make_kernel_folder(ws);
  fs::copy(ws / "kernels" / "01_softmax", ws / "kernels" / "03_softmax");
  const fs::path d2 = ws / "kernels" / "02_softmax";
  fs::copy(ws / "kernels" / "01_softmax", d2);
  std::string pad = "0";
  for (int i = 1; i < 100; ++i) pad += fmt::format(",{}", i);
  std::ofstream(d2 / "softmax.cpp", std::ios::trunc)
      << "// @vb-param UNROLL 1 {1,2,4,8}  unroll factor\n#ifndef UNROLL\n#define UNROLL 1\n#endif\n"
         "// @vb-param MODE 0 {0}  honest\n#ifndef MODE\n#define MODE 0\n#endif\n"
         "// @vb-param PAD 0 {" + pad + "}  ignored\n#ifndef PAD\n#define PAD 0\n#endif\n";
  Counting m;
  OrchestratorOptions o;
  o.budget_s = 3;
  o.parallel = 2;
  o.plateau_k = 100000;  // only the budget stops 02
  o.loop.measurer = &m;
  o.loop.git = false;
  std::vector<std::string> lines;
  std::mutex lines_mu;
  o.loop.progress = [&](const std::string& l) {
    std::lock_guard<std::mutex> lk(lines_mu);
    lines.push_back(l);
  };
  const auto orch = run_orchestrator(ws, o);
  const auto& k2 = orch["kernels"][1];
  // The second turn happened: the run's end cut it (its first turn ended at its own budget).
  ASSERT_NE(k2["reason"].get<std::string>().find("the run's budget ended during its turn"),
            std::string::npos)
      << orch.dump(1);
  EXPECT_EQ(m.best_quick, 0) << orch.dump(1);
  bool said = false;
  for (const auto& l : lines) said = said || (l.rfind("02_softmax: as its last turn left it", 0) == 0);
  EXPECT_TRUE(said);
  fs::remove_all(ws);
}

TEST(OptimizeLoop, ATurnTakesItsLastTurnsFiguresOnlyWhenTheFolderIsAsThatTurnLeftIt) {
  class Counting : public SyntheticMeasurer {
   public:
    Counting() : SyntheticMeasurer(0.0) {}
    Measurement measure(const fs::path& f, EvalMode mode) override {
      if (mode == EvalMode::Quick && f.parent_path().filename() == "best") ++best_quick;
      return SyntheticMeasurer::measure(f, mode);
    }
    int best_quick = 0;
  };
  const fs::path ws = temp_dir("carry");
  const fs::path d = make_kernel_folder(ws);
  OptimizeOptions o;
  o.git = false;
  o.budget_s = 60;
  o.max_experiments = 2;
  Counting m;
  o.measurer = &m;
  const KernelSummary first = optimize_kernel(d, o);
  EXPECT_FALSE(first.carried);
  EXPECT_EQ(first.carry.experiments, 2);
  EXPECT_GT(first.carry.screen_us, 0);
  // As the first turn left it: the best is not measured, its figures are that turn's.
  o.carry = first.carry;
  o.max_experiments = 1;
  m.best_quick = 0;
  const KernelSummary second = optimize_kernel(d, o);
  EXPECT_TRUE(second.carried);
  EXPECT_EQ(m.best_quick, 0);
  EXPECT_NEAR(second.baseline_us, first.baseline_us, 1e-9);
  EXPECT_EQ(second.experiments, 3);
  // Stale, foreign or empty carries are not taken, nor one over a figure flagged for a
  // re-check: the best is measured as in a new run. (Each call below runs one experiment.)
  KernelSummary last = second;
  auto measured_with = [&](const LoopCarry& c) {
    o.carry = c;
    m.best_quick = 0;
    last = optimize_kernel(d, o);
    return !last.carried && m.best_quick >= 1;
  };
  LoopCarry behind = last.carry;  // the folder moved on since (another process's turn)
  behind.experiments -= 1;
  EXPECT_TRUE(measured_with(behind));
  LoopCarry other = last.carry;  // another best version
  other.best_hash = "0000000000000000";
  EXPECT_TRUE(measured_with(other));
  LoopCarry empty = last.carry;  // no screen figure on record
  empty.screen_us = 0;
  EXPECT_TRUE(measured_with(empty));
  EXPECT_FALSE(measured_with(last.carry));  // the valid one still is taken
  EXPECT_TRUE(last.carried);
  {
    const LoopCarry c = last.carry;
    auto meta = nlohmann::json::parse(read_file(d / "best" / "best.json"));
    meta[read_kernel_state(d).value("kept", 0) > 0 ? "kept_contended" : "baseline_contended"] = true;
    std::ofstream(d / "best" / "best.json", std::ios::trunc) << meta.dump(2);
    EXPECT_TRUE(measured_with(c));
  }
  {
    const LoopCarry c = last.carry;  // best.json names another version than best/ holds
    auto meta = nlohmann::json::parse(read_file(d / "best" / "best.json"));
    meta["hash"] = "0000000000000000";
    std::ofstream(d / "best" / "best.json", std::ios::trunc) << meta.dump(2);
    EXPECT_TRUE(measured_with(c));
  }
  fs::remove_all(ws);
}

namespace {

TEST(OptimizeLoop, RoundsAddedToAComparisonContinueTheAlternation) {
  // Measurer::interleave: round first_round + i is best-first when even. Two calls of 3
  // rounds, the second starting at round 3: AB BA AB, then BA AB BA (not AB BA AB again,
  // which would time the best first in 4 of 6 pairs).
  class Order : public Measurer {
   public:
    Measurement measure(const fs::path& f, EvalMode) override {
      seq.push_back(f.filename().string());
      Measurement m;
      m.timed = true, m.median_us = 1, m.noise = 0.01, m.reps = 5;
      return m;
    }
    std::string target() const override { return "order"; }
    std::vector<std::string> seq;
  } order;
  order.interleave("A", "B", 3, 0);
  order.interleave("A", "B", 3, 3);
  EXPECT_EQ(order.seq, (std::vector<std::string>{"A", "B", "B", "A", "A", "B", "B", "A", "A",
                                                 "B", "B", "A"}));

  // The loop: a 20 % faster candidate whose rounds spread widely (a loaded machine) is not
  // decided by the noise threshold; it gets more rounds until the signed-rank test keeps it
  // (9 pairs, all won), and each call continues where the last one ended.
  class Spread : public SyntheticMeasurer {
   public:
    Spread() : SyntheticMeasurer(0.0) {}
    Measurement measure(const fs::path& f, EvalMode mode) override {
      Measurement m = SyntheticMeasurer::measure(f, mode);
      if (comparing_ && m.timed) {
        const int pair = pair_calls_++ / 2;  // both sides of a round share its factor
        m.median_us *= 1.0 + 0.6 * ((pair * 5) % 7) / 6.0;
        m.noise = 0.3;
      }
      return m;
    }
    Interleaved interleave(const fs::path& best, const fs::path& cand, int rounds,
                           int first_round) override {
      firsts.push_back(first_round);
      comparing_ = true;
      Interleaved r = Measurer::interleave(best, cand, rounds, first_round);
      comparing_ = false;
      return r;
    }
    std::vector<int> firsts;

   private:
    bool comparing_ = false;
    int pair_calls_ = 0;
  } spread;
  const fs::path ws = temp_dir("alternation");
  std::string src = kSource;
  src.replace(src.find("{1,2,4,8}"), 9, "{1,4}");  // one candidate: UNROLL=4
  src.replace(src.find("{0,1,2}"), 7, "{0}");
  const fs::path d = make_kernel_folder(ws, src);
  OptimizeOptions o;
  o.budget_s = 60;
  o.max_experiments = 1;
  o.measurer = &spread;
  o.git = false;
  o.rounds = 3;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(s.kept, 1);
  EXPECT_EQ(spread.firsts, (std::vector<int>{0, 3, 6}));
  fs::remove_all(ws);
}

TEST(OptimizeLoop, AComparisonAddsNoRoundsOnceTheFoldersBudgetHasEnded) {
  // The candidate of the test above (20 % faster, rounds spread widely: undecided after the
  // first 3 rounds), but the first rounds end after the folder's budget: no more rounds are
  // timed, it is not kept, and the row says why (a new user's GPT-2 LM head spent 84 s of a
  // 65 s budget adding rounds to one comparison).
  class SlowSpread : public SyntheticMeasurer {
   public:
    SlowSpread() : SyntheticMeasurer(0.0) {}
    Measurement measure(const fs::path& f, EvalMode mode) override {
      Measurement m = SyntheticMeasurer::measure(f, mode);
      if (comparing_ && m.timed) {
        const int pair = pair_calls_++ / 2;
        m.median_us *= 1.0 + 0.6 * ((pair * 5) % 7) / 6.0;
        m.noise = 0.3;
      }
      return m;
    }
    Interleaved interleave(const fs::path& best, const fs::path& cand, int rounds,
                           int first_round) override {
      firsts.push_back(first_round);
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      comparing_ = true;
      Interleaved r = Measurer::interleave(best, cand, rounds, first_round);
      comparing_ = false;
      return r;
    }
    std::vector<int> firsts;

   private:
    bool comparing_ = false;
    int pair_calls_ = 0;
  } spread;
  const fs::path ws = temp_dir("cmpbudget");
  std::string src = kSource;
  src.replace(src.find("{1,2,4,8}"), 9, "{1,4}");
  src.replace(src.find("{0,1,2}"), 7, "{0}");
  const fs::path d = make_kernel_folder(ws, src);
  OptimizeOptions o;
  o.budget_s = 0.3;
  o.max_experiments = 1;
  o.measurer = &spread;
  o.git = false;
  o.rounds = 3;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(s.kept, 0);
  EXPECT_EQ(spread.firsts, (std::vector<int>{0}));
  bool said = false;
  for (const auto& r : rows_of(ws / "results.tsv"))
    if (r[1] != "baseline") said = said || r[9].find("when the folder's budget ended") != std::string::npos;
  EXPECT_TRUE(said) << read_file(ws / "results.tsv");
  // Not a decision to replay: a later run with more budget compares it again (a review found
  // the cut "not kept" cached and replayed).
  const fs::path cache = ws / "cache" / "measurements.jsonl";
  ASSERT_TRUE(fs::exists(cache));  // the screens are cached there
  EXPECT_EQ(read_file(cache).find("cmp2|"), std::string::npos) << read_file(cache);
  fs::remove_all(ws);
}

/// `M`'s answers, but each interleave() call first sleeps 600 ms (past the 0.3 s budget of the
/// tests below) and records the round it starts at.
template <class M>
class RoundsPastTheBudget : public M {
 public:
  using M::M;
  Interleaved interleave(const fs::path& best, const fs::path& cand, int rounds,
                         int first_round) override {
    firsts.push_back(first_round);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    return Measurer::interleave(best, cand, rounds, first_round);
  }
  std::vector<int> firsts;
};

TEST(OptimizeLoop, TheQuietRoundsOfAContendedKeepAreNotTimedOnceTheFoldersBudgetHasEnded) {
  // Contended throughout, and the first rounds end after the folder's budget: the keep is not
  // confirmed on quiet rounds (up to 3 x 3 more rounds were timed past the budget); it stands
  // flagged, as when no quiet rounds come, and the row says the budget ended first.
  RoundsPastTheBudget<ContentionFavoursMeasurer> m(1000, false);
  const fs::path ws = temp_dir("quietbudget");
  const fs::path d = make_kernel_folder(ws, kTwoWaySource);
  OptimizeOptions o;
  o.budget_s = 0.3;
  o.max_experiments = 1;
  o.measurer = &m;
  o.git = false;
  o.rounds = 3;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(m.firsts, (std::vector<int>{0}));
  EXPECT_EQ(s.kept, 1);
  const auto rows = rows_of(ws / "results.tsv");
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back()[1], "keep");
  EXPECT_NE(rows.back()[9].find("KEPT UNDER CONTENTION"), std::string::npos) << rows.back()[9];
  EXPECT_NE(rows.back()[9].find("before the folder's budget ended"), std::string::npos)
      << rows.back()[9];
  const auto meta = nlohmann::json::parse(read_file(d / "best" / "best.json"));
  EXPECT_TRUE(meta["kept_contended"].get<bool>());
  fs::remove_all(ws);
}

TEST(OptimizeLoop, ASlowBestIsNotReTimedOnceTheFoldersBudgetHasEnded) {
  // The best ran 4x its record in the first rounds (the candidate "8x" faster) and those rounds
  // end after the folder's budget: no fresh rounds are timed (they were, past the budget), so
  // nothing is kept, the row says why, and the comparison is not cached (a later run decides
  // it again).
  RoundsPastTheBudget<SlowIncumbentMeasurer> m(3, 50);
  const fs::path ws = temp_dir("slowbudget");
  const fs::path d = make_kernel_folder(ws, kTwoWaySource);
  OptimizeOptions o;
  o.budget_s = 0.3;
  o.max_experiments = 1;
  o.measurer = &m;
  o.git = false;
  o.rounds = 3;
  const KernelSummary s = optimize_kernel(d, o);
  EXPECT_EQ(m.firsts, (std::vector<int>{0}));
  EXPECT_EQ(s.kept, 0);
  EXPECT_NEAR(s.speedup(), 1.0, 1e-9);
  const auto rows = rows_of(ws / "results.tsv");
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back()[1], "revert");
  EXPECT_NE(rows.back()[9].find("budget ended before fresh rounds"), std::string::npos)
      << rows.back()[9];
  // (With budget left the fresh rounds are timed and decide, as before:
  // OptimizeLoop.AKeepOverAnIncumbentTimedFarAboveItsRecordIsReDecidedOrNotMade.)
  EXPECT_EQ(read_file(ws / "cache" / "measurements.jsonl").find("cmp2|"), std::string::npos);
  fs::remove_all(ws);
}

}  // namespace

// `vladbud optimize`/`status`/`autotune` printed "1.000x expected end-to-end (Amdahl)" and
// report.md "Expected end-to-end speedup", which users read as contradicting verify's measured
// speedup vs eager PyTorch: the figure is named as what it is, and verify as the comparison.
TEST(OptimizeReport, TheAmdahlFigureIsNamedAsTheKeepsOverTheStartersNotAComparisonWithPyTorch) {
  EXPECT_EQ(amdahl_statement(1.0),
            "1.000x model-level speedup implied by the optimizer's keeps over the starter kernels "
            "(Amdahl over each folder's speedup over its starter; not a comparison with PyTorch: "
            "`vladbud verify` measures that)");
  std::vector<KernelEntry> es(1);
  es[0].dir = "01_softmax";
  es[0].best_contended = true;
  const auto j = orchestration_json(es, 60, 1, "");
  EXPECT_TRUE(j["kernels"][0]["best_contended"].get<bool>());
  EXPECT_FALSE(j["kernels"][0]["baseline_contended"].get<bool>());
}

TEST(OptimizeReport, HandedOverListNamesTheShapesOfATypeServedAtSomeOnly) {
  const auto v = nlohmann::json::parse(R"({"kernels_in": ["matmul", "layernorm"],
      "shape_selection": {"matmul": [[3072, 768], [2304, 768]]}})");
  EXPECT_EQ(vb::opt::handed_over_list(v), "matmul (only at N3072xK768, N2304xK768), layernorm");
  EXPECT_EQ(vb::opt::handed_over_list(nlohmann::json::parse(R"({"kernels_in": []})")), "");
  // Damaged records give what can be read, never a throw.
  EXPECT_EQ(vb::opt::handed_over_list(nlohmann::json::parse(
                R"({"kernels_in": ["matmul", 3], "shape_selection": {"matmul": [["a", 1], 5]}})")),
            "matmul");
  EXPECT_EQ(vb::opt::handed_over_list(nlohmann::json::array()), "");
}
