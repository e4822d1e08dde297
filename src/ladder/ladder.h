// The confidence ladder (DESIGN §6): for a (kernel variant, hardware target) pair, climb the
// rungs the tools installed here allow, record each rung's evidence, and end with an estimated
// time that carries its rung, its evidence and an uncertainty band. Ranking treats candidates
// whose bands overlap as tied ("rank, don't promise").
//
//   rung 0 static reject   compile for the target fails; source screen (forbidden calls)
//   rung 1 static signals  vectorization report, llvm-mca; ptxas/SASS; occupancy
//   rung 2 correctness     native run, QEMU user-mode, interpreters: the evaluator's stages
//   rung 3 analytical      roofline from the spec DB adjusted by rung-1 signals
//   rung 4 simulation      a cycle simulator where one is installed
//   rung 5 real hardware   measured here (ground truth; calibrates its siblings)
//
// One TargetClimber serves one kind of target (CPU ISAs, NVIDIA GPUs, ...) for the sources of
// one backend; all_climbers() lists them and climber_for() picks the one that handles a spec
// (and a backend: NVIDIA GPUs have one climber for CUDA sources and one for Triton sources).
// Nothing above this interface knows which tools a climber uses.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "kernels/kernel_type.h"
#include "targets/spec_db.h"

namespace vb::ladder {

/// Rung numbers of DESIGN §6.
enum Rung : int {
  kStaticReject = 0,
  kStaticSignals = 1,
  kCorrectness = 2,
  kAnalytical = 3,
  kSimulation = 4,
  kRealHardware = 5,
};

/// "static reject", "static signals", "correctness", "analytical", "simulation", "real hardware".
std::string rung_name(int rung);

/// What one rung found for one (variant, target) pair.
struct RungEvidence {
  int rung = 0;
  /// "pass" (rung reached and the candidate survived it), "reject" (the candidate is refused
  /// here: compile error, forbidden call, failed correctness), "unavailable" (no tool for this
  /// rung here; `summary` says which tool is missing and why), "skipped" (not asked for).
  std::string status;
  std::string tool;          ///< "clang-19 -mcpu=neoverse-v2", "llvm-mca-19", "qemu-aarch64"...
  std::string tool_version;  ///< recorded with every result (DESIGN §8: LLVM version)
  std::string summary;       ///< one line a person reads in the rank table
  nlohmann::json data;       ///< the rung's numbers (cycles/iter, registers, verdict, ...)
};

/// A RungEvidence from its fields (tool_version left empty).
inline RungEvidence make_evidence(int rung, std::string status, std::string tool,
                                  std::string summary,
                                  nlohmann::json data = nlohmann::json::object()) {
  RungEvidence e;
  e.rung = rung;
  e.status = std::move(status);
  e.tool = std::move(tool);
  e.summary = std::move(summary);
  e.data = std::move(data);
  return e;
}

/// An estimated time for one call at the ranking size, with its band.
struct Estimate {
  double time_us = 0;  ///< point estimate, microseconds
  double low_us = 0;   ///< lower edge of the uncertainty band
  double high_us = 0;  ///< upper edge
  int rung = kAnalytical;  ///< the highest rung whose evidence the estimate rests on
  std::string basis;       ///< how it was computed ("roofline memory 1.2 us x mca 1.8", ...)
  /// Set when a measured sibling corrected it: which measurement (target, kernel, file/date)
  /// and the factor applied (measured / estimated).
  std::string calibrated_by;
  double calibration_factor = 1.0;
};

/// One candidate kernel source to climb with.
struct Variant {
  std::string name;              ///< "scalar", "omp-simd", "hwy", "unroll4", "blocked-64"...
  std::filesystem::path source;  ///< the kernel source file
  std::string backend = "cpu";   ///< author surface ("cpu" C++, "cuda")
  std::string description;       ///< one line: what makes this variant different
};

/// Knobs of one climb.
struct ClimbOptions {
  DType dtype = DType::F32;          ///< dtype of the ranked problem
  std::optional<Size> size;          ///< ranking size; default the type's benchmark size
  bool quick = false;                ///< fewer evaluator sizes at rung 2
  int max_rung = kRealHardware;      ///< stop after this rung
  /// Skip rung 2 where it would need an emulator (QEMU): the fast default of `vladbud run --all`.
  bool skip_emulation = false;
  std::function<void(const std::string&)> progress;  ///< may be empty
};

/// The whole climb of one (variant, target) pair.
struct ClimbResult {
  std::string target_id;
  std::string kernel;
  std::string variant;
  std::string backend;
  int highest_rung = -1;     ///< highest rung reached with status "pass"; -1 none
  bool rejected = false;     ///< a rung rejected the candidate (rank: last, not estimated)
  std::string stop_reason;   ///< why it stopped climbing ("no cycle simulator installed", ...)
  std::vector<RungEvidence> evidence;  ///< in rung order
  std::optional<Estimate> estimate;    ///< absent when rejected or nothing to estimate from
  /// "measured" (rung 5), "emulated+analytical" (rungs 2 and 3), "analytical" (3 without 2),
  /// "static" (1 only), "rejected".
  std::string confidence;

