// The NVIDIA climber of the confidence ladder (DESIGN §6) for CUDA C++ kernel sources
// (Variant.backend "cuda", one .cu file) on NVIDIA GPU targets (TargetSpec kind "gpu", vendor
// "NVIDIA"), none of which needs the GPU except rungs 2 and 5:
//
//   rung 0  nvcc -cubin -gencode=arch=compute_XX,code=sm_XX (XX from TargetSpec::isa, "a"
//           suffix kept: sm_90a, sm_100a) -Xptxas -v: a compile error (front end or ptxas, with
//           its message), registers over the per-thread limit, static shared memory over the
//           48 KB static limit or the per-block limit, a launch bound over the block limit
//           reject the candidate.
//   rung 1  the ptxas numbers per kernel, the SASS instruction mix (cuobjdump --dump-sass),
//           __launch_bounds__ (cuobjdump -elf, EIATTR_MAX_THREADS) and the theoretical
//           occupancy from the target's limits at the block size; and the launch record
//           (ladder/launch_record.h: the host code run under a stand-in CUDA runtime that answers
//           for the target) which names the launched kernels, their grid, block and dynamic
//           shared memory. Block size: the launch record, else the launch bound, else the
//           source's `@vb-param BLOCK_THREADS N` (or THREADS, BLOCK_SIZE, ...), else 256 (noted).
//           (DESIGN §6 lists ptxas, SASS mix and occupancy for this rung; the launch record is
//           an addition of issue 20.)
//   rung 2  unavailable (no NVIDIA GPU emulator here) unless the target is the local GPU: then
//           the evaluator's correctness stages through the "cuda" backend when it is built in.
//   rung 3  analytical time at the ranking size (analysis/gpu_estimate.h), data "estimate_us".
//   rung 4  unavailable: no GPU cycle simulator is packaged for Debian or PyPI.
//   rung 5  only on the local GPU: the evaluator's timing (data "measured_us"); calibration of
//           siblings is the ladder core's.
//
// Compiles are cached per (source text, SDK headers, nvcc and cuobjdump versions, arch) under
// cache_dir()/nvidia-static/<hash>/ (VB_CACHE_DIR moves it). Tools: nvcc from $VB_NVCC / PATH /
// /usr/local/cuda/bin; cuobjdump from $VB_CUOBJDUMP, PATH, the project's .venv (scripts/
// setup.sh installs it from PyPI) or /usr/local/cuda/bin. Without cuobjdump rung 1 keeps the
// ptxas numbers and says the SASS mix is missing.
#pragma once

#include <filesystem>
#include <string>

#include "ladder/ladder.h"

namespace vb::ladder {

/// The NVIDIA climber (a process-wide instance).
const TargetClimber& nvidia_climber();

/// Climbs one CUDA source for `target` (variant name = the file stem, backend "cuda").
/// Never throws for a bad candidate; throws std::runtime_error when `source` cannot be read,
/// std::invalid_argument when `target` is not an NVIDIA GPU.
ClimbResult nvidia_climb_source(const std::filesystem::path& source, const KernelType& type,
                                const TargetSpec& target, const ClimbOptions& opts = {});

/// The cuobjdump executable (see the file comment), or "" when none is found.
std::string find_cuobjdump();

/// The text of the SDK headers a CUDA source includes (kernels/include/*, names and contents):
/// part of every CUDA build's cache key, so an edited header is a new build.
std::string cuda_sdk_headers_text();

/// "sm_90a" -> {"-gencode=arch=compute_90a,code=sm_90a"}. Throws std::invalid_argument for an
/// isa that is not "sm_<digits>[a|f]".
std::string nvcc_gencode_for_isa(const std::string& isa);

/// The result of compiling one source for one architecture (what the cache holds).
struct CudaStaticBuild {
  bool ran = false;            ///< nvcc was found and run
  int exit_code = -1;
  std::string command;         ///< the nvcc command line
  std::string nvcc_version;    ///< "Cuda compilation tools, release 13.0, V13.0.88"
  std::string compiler_output; ///< nvcc/ptxas stderr + stdout (the -Xptxas -v report)
  bool have_sass = false;      ///< cuobjdump ran on the cubin
  std::string cuobjdump;       ///< its path and version, or why it is missing
  std::string sass;            ///< cuobjdump --dump-sass
  std::string nv_info;         ///< the .nv.info sections of cuobjdump -elf
  std::string cache_key;
  bool cached = false;
  double seconds = 0;          ///< compile + dump time (0 when cached)
};

/// Compiles `source` for `isa` with -Xptxas -v and dumps SASS and .nv.info when the compile
/// succeeds, from the cache when possible. Throws std::runtime_error when the source cannot be
/// read; a missing nvcc gives ran = false.
CudaStaticBuild compile_cuda_static(const std::filesystem::path& source, const std::string& isa);

}  // namespace vb::ladder
