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
  /// "g++ -O3 -march=native ..." for reports and cache keys.
  std::string command_line() const;
};

/// The toolchain for this machine (cached after the first call). Throws std::runtime_error
/// when the compiler is missing, naming it and the setup script that installs it.
const CpuToolchain& cpu_toolchain();

}  // namespace vb
