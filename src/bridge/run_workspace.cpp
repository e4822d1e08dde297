#include "bridge/run_workspace.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <stdexcept>
#include <ctime>
#include <system_error>

#include "bridge/bridge.h"

namespace vb {

namespace fs = std::filesystem;

namespace {

std::string utc_stamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y%m%dT%H%M%S", &tm);
  return b;
}

// True when `p` is the current directory or one of its ancestors.
bool holds_cwd(const fs::path& p) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(p, ec), cwd = fs::current_path();
  if (ec) return false;
  for (fs::path c = cwd;; c = c.parent_path()) {
    if (c == a) return true;
    if (c == c.parent_path()) return false;
  }
}

// `p` with `suffix` appended to its last component ("ws" -> "ws.prev-...").
fs::path sibling(const fs::path& p, const std::string& suffix) {
  fs::path to = p;
  to.replace_filename(p.filename().string() + suffix);
  return to;
}

// A word for a shell command line: as it is when it needs no quoting, else in single quotes.
std::string shell_word(const std::string& s) {
  bool plain = !s.empty();
  for (const char c : s)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::string("/._-+:,=@").find(c) != std::string::npos);
  if (plain) return s;
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// True when the folder holds nothing but a first stage's output (.bridge/, profile.json).
bool only_first_stage(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n != ".bridge" && n != "profile.json") return false;
  }
  return !ec;
}

// Removes <ws>.new-<pid> folders whose process is gone and that hold only a first stage's
// output (a run killed while it profiled).
void remove_stale_staging(const fs::path& ws) {
  const fs::path parent = ws.has_parent_path() ? ws.parent_path() : fs::path(".");
  const std::string prefix = ws.filename().string() + ".new-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0 || !e.is_directory()) continue;
    const std::string digits = n.substr(prefix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (!only_first_stage(e.path())) continue;
    std::error_code rec;
    fs::remove_all(e.path(), rec);
  }
}

}  // namespace

RunWorkspace prepare_run_workspace(const fs::path& workspace) {
  auto bad = [&](const std::string& m) {
    throw BridgeUsageError("--workspace '" + workspace.string() + "' " + m);
  };
  if (workspace.empty()) throw BridgeUsageError("--workspace must name a folder");
  fs::path ws = workspace.lexically_normal();
  if (ws.filename().empty() && ws.has_parent_path()) ws = ws.parent_path();  // "workspace/"
  if (ws.empty() || ws == "." || ws == "..")
    bad("must name a dedicated folder (default: workspace)");
  RunWorkspace w;
  w.ws = ws;
  w.staging = ws;
  std::error_code ec;
  if (fs::exists(ws)) {
    if (!fs::is_directory(ws)) bad("exists and is not a folder");
    if (!fs::is_empty(ws)) {
      if (holds_cwd(ws))
        bad("holds the current directory; pass a dedicated folder (default: workspace)");
      // Only a folder an earlier autotune run wrote is kept aside; anything else is the
      // user's. (results.tsv alone is no sign: bench and run append to one anywhere.)
      bool ours = false;
      for (const char* f : {"profile.json", "orchestration.json", "verify.json", "report.md",
                            "rank.json", ".bridge"})
        ours = ours || fs::exists(ws / f);
      ours = ours || fs::exists(ws / "kernels" / "orchestration.json") ||
             fs::exists(ws / "progress.png");
      if (!ours)
        bad("is a non-empty folder that no autotune run wrote (no profile.json, .bridge/ or "
            "report.md in it); pass a new or empty folder");
      // An earlier run that finished no stage left only its .bridge/ request: nothing to keep.
      bool only_bridge = true;
      for (const auto& e : fs::directory_iterator(ws))
        only_bridge = only_bridge && e.path().filename() == ".bridge";
      if (only_bridge) {
        fs::remove_all(ws / ".bridge", ec);
        if (ec)
          bad("holds an earlier run that finished no stage and cannot be cleared (" +
              ec.message() + "); pass another --workspace");
      }
    }
    w.has_earlier = !fs::is_empty(ws);
  }
  remove_stale_staging(ws);
  if (w.has_earlier) {
    w.staging = sibling(ws, fmt::format(".new-{}", ::getpid()));
    fs::remove_all(w.staging, ec);  // this process's own leftover (none in practice)
  }
  fs::create_directories(w.staging, ec);
  if (ec)
    bad(std::string(w.has_earlier ? "holds an earlier run, and the folder beside it for the new "
                                    "run (" + w.staging.string() + ")"
                                  : "") +
        "cannot be created (" + ec.message() + "); pass a folder in a writable place");
  return w;
}

void commit_run_workspace(RunWorkspace& w) {
  if (w.committed) return;
  if (w.has_earlier) {
    const std::string stamp = utc_stamp();
    fs::path to = sibling(w.ws, ".prev-" + stamp);
    for (int i = 2; fs::exists(to); ++i) to = sibling(w.ws, fmt::format(".prev-{}-{}", stamp, i));
    std::error_code ec;
    fs::rename(w.ws, to, ec);
    if (ec)
      throw std::runtime_error(fmt::format(
          "the earlier run in {} could not be moved to {} ({}); it is where it was: pass another "
          "--workspace",
          w.ws.string(), to.string(), ec.message()));
    fs::rename(w.staging, w.ws, ec);
    if (ec) {
      std::error_code back;
      fs::rename(to, w.ws, back);
      if (back) w.archived = to;  // earlier_run_note says where it is
      throw std::runtime_error(fmt::format(
          "the new run's folder {} could not be moved to {} ({}); {}: pass another --workspace",
          w.staging.string(), w.ws.string(), ec.message(),
          back ? "the earlier run is in " + to.string() + " (" + back.message() + ")"
               : "the earlier run is back in " + w.ws.string()));
    }
    w.archived = to;
  }
  w.committed = true;
}

void abandon_run_workspace(const RunWorkspace& w) {
  if (w.committed || w.staging == w.ws) return;
  std::error_code ec;
  fs::remove_all(w.staging, ec);
}

std::string earlier_run_note(const RunWorkspace& w, const std::string& vladbud) {
  if (!w.has_earlier) return "";
  if (w.archived.empty())
    return "  the earlier run in " + w.ws.string() + " is as it was (nothing was moved)\n";
  const std::string ws = shell_word(w.ws.string()), old = shell_word(w.archived.string());
  if (!w.committed)  // the commit failed halfway and could not move it back
    return fmt::format("  the earlier run is in {}: use it with --workspace {}, or move it back "
                       "with `mv {} {}`\n",
                       old, old, old, ws);
  return fmt::format(
      "  the earlier run is in {}: use it with --workspace {} (e.g. `{} status --workspace {}`), "
      "or put it back in place of this run with `mv {} {} && mv {} {}`\n",
      old, old, vladbud, old, ws, shell_word(sibling(w.ws, ".failed-" + utc_stamp()).string()),
      old, ws);
}

}  // namespace vb
