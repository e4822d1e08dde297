// The cuda backend's toolchain lookup (find_nvcc) and its device's probe, in the backend's folder
// (DESIGN §1: each backend's toolchain and probes under src/backends/<name>/).
//
// Measured ceilings of a local NVIDIA GPU (DESIGN §5): device-memory bandwidth and peak compute
// per dtype, measured by a CUDA probe (src/backends/cuda/probes/cuda_ceilings.cu) that is compiled
// at run time with nvcc for the detected compute capability, cached under
// cache_dir()/probes/<hash>/, and whose results are cached like the CPU ones under
// cache_dir()/ceilings/<gpu_machine_id>.json. Only nvcc is needed at run time; VladBud itself
// builds without CUDA.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "targets/ceilings.h"
#include "targets/nvidia_detect.h"

namespace vb {

/// The nvcc executable: $VB_NVCC, else "nvcc" in PATH, else /usr/local/cuda/bin/nvcc when it
/// exists; "" when none is found.
std::string find_nvcc();

/// nvcc target flags for compute capability major.minor: {"-gencode",
/// "arch=compute_90a,code=sm_90a"} for 9.0 (the architecture-specific target that has wgmma),
/// {"-gencode", "arch=compute_XY,code=sm_XY"} otherwise.
std::vector<std::string> nvcc_arch_flags(int cc_major, int cc_minor);

/// Compiles the GPU ceilings probe for compute capability major.minor with
/// `nvcc -O3 -std=c++17 <nvcc_arch_flags>` (no GPU needed), cached by source text, nvcc version
/// and flags in cache_dir()/probes/<hash>/cuda_ceilings; returns the executable's path.
/// Throws std::runtime_error when nvcc is missing ("nvcc not found ...") or the build fails
/// (with the compiler's output).
std::filesystem::path build_gpu_probe(int cc_major, int cc_minor,
                                      std::function<void(std::string)> progress = {});

/// Builds the probe for `gpu` (falling back to `-arch=native` if nvcc does not know its compute
/// capability), runs it on that device (~10-30 s; ~2-5 s with VB_PROBE_QUICK=1) and returns
/// the measured ceilings: machine_id = gpu_machine_id(gpu), cpu_model = the GPU's name,
/// mem_bw_gbs = max over the "copy", "read", "write" and "memcpy_d2d" probes (GB/s, bytes read
/// + written), peak_tflops for fp32 (FFMA), fp64 (max of DFMA and DMMA), fp16 and bf16
/// (mma.sync m16n8k16, or wgmma m64n256k16 on compute capability 9.0 when it is faster), and
/// threads = the SM count. Throws std::runtime_error when building or running the probe fails.
Ceilings measure_gpu_ceilings(const GpuInfo& gpu, std::function<void(std::string)> progress = {});

/// Ceilings of `gpu` from cache_dir()/ceilings/<gpu_machine_id>.json; measured (and the cache
/// rewritten atomically) when the file is missing, invalid, of another id, quick while a full
/// one is wanted, or when `recalibrate`. Serialized by a process-wide mutex.
Ceilings local_gpu_ceilings(const GpuInfo& gpu, bool recalibrate = false,
                            std::function<void(std::string)> progress = {});

}  // namespace vb
