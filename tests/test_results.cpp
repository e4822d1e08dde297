// results.tsv (DESIGN §7): header, numbering, atomic append, refusal of a foreign file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/paths.h"
#include "eval/report.h"
#include "eval/run_all.h"

namespace vb {
namespace {

namespace fs = std::filesystem;

fs::path temp_file(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("vb-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove(p);
  return p;
}

int count_lines(const fs::path& p) {
  std::ifstream in(p);
  std::string l;
  int n = 0;
  while (std::getline(in, l)) ++n;
  return n;
}

// An INVALID verdict (a timing guard) counts as correct only when the correctness stages ran
// and passed: under --timing-only they are SKIP, and the report must not say "PASS".
TEST(EvalReportCorrectness, InvalidUnderTimingOnlyIsNotReportedAsCorrect) {
  EvalReport r;
  r.verdict = "INVALID";
  r.stages.resize(5);
  for (auto& st : r.stages) st.status = "SKIP";
  EXPECT_FALSE(r.correct());
  EXPECT_EQ(report_to_json(r)["correctness"], "INVALID");
  for (auto& st : r.stages) st.status = "PASS";
  EXPECT_TRUE(r.correct());
  EXPECT_EQ(report_to_json(r)["correctness"], "PASS");
  r.verdict = "UNVERIFIED";
  EXPECT_FALSE(r.correct());
  r.verdict = "PASS";
  EXPECT_TRUE(r.correct());
}

TEST(ResultsTsv, HeaderThenNumberedRowsWithAllColumns) {
  const auto p = temp_file("results.tsv");
  ResultsRow row;
  row.kernel_type = "softmax";
  row.correctness = "PASS";
  row.target = "local-cpu";
  row.backend = "cpu";
  row.description = "tabs\tand\nnewlines are cleaned";
  EXPECT_EQ(append_results_row(p, row), 1);
  EXPECT_EQ(append_results_row(p, row), 2);
  EXPECT_EQ(count_lines(p), 3);
  const std::string text = read_file(p);
  EXPECT_EQ(text.rfind(results_header(), 0), 0u);
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  std::getline(in, line);
  EXPECT_EQ(std::count(line.begin(), line.end(), '\t'), 13) << line;
  fs::remove(p);
}

TEST(ResultsTsv, TornLastLineFromAKilledRunIsClosedNotMerged) {
  const auto p = temp_file("torn.tsv");
  ResultsRow row;
  row.kernel_type = "reduce";
  append_results_row(p, row);
  {
    std::ofstream out(p, std::ios::app);
    out << "2\tpartial";  // a writer killed mid-line (no newline)
  }
  append_results_row(p, row);
  EXPECT_EQ(count_lines(p), 4);
  fs::remove(p);
}

TEST(ResultsTsv, RefusesAFileThatIsNotAResultsTsv) {
  const auto p = temp_file("notes.tsv");
  {
    std::ofstream out(p);
    out << "my precious notes\n";
  }
  ResultsRow row;
  try {
    append_results_row(p, row);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a results.tsv"), std::string::npos);
  }
  EXPECT_EQ(read_file(p), "my precious notes\n") << "nothing already written may be lost";
  fs::remove(p);
}

// A timed PASS of `kernel` at `us` microseconds with `others` other runnable tasks seen.
EvalReport timed_report(const std::string& kernel, double us, int others) {
  EvalReport r;
  r.kernel = kernel;
  r.backend = "cpu";
  r.timing = TimingResult{};
  r.timing->size_label = "b512";
  r.timing->median_us = us;
  r.timing->roofline.pct_peak = 3.9;
  r.timing->roofline.bound = "compute";
  r.timing->other_runnable = others;
  r.pytorch_us = us * 0.19;
  return r;
}

// A new user's `vladbud run --all` showed fused_mlp at 68363.8 us, 3.9 % of ceiling and 0.19x
// PyTorch with no flag (the same kernel timed 5854 us minutes later) while `bench` warned: a
// row timed under contention is marked in the table, the Markdown report and the JSON, and
// the run's warning names it and the fix.
TEST(RunTable, ARowTimedUnderContentionIsMarkedWithAFootnoteAndAWarning) {
  TargetResults t;
  t.id = "local-cpu";
  t.kernels.push_back(timed_report("fused_mlp", 68363.8, 1));
  t.kernels.push_back(timed_report("softmax", 12.5, 0));
  const std::vector<TargetResults> ts{t};
  EXPECT_TRUE(timed_under_contention(t.kernels[0]));
  EXPECT_FALSE(timed_under_contention(t.kernels[1]));
  EXPECT_FALSE(timed_under_contention(EvalReport{}));  // not timed

  const std::string text = format_run_table(ts, false);
  EXPECT_NE(text.find("68363.8*"), std::string::npos) << text;
  EXPECT_NE(text.find("3.9%*"), std::string::npos) << text;
  EXPECT_NE(text.find("0.19x*"), std::string::npos) << text;
  EXPECT_EQ(text.find("12.5*"), std::string::npos) << text;  // the quiet row is not marked
  EXPECT_NE(text.find("\n* timed while other work competed for the cores (fused_mlp: 1 other "
                      "task)"),
            std::string::npos)
      << text;
  const std::string md = format_run_table(ts, true);
  EXPECT_NE(md.find("| 68363.8* |"), std::string::npos) << md;
  EXPECT_NE(md.find("\\* timed while other work competed"), std::string::npos) << md;

  const nlohmann::json j = run_to_json(ts);
  const auto& ks = j["targets"][0]["kernels"];
  EXPECT_TRUE(ks[0]["contended"].get<bool>());
  EXPECT_EQ(ks[0]["other_runnable_tasks"], 1);
  EXPECT_FALSE(ks[1]["contended"].get<bool>());
  ASSERT_TRUE(j.contains("warnings")) << j.dump(1);
  EXPECT_EQ(j["warnings"][0], run_contention_warning(ts));

  const std::string w = run_contention_warning(ts);
  EXPECT_EQ(w.rfind("warning: fused_mlp on local-cpu (1 other task) was timed while other work "
                    "competed for the cores",
                    0),
            0u)
      << w;
  EXPECT_NE(w.find("its latency, % of ceiling and vs PyTorch are not trustworthy; re-run on a "
                   "quiet machine"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("`vladbud bench --kernel fused_mlp`"), std::string::npos) << w;
  EXPECT_EQ(w.find("softmax"), std::string::npos) << w;

  // Several contended rows are all named; a GPU row's bench command names its backend.
  t.kernels[1].timing->other_runnable = 2;
  TargetResults g;
  g.id = "local-gpu0";
  g.kernels.push_back(timed_report("reduce", 40, 1));
  g.kernels[0].backend = "cuda";
  g.kernels[0].timing->dtype = DType::F16;
  const std::string w2 = run_contention_warning({g, t});
  EXPECT_NE(w2.find("reduce on local-gpu0 (1 other task), fused_mlp on local-cpu (1 other task) "
                    "and softmax on local-cpu (2 other tasks) were timed"),
            std::string::npos)
      << w2;
  EXPECT_NE(w2.find("`vladbud bench --kernel reduce --backend cuda --dtype fp16`"),
            std::string::npos)
      << w2;

  // Nothing contended: no mark, no footnote, no warning.
  for (auto& r : t.kernels) r.timing->other_runnable = 0;
  EXPECT_EQ(format_run_table({t}, false).find('*'), std::string::npos);
  EXPECT_EQ(run_contention_warning({t}), "");
  EXPECT_FALSE(run_to_json({t}).contains("warnings"));
}

// results.tsv keeps the flag too: a row timed under contention says so in its description.
TEST(ResultsTsv, ARowTimedUnderContentionSaysSoInItsDescription) {
  EXPECT_NE(results_row(timed_report("fused_mlp", 68363.8, 2), "local-cpu", "run")
                .description.find(" contended=2"),
            std::string::npos);
  EXPECT_EQ(results_row(timed_report("fused_mlp", 5854, 0), "local-cpu", "run")
                .description.find("contended"),
            std::string::npos);
}

}  // namespace
}  // namespace vb
