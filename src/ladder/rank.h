// Ranking kernel variants for targets (issue 4): variant discovery and instantiation from the
// knowledge card's parameters, target resolution, climbing every (variant, target) pair and
// calibrating siblings with what was measured here.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ladder/ladder.h"

namespace vb::ladder {

/// A tunable a variant source declares with
///   // @vb-param NAME DEFAULT {V1,V2,...}  description
/// followed by "#ifndef NAME / #define NAME DEFAULT / #endif".
struct VariantParam {
  std::string name;
  long long default_value = 0;
  std::vector<long long> allowed;  ///< empty: any value
  std::string description;
};

/// The @vb-param declarations of a source, in order. Throws std::invalid_argument naming the
/// line for a malformed declaration or one without its "#define NAME" fallback.
std::vector<VariantParam> parse_variant_params(const std::string& source);

/// Parameter values a target's spec (knowledge card) supplies: VEC_BYTES = vector_width.bits/8,
/// L1D_BYTES, L2_BYTES (per core), LLC_BYTES from caches, CORES = compute_units. Names the card
/// cannot supply are absent.
std::map<std::string, long long> target_params(const TargetSpec& target);

/// `source` with each declared parameter's "#define NAME DEFAULT" set to the target's value: the
/// largest allowed value not above the card's (the smallest allowed when all are above), or the
/// default when the card does not supply it. A header comment records the values and why.
std::string instantiate_variant(const std::string& source, const TargetSpec& target);

/// The variants of kernel `type` in `dir` (every source with a registered backend's extension:
/// .cpp, .cu, .py; sorted by name; name = file stem, backend = that extension's backend,
/// description = the first line of the leading // or # comment or Python docstring). Throws
/// std::invalid_argument when `dir` does not exist or holds no such file (naming the directory
/// and the fix).
std::vector<Variant> load_variants(const std::filesystem::path& dir);

/// The starter of `type` for `backend` (kernels/<backend>/<type><ext>) as the one variant of a
/// ranking, named "starter". Throws std::invalid_argument when the starter file is missing.
Variant starter_variant(const Backend& backend, const KernelType& type);

/// The default variants of a type: those of every registered backend's variants folder that
/// exists (Backend::variants_dir, <home>/kernels/variants/<backend>/<type>), read by
/// load_variants and sorted by name. Throws std::invalid_argument naming the folders and the fix
/// (--variants DIR) when none exists.
std::vector<Variant> default_variants(const std::string& type);

/// Writes every variant of `variants` instantiated for `target` to `out_dir`/<name><its source's
/// extension> and returns the instantiated variants (same names, new sources).
std::vector<Variant> instantiate_variants(const std::vector<Variant>& variants,
                                          const TargetSpec& target,
                                          const std::filesystem::path& out_dir);

/// The target `id`: "local" or "local-cpu" is this machine's CPU (derived from detection and its
/// measured ceilings), else the spec DB entry. Throws std::invalid_argument for an unknown id,
/// listing the known CPU targets.
TargetSpec resolve_target(const std::string& id);

/// Times measured on one target, read from a file in the format `bench/ranking_cuda.sh
/// --measure` writes: {"target": ID, "date", "machine", "types": {TYPE: {VARIANT: {"verdict",
/// "median_us", ...}}}}. Only variants whose verdict is PASS or UNVERIFIED count.
struct MeasuredTimes {
  std::string target_id;
  std::string file;
  std::string date, machine;
  std::map<std::string, double> median_us;  ///< variant -> measured median, microseconds
};

/// Loads the times of kernel `type` from `file`. Throws std::invalid_argument naming the file
/// and the fix when it cannot be read, is not that format, or holds no time for `type`.
MeasuredTimes load_measured_times(const std::filesystem::path& file, const std::string& type);

/// How far a ranking for a target family and kernel type has been shown to hold: a Kendall tau
/// measured in a study (data/ranking_trust.json: {"studies": [{"family", "backend", "kernel",
/// "tau", "pairs", "blind", "regret", "model", "study"}]}; "backend" is the source language
/// ranked, a record without it covers every backend).
struct RankingTrust {
  std::string family, kernel, model, study;
  double tau = 0, regret = 0;
  int pairs = 0;
  bool blind = false;
};

/// The trust records for `family` and `kernel` (the kernel's own and the studies' "all"
/// records) of studies that ranked sources of `backend` ("" = any), newest model first and,
/// within a model, the kernel's own record before "all"; empty
/// when no such study measured that family. Throws std::runtime_error when
/// data/ranking_trust.json exists but is malformed.
std::vector<RankingTrust> ranking_trust(const std::string& family, const std::string& kernel,
                                        const std::string& backend = "");

/// The ranking of one target.
struct TargetRanking {
  TargetSpec target;
  std::vector<RankedVariant> ranking;
  std::optional<Calibration> calibration_applied;  ///< the sibling measurement used, if any
  std::vector<RankingTrust> trust;                 ///< measured taus for this family and kernel
};

/// Climbs every variant (instantiated for each target) on every target, calibrates each target
/// from a sibling (same family) that reached rung 5 in this call, and ranks per target.
/// Throws std::invalid_argument when no climber handles a target.
///
/// `measured`: times read from files (load_measured_times); a target among `targets` with
/// measured times gets them as rung-5 evidence for the variants they name, so that they
/// calibrate its siblings as a measurement in this call would. Where no sibling of a target's
/// family was measured, a measured target of the same vendor calibrates it across families,
/// with the band widened (x0.8 low, x1.25 high) and the source saying so.
std::vector<TargetRanking> rank_variants(const KernelType& type,
                                         const std::vector<Variant>& variants,
                                         const std::vector<TargetSpec>& targets,
                                         const ClimbOptions& opts,
                                         const std::vector<MeasuredTimes>& measured = {});

/// The rankings as an aligned text table (per target: position, tie group, variant, rung,
/// confidence, estimate, band, then one evidence line per rung).
std::string format_rankings(const std::vector<TargetRanking>& rankings, const std::string& kernel);

/// {"kernel", "dtype", "targets": [{"id", "name", "family", "local", "calibration",
/// "ranking": [...]}]}
nlohmann::json rankings_to_json(const std::vector<TargetRanking>& rankings,
                                const std::string& kernel, DType dtype);

/// The CPU targets of the spec DB other than this machine, by id (what `vladbud run --all` adds).
std::vector<TargetSpec> remote_cpu_targets();

/// The remote targets of every climber that climbs sources of `backend`
/// (TargetClimber::remote_targets: remote_cpu_targets() for cpu, remote_nvidia_targets() for
/// cuda); empty when no climber takes that backend.
std::vector<TargetSpec> remote_targets_for(const std::string& backend);

/// NVIDIA GPUs of the spec DB that the NVIDIA climber serves, one per distinct architecture
/// (TargetSpec::isa: sm_80, sm_89, sm_90a, sm_100a, sm_120, sm_121 ...; the first id in order
/// wins, e.g. h100-sxm for sm_90a), leaving out the architecture of a detected local GPU
/// (measured at rung 5 instead). Compile-only rungs: nvcc/ptxas/cuobjdump, no GPU needed.
std::vector<TargetSpec> remote_nvidia_targets();

/// One kernel to climb: its type, its source (Variant::source, Variant::backend "cpu" or
/// "cuda"; Variant::name labels the row, e.g. the kernel folder "01_matmul"), and the problem
/// it is ranked at (size: nullopt = the type's benchmark size; dtype).
struct KernelToClimb {
  const KernelType* type = nullptr;
  Variant variant;
  std::optional<Size> size;
  DType dtype = DType::F32;
};

/// Climbs each kernel on each target with `opts` (its size and dtype replaced by the kernel's);
/// a kernel whose backend does not match a target's kind (cpu sources for CPU targets, cuda for
/// GPUs) is not climbed there and gets a rejected result saying so. Results per target in
/// `kernels` order. Throws std::invalid_argument when no climber handles a target.
std::vector<std::vector<ClimbResult>> climb_kernels(const std::vector<KernelToClimb>& kernels,
                                                    const std::vector<TargetSpec>& targets,
                                                    const ClimbOptions& opts);

/// Climbs the starter kernel of each type on each target with `opts`
/// (`vladbud run --all`: rungs 0, 1, 3, and 2 only with --emulate). `backend` "" climbs each
/// target's default climber's starters (kernels/cpu/<type>.cpp on CPUs, kernels/cuda/<type>.cu
/// on NVIDIA GPUs, kernels/triton/<type>.py on AMD GPUs); a registered backend name climbs that
/// backend's starters wherever a climber takes them (kernels/triton/*.py on NVIDIA and AMD), and
/// a target none of whose climbers takes them gets rejected results saying so. Results per
/// target in `types` order. Throws std::invalid_argument for an unknown backend or a target no
/// climber handles.
std::vector<std::vector<ClimbResult>> climb_starters(const std::vector<const KernelType*>& types,
                                                     const std::vector<TargetSpec>& targets,
                                                     const ClimbOptions& opts,
                                                     const std::string& backend = "");

/// The family of a target as `vladbud run --remote` names it: "cpu" for CPU targets, else the
/// target's vendor in lower case ("nvidia", "amd"): target kinds and vendors (DESIGN §5), not
/// backend names.
std::string target_family(const TargetSpec& t);

/// Every climber's remote targets (TargetClimber::remote_targets, each target once) grouped by
/// target_family, families in climber order ("cpu", "nvidia", "amd" with the spec DB shipped
/// here). Asks each climber once (the NVIDIA ones detect the local GPU to leave its
/// architecture out), so callers take it once and look families up in it.
std::vector<std::pair<std::string, std::vector<TargetSpec>>> remote_targets_by_family();

/// {"id", "name", "backend": "cpu", "local": false, "family", "kernels": [{"kernel", "rung",
/// "rung_name", "confidence", "estimate_us", "low_us", "high_us", "rejected", "stop_reason"}]}
/// per target.
nlohmann::json remote_targets_json(const std::vector<TargetSpec>& targets,
                                   const std::vector<std::vector<ClimbResult>>& results);

/// The kernel x remote target table: highest rung and estimate (us) with its band. Rows are
/// labelled `row_labels[k]` when given (one per kernel), else by the kernel type.
std::string format_remote_table(const std::vector<TargetSpec>& targets,
                                const std::vector<std::vector<ClimbResult>>& results,
                                const std::vector<std::string>& row_labels = {});

}  // namespace vb::ladder
