// Capability probes (DESIGN §5, §6 rung 0): tiny programs compiled for a target to discover what
// its toolchain and ISA accept, e.g. does ptxas accept `wgmma.mma_async` for sm_90a (and not for
// sm_90), `tcgen05.*` for sm_100a but not sm_120/sm_121; does g++ accept AVX-512 BF16 and AMX
// for -march=sapphirerapids; does the aarch64 cross compiler accept SVE2 for Neoverse V2.
//
// A probe answers one of four statuses and never guesses:
//   accepted     the toolchain compiled the feature for the target;
//   rejected     the toolchain refused it for the target with its own "not supported on this
//                target" diagnosis (ptxas: "not supported on .target"/"requires .target";
//                C/C++: the target's predefined feature macro is absent), AND a control
//                compile of the same feature for a target that has it succeeded, so the tool
//                knows the feature;
//   unavailable  no verdict is possible here: the tool is not installed, it does not know the
//                target (e.g. g++ 12.2 and -march=znver4) or the feature (control failed);
//   error        anything else (a probe or environment problem), with the tool's output.
// Results with a verdict are cached under cache_dir()/capabilities/, keyed by probe, target,
// probe source and the versions of every candidate tool (installing a tool changes the key).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace vb {

/// The instruction-set family a probe is compiled for.
enum class ProbeIsa { kNvptx, kX86, kAarch64, kAmdgcn };

/// "nvptx", "x86", "aarch64", "amdgcn".
std::string probe_isa_name(ProbeIsa isa);

/// One capability probe: a feature and the tiny program that uses it.
struct CapabilityProbe {
  std::string id;       ///< stable id, e.g. "wgmma", "tcgen05", "avx512_bf16", "sve2"
  ProbeIsa isa;         ///< which toolchain compiles it
  std::string feature;  ///< what it tests, e.g. "wgmma.mma_async m64n8k16 bf16 (warpgroup MMA)"
  /// Matrix-instruction family this feature provides when accepted ("wgmma", "mma.sync",
  /// "tcgen05", "AMX", "BFMMLA", "MFMA", ...), "" for non-matrix features.
  std::string matrix_family;
  /// Nvptx: the body of a PTX kernel `.entry vb_probe(.param .u64 p)` (before `ret;`).
  /// C/C++: a whole translation unit that #errors "VB_PROBE_REJECT" when the target's feature
  /// macro is missing.
  std::string source;
  /// Where the feature exists, for the control compile: an sm_XX target (nvptx), a gfx target
  /// (amdgcn), or the compiler flags that enable it (x86: "-mavx512bf16", aarch64:
  /// "-march=armv9-a+sve2").
  std::string control;
  std::string min_ptx = "7.0";  ///< nvptx: lowest PTX ISA version that has the feature
};

/// Outcome of one probe for one target architecture.
enum class CapStatus { kAccepted, kRejected, kUnavailable, kError };

/// "accepted", "rejected", "unavailable", "error".
std::string cap_status_name(CapStatus s);

struct CapabilityResult {
  std::string probe;    ///< CapabilityProbe::id
  std::string isa;      ///< probe_isa_name
  std::string arch;     ///< the target as its toolchain names it: "sm_90a", "sapphirerapids", ...
  std::string feature;  ///< CapabilityProbe::feature
  std::string matrix_family;
  CapStatus status = CapStatus::kError;
  /// Why: for rejected the tool's diagnosis line; for unavailable the plain reason
  /// ("unavailable: aarch64-linux-gnu-g++ not installed"); for error the tool's output head.
  std::string reason;
  std::string tool;        ///< tool and version that gave the verdict, e.g. "ptxas 13.0 (V13.0.88)"
  std::string command;     ///< the command line run (the probe file named probe.ptx/probe.cpp/...)
  std::string note;        ///< e.g. "g++ 12 names Neoverse V2 'demeter'"; "" when none
  std::string checked_at;  ///< ISO-8601 UTC time of the compile
  bool cached = false;     ///< true when read from the cache rather than compiled now
};

void to_json(nlohmann::json& j, const CapabilityResult& r);
void from_json(const nlohmann::json& j, CapabilityResult& r);

/// All probes VladBud knows, in a fixed order.
const std::vector<CapabilityProbe>& capability_probes();

/// The probe with this id, or nullptr.
const CapabilityProbe* find_capability_probe(const std::string& id);

/// Runs `probe` for the target architecture `arch` (nvptx "sm_90a"; x86 a -march name; aarch64
/// a -mcpu name; amdgcn a gfx name), or returns the cached verdict unless `refresh`. Never
/// throws for tool problems: they become kUnavailable or kError.
CapabilityResult run_capability_probe(const CapabilityProbe& probe, const std::string& arch,
                                      bool refresh = false);

/// Runs every probe of `isa` for `arch`. For nvptx and a base target with an
/// architecture-specific variant (sm_90, sm_100, sm_101, sm_103, sm_110, sm_120, sm_121) the
/// probes run for both "sm_XY" and "sm_XYa".
std::vector<CapabilityResult> probe_capabilities(ProbeIsa isa, const std::string& arch,
                                                 bool refresh = false);

/// Directory of the cached verdicts: cache_dir()/capabilities.
std::filesystem::path capability_cache_dir();

}  // namespace vb
