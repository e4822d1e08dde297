// The hardware spec database (DESIGN §5): one JSON file per target in data/targets/<id>.json,
// every number with its source, loaded and validated as a whole; the mapping of a detected device
// (an NVIDIA GPU through its name and compute capability, the local CPU through its model name)
// to its entry; and, for a device the database does not know, a spec derived from the device's
// own attributes, labelled `derived`.
//
// File schema (fields beyond these are refused, so that a misspelt field cannot pass silently):
//   required  id (== file stem), name, vendor, family, kind ("gpu" | "cpu" | "accelerator"),
//             isa, author_surfaces [string], peak_tflops {dtype: TFLOP/s}, memory_bandwidth_gbs,
//             memory_gb, compute_units {count, kind}, rungs {rung0, rung1, rung2, [rung3..rung5]},
//             sources {field | "*": document or URL}
//   optional  memory_type, clock_ghz, boost_clock_ghz, caches, on_chip_memory, register_file,
//             vector_width, limits, matrix_instructions [string], isa_extensions [string],
//             match {compute_capability, name_tokens, exclude_tokens, cpu_model_tokens},
//             notes {field: text}, unverified [field]
//   NVIDIA GPUs additionally require match.compute_capability, match.name_tokens and `limits`
//   (the occupancy limits: warp_size, max_threads_per_sm, max_blocks_per_sm, registers_per_sm,
//   max_shared_memory_per_sm_kb, max_shared_memory_per_block_kb).
// Peak keys: fp64, fp64_matrix, fp32, fp32_matrix, tf32, fp16, bf16, fp8, fp6, fp4, block_fp8,
// int8, int4 — dense rates only (never a structured-sparsity headline), int8/int4 in TOPS.
// Every number anywhere in a file must be positive and finite and be covered by a `sources` key:
// the number's dotted path ("peak_tflops.bf16"), a prefix of it ("peak_tflops"), or "*". Every
// key of `sources`, `notes` and every entry of `unverified` must name a field of the file.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/paths.h"
#include "targets/ceilings.h"
#include "targets/cpu_info.h"
#include "targets/nvidia_detect.h"

namespace vb {

/// A spec file (or the database directory) that was refused. what() is
/// `<path>: field "<field>": expected <what>, got <value>` (or `<path>: <problem>` when the
/// problem is not one field's, e.g. invalid JSON); the path is shown relative to
/// vladbud_home() when it lies below it.
class SpecError : public std::runtime_error {
 public:
  SpecError(std::string path, std::string field, const std::string& message);
  const std::string& path() const { return path_; }    ///< the file (or directory) refused
  const std::string& field() const { return field_; }  ///< dotted field path, "" if none

 private:
  std::string path_;
  std::string field_;
};

/// Per-SM limits of an NVIDIA GPU, as the occupancy calculator needs them (all > 0; l2_mb 0 when
/// not recorded). Source of the per-compute-capability values: CUDA C++ Programming Guide,
/// "Technical Specifications per Compute Capability" (mirrored in CCCL's arch_traits.h).
struct GpuLimits {
  int warp_size = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int registers_per_sm = 0;          ///< 32-bit registers per SM
  int max_registers_per_thread = 0;  ///< 0 when not recorded
  double max_shared_memory_per_sm_kb = 0;
  double max_shared_memory_per_block_kb = 0;  ///< opt-in maximum per block
  double l2_mb = 0;
};

/// One hardware target: the typed fields VladBud reads, plus the file's whole JSON in `raw`.
struct TargetSpec {
  std::string id;      ///< "h200"; equals the file stem
  std::string name;    ///< "NVIDIA H200 (SXM)"
  std::string vendor;  ///< "NVIDIA", "AMD", ...
  /// Siblings share a family ("nvidia-hopper"): a target measured here calibrates its siblings.
  std::string family;
  std::string kind;  ///< "gpu", "cpu" or "accelerator"
  std::string isa;   ///< "sm_90a", "gfx942", "x86-64-v4", "armv9-a+sve2", ...
  std::vector<std::string> author_surfaces;  ///< ["cuda", "triton"], ["cpp-simd"], ["pallas"]
  /// Dense peak per dtype key (see the file comment) in TFLOP/s (TOPS for integer keys).
  std::map<std::string, double> peak_tflops;
  double memory_bandwidth_gbs = 0;  ///< GB/s (1e9 B/s)
  double memory_gb = 0;             ///< GB (1e9 B); for CPUs the maximum supported per socket
  int compute_units = 0;            ///< SMs, CUs, cores, ...
  std::string compute_unit_kind;    ///< "SM", "CU", "core", "TensorCore", ...
  double clock_ghz = 0;             ///< the clock the peaks assume; 0 when not recorded
  std::map<std::string, std::string> rungs;    ///< "rung0".."rung5" -> tool serving it here
  std::map<std::string, std::string> sources;  ///< field path or "*" -> document / URL
  std::map<std::string, std::string> notes;    ///< field path -> derivation / caveat
  std::vector<std::string> unverified;         ///< fields not confirmed by a primary source
  // Detection identity (from `match`).
  std::string compute_capability;             ///< "9.0" for NVIDIA GPUs, else empty
  std::vector<std::string> name_tokens;       ///< all must occur in the device name
  std::vector<std::string> exclude_tokens;    ///< none may occur in the device name
  std::vector<std::string> cpu_model_tokens;  ///< all must occur in CpuInfo::model
  std::optional<GpuLimits> limits;            ///< NVIDIA GPUs (required there), derived GPUs
  /// True when built from a device's own attributes instead of the database.
  bool derived = false;
  std::filesystem::path path;  ///< the file it was loaded from (empty when derived)
  nlohmann::json raw;          ///< the whole file (for derived specs: the same schema, built)

