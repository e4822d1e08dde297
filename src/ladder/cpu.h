// The CPU climber of the confidence ladder (issue 4): CPU kernel sources on x86-64 (AVX-512:
// Sapphire/Emerald Rapids, Zen 4) and aarch64 (Neoverse V2 SVE2, Neoverse N1, Apple M NEON)
// targets, present or not.
//
//   rung 0  source screen (forbidden calls, wrong-ISA intrinsics or inline asm) and the
//           cross-compile for the target (clang-19 --target=... -march/-mcpu=...)
//   rung 1  clang's loop-vectorization remarks and llvm-mca-19 on the hot loop of the emitted
//           assembly, marked with LLVM-MCA-BEGIN/END comments in the assembly itself
//   rung 2  the evaluator's stages: natively when this host has the target's ISA, under
//           qemu-aarch64 user mode for aarch64 targets (candidate built with aarch64-linux-gnu-g++,
//           runner cross-built the same way)
//   rung 3  roofline from the spec DB combined with llvm-mca's cycles per iteration
//   rung 5  the evaluator's timing when the target is this machine
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ladder/ladder.h"

namespace vb::ladder {

/// How one CPU target is compiled and analysed.
struct CpuTargetConfig {
  bool aarch64 = false;
  std::string triple;       ///< "x86_64-linux-gnu", "aarch64-linux-gnu"
  std::string cpu;          ///< clang/llvm-mca CPU name ("sapphirerapids", "neoverse-v2", "native")
  std::vector<std::string> clang_cpu_flags;  ///< {"-march=znver4"} or {"-mcpu=neoverse-v2"}
  std::vector<std::string> gcc_cross_flags;  ///< aarch64-linux-gnu-g++ flags ({"-march=armv9-a+sve2"})
  bool sve = false;         ///< the target has SVE (qemu -cpu max,sve=on)
  int sve_bytes = 16;       ///< SVE vector length in bytes (from vector_width.bits)
  bool local = false;       ///< the target is this machine (rung 5 available)
};

/// The configuration of a CPU spec: the llvm-mca CPU comes from the "-mcpu=" of the spec's
/// rungs.rung1 text (e.g. "llvm-mca-19 -mcpu=znver4"), the aarch64 GCC flags from its isa
/// ("armv9-a+sve2" -> -march=armv9-a+sve2). The derived "local-cpu" spec compiles for -march=native.
/// Throws std::invalid_argument for a non-CPU spec or one whose rung1 names no -mcpu.
CpuTargetConfig cpu_target_config(const TargetSpec& target);

/// Source screen of rung 0: problems found in `source` (comments and strings ignored) for a
/// target of the given ISA: process, dynamic loading, file and socket calls (system, popen,
/// fork, exec*, posix_spawn, dlopen, fopen, open, socket, ...), inline asm written for the other
/// ISA, and x86 intrinsics headers included unconditionally for an aarch64 target. Each entry
/// reads "line N: <what> (<why>)". Empty when clean.
std::vector<std::string> screen_cpu_source(const std::string& source, bool aarch64_target);

/// The text every kernel source may include from the repository's SDK folder
/// (VLADBUD_HOME/kernels/include: vb_kernel.h, vb_cpu_exp.h, ...), each file's name and content
/// in name order, for the compile-only rungs' build-cache key: an edit to any local header
/// rebuilds (a review found the key covering vb_kernel.h alone). Empty when the folder is absent.
std::string local_include_text();

/// True when the variant runs on several threads (OpenMP parallel regions or std::thread).
bool variant_is_threaded(const std::string& source);

/// The CPU climber (registered in all_climbers()).
const TargetClimber& cpu_climber();

}  // namespace vb::ladder
