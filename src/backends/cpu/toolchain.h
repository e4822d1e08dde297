// The compiler and flags the CPU backend builds kernel sources (and the ceiling probes) with.
#pragma once

#include <string>
#include <vector>

namespace vb {

/// C++ compiler and flags for CPU kernels.
struct CpuToolchain {
  std::string cxx;                 ///< $VB_CPU_CXX, default "g++"
  std::vector<std::string> flags;  ///< -std=c++20 -O3 -march=native -fopenmp -fPIC -I<sdk>
  std::string version;             ///< first line of `cxx --version`
  /// What -march=native resolves to on this machine: the CPU name and every -m feature (and
  /// cache --param) the compiler driver passes on, e.g. "-march=znver3 -mmmx ... -mno-avx512f
  /// ...". Part of the build cache key, so a cache shared between machines never hands one CPU
  /// a binary built for instructions it lacks (issue 18).
  std::string native_target;
  /// "g++ -O3 -march=native ..." for reports and cache keys.
  std::string command_line() const;
  /// The CPU -march=native resolved to ("znver3"), for reports; "" when unknown.
  std::string native_cpu() const;
};

/// Asks `cxx` what -march=native means here: runs `cxx -march=native -### -x c++ -c /dev/null`
/// and keeps, from the compiler proper's command line, the -march/-mtune/-m<feature> options and
/// the --param values (GCC) or the -target-cpu / -target-feature values (Clang), in order.
/// Falls back to the model name and flags of /proc/cpuinfo's first processor when the driver
/// prints nothing usable. Never throws; "" only when both fail.
std::string resolve_native_target(const std::string& cxx);

/// The content key of a CPU build: preprocessed source, compiler command line and version,
/// and the resolved native target. 16 hex digits.
std::string cpu_build_key(const std::string& preprocessed, const CpuToolchain& tc);

/// The toolchain for this machine (cached after the first call). Throws std::runtime_error
/// when the compiler is missing, naming it and the setup script that installs it.
const CpuToolchain& cpu_toolchain();

}  // namespace vb