  /// The peak recorded under `key` ("bf16"), or nullopt.
  std::optional<double> peak(std::string_view key) const;
  /// The dense ceiling, TFLOP/s, for a kernel computing in `t`: F64/I64 the larger of fp64 and
  /// fp64_matrix; F32 the larger of fp32 and fp32_matrix (never tf32: DESIGN §2 fp32 is true
  /// fp32); F16/BF16 their own key, else the F32 ceiling (a 16-bit kernel can compute in fp32).
  /// nullopt when nothing applicable is recorded.
  std::optional<double> peak_for(DType t) const;
  /// The `sources` entry covering field path `field` (exact, longest dotted prefix, then "*");
  /// nullptr if none.
  const std::string* source_for(std::string_view field) const;
};

/// Loads and validates every `*.json` file of `dir` (other files are ignored) and returns the
/// targets sorted by id. Throws SpecError naming the file, the field and what was expected when
/// any file is refused (see the file comment for the rules), or naming `dir` when it does not
/// exist; ids must be unique.
std::vector<TargetSpec> load_spec_db(const std::filesystem::path& dir = vladbud_home() / "data" /
                                                                        "targets");

/// Parses and validates one spec document as if read from `path` (the id must equal the stem).
/// Throws SpecError. load_spec_db() uses it; exposed for tests and tools.
TargetSpec parse_target_spec(const nlohmann::json& doc, const std::filesystem::path& path);

/// The target with `id`, or nullptr.
const TargetSpec* find_target(const std::vector<TargetSpec>& db, std::string_view id);

/// Splits a device or model name into lower-case tokens of letters, digits and '+'
/// ("NVIDIA A100-SXM4-80GB" -> nvidia, a100, sxm4, 80gb). Matching is token-exact, so "H100"
/// never matches "H200" and "V2" never matches "V20".
std::vector<std::string> name_tokens_of(std::string_view name);

/// The database entry of an NVIDIA GPU by exact identity: compute capability `cc_major`.`cc_minor`
/// equal to the entry's, every token of its name_tokens present in `device_name` and none of its
/// exclude_tokens ("NVIDIA H200" -> h200; "NVIDIA H100 80GB HBM3" -> h100-sxm; an H200 never maps
/// to h100-sxm). When several entries match, the one with the most name tokens wins (ties: the
/// smallest id). nullptr when none matches.
const TargetSpec* match_nvidia_device(const std::vector<TargetSpec>& db,
                                      std::string_view device_name, int cc_major, int cc_minor);

/// What the CUDA driver reports about a device (cuDeviceGetAttribute / cuDeviceGetName /
/// cuDeviceTotalMem). A field left at 0 is unknown and is left out of a derived spec.
struct NvidiaDeviceAttributes {
  std::string name;  ///< "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;                                ///< CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  double max_clock_mhz = 0;                        ///< CU_DEVICE_ATTRIBUTE_CLOCK_RATE / 1000
  double memory_bytes = 0;                         ///< cuDeviceTotalMem
  double memory_clock_mhz = 0;                     ///< CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE / 1000
  int memory_bus_width_bits = 0;                   ///< CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
  double l2_bytes = 0;                             ///< CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
  double shared_memory_per_sm_bytes = 0;           ///< ..._MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
  double shared_memory_per_block_optin_bytes = 0;  ///< ..._MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
  int max_threads_per_sm = 0;                      ///< ..._MAX_THREADS_PER_MULTIPROCESSOR
  int max_blocks_per_sm = 0;                       ///< ..._MAX_BLOCKS_PER_MULTIPROCESSOR
  int registers_per_sm = 0;                        ///< ..._MAX_REGISTERS_PER_MULTIPROCESSOR
  int warp_size = 0;                               ///< ..._WARP_SIZE
};

/// A spec derived from a device's attributes (derived = true, id "<name slug>-derived", e.g.
/// "nvidia-l40s-derived"): memory bandwidth = 2 x memory clock x bus width / 8 (the DDR formula
/// of the CUDA bandwidthTest sample); fp32 (and fp64) peak = SMs x FMA lanes per SM for the
/// compute capability (CUDA C++ Programming Guide, arithmetic instruction throughput table) x 2 x
/// clock; Tensor Core peaks are not derivable and are left out (consumers fall back to fp32).
TargetSpec derive_nvidia_spec(const NvidiaDeviceAttributes& dev);

/// The attributes of a detected GPU in the spec database's units (kHz clocks to MHz).
NvidiaDeviceAttributes device_attributes(const GpuInfo& g);

/// match_nvidia_device() for dev.name and its compute capability, else derive_nvidia_spec(dev).
TargetSpec resolve_nvidia_device(const std::vector<TargetSpec>& db,
                                 const NvidiaDeviceAttributes& dev);

/// The CPU entry (kind "cpu") whose cpu_model_tokens all occur in cpu.model, or nullptr
/// (most tokens wins; ties: smallest id).
const TargetSpec* match_cpu(const std::vector<TargetSpec>& db, const CpuInfo& cpu);

/// The local CPU as a derived spec (id "local-cpu", derived = true): peaks and bandwidth from the
/// measured ceilings `c`, caches and ISA extensions from `cpu`, isa from its flags (x86-64-v2/v3/
/// v4, armv8-a[+sve][+sve2]).
TargetSpec derive_cpu_spec(const CpuInfo& cpu, const Ceilings& c);

}  // namespace vb
