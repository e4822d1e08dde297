// Knowledge cards (`vladbud research`, DESIGN §5 and issue 3 item 5): for one target, its spec
// (data/targets/<id>.json through the spec DB), local facts when the target is this machine
// (detected CPU/GPU, measured ceilings), capability probes compiled for it
// (src/research/capabilities.h), the curated playbook of its family (data/knowledge/<family>.md),
// and the generation constraints derived from all of these, as data that generators read.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "research/capabilities.h"
#include "targets/spec_db.h"

namespace vb {

/// A target id that is neither in the spec DB nor "local". what():
/// "unknown target 'x'; known targets: a100-sxm, ..., zen4-epyc (or 'local' for this machine)".
class UnknownTargetError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// How a target's toolchain names it, for the capability probes.
struct ProbeTarget {
  ProbeIsa isa = ProbeIsa::kNvptx;
  std::string arch;    ///< "sm_90" (base; the 'a' variant is probed too), "gfx942", "znver4", ...
  std::string source;  ///< where the name came from: "spec isa" or "data/knowledge/index.json"
};

/// The probe target of a spec: NVIDIA GPUs from the spec's isa ("sm_90a" -> sm_90 + sm_90a),
/// AMD GPUs from "gfxNNN", CPUs from data/knowledge/index.json `toolchain_arch` (x86 -march /
/// aarch64 -mcpu names), else an x86 spec's isa as -march (x86-64-v3/v4). nullopt when no local
/// toolchain can compile for it (TPU, Trainium, Hexagon, ...).
std::optional<ProbeTarget> probe_target_for(const TargetSpec& spec);

/// A curated playbook (data/knowledge/<file>.md).
struct Playbook {
  std::string title;
  std::filesystem::path path;
  std::string text;
};

/// The playbook whose index entry lists `family` (data/knowledge/index.json), or nullopt.
/// Throws std::runtime_error when index.json or the listed file cannot be read.
std::optional<Playbook> playbook_for_family(const std::string& family);

/// Options of research_card() / local_card().
struct CardOptions {
  bool refresh_probes = false;  ///< re-run capability probes instead of reading the cache
  bool calibrate = false;       ///< re-measure local ceilings (CPU, GPU) for a local target
  bool probes = true;           ///< run capability probes at all
  /// Measure local ceilings when none are cached (else they are shown only when cached).
  bool measure_local = true;
  std::function<void(std::string)> progress;  ///< status lines, may be empty
};

/// The generation constraints of `spec` as data, each entry {value..., "source": why}:
/// compile_target, simd_group {name, width}, vector_width_bytes, on_chip_memory_per_block_bytes
/// {value, name}, registers_per_thread_max (GPUs), matrix_instructions (accepted capability
/// probes with a matrix family; the spec's list when no probe could run). `local` (a GpuInfo or
/// CpuInfo JSON, or null) overrides spec numbers with detected ones.
nlohmann::json generation_constraints(const TargetSpec& spec,
                                      const std::vector<CapabilityResult>& probes,
                                      const nlohmann::json& local = nullptr);

/// The card of spec-DB target `target_id`, or of this machine for "local". JSON:
/// {target, name, vendor, family, kind, isa, spec_path, spec, local {present, ...},
///  capabilities {isa, arch, source, results [...]} | null, constraints, playbook | null}.
/// Throws UnknownTargetError for an unknown id, SpecError when the spec DB is refused.
nlohmann::json research_card(const std::string& target_id, const CardOptions& opts = {});

/// Every target's card, in id order (the local machine is marked in each card's `local`).
std::vector<nlohmann::json> research_all(const CardOptions& opts = {});

/// Text rendering of a card (the playbook text included when `with_playbook`).
std::string format_card(const nlohmann::json& card, bool with_playbook = true);

}  // namespace vb
