// Measured ceilings of the local CPU (DESIGN §5): memory bandwidth and peak compute per dtype,
// measured by a probe program built with the same toolchain as the kernels
// (src/targets/probes/cpu_ceilings.cpp) and cached per machine under cache_dir()/ceilings/.
// The evaluator's roofline (src/targets/roofline.h) and its ">100 % of ceiling is INVALID"
// guard (DESIGN §4) are based on these numbers.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace vb {

struct CpuToolchain;  // backends/cpu/toolchain.h

/// Bandwidth and compute ceilings of one machine, as measured.
struct Ceilings {
  std::string machine_id;   ///< machine_id(detect_cpu()) of the machine measured
  std::string cpu_model;    ///< CpuInfo::model of that machine
  std::string measured_at;  ///< ISO-8601 UTC time of the measurement, "2025-01-31T12:00:00Z"
  std::string compiler;     ///< probe build: compiler command line and `--version` first line
  /// Memory bandwidth ceiling in GB/s (1e9 bytes/s): the maximum over bw_probes_gbs.
  double mem_bw_gbs = 0;
  /// Per STREAM-like probe ("read", "copy", "triad"), GB/s, all threads, arrays >= 4x LLC
  /// (capped at ~3 GiB total). Bytes counted: read 8, copy 16, triad 24 per element.
  std::map<std::string, double> bw_probes_gbs;
  /// Peak compute in TFLOP/s (1e12 FLOP/s, FMA = 2 FLOP) for F64, F32, F16, BF16, all threads.
  /// A 16-bit peak is never below the fp32 peak (a kernel can always compute in fp32).
  std::map<DType, double> peak_tflops;
  /// How each peak was obtained, e.g. "AVX-512 vfmadd231ps (zmm, 16 chains)" or
  /// "via fp32 (no native 16-bit FMA)".
  std::map<DType, std::string> peak_method;
  double probe_seconds = 0;  ///< wall time of the probe run (not counting its compilation)
  int threads = 0;           ///< OpenMP threads the probe used
  /// Measured with VB_PROBE_QUICK (small arrays, short runs; bandwidth may be cache, not DRAM,
  /// bandwidth). A quick result is never reused by a normal (full) local_cpu_ceilings() call.
  bool quick = false;
  /// The CPU probe build that measured it (cpu_probe_id(): a hash of the probe's source and
  /// the compiler); "" for GPU ceilings and for caches written before the field existed. A
  /// cached measurement by another probe is not reused: a probe that gained a measurement
  /// (copy_nt, 2026-12-05) must not leave an old, lower ceiling in place.
  std::string probe;

  /// Peak TFLOP/s for kernels of dtype `t`: F64 and I64 use the F64 peak; a missing 16-bit
  /// entry falls back to F32. Throws std::invalid_argument when no usable peak is recorded.
  double peak_for(DType t) const;
};

/// JSON form: {"machine_id", "cpu_model", "measured_at", "compiler", "mem_bw_gbs",
/// "bw_probes_gbs": {"read":..}, "peak_tflops": {"fp64":..}, "peak_method": {"fp64":..},
/// "probe_seconds", "threads", "quick", "probe" (optional)}; dtypes are keyed by dtype_name().
void to_json(nlohmann::json& j, const Ceilings& c);
/// Inverse of to_json. Throws (nlohmann::json::exception or std::invalid_argument) on a missing
/// or mistyped field, an unknown dtype name, or non-positive bandwidth / F32 / F64 peaks.
void from_json(const nlohmann::json& j, Ceilings& c);

/// Builds the probe (cached by source + compiler hash in cache_dir()/probes/<hash>/), runs it
/// on all threads and returns what it measured, stamped with this machine's id and the time.
/// Takes ~7-15 s (~1-2 s with VB_PROBE_QUICK=1 in the environment). `progress`, when set,
/// receives short status lines. Throws std::runtime_error with the compiler's or the probe's
/// output when building or running fails, or when the probe's output is not the expected JSON.
Ceilings measure_cpu_ceilings(std::function<void(std::string)> progress = {});

/// The id of the CPU ceiling probe build local_cpu_ceilings() would run:
/// cpu_probe_id_of(the probe source VLADBUD_HOME/src/targets/probes/cpu_ceilings.cpp,
/// cpu_toolchain(), vladbud_home()). Throws std::runtime_error when the source is missing.
std::string cpu_probe_id();

/// The id of probe source `text` built by toolchain `tc` from the VladBud tree at `home`: 16
/// hex digits of the FNV-1a hash of the source text, the compiler's `--version` line and its
/// command line (compiler and flags) with `home` written as "$VLADBUD_HOME" wherever a flag
/// holds it as a whole path (the kernels' include directory). So the id depends on the probe's
/// source and the compiler's identity and flags, not on where the checkout lies: two checkouts
/// of the same tree share one cached measurement, and a changed probe source, compiler,
/// compiler version or flag still gives another id. Never throws.
std::string cpu_probe_id_of(const std::string& text, const CpuToolchain& tc,
                            const std::filesystem::path& home);

/// Raises every ceiling of `into` to the larger of the two measurements (bandwidth per probe,
/// peak per dtype with its method); the best of repeated probes is the machine's capability.
void merge_best(Ceilings& into, const Ceilings& other);

/// The local machine's ceilings from cache_dir()/ceilings/<machine_id>.json; measured (and the
/// cache rewritten atomically) when the file is missing, unreadable, invalid, of another
/// machine id, a quick measurement while a full one is wanted, or when `recalibrate`. A full
/// measurement runs the probe twice and keeps the best of each ceiling, and warns through
/// `progress` when the machine was busy.
/// Serialized by a process-wide mutex, so concurrent callers never run two probes at once.
Ceilings local_cpu_ceilings(bool recalibrate = false,
                            std::function<void(std::string)> progress = {});

/// Path of the cache file for `machine_id`: cache_dir()/ceilings/<machine_id>.json.
std::filesystem::path ceilings_cache_path(const std::string& machine_id);

}  // namespace vb
