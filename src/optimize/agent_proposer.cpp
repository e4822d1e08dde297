#include <fmt/format.h>

#include <map>

#include "core/paths.h"
#include "core/process.h"
#include "optimize/cache.h"
#include "optimize/proposer.h"

namespace vb::opt {

namespace {

namespace fs = std::filesystem;

// Every regular file below `dir` except `skip` (relative path -> content), and directories.
struct Snapshot {
  std::map<std::string, std::string> files;
  std::set<std::string> dirs;
};

Snapshot snapshot(const fs::path& dir, const std::string& skip) {
  Snapshot s;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), dir).string();
    if (rel == skip) continue;
    if (it->is_directory() && !it->is_symlink()) {
      s.dirs.insert(rel);
    } else {
      s.files[rel] = it->is_regular_file() && !it->is_symlink() ? read_file(it->path())
                                                                : std::string("\x01symlink");
    }
  }
  return s;
}

// Puts the folder back as snapshotted; returns the paths that differed.
std::vector<std::string> restore_snapshot(const fs::path& dir, const std::string& skip,
                                          const Snapshot& before) {
  std::vector<std::string> changed;
  const Snapshot now = snapshot(dir, skip);
  for (const auto& [rel, content] : now.files) {
    auto it = before.files.find(rel);
    if (it == before.files.end()) {
      changed.push_back(rel + " (added)");
      fs::remove(dir / rel);
    } else if (it->second != content) {
      changed.push_back(rel + " (modified)");
      fs::remove(dir / rel);
      write_file_atomic(dir / rel, it->second);
    }
  }
  for (const auto& [rel, content] : before.files)
    if (!now.files.count(rel)) {
      changed.push_back(rel + " (removed)");
      fs::create_directories((dir / rel).parent_path());
      write_file_atomic(dir / rel, content);
    }
  for (const auto& d : now.dirs)
    if (!before.dirs.count(d)) {
      changed.push_back(d + "/ (added)");
      fs::remove_all(dir / d);
    }
  return changed;
}

class AgentProposer : public Proposer {
 public:
  explicit AgentProposer(AgentOptions o) : opt_(std::move(o)) {}
  std::string name() const override { return "agent"; }

  std::optional<Proposal> propose(const ProposeContext& ctx) override {
    const fs::path dir = ctx.kernel_dir;
    const fs::path src = dir / ctx.source_name;
    if (!fs::exists(dir / "program.md"))
      write_file_atomic(dir / "program.md",
                        program_md(kernel_of(dir), ctx.backend, ctx.source_name));
    write_file_atomic(dir / "results.tsv", ctx.recent_results);
    // The agent starts from the best version.
    write_file_atomic(src, ctx.best_source);
    const Snapshot before = snapshot(dir, ctx.source_name);
    std::map<std::string, std::string> prot;
    for (const auto& p : opt_.protected_files)
      if (fs::exists(p)) prot[p.string()] = content_hash(read_file(p));

    Proposal pr;
    ProcessResult r;
    try {
      r = run_process({"bash", "-c", opt_.command},
                      std::chrono::milliseconds(static_cast<long long>(opt_.timeout_s * 1000)), dir);
    } catch (const std::exception& e) {
      r.exit_code = -1;
      r.err = e.what();
    }
    // What the agent left in the editable source is the candidate.
    pr.source = fs::exists(src) ? read_file(src) : std::string();
    std::vector<std::string> touched = restore_snapshot(dir, ctx.source_name, before);
    for (const auto& [p, h] : prot)
      if (!fs::exists(p) || content_hash(read_file(p)) != h) touched.push_back(p + " (protected)");
    // The editable source goes back to the best version; the loop evaluates the candidate
    // from a copy and installs it only when it is kept.
    write_file_atomic(src, ctx.best_source);
    std::string tail = r.out + r.err;
    if (tail.size() > 300) tail = tail.substr(tail.size() - 300);
    pr.description = fmt::format("agent `{}` exit {}{}", opt_.command, r.exit_code,
                                 r.timed_out ? " (timed out)" : "");
    if (!touched.empty()) {
      std::string list;
      for (const auto& t : touched) list += (list.empty() ? "" : ", ") + t;
      pr.reject_guard = "agent_touched_protected";
      pr.reject_reason = "the agent changed files it must not touch (restored): " + list;
    } else if (r.timed_out) {
      pr.reject_guard = "agent_timeout";
      pr.reject_reason = fmt::format("the agent command ran past {:.0f} s", opt_.timeout_s);
    } else if (pr.source.empty()) {
      pr.reject_guard = "agent_no_source";
      pr.reject_reason = "the agent left the editable source empty or removed it";
    } else if (pr.source == ctx.best_source) {
      pr.reject_guard = "agent_no_change";
      pr.reject_reason = "the agent did not change the source" +
                         (r.exit_code != 0 ? fmt::format(" (exit {}: {})", r.exit_code, tail)
                                           : std::string());
    }
    return pr;
  }

 private:
  static std::string kernel_of(const fs::path& dir) {
    const std::string n = dir.filename().string();
    const auto u = n.find('_');
    return u == std::string::npos ? n : n.substr(u + 1);
  }
  AgentOptions opt_;
};

}  // namespace

std::unique_ptr<Proposer> make_agent_proposer(AgentOptions opts) {
  return std::make_unique<AgentProposer>(std::move(opts));
}

}  // namespace vb::opt
