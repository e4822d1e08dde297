// "Did you mean ...?" for a command line CLI11 refused: the closest subcommand or option name.
#include <algorithm>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace vb::cli {

namespace {

// Optimal string alignment distance: Levenshtein's insertions, deletions and substitutions plus
// transpositions of adjacent characters ("rnu" -> "run" is 1), the usual typo model
// (Damerau 1964; the restricted form, each substring edited once).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// The closest of `names` to `word` within a third of its length (at least 1, at most 3 edits),
// or "" when none is that close.
std::string closest(const std::string& word, const std::vector<std::string>& names) {
  const std::size_t limit = std::clamp<std::size_t>(word.size() / 3, 1, 3);
  std::string best;
  std::size_t best_d = limit + 1;
  for (const auto& n : names) {
    const std::size_t d = edit_distance(word, n);
    if (d < best_d) best = n, best_d = d;
  }
  return best;
}

// The long option names ("--kernel") of `app`.
std::vector<std::string> long_names(const CLI::App* app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app->get_options())
    for (const auto& n : o->get_lnames()) out.push_back("--" + n);
  return out;
}

}  // namespace

std::string suggest_fix(const CLI::App& app, int argc, char** argv) {
  // Walk down the subcommands named in argv ("kernelbench score ..."); `path` holds the apps
  // whose options apply, the deepest last.
  std::vector<const CLI::App*> path{&app};
  std::string where = "vladbud";
  int i = 1;
  auto sub_names = [](const CLI::App* a) {
    std::vector<std::string> n;
    for (const CLI::App* s : a->get_subcommands({})) n.push_back(s->get_name());
    return n;
  };
  for (; i < argc; ++i) {
    const std::string w = argv[i];
    if (w.empty() || w[0] == '-') break;
    const auto names = sub_names(path.back());
    if (names.empty()) break;  // a positional argument of a leaf command
    if (std::find(names.begin(), names.end(), w) == names.end()) {
      const std::string c = closest(w, names);
      return where + ": unknown command '" + w + "'" +
             (c.empty() ? "" : "; did you mean '" + c + "'?") + " (`" + where +
             " --help` lists them)";
    }
    path.push_back(path.back()->get_subcommand(w));
    where += " " + w;
  }
  std::vector<std::string> names;
  for (const CLI::App* a : path) {
    const auto n = long_names(a);
    names.insert(names.end(), n.begin(), n.end());
  }
  std::string out;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;  // what follows is not an option
    if (a.rfind("--", 0) != 0) continue;
    a = a.substr(0, a.find('='));
    if (std::find(names.begin(), names.end(), a) != names.end()) continue;
    const std::string c = closest(a, names);
    out += (out.empty() ? "" : "\n") + (where + ": unknown option '" + a + "'") +
           (c.empty() ? "" : "; did you mean '" + c + "'?") + " (`" + where +
           " --help` lists them)";
  }
  return out;
}

}  // namespace vb::cli
