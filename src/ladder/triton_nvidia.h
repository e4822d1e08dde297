// The Triton-on-NVIDIA climber of the confidence ladder (DESIGN §6) for Triton kernel sources
// (Variant.backend "triton", one .py file) on NVIDIA GPU targets (TargetSpec kind "gpu", vendor
// "NVIDIA"; the same targets as the CUDA climber of ladder/nvidia.h, which climbs .cu sources
// there). Nothing here needs the GPU or the CUDA driver: Triton's NVIDIA backend compiles to PTX
// and its bundled ptxas assembles the cubin on this machine.
//
//   rung 0  triton.compile(ASTSource(kernel), GPUTarget("cuda", CC, 32)) of every kernel the
//           source launches for the ranking problem (ladder/triton_compile.h), CC from the
//           target's isa (sm_90a -> 90; Triton compiles 90 and later as sm_CCa). A compile error
//           rejects; an architecture Triton's ptxas does not know is "unavailable" with the fix;
//           registers over the per-thread limit, shared memory (the launch's dynamic size,
//           Triton metadata "shared", plus ptxas' static smem) over the target's per-block
//           opt-in maximum, or a block over the threads-per-block limit reject.
//   rung 1  per launched kernel: `ptxas -v` of the PTX Triton produced, with Triton's own
//           ptxas and flags (registers, spill stores/loads, static smem), the SASS instruction
//           mix of the cubin (cuobjdump --dump-sass: HMMA / HGMMA / tcgen05 MMAs, LDG/STG by
//           width, LDGSTS, TMA, LDL/STL), and the theoretical occupancy from the target's
//           limits at the launch's num_warps x 32 threads and shared memory (analysis/occupancy.h).
//   rung 2  not climbed here: the Triton interpreter checks correctness on the CPU with
//           `vladbud bench TYPE --backend triton` (target independent).
//   rung 3  the CUDA climber's model (analysis/gpu_estimate.h, model 4) with the exact launch
//           geometry of the captured launches: grid, threads, blocks per SM, launches, operand
//           bytes per FLOP, shared memory per block (one estimate for the main kernel: model 4's
//           launch-by-launch sum is used by the CUDA climber only).
//   rung 4  unavailable: no GPU cycle simulator installed.
//   rung 5  unavailable: Triton kernels are not timed on NVIDIA GPUs by VladBud yet.
#pragma once

#include "ladder/ladder.h"

namespace vb::ladder {

/// The Triton-on-NVIDIA climber (a process-wide instance).
const TargetClimber& triton_nvidia_climber();

/// The compute capability Triton's NVIDIA backend takes for an isa ("sm_90a" -> 90, "sm_80" ->
/// 80, "sm_120a" -> 120). Throws std::invalid_argument for an isa that is not
/// "sm_<digits>[a|f]".
int cuda_capability_of_isa(const std::string& isa);

}  // namespace vb::ladder
