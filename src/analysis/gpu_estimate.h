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
//               = (bandwidth / SMs) x 1000 ns loaded DRAM latency (fitted on the first blind
//               study's measurements, bench/results/ranking-cuda-measured-h200.json: 600, 1000,
//               1500 and 2000 ns tried, 1000-1500 ordered softmax/rmsnorm best; unloaded
//               pointer-chase latencies on H100 are ~500-700 ns, Luo et al. 2024, and grow
//               under load); supplied = active warps x 32 threads x
//               mean bytes per LDG (16 for LDG.E.128: this is where 128-bit loads pay) x loads
//               in flight per thread (the LDG count of the kernel, clamped to 1..4, heuristic).
//               Kernels staging through cp.async (LDGSTS) or TMA count as 1 (the copies are
//               asynchronous; heuristic). Clamped to 0.05..1.
//   local       1 / (1 + local accesses / global accesses) from LDL/STL vs LDG/STG/LDGSTS/TMA: each
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
// Model 2, when the launch geometry is known (rung 1's launch record; model 3 =
// vb-nvidia-model-3 adds the operand-tile term below, 2026-12-04; model 2 made the second blind
// study's prediction):
//   resident    blocks resident per SM = min(occupancy blocks per SM, grid / SMs), and only
//               min(grid, SMs) SMs busy: a small or capped grid supplies fewer warps than the
//               theoretical occupancy (the in_flight and latency terms use these warps).
//   in_flight   loads in flight per thread = the launched kernel's LDG count clamped to 1..8
//               (heuristic: the loads of an unrolled body issue back to back), and per block at
//               most one row of the first input (a block works on one row at a time: model 2's
//               row cap, which ordered study 1's softmax/rmsnorm at tau 0.59/0.70 against
//               0.50/0.40 without it); an SM can pull at
//               most 64 B/clk from L2 (heuristic, the order of the L2-to-SM bandwidth of
//               A100/H100 microbenchmarks, Jia et al. 2018 / Luo et al. 2024), so a grid of
//               few SMs cannot reach the DRAM bandwidth.
//   phases      memory-bound kernels with block barriers: every BAR of the kernel's SASS is a
//               phase in which the block issues no loads; duty = 1 / (1 + BAR x 0.25 x warps per
//               block / 32) (heuristic: a barrier round costs ~the time of a DRAM round trip
//               when the block has 32 warps, proportionally less for smaller blocks).
//   waves       compute-bound: w = grid / SMs; efficiency w / ceil(w) (the last wave's idle SMs;
//               wave quantization, NVIDIA "GPU Performance Background" user guide).
//   smem        mma.sync: shared-memory bytes read per FLOP from the SASS (LDSM/LDS bytes over
//               HMMA FLOPs) against 128 B/clk per SM (the shared-memory bandwidth of Volta to
//               Hopper: 32 banks x 4 B per clock, CUDA C++ Programming Guide).
//   operands    tensor-core kernels with a tiled contraction (model 3): the operand bytes per
//               FLOP of the tile (KernelType::operand_bytes_per_flop at the recorded grid)
//               against (a) the L2-to-SM bandwidth, 40 B/clk/SM (heuristic: chosen between the
//               ~30 B/clk/SM measured on H100 PCIe by microbenchmarks and the per-SM cap of the
//               memory path; the two blind studies' wgmma/mma.sync matmul variants order by it),
//               and (b) for kernels that stage through cp.async or TMA, the bytes in flight:
//               0.75 x shared memory per block x resident blocks per SM (the ring minus the stage
//               being consumed, heuristic) over the same 1000 ns latency (Little's law).
//   launch      2 us for the first launch, 1 us for each further launch in the call (heuristic).
//
// Model 4 = vb-nvidia-model-4 (2026-12-05; written after the third blind study's scores, so its
// terms are checked post hoc on studies 2 and 3, not blind):
//   launches    a call whose kernel type says how its work splits across its recorded launches
//               (KernelType::launch_work; fused_mlp: the gate+up GEMM with its SwiGLU epilogue,
//               4 of 6 B*D*H FLOPs, then the down GEMM, 2 of 6) is estimated launch by launch,
//               each with its own grid, block, shared memory, occupancy and SASS, and the parts
//               add (estimate_gpu_call). Study 3's notes: the two-kernel call had been charged
//               to one kernel's geometry.
//   mma_warps   mma.sync (HMMA without HGMMA) with a launch record: min(1, warps per SM
//               sub-partition / 4), replacing the latency term. Heuristic: the measured
//               mma.sync rate (653 TFLOP/s on the H200) comes from a probe running 16 warps per
//               sub-partition with 8 independent accumulators each
//               (src/backends/cuda/probes/cuda_ceilings.cu); a tiled kernel's warp waits at
//               every k-step on its LDSM fragments and the block barrier, so the tensor pipe
//               needs several warps per sub-partition to stay busy (Little's law on the pipe;
//               Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture",
//               IPDPS 2024, on mma.sync reaching a fraction of wgmma's rate). The 4 is ours, not
//               measured: the post-hoc check of studies 2-3 is no evidence for it.
//   issue       mma.sync with a hot loop in the SASS (the innermost backward branch with the most
//               MMAs, SassMix::loop_*): the loop's instructions issue at one per clock per
//               sub-partition (Volta..Hopper whitepapers), against its HMMA FLOPs at the path's
//               rate per sub-partition; efficiency min(1, HMMA clocks / issue clocks).
//
// Model 5 = vb-nvidia-model-5 (2026-12-07, issue 20; written after the first blind Triton
// study's scores, bench/results/ranking-triton-h100-sxm.md, so checked post hoc on it, not blind):
//   row programs  when the launch geometry carries a program's load steps (tile_bytes > 0: the
//               Triton climber sets it for kernels without tensor-core MMAs; the CUDA climber does
//               not, so CUDA estimates are model 4's), the in_flight term is the utilisation of
//               the SM's share of DRAM bandwidth by its N resident programs (occupancy blocks per
//               SM, capped by the grid), each a cycle of dram_steps dependent steps loading
//               tile_bytes at once (a Triton tl.load issues a whole tile before its first use)
//               plus cached_steps re-reading those bytes from L2 (later passes over a row), by
//               exact mean-value analysis of one queueing station (demand D = dram_steps x
//               tile_bytes / (bandwidth / SMs)) and one delay station (Z = dram_steps x 1000 ns
//               + cached_steps x 300 clk; the same loaded DRAM latency as above; L2-hit
//               pointer-chase latencies: 200 cycles V100..H100, PMC10448217 Table 3; 222-339
//               cycles on an L40, arXiv 2606.22588). Reiser & Lavenberg, JACM 1980; Lazowska et
//               al., "Quantitative System Performance", 1984, ch. 6. Capped by the 64 B/clk L2-to-
//               SM bound. A one-pass program holding a whole row issues the whole row at once
//               whatever its warps: more warps per program cost only through fewer resident
//               programs (registers, 64 warps per SM); chunked loops pay a latency per step. The
//               barrier "phases" factor of model 2 is not applied (a barrier stalls one program,
//               not the SM: the other resident programs are in N). Not modelled: the reduction
//               and store tail of a program, instruction issue inside the loops.
//
// Model 6 = vb-nvidia-model-6 (2026-12-07, issue 20; written after blind Triton study 2's scores,
// bench/results/ranking-triton-blind2-h200.md, so checked post hoc on it, not blind: see
// bench/results/ranking-triton-blind2-posthoc-model6-h200.md). It replaces model 5's row-program
// terms; tensor-core kernels and every CUDA estimate (no tile_bytes) keep model 4's terms. Study 2
// showed that model 5 ranked chunked row programs by Little's law on their resident programs,
// while the measured order followed three things model 5 did not see:
//   unroll      ptxas unrolls a chunked loop and issues the loads of u steps before the first is
//               used (SASS of study 2's rmsnorm CHUNK 512/1024 with 8 warps: 4 LDG per iteration,
//               u = 4): one latency round per u steps. u = the fewest LDG bytes per thread of one
//               iteration of the program's load loops (SassMix::load_loop_min_ldg_bytes) / the
//               tile's bytes per thread (tile_bytes / threads), rounded, >= 1; rounds per pass =
//               ceil(dram_steps / u).
//   L2 reuse    a later pass re-reads the row from L2 only while it is still there. LRU keeps a
//               line whose reuse (stack) distance is below the capacity (Mattson et al., "Evaluation
//               techniques for storage hierarchies", IBM Systems Journal 1970). The bytes all
//               resident programs bring into L2 during one program's life are D = resident per SM
//               x busy SMs x (read + written bytes of a program); a re-read's distance lies between
//               0 and D, taken as spread evenly, so the hit fraction is h = min(1, C / D). C = 2/3
//               of the spec's L2 (heuristic, derived: the L2 is two partitions, each caching the
//               data of the SMs of its own GPCs, A100 and H100 whitepapers; a line homed in the far
//               partition is copied into the near one, the "L2 fabric" traffic Nsight Compute
//               counts (lts__t_sectors_srcunit_ltcfabric, NVIDIA developer forum thread 200725);
//               with addresses spread evenly over the partitions a line is held 1.5 times on
//               average). Misses are DRAM bytes and DRAM latency. Many small resident programs
//               (2-warp chunks) lose their re-reads; study 2's 2-warp rmsnorm measured 1.4x the
//               16-warp one.
//   issue       the SM issues one warp instruction per clock per sub-partition, 4 per SM (Volta..
//               Hopper whitepapers); a row program's dynamic instructions are the SASS's static
//               count with the load loops' bodies counted once per iteration (dram_steps / u of
//               them per pass). Issue time = programs per SM x warps x instructions / (4 x clock):
//               an instruction roofline (Ding & Williams, "An Instruction Roofline Model for
//               GPUs", PMBS 2019) that replaces the static "mix" factor for row programs; MUFU
//               likewise at 16 results per clock per SM (CUDA C++ Programming Guide, arithmetic
//               instruction throughput table). The compute term is the largest of the FLOP,
//               issue and MUFU times. A chunked softmax's online max/sum issues ~35 instructions
//               per element per thread and is issue-bound (study 2: 103-134 us vs 63 us of DRAM).
//   MVA         the queueing station's demand is all DRAM bytes of a program (its reads, its L2
//               misses and its writes: model 5 counted the reads only and then divided the whole
//               call's bytes by the utilisation, charging write-heavy programs twice), and the
//               delay station's latency is the unloaded DRAM latency, 600 ns (the middle of the
//               ~500-700 ns pointer-chase latencies on H100 that the model-2 entry above cites,
//               Luo et al. 2024; the queueing that loads it is the station's), per round, plus
//               300 clk per round of L2 re-reads (model 5's) or 600 ns for the missed share.
// Constants: 4 instructions/clk/SM and 16 MUFU/clk/SM (NVIDIA documents), 600 ns (published
// microbenchmarks), 2/3 of the L2 (derived, heuristic); no constant was fitted to study 2, though
// the 2/3 and the 600 ns were chosen with its scores known (the notes give the tau with the
// datasheet's full L2 and with 1000 ns). Not modelled: the reduction and store tail of a program,
// a second launch's latency-bound single program (cross_entropy's merge), DRAM page locality.
//
// Band (heuristic): x0.7 .. x1.6 of t when the estimate rests on ptxas + SASS (model 2: x0.9 ..
// x2.25, the 10th-90th percentile of measured/estimated over the first blind study's 32
// variants, bench/results/ranking-cuda-measured-h200.json); each of these
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