  nlohmann::json to_json() const;
};

/// Climbs the rungs for one kind of target.
class TargetClimber {
 public:
  virtual ~TargetClimber() = default;
  /// "cpu", "nvidia", ...
  virtual std::string name() const = 0;
  /// True when this climber can serve `target` (by kind, vendor, ISA).
  virtual bool handles(const TargetSpec& target) const = 0;
  /// The backend (registry name) whose sources this climber compiles for its targets: a
  /// variant of another backend is rejected at rung 0.
  virtual std::string backend() const = 0;
  /// True when this climber climbs sources of `backend` (a variant's Variant::backend).
  bool accepts(std::string_view backend_name) const { return backend_name == backend(); }
  /// The spec DB targets of this climber that are not this machine (what `vladbud run --all`
  /// and the workspace ranking add for its backend).
  virtual std::vector<TargetSpec> remote_targets() const = 0;
  /// Climbs as far as the installed tools allow. Never throws for a bad candidate (that is a
  /// reject with evidence); throws std::runtime_error for harness problems.
  virtual ClimbResult climb(const KernelType& type, const Variant& variant,
                            const TargetSpec& target, const ClimbOptions& opts) const = 0;
};

/// Every registered climber (ladder.cpp lists them).
const std::vector<const TargetClimber*>& all_climbers();
/// The default climber of `target`: the first registered one that handles it, or nullptr.
const TargetClimber* climber_for(const TargetSpec& target);
/// The climber that handles `target` and climbs sources of `backend` (a registry name); when
/// no climber of `target` takes that backend, the target's default climber (which rejects such
/// a source at rung 0 with the reason); nullptr when no climber handles `target`.
const TargetClimber* climber_for(const TargetSpec& target, std::string_view backend);
/// The source extensions the climbers of `target` compile, joined by " or " (".cu or .py"),
/// for error messages; "" when no climber handles it.
std::string climber_extensions_for(const TargetSpec& target);
/// Names of all climbers, comma-separated ("cpu, nvidia"), for error messages.
std::string climber_names();


// ---- ranking and calibration (additions) ------------------------------------------------------

/// One entry of a ranking: the climb, its place and its tie group.
struct RankedVariant {
  ClimbResult result;
  int position = 0;   ///< 1-based place by point estimate (rejected and unestimated last)
  /// 1-based tie group: consecutive entries (by point estimate) whose bands overlap share a
  /// group ("rank, don't promise"); the chain is transitive. 0 for rejected / unestimated.
  int tie_group = 0;
};

/// Ranks climbs of one target: estimated ones by point estimate (ascending time), then the
/// unestimated, then the rejected (by name). Two neighbours are tied when the lower band edge
/// of the slower one is at or below the upper band edge of the faster one's group.
std::vector<RankedVariant> rank_climbs(std::vector<ClimbResult> climbs);

/// A measured/estimated ratio of one kernel type on one target measured here (rung 5).
struct Calibration {
  std::string target_id;  ///< the measured target ("local-cpu")
  std::string family;     ///< its TargetSpec::family (siblings share it)
  std::string kernel;     ///< the kernel type
  double factor = 1.0;    ///< geometric mean over variants of measured_us / analytical_us
  int samples = 0;        ///< variants in the mean
  std::string source;     ///< which measurement: "local-cpu softmax rung 5, 6 variants, 2026-..."
};

/// The calibration of kernel `kernel` from climbs on one target that reached rung 5: each climb
/// must carry the analytical (rung-3) estimate in its rung-3 evidence data "estimate_us" and the
/// measurement in its rung-5 evidence data "measured_us"; climbs without both are skipped.
/// nullopt when none has both. `family` is the measured target's family; `when` a date stamp.
std::optional<Calibration> calibration_from(const std::vector<ClimbResult>& measured,
                                            const std::string& family, const std::string& when);

/// Corrects a sibling's estimate (time and band multiplied by c.factor) and records which
/// measurement calibrated it. No effect when `r` has no estimate, is measured itself (rung 5)
/// or is the measured target. Throws std::invalid_argument when c.factor is not positive.
void apply_calibration(ClimbResult& r, const Calibration& c);

/// The ranking as JSON: [{"position", "tie_group", ...ClimbResult::to_json()}].
nlohmann::json ranking_to_json(const std::vector<RankedVariant>& ranking);

}  // namespace vb::ladder
