// results.tsv (DESIGN §7): header, numbering, atomic append, refusal of a foreign file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/paths.h"
#include "eval/report.h"

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

}  // namespace
}  // namespace vb