/// The launch geometry of the kernel the estimate rests on, as rung 1's launch record found it
/// (src/ladder/launch_record.h): exact for the target, without a GPU.
struct LaunchGeometry {
  long blocks = 0;        ///< grid size of the main kernel's launch(es), summed
  int threads = 0;        ///< threads per block
  int blocks_per_sm = 0;  ///< resident blocks per SM (occupancy at this block size and dynamic smem)
  int launches = 1;       ///< kernel launches in one call (each adds launch overhead)
  double memset_bytes = 0;  ///< bytes written by cudaMemset(Async) in one call
  /// Bytes of one row of the first input (its last dimension): a block working on one row at a
  /// time cannot have more than this in flight. 0 = unknown (no cap).
  double row_bytes = 0;
  /// Global bytes per FLOP the main kernel's tiles read (KernelType::operand_bytes_per_flop at
  /// this grid); 0 = not a tiled contraction.
  double operand_bytes_per_flop = 0;
  /// Shared memory per block (static + dynamic), bytes: the staging ring of an async-copy kernel.
  double smem_per_block = 0;
  /// Model 5 (row programs): bytes of the main input one step of a program loads at once (the
  /// tile); 0 = not a row program (model 4's in_flight and phases terms). With it, dram_steps
  /// >= 1 dependent steps per program read from DRAM and cached_steps >= 0 further steps re-read
  /// the same bytes from L2; estimate_gpu_time throws std::invalid_argument otherwise.
  double tile_bytes = 0;
  int dram_steps = 0;
  int cached_steps = 0;
  /// Model 6 (row programs): bytes one program writes to global memory (the call's output bytes /
  /// grid); >= 0 and finite, else estimate_gpu_time throws std::invalid_argument.
  double write_bytes = 0;
};

