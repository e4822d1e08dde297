// The workspace of a `vladbud autotune` run (issue: bad input must lose nothing already
// written). An earlier run in the workspace is kept: it stays where it is while the new run's
// first stage (the profile, which is where a wrong --class-name, model file or input shape
// shows) writes into a staging folder beside it, and is moved to <workspace>.prev-<UTC time>
// only once that stage succeeded. A run that fails before then leaves the earlier run as it
// was: a new user's wrong --class-name moved it aside first, then suggested an `mv` that
// nested it inside the new, failed workspace.
#pragma once

#include <filesystem>
#include <string>

namespace vb {

/// A new autotune run's workspace, from prepare_run_workspace to commit_run_workspace (or
/// abandon_run_workspace).
struct RunWorkspace {
  std::filesystem::path ws;  ///< the workspace the run ends in (lexically normal, no trailing /)
  /// Where the first stage writes: `ws` itself when it holds no earlier run, else the sibling
  /// folder <ws>.new-<pid>, renamed to `ws` by commit_run_workspace.
  std::filesystem::path staging;
  bool has_earlier = false;        ///< `ws` holds an earlier run (moved aside at the commit)
  bool committed = false;          ///< commit_run_workspace ran: the run writes into `ws`
  std::filesystem::path archived;  ///< where the commit moved the earlier run ("" when none)
  /// The folder the run writes into now: `staging` before the commit, `ws` after it.
  const std::filesystem::path& current() const { return committed ? ws : staging; }
};

/// Checks `workspace` for a new autotune run and prepares it without moving anything already
/// written: a missing or empty folder is created and used as it is; a folder an earlier
/// autotune run wrote (profile.json, orchestration.json, verify.json, report.md, rank.json,
/// .bridge/, kernels/orchestration.json or progress.png in it) is kept in place and a staging
/// folder <workspace>.new-<pid> is made beside it; an earlier run that finished no stage (only
/// its .bridge/ request) is cleared; staging folders that dead autotune processes left beside
/// it are removed. Throws BridgeUsageError naming the problem and the fix for an empty name,
/// ".", "..", a file, a folder holding the current directory, a non-empty folder no autotune
/// run wrote (the user's: never moved), or a folder that cannot be created.
RunWorkspace prepare_run_workspace(const std::filesystem::path& workspace);

/// The first stage succeeded in `w.staging`: moves the earlier run (if any) to
/// <ws>.prev-<UTC time> (`w.archived`) and the staging folder to `w.ws`, then sets
/// `w.committed`. When the second move fails the earlier run is moved back (if that fails
/// too, `w.archived` says where it is). Throws
/// std::runtime_error naming the folders and the fix when a move fails (the earlier run is then
/// in `w.ws` as before). Does nothing when already committed.
void commit_run_workspace(RunWorkspace& w);

/// The run failed before commit_run_workspace: removes the staging folder when it is not `w.ws`
/// (it holds only the failed first stage's .bridge/ request and result); the earlier run in
/// `w.ws` is untouched. When `w.ws` is the staging folder (no earlier run) what the stage wrote
/// stays, as it does after a later stage's failure. Never throws.
void abandon_run_workspace(const RunWorkspace& w);

/// The lines a failed run prints about the earlier run ("" when there was none): before the
/// commit that it is in `w.ws` as it was (or, when a failed commit could not move it back,
/// where it is); after it, where it is and two ways to use it that
/// work as written: pass --workspace <archived> to the stage commands (`vladbud` being how the
/// user runs the binary, e.g. "build/vladbud"), or swap it back with `mv <ws> <ws>.failed-<time>
/// && mv <archived> <ws>` (a bare `mv <archived> <ws>` would nest it inside the new run's folder).
std::string earlier_run_note(const RunWorkspace& w, const std::string& vladbud);

}  // namespace vb
