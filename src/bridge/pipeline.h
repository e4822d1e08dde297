// The model pipeline's stages as callable functions (issue 7 item 6): profile a PyTorch model,
// verify the extracted (or optimized) kernels plugged into it, and climb the best kernels of a
// workspace up the confidence ladder for remote targets. `vladbud profile`, `vladbud verify` and
// `vladbud autotune` are thin wrappers over these; extraction is extract_kernels (bridge.h), the
// optimizer run_orchestrator (optimize/orchestrator.h) and the report write_report
// (optimize/report_md.h).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bridge/bridge.h"
#include "targets/spec_db.h"

namespace vb {

/// What to profile: the fields of `vladbud profile`.
struct ProfileRequest {
  std::string model;       ///< Python file defining the class ("" with `module`)
  std::string class_name;  ///< nn.Module class to build
  std::string module;      ///< importable module instead of `model` ("transformers", ...)
  std::string config;      ///< transformers config (file, folder or cached name)
  std::string model_args = "{}";  ///< constructor keyword arguments, a JSON object
  std::string input_shape = "1,128";  ///< "BATCH,SEQ", two positive integers
  std::string dtype = "fp32";         ///< fp32, fp16 or bf16
  std::string device = "cpu";         ///< cpu or cuda
  std::string workspace = "workspace";  ///< workspace folder (profile.json, trace.json)
  bool export_trace = false;  ///< also write workspace/trace.json (Chrome trace)
  int warmup = 3;             ///< forwards before profiling
  int iters = 3;              ///< profiled forwards (times are per forward)
};

/// Checks `r` without starting Python: a model file or module, an existing model file, a class
/// name, dtype fp32/fp16/bf16, device cpu/cuda, model_args a JSON object, input_shape two
/// positive integers "B,S", warmup >= 0 and iters >= 1. Throws BridgeUsageError naming the
/// option and the fix (e.g. "--input-shape must be BATCH,SEQ with two positive integers, e.g.
/// 1,128 (got '1,x')").
void check_profile_request(const ProfileRequest& r);

/// The profiler recorded no operator time (the forward ran outside PyTorch operators);
/// nothing was written.
struct EmptyProfileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What profile_model produced.
struct ProfileOutcome {
  nlohmann::json profile;  ///< profile.json's content (analyze_profile of the Python result)
  Roof roof;               ///< the ceilings the entries were classified against
  std::filesystem::path written;  ///< workspace/profile.json
};

/// Checks `r` (check_profile_request), runs `python -m vladbud.profile`, classifies the entries
/// against the device's roof (analyze_profile) and writes workspace/profile.json atomically.
/// Throws BridgeUsageError for bad input (either side), EmptyProfileError when nothing was
/// recorded, std::runtime_error when Python fails otherwise (no torch, crash; the message holds
/// the tail of its stderr).
ProfileOutcome profile_model(const ProfileRequest& r);

/// The text `vladbud profile` prints: the model line, forward time, roof, the ranked table
/// (`rows` rows), the share in the nine types with Amdahl's bound, and the warnings.
std::string format_profile_summary(const ProfileOutcome& p, const ProfileRequest& r, int rows);

/// What to verify: the options of `vladbud verify`.
struct VerifyRequest {
  std::filesystem::path workspace = "workspace";
  std::string backend;  ///< build the kernels with this backend ("" = the one extract used)
  bool diagnose = false;  ///< also list each type's error alone (every type is checked alone anyway)
  int reps = 9;           ///< paired timed rounds per in-model comparison (>= 1; 9 gives a 96 % interval)
  bool compile = false;   ///< the baseline is torch.compile of the model, VladBud's ops inside the graph
  bool select = true;     ///< false: plug in every correct kernel without the in-model timing decision
  std::vector<int> seeds{0, 1, 2};  ///< input seeds compared
};

/// A kernel chosen for verification did not build; `diagnostics` holds the compiler's output.
struct KernelBuildError : std::runtime_error {
  KernelBuildError(const std::string& what, std::string diag)
      : std::runtime_error(what), diagnostics(std::move(diag)) {}
  std::string diagnostics;
};

/// Builds the best kernel of each extracted type (the folder of that type with the largest
/// share, i.e. the lowest NN; its best/<type><ext> when the optimizer left one, else the
/// folder's source) as a candidate replacement, with its speedup over PyTorch at the folder's
/// own shape when both were measured (orchestration.json's best_us, problem.json's pytorch_us),
/// runs `python -m vladbud.verify` on the profiled model (profile.json's model fields and
/// entries) and writes workspace/verify.json atomically. verify decides per type inside the
/// model (DESIGN §6b; python/vladbud/verify.py's doc gives the statistics): a candidate is
/// handed over only if it is correct, intercepts the calls the profile attributed to its type,
/// and makes the model faster beyond the noise. Returns verify.json's content ({"verdict":
/// "PASS"|"FAIL", "speedup" (of what is handed over, 1.0 when nothing is), "candidates":
/// [{"type", "decision": "in"|"dropped", "reason", ...}], "kernels_in", "kernels_dropped",
/// "end_to_end": {"eager_ms", "compile_ms", "vladbud_ms", "vladbud_compile_ms", "ci", ...},
/// "seeds", "tolerance", ...}); FAIL (a candidate wrong in the model or an intercept
/// mismatch) is returned, not thrown. Throws
/// BridgeUsageError when profile.json or the kernel folders are missing or malformed (naming the
/// command to run), KernelBuildError when a kernel does not build, std::runtime_error when
/// Python fails.
nlohmann::json verify_model(const VerifyRequest& r);

/// Whether a kernel folder's best figure was timed while other work competed for the cores,
/// from `folder`/best/best.json (written by the optimizer): for the starter (experiment 0) its
/// "baseline_contended" flag, for a kept version its "kept_contended" flag. Issue 16 stores such
/// a figure only with that flag; verify's own-shape screen then has no figure for the folder
/// and the in-model rounds decide (a 52 us layernorm timed at 7557 us under load would
/// otherwise be dropped as 0.005x PyTorch without being tried in the model). A missing or
/// unreadable best.json gives false (the figure is taken as it is). Never throws.
bool best_figure_contended(const std::filesystem::path& folder);

/// Whether a kernel folder's starter (baseline) figure was timed while other work competed for
/// the cores: `folder`/best/best.json's "baseline_contended", whatever was kept since (a kept
/// version's speedup over the starter comes from interleaved rounds, but the starter's own
/// figure stays the contended one until a run re-measures it). A missing or unreadable
/// best.json gives false. Never throws.
bool baseline_figure_contended(const std::filesystem::path& folder);

/// The text `vladbud verify` prints for verify.json `res` of the model in `profile`: the
/// kernels plugged in, the tolerance, one line per seed, the latencies and speedup, the
/// warnings, the diagnosis, the verdict and where it was written.
std::string format_verify(const nlohmann::json& res, const nlohmann::json& profile,
                          const std::filesystem::path& workspace);

/// Options of rank_workspace.
struct RankWorkspaceOptions {
  /// Remote targets to climb for. Empty: the spec DB's targets of the kernels' backend other
  /// than this machine (ladder::remote_targets_for: for cpu the CPUs `vladbud run --all` adds,
  /// for cuda one NVIDIA GPU per architecture).
  std::vector<TargetSpec> targets;
  int max_rung = 3;  ///< rungs 0, 1 and 3 as `run --all` (2 only when emulate)
  bool emulate = false;  ///< also rung 2 (QEMU for Arm, native AVX-512): minutes more
  std::function<void(const std::string&)> progress;  ///< one line per climb; may be empty
};

/// Climbs the best version of every kernel folder of workspace `ws` (kernels/NN_<type>/:
/// best/<type><ext> when the optimizer kept one, else the folder's source) at the folder's
/// model shape and dtype up the confidence ladder for the remote targets, as `vladbud run
/// --all` does for the starters (ladder::climb_kernels), and writes workspace/rank.json:
/// {"kernels": [{"dir", "kernel", "source", "improved", "size", "dtype"}], "targets":
/// ladder::remote_targets_json, "table": ladder::format_remote_table}. Returns that document.
/// Throws BridgeUsageError when the workspace has no kernel folder (run `vladbud extract`).
nlohmann::json rank_workspace(const std::filesystem::path& ws, const RankWorkspaceOptions& opts);

}  // namespace vb