/// Model 6: the terms of a row program's estimate (see the file comment), per busy SM unless said.
struct RowProgramTerms {
  int resident = 0;          ///< programs resident per busy SM (occupancy, capped by the grid)
  double programs = 0;       ///< programs per busy SM over the call (grid / busy SMs)
  int unroll = 1;            ///< steps whose loads issue together (ptxas unrolling, from the SASS)
  int rounds = 1;            ///< dependent load rounds per pass: ceil(dram_steps / unroll)
  int passes = 1;            ///< passes over the program's bytes (1 + cached_steps / dram_steps)
  double l2_hit = 1;         ///< share of the later passes' re-reads served by L2
  double l2_capacity_bytes = 0;  ///< the capacity the hit share assumes (0: the spec has no L2)
  double reuse_distance_bytes = 0;  ///< bytes brought into L2 during one program's life
  double dram_bytes = 0;     ///< DRAM bytes of one program (reads, missed re-reads, writes)
  double demand_ns = 0;      ///< the program's time at the SM's DRAM share (queueing station)
  double latency_ns = 0;     ///< the program's latency per life (delay station)
  double utilisation = 0;    ///< the SM's DRAM share busy (mean-value analysis)
  double instructions_per_warp = 0;  ///< dynamic warp instructions of one warp of a program
  double mufu_per_warp = 0;  ///< dynamic MUFU instructions of one warp of a program
  double issue_us = 0;       ///< the call's issue time per SM (4 per clock)
  double mufu_us = 0;        ///< the call's MUFU time per SM (16 results per clock)
};

