// The AMD climber of the confidence ladder (DESIGN §6) for Triton kernel sources (Variant.backend
// "triton", one .py file) on AMD GPU targets (TargetSpec kind "gpu", vendor "AMD", isa gfx*),
// none of which needs the GPU or ROCm: Triton's AMD backend compiles to amdgcn on this machine.
//
//   rung 0  triton.compile(ASTSource(kernel), GPUTarget("hip", isa, 64)) of every kernel the
//           source launches for the ranking problem (python/vladbud/triton_build.py compile):
//           a compile error, or LDS over the target's limits.lds_kb_per_cu, rejects.
//   rung 1  the amdgcn's numbers per kernel: VGPR/AGPR/SGPR counts, VGPR/SGPR spills, LDS and
//           scratch bytes from the .amdhsa descriptor, the compiler's "; Occupancy:" (waves per
//           SIMD), and the MFMA/WMMA and global load/store instruction counts.
//   rung 2  not climbed here: the Triton interpreter checks correctness on the CPU with
//           `vladbud bench TYPE --backend triton` (target independent).
//   rung 3  analytical time at the ranking size (amd_estimate below), data "estimate_us".
//   rung 4  unavailable: no AMD GPU cycle simulator installed.
//   rung 5  unavailable: no AMD GPU measured here.
#pragma once

#include <nlohmann/json.hpp>

#include "ladder/ladder.h"

namespace vb::ladder {

/// The AMD climber (a process-wide instance).
const TargetClimber& amd_climber();

/// Analytical time of one call (us) from the roofline of `target` corrected by the rung-1
/// numbers `kernels` (triton_build.py compile's list), with its band and basis:
///   t = max(bytes / (bandwidth x 0.85 x hide), flops / (peak x path x hide)) + 4 us x launches
/// peak: the dtype's matrix peak (spec peak_tflops) when the amdgcn has MFMA/WMMA and the
/// problem is 16-bit, else the fp32 peak (peak_for(F32)); path 0.7 for MFMA, 0.5 for vector
/// fp32 (heuristic: no AMD measurement calibrates them yet); hide = min(1, occupancy / 4)
/// waves per SIMD, the occupancy of the launch with the most work (heuristic: 4 waves hide
/// HBM latency on CDNA, after AMD's CDNA3 tuning guides); 0.85 stream efficiency (heuristic,
/// the H200's measured 0.89 transferred); 4 us per launch (heuristic). Band x0.5 .. x2 (no
/// AMD calibration). Spills widen it (high x1.5). Throws std::invalid_argument when the spec
/// has no bandwidth or peak.
Estimate amd_estimate(const TargetSpec& target, DType dtype, double flops, double bytes,
                      const nlohmann::json& kernels);

}  // namespace vb::ladder
