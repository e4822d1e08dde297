// Detection of AMD GPUs (issue 17 step 2, item 6; DESIGN §5): the local AMD GPU becomes a
// target with its spec database entry, so the same commands run for whoever has one.
//
// Three sources, tried in this order, each only where it can exist (no AMD tool and no ROCm
// kernel driver: no AMD GPU, no error, nothing run):
//   1. `amd-smi static --asic --json` (ROCm 6+; the amd-smi CLI's "asic" block: market_name,
//      target_graphics_version, num_compute_units), when amd-smi is on PATH;
//   2. `rocm-smi --showproductname --json` (older ROCm: "cardN" objects with "Card Series" and
//      "GFX Version"), when rocm-smi is on PATH;
//   3. a ROCm build of torch (torch.version.hip set; torch.cuda.get_device_properties' name and
//      gcnArchName), asked only when /dev/kfd (the ROCm kernel driver's device) exists.
// The parsers are public so that tests feed them recorded output; detect_amd_gpus() takes the
// PATH and the python to use, so that tests inject fake tools.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "targets/spec_db.h"

namespace vb {

/// One AMD GPU as a tool reported it. A field the tool did not report is empty / 0.
struct AmdGpuInfo {
  int index = 0;             ///< the tool's GPU index (amd-smi "gpu", rocm-smi cardN, torch ordinal)
  std::string name;          ///< marketing name, e.g. "AMD Instinct MI300X"
  std::string gfx_arch;      ///< LLVM target without feature flags, e.g. "gfx942"
  int compute_units = 0;     ///< CUs (amd-smi num_compute_units, torch multi_processor_count)
  std::string detected_by;   ///< the command that reported it
};

/// JSON form: index, name, gfx_arch, compute_units, detected_by.
void to_json(nlohmann::json& j, const AmdGpuInfo& g);

/// Parses `amd-smi static --asic --json`: a list of {"gpu": N, "asic": {...}} objects, or that
/// list under "gpu_data" (newer amd-smi versions wrap it). Entries without an "asic" object
/// are skipped; "N/A" values count as unreported. Throws std::invalid_argument when the text is
/// not JSON or has neither shape.
std::vector<AmdGpuInfo> parse_amd_smi_static(const std::string& text);

/// Parses `rocm-smi --showproductname --json`: {"card0": {"Card Series": ..., "GFX Version":
/// ...}, ..., "system": {...}}; keys not named cardN are ignored. Throws std::invalid_argument
/// when the text is not a JSON object.
std::vector<AmdGpuInfo> parse_rocm_smi_product(const std::string& text);

/// Parses the torch probe's answer {"hip": "6.2.41133" | null, "devices": [{"index", "name",
/// "gcnArchName", "multi_processor_count"}]}: no devices when "hip" is null (a CUDA or CPU
/// build of torch). gcnArchName's feature flags ("gfx942:sramecc+:xnack-") are dropped. Throws
/// std::invalid_argument for anything else.
std::vector<AmdGpuInfo> parse_torch_hip_probe(const std::string& text);

/// Where detect_amd_gpus() looks.
struct AmdDetectOptions {
  std::string path;                             ///< ':'-separated tool dirs ("": $PATH)
  std::string python;                           ///< torch's python ("": project_python())
  std::filesystem::path kfd = "/dev/kfd";       ///< the ROCm kernel driver's device node
};

/// The local AMD GPUs from the first source that reports any (order in the file comment).
/// Never throws: returns an empty vector when there is none and, when `why_none` is set,
/// writes the reason ("no AMD GPU: neither amd-smi nor rocm-smi is on PATH and /dev/kfd does
/// not exist", or what a tool that ran answered). Each tool runs under a 30 s timeout.
std::vector<AmdGpuInfo> detect_amd_gpus(std::string* why_none = nullptr,
                                        const AmdDetectOptions& opts = {});

/// The spec database entry of a detected AMD GPU: vendor AMD, kind gpu, every one of its
/// match.name_tokens in `g.name` and none of its exclude_tokens, and its isa equal to
/// `g.gfx_arch` when that is known ("AMD Instinct MI300X", gfx942 -> mi300x; an MI325X never
/// maps to mi300x). Most name tokens wins (ties: smallest id). nullptr when nothing matches,
/// including a GPU without a name: a gfx arch alone is shared by several products (gfx942:
/// MI300X, MI300A, MI325X).
const TargetSpec* match_amd_device(const std::vector<TargetSpec>& db, const AmdGpuInfo& g);

}  // namespace vb
