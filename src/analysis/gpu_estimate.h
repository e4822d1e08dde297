// Analytical time of one NVIDIA kernel call (ladder rung 3): the roofline of the target's spec
// (Williams, Waterman, Patterson 2009) corrected by the static signals of rung 1 (ptxas numbers,
// SASS instruction mix, theoretical occupancy). Every factor carries its source, or says
// "heuristic" where it is a modelling choice of ours; the band widens for every heuristic that
// dominates the answer.
//
//   t = max(t_memory, t_compute) + t_launch
//   t_memory  = min_bytes / (bandwidth x stream x in_flight x local)
//   t_compute = flops / (peak x path_efficiency x mix x latency_hiding)
//
//   stream      0.89: mean of the measured read 95 %, copy 82 %, write 90 % of the datasheet
//               bandwidth on the H200 (bench/results/targets-h200.md), transferred to every
//               NVIDIA target (heuristic transfer).
//   in_flight   Little's law (bytes in flight = bandwidth x latency; Little 1961, applied to
//               GPUs by Volkov, "Better Performance at Lower Occupancy", GTC 2010): needed per SM
//               = (bandwidth / SMs) x 600 ns DRAM latency (heuristic, the order of published
//               pointer-chase measurements on A100/H100); supplied = active warps x 32 threads x
//               mean bytes per LDG (16 for LDG.E.128: this is where 128-bit loads pay) x loads
//               in flight per thread (the LDG count of the kernel, clamped to 1..4, heuristic).
//               Kernels staging through cp.async (LDGSTS) or TMA count as 1 (the copies are
//               asynchronous; heuristic). Clamped to 0.05..1.
//   local       1 / (1 + local accesses / global accesses) from LDL/STL vs LDG/STG counts: each
//               local access costs about one global access (heuristic; local memory is cached
//               in L1/L2 but spills sit in the hot loop).
//   peak        tensor-core peak of the dtype (spec peak_tflops.fp16/bf16) only when the SASS
//               has HMMA/HGMMA/tcgen05 MMAs and the problem is 16-bit; else the fp32 peak
//               (also for MMAs when the spec records no peak for the dtype, e.g. GB10: then
//               path = 1, no issue model, band widened).
//   path        tensor path: wgmma (HGMMA) on sm_90 0.90 and mma.sync (HMMA) on sm_90 0.66
//               (measured on the H200, bench/results/targets-h200.md: 890/989 and 653/989);
//               mma.sync where it is the architecture's tensor-core path (sm_80/86/89/120/121)
//               0.85 (heuristic); mma.sync on sm_100 0.35 and tcgen05 on sm_100 0.85
//               (heuristic: the datasheet peak assumes tcgen05). fp32 path: 0.97 (FFMA probe
//               measured on the H200).
//   mix         fp32 path only: useful flops / issue capacity. An SM sub-partition issues one
//               warp instruction per cycle (NVIDIA Volta..Blackwell whitepapers); an fp32
//               instruction occupies the FP32 pipe 32 / (FP32 lanes per SMSP) cycles (lanes from
//               the spec: peak / (2 x clock x SMs x 4)). mix = (2 FFMA + FADD/FMUL)/2 x cpi /
//               max((FFMA + FADD/FMUL) x cpi, all instructions). Static counts (heuristic: code
//               outside loops weighs as much as the loop body). Clamped to 0.05..1.
//   latency     tensor path: min(1, active warps / 4) (one warp per sub-partition's tensor core,
//               whitepapers); fp32 path: min(1, active warps / 8) (2 warps per sub-partition to
//               cover the ~4-cycle FFMA latency with ILP, heuristic).
//   t_launch    2 us per call (heuristic: launch-to-completion floor of a kernel).
//
// Band (heuristic): x0.7 .. x1.6 of t when the estimate rests on ptxas + SASS; each of these
// widens it (low x0.9, high x1.25): block size assumed, no SASS mix, a heuristic tensor-core
// path factor, in_flight < 0.5, local-memory traffic, a spec peak or bandwidth marked
// unverified.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/occupancy.h"
#include "analysis/sass_mix.h"
#include "core/dtype.h"
#include "targets/spec_db.h"

namespace vb::analysis {

/// What the estimate knows about one kernel call.
struct GpuEstimateInput {
  double flops = 0;      ///< of one call (KernelType::flops)
  double bytes = 0;      ///< minimal bytes of one call (KernelType::min_bytes)
  DType dtype = DType::F32;
  std::optional<SassMix> mix;  ///< the dominant kernel's SASS mix (absent: no cuobjdump)
  Occupancy occupancy;         ///< of that kernel at its block size
  bool block_size_assumed = false;  ///< no launch bound / declared parameter: 256 assumed
  std::string arch;            ///< "sm_90a" (the target's isa)
};

/// One multiplicative factor of the model.
struct ModelFactor {
  std::string name;    ///< "stream", "in_flight", ...
  double value = 1;
  std::string source;  ///< document, measurement or "heuristic: ..."
};

/// The estimate of one call.
struct GpuEstimate {
  double time_us = 0, low_us = 0, high_us = 0;
  double memory_us = 0, compute_us = 0, launch_us = 0;
  double ideal_memory_us = 0, ideal_compute_us = 0;  ///< pure roofline (datasheet numbers)
  double peak_tflops = 0;   ///< the compute roof used
  std::string peak_key;     ///< "bf16 (tensor cores)" or "fp32"
  std::string bound;        ///< "memory" or "compute" (which term dominates)
  std::vector<ModelFactor> factors;
  std::vector<std::string> widened_by;  ///< reasons the band was widened
  std::string basis;        ///< one line: "memory 12.3 us (roofline 9.1 us / 0.74) + launch 2 us"
};

/// Computes the estimate for `target` (kind gpu, vendor NVIDIA). Throws std::invalid_argument
/// when flops or bytes are negative or not finite, both are 0, or the target has no bandwidth,
/// no fp32 peak or no SM count.
GpuEstimate estimate_gpu_time(const GpuEstimateInput& in, const TargetSpec& target);

nlohmann::json to_json(const GpuEstimate& e);

}  // namespace vb::analysis
