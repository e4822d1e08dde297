// The launch geometry of a CUDA kernel library at a problem's size, for a target that need not be
// present (ladder rung 1, NVIDIA). The source is built with `nvcc -cudart none` for the target's
// ISA and its host code run by `vladbud-launch-record` (launch_record_main.cpp), a stand-in CUDA
// runtime that answers device and occupancy queries from the target's spec and the ptxas numbers,
// and records every launch. What a launcher decides at run time (the grid from the SM count, a
// split-K factor, the streaming path for long rows, a cudaOccupancy query) is thereby known
// without a GPU.
#pragma once

#include <array>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/occupancy.h"
#include "kernels/kernel_type.h"
#include "targets/spec_db.h"

namespace vb::ladder {

/// One recorded kernel launch.
struct KernelLaunch {
  std::string kernel;                    ///< mangled device function name
  std::array<long, 3> grid{1, 1, 1};     ///< blocks
  std::array<long, 3> block{1, 1, 1};    ///< threads
  std::array<long, 3> cluster{1, 1, 1};  ///< thread-block cluster (cudaLaunchKernelEx)
  long dynamic_smem = 0;                 ///< bytes of dynamic shared memory per block
  long blocks() const { return grid[0] * grid[1] * grid[2]; }
  long threads() const { return block[0] * block[1] * block[2]; }
};

/// ptxas numbers of one kernel, as the stand-in runtime answers cudaFuncGetAttributes and
/// occupancy queries with them.
struct KernelResources {
  int registers = 0;
  long smem_bytes = 0;   ///< static shared memory
  long local_bytes = 0;  ///< local memory (stack + spills) per thread
  int max_threads = 1024;
};

/// The outcome of one recording.
struct LaunchRecord {
  bool available = false;  ///< false: nvcc or the recorder missing, or the build failed (`why`)
  std::string why;
  bool ok = false;         ///< vb_kernel_run returned 0 under the stand-in runtime
  std::string error;       ///< the library's error text, or a crash / timeout
  std::vector<KernelLaunch> launches;
  long memset_bytes = 0;     ///< bytes written by cudaMemset(Async)
  long allocated_bytes = 0;  ///< bytes of cudaMalloc(Async) workspace
  std::vector<std::string> unanswered;  ///< queries the stand-in could not answer
  std::string command;                  ///< the nvcc command of the recording build
  bool cached = false;
};

/// Records the launches `source` makes for problem `p` on `target` (kind gpu, vendor NVIDIA,
/// with occupancy limits). `kernels` maps mangled names to their ptxas numbers (rung 1).
/// Builds into the cache (`<cache>/nvidia-launch/<key>/`, keyed by the source, the SDK headers,
/// the flags and the nvcc release) and caches the record per problem and target. Never throws
/// for a kernel's failure (it is reported in the record); throws std::invalid_argument when the
/// target has no limits or no SM count.
LaunchRecord record_launches(const std::filesystem::path& source, const Problem& p,
                             const TargetSpec& target,
                             const std::map<std::string, KernelResources>& kernels);

nlohmann::json to_json(const LaunchRecord& r);

}  // namespace vb::ladder
