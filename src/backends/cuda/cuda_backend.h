// CUDA backend (author surface "cuda"): builds one .cu kernel source with nvcc into a shared
// library exposing the kernel ABI (DESIGN §3) on device memory (kernels/include/vb_cuda.cuh).
// The library links the CUDA runtime statically, so the runner needs only the driver
// (libcuda.so.1) at run time; VladBud itself builds without CUDA.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace vb {

/// Sets the GPU architecture CUDA kernels are compiled for, e.g. "sm_90a" or "sm_80" (from
/// `--arch`). "" restores the default: $VB_CUDA_ARCH, else the first detected GPU's compute
/// capability (sm_90a for 9.0, so wgmma is available). Throws std::invalid_argument for a
/// string that is not "sm_<digits>[a|f]".
void set_cuda_arch(const std::string& arch);

/// The architecture CUDA kernels are built for now ("sm_90a"). Throws std::runtime_error when
/// none is set and no GPU is detected, naming the reason and the fix (--arch / VB_CUDA_ARCH).
std::string cuda_arch();

/// nvcc -gencode flags for an architecture name: "sm_90a" -> {"-gencode",
/// "arch=compute_90a,code=sm_90a"}. Throws std::invalid_argument for a malformed name.
std::vector<std::string> cuda_gencode_flags(const std::string& arch);

/// The build cache key of a CUDA source (16 hex digits, FNV-1a 64): its preprocessed text
/// (`nvcc -E`, line markers included, so an edited header is a new build), the nvcc flags and
/// the nvcc release. The source's own location is not part of it: every occurrence of the
/// absolute path `source` becomes "<source>" and of its folder "<source-dir>/", so the same
/// text preprocessed from another folder or under another file name is the same build (a
/// worker pool's build worker and its measuring worker write a candidate into different
/// temporary folders; the optimizer's tried/<hash>.cu and the editable source are one build).
/// The cached library then carries the path it was first built from in its line info (as the
/// CPU backend's vectorization report does). A relative `source` is left as spelled.
std::string cuda_build_key(std::string preprocessed, const std::filesystem::path& source,
                           const std::string& flags, const std::string& nvcc_release);

/// Rewrites nvcc/cudafe diagnostics "k.cu(12): error: ..." into the GCC form
/// "k.cu:12: error: ..." (host-compiler lines are already in that form), so every compiler
/// error names file:line the same way.
std::string normalize_nvcc_diagnostics(const std::string& text);

/// Parses compute-sanitizer output (SanitizerFindings: backends/backend.h) ("========= Invalid __global__ write of size 4 bytes",
/// "=========     at kernel(float*)+0x90 in k.cu:12", "========= ERROR SUMMARY: 1 error").
/// Lines without the "=========" prefix are ignored (they are the runner's own output).
SanitizerFindings parse_sanitizer_log(const std::string& log);

/// compute-sanitizer: $VB_COMPUTE_SANITIZER, else in PATH, else next to nvcc, else
/// /usr/local/cuda/bin/compute-sanitizer; always an absolute path (the runner client execve()s
/// it), "" when none is found.
std::string find_compute_sanitizer();

}  // namespace vb
