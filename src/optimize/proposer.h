// Proposers: where candidate sources come from. The search proposer is a seeded UCB1 bandit
// over the @vb-param space (arms = one parameter changed from the current best), with random
// restarts; the agent proposer runs an external coding agent in the kernel folder.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "optimize/params.h"

namespace vb::opt {

/// What the loop hands a proposer.
struct ProposeContext {
  std::string best_source;         ///< text of the current best version
  std::filesystem::path kernel_dir;
  std::string source_name;         ///< the editable source's file name
  std::string backend;             ///< "cpu" / "cuda"
  int experiment = 0;              ///< number of the experiment about to run (1-based)
  std::string recent_results;      ///< results.tsv header + this kernel's latest rows
};

/// A candidate.
struct Proposal {
  std::string source;       ///< the full candidate text
  Config config;            ///< its parameter values (search proposer; may be empty)
  std::string description;  ///< "LANES=32 (bandit arm LANES)", "agent edit", ...
  /// Set when the candidate must be rejected without building (e.g. the agent touched files
  /// it must not): the reason and the guard name for results.tsv.
  std::string reject_reason, reject_guard;
  /// The search proposer's bandit arm ("NAME=VALUE"; "" for a restart): observe() credits it,
  /// so that feedback for a batch of proposals reaches the arm of each.
  std::string arm;
};

/// The outcome of a proposal, fed back to the proposer.
struct Feedback {
  bool correct = false;  ///< passed the quick checks
  bool kept = false;
  double cand_us = 0, best_us = 0;  ///< quick-screen latencies (0 when not timed)
  /// The experiment was lost (a pool task never came back): the loop does not feed it back.
  bool lost = false;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string name() const = 0;
  /// The next candidate, or nullopt when the proposer has nothing left (space exhausted).
  virtual std::optional<Proposal> propose(const ProposeContext& ctx) = 0;
  virtual void observe(const Proposal&, const Feedback&) {}
  /// Resumable state (saved in the kernel folder's state.json).
  virtual nlohmann::json state() const { return nlohmann::json::object(); }
  virtual void restore(const nlohmann::json&) {}
  /// Candidates rejected by the pruner before building (not experiments).
  virtual int pruned() const { return 0; }
};

/// The search proposer over the parameters declared in the best source, whose values it reads
/// and rewrites in `syntax` (the backend's Backend::param_syntax(); it must outlive the
/// proposer: the registered backends' are static). `pruner` screens every configuration before
/// it is proposed. Reproducible: the same seed and the same feedback give the same sequence.
/// Throws std::invalid_argument when the source declares no @vb-param or a malformed one.
std::unique_ptr<Proposer> make_search_proposer(
    std::uint64_t seed, Pruner pruner, const ParamSyntax& syntax = preprocessor_param_syntax());

/// Options of the agent proposer.
struct AgentOptions {
  std::string command;           ///< run with `bash -c` in the kernel folder
  double timeout_s = 900;        ///< the agent's wall-clock limit
  /// Files outside the folder the agent must not change (the vladbud binaries, the kernel SDK
  /// headers); checksummed before and after every run.
  std::vector<std::filesystem::path> protected_files;
};

/// The agent proposer: writes program.md (when absent) and results.tsv (this kernel's latest
/// rows) into the folder, snapshots every file in it except the editable source, runs the
/// command, then restores the snapshot; an agent that changed, added or removed any other file
/// (or a protected file) gets its candidate rejected (guard "agent_touched_protected").
std::unique_ptr<Proposer> make_agent_proposer(AgentOptions opts);

/// The operating manual for an agent (program.md): protocol, playbook per backend, decision
/// rules, what it must not touch.
std::string program_md(const std::string& kernel, const std::string& backend,
                       const std::string& source_name);

}  // namespace vb::opt