/// What the estimate knows about one kernel call.
struct GpuEstimateInput {
  double flops = 0;      ///< of one call (KernelType::flops)
  double bytes = 0;      ///< minimal bytes of one call (KernelType::min_bytes)
  DType dtype = DType::F32;
  std::optional<SassMix> mix;  ///< the dominant kernel's SASS mix (absent: no cuobjdump)
  Occupancy occupancy;         ///< of that kernel at its block size
  bool block_size_assumed = false;  ///< no launch bound / declared parameter: 256 assumed
  std::string arch;            ///< "sm_90a" (the target's isa)
  std::optional<LaunchGeometry> launch;  ///< absent: the grid is unknown (model 1 terms only)
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
  std::optional<RowProgramTerms> row_program;  ///< model 6's terms when the input is a row program
};

/// Model 4: the estimate of a call that launches several kernels, each part its own kernel
/// (mix, occupancy, geometry) with its share of the call's FLOPs and bytes
/// (KernelType::launch_work): each part is estimated alone (as one launch) and the times add;
/// the launch overhead counts `launches` launches once. The band is the parts' bands, weighted
/// by their times. Throws std::invalid_argument when `parts` is empty or a part is invalid.
GpuEstimate estimate_gpu_call(const std::vector<GpuEstimateInput>& parts, const TargetSpec& target,
                              int launches);

/// Computes the estimate for `target` (kind gpu, vendor NVIDIA). Throws std::invalid_argument
/// when flops or bytes are negative or not finite, both are 0, the target has no bandwidth,
/// no fp32 peak or no SM count, or a launch's row program is malformed (tile_bytes set but not
/// finite and > 0, dram_steps < 1, cached_steps < 0, write_bytes negative or not finite, or a
/// SASS mix whose load-loop counts are negative or exceed its instruction count).
GpuEstimate estimate_gpu_time(const GpuEstimateInput& in, const TargetSpec& target);

nlohmann::json to_json(const GpuEstimate& e);

}  // namespace vb::analysis
