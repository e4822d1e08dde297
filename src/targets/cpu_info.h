// Detection of the local CPU (DESIGN §5): model, ISA extensions, cache sizes and core count,
// read from /proc/cpuinfo and sysfs. The result keys the cached calibration ceilings
// (src/targets/ceilings.h) through machine_id().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace vb {

/// What VladBud knows about the CPU it runs on.
struct CpuInfo {
  /// Vendor: x86 "vendor_id" ("GenuineIntel", "AuthenticAMD"); aarch64 the name of the
  /// "CPU implementer" code ("ARM", "Apple", "Ampere", ...) or "implementer 0x.." when unknown;
  /// "unknown" when /proc/cpuinfo says nothing.
  std::string vendor;
  /// Model: x86 "model name" ("Intel(R) Xeon(R) Platinum 8592+"); aarch64 the core name of
  /// "CPU part" ("Neoverse-V2") or "<vendor> part 0x..", else the "model name"/"Hardware"
  /// line; "unknown" as last resort.
  std::string model;
  /// Machine architecture as uname(2) reports it: "x86_64", "aarch64", ...
  std::string arch;
  /// Logical CPUs available: std::thread::hardware_concurrency(), else
  /// sysconf(_SC_NPROCESSORS_ONLN); at least 1.
  int logical_cores = 0;
  /// Level-1 data cache per core in bytes (sysfs cpu0 index with level 1, type Data); 0 if unknown.
  std::size_t l1d_bytes = 0;
  /// Level-2 cache of cpu0 in bytes (level 2, Unified or Data); 0 if unknown.
  std::size_t l2_bytes = 0;
  /// Last-level cache in bytes: the highest-level Unified/Data cache of cpu0 (one instance,
  /// i.e. the size shared by the cores attached to it). When sysfs lists no level-3 cache
  /// this is the level-2 size (e.g. some aarch64 kernels); 0 only if no cache is known.
  std::size_t llc_bytes = 0;
  /// ISA extensions of interest present on this CPU, in a fixed canonical order, using the
  /// Linux flag names: x86 "sse2" ... "avx2", "fma", "f16c", "avx512f", "avx512bw",
  /// "avx512vl", "avx512_fp16", "avx512_bf16", "amx_tile", "amx_bf16", ...; aarch64 "neon"
  /// (alias of "asimd", both listed), "asimdhp", "asimddp", "bf16", "i8mm", "sve", "sve2", ...
  std::vector<std::string> isa;

  /// True when `ext` is in `isa`.
  bool has(std::string_view ext) const;
};

/// The 1-minute load average from /proc/loadavg (runnable + waiting tasks); 0 when unknown.
/// A value above the core count means other work competes with measurements.
double system_load_average();

/// The warning a run prints when the highest 1-minute load average seen during it,
/// `max_load`, passed `cores` + 1 (the run's own threads count in the load too, hence the +1):
/// its timings then reflect the contention. "" when the machine was quiet enough (or the load
/// is unknown: max_load <= 0). Throws std::invalid_argument for cores < 1.
std::string contention_warning(double max_load, int cores);

/// Tasks currently runnable on the machine (the R of "R/T" in /proc/loadavg), this thread
/// included; -1 when unknown. Sampled while our own workers are idle, R - 1 is the number of
/// other tasks competing for the cores.
int runnable_tasks();

/// Of `others` tasks runnable beside a timing (runnable_tasks() - 1), those that compete with
/// it: the ones beyond the cores the timed call leaves idle. `host_threads` is how many of the
/// `cores` a timed call keeps busy (Device::timing_host_threads(); 0 = all of them, a CPU
/// kernel's OpenMP team), so with 0 every other task competes, and a GPU call (1 thread) on a
/// 16-core host competes with the 16th other task only (an H200 machine's build workers on the
/// other cores read as contention and made the optimizer re-time a baseline twice).
/// Never negative; `cores` < 1 is taken as 1.
int competing_tasks(int others, int cores, int host_threads);

/// CPUs this process may run on (sched_getaffinity; a container's cpuset counts, its cgroup
/// CPU quota does not), or std::thread::hardware_concurrency() when unknown; at least 1.
int usable_cores();

/// Detects the CPU this process runs on (parses /proc/cpuinfo, sysfs caches, uname).
/// Never throws: missing sources leave fields at "unknown"/0.
CpuInfo detect_cpu();

/// Parses the vendor, model and ISA fields from the text of /proc/cpuinfo for architecture
/// `arch` ("x86_64", "aarch64", ...). Exposed for tests; detect_cpu() uses it.
CpuInfo parse_proc_cpuinfo(std::string_view text, std::string_view arch);

/// Parses a sysfs cache size such as "48K", "2048K", "1M", "266240K" into bytes (0 if invalid).
std::size_t parse_cache_size(std::string_view s);

/// A short stable identifier of the machine: FNV-1a 64 (16 hex digits) over vendor, model,
/// arch, logical cores, the three cache sizes and the ISA list. Equal inputs give equal ids
/// across runs and builds; any change in these fields (another host, a VM with other features
/// or core count) gives another id, so cached ceilings are re-measured there.
std::string machine_id(const CpuInfo& cpu);

}  // namespace vb
