// Theoretical occupancy of an NVIDIA kernel: the arithmetic of the CUDA Occupancy Calculator
// (CUDA C++ Programming Guide, "Occupancy Calculator" / the toolkit's cuda_occupancy.h), given
// the per-thread registers and per-block shared memory ptxas reports and the SM limits of the
// target (TargetSpec::limits, data/targets/<id>.json).
//
// Per SM, blocks are limited by
//   warps      floor(max_warps_per_sm / warps_per_block), warps_per_block = ceil(threads / 32)
//   registers  registers are allocated per warp in units of 256 (= the per-thread count rounded
//              up to a multiple of 8 for a 32-thread warp) within each of the 4 SM sub-partitions
//              (SMSPs, compute capability 7.0 and later): warps_by_regs =
//              4 * floor((registers_per_sm / 4) / regs_per_warp); blocks = floor(that / warps_per_block).
//              A block needing more than the per-block register file (registers_per_sm, 64K on
//              every target here; warps rounded up to a multiple of 4 for this hardware check) or a
//              thread over max_registers_per_thread cannot launch (0 blocks).
//   shared mem per block: static + dynamic + the per-block reservation (1 KB on sm_80 and later),
//              rounded up to the 128-byte allocation unit (sm_80+); blocks = floor(smem_per_sm /
//              that); more than the opt-in per-block maximum (+ reservation) cannot launch.
//   blocks     max_blocks_per_sm
// The result is the minimum; occupancy = active warps / max warps per SM. The shared-memory
// carveout is assumed to be the largest (the driver's default picks one that fits; a smaller
// explicit carveout could only lower occupancy).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "targets/spec_db.h"

namespace vb::analysis {

/// The SM limits the calculator needs. from_spec() fills them from a TargetSpec.
struct SmLimits {
  int warp_size = 32;
  int max_warps_per_sm = 0;
  int max_blocks_per_sm = 0;
  int registers_per_sm = 0;            ///< 32-bit registers per SM
  int registers_per_block = 0;         ///< per-block register file limit (65536 on sm_80..sm_121)
  int max_registers_per_thread = 255;
  int register_allocation_unit = 256;  ///< registers per warp allocation unit
  int sub_partitions = 4;              ///< SMSPs per SM (registers are split among them)
  long shared_memory_per_sm_bytes = 0;      ///< largest carveout
  long shared_memory_per_block_bytes = 0;   ///< opt-in maximum per block (dynamic + static)
  long static_shared_memory_limit_bytes = 48 * 1024;  ///< static __shared__ limit per block
  long reserved_shared_memory_per_block_bytes = 1024; ///< driver reservation per block
  int shared_memory_allocation_unit = 128;            ///< bytes
  int max_threads_per_block = 1024;

  /// Limits of an NVIDIA target from its `limits` (and raw JSON fields max_warps_per_sm,
  /// max_threads_per_block, reserved_shared_memory_per_block_kb when present). Throws
  /// std::invalid_argument naming the target when it has no limits.
  static SmLimits from_spec(const TargetSpec& t);
};

/// What one kernel launch asks of an SM.
struct LaunchResources {
  int threads_per_block = 0;
  int registers_per_thread = 0;
  long static_shared_bytes = 0;   ///< per block, from ptxas ("N bytes smem")
  long dynamic_shared_bytes = 0;  ///< per block, the launch's dynamic shared memory
};

/// The calculator's answer.
struct Occupancy {
  int warps_per_block = 0;
  int regs_per_warp_allocated = 0;   ///< per-thread registers x 32 rounded up to 256
  long shared_bytes_per_block_allocated = 0;  ///< incl. reservation, rounded to 128 B
  int blocks_by_warps = 0, blocks_by_registers = 0, blocks_by_shared = 0, blocks_by_blocks = 0;
  int blocks_per_sm = 0;
  int active_warps = 0;
  int max_warps = 0;
  double occupancy = 0;  ///< active_warps / max_warps, 0..1
  /// The binding limits ("warps", "registers", "shared memory", "blocks"), all that equal the
  /// minimum, in that order; "cannot launch: ..." reasons when blocks_per_sm == 0.
  std::vector<std::string> limited_by;
  std::string cannot_launch;  ///< non-empty when a single block does not fit

  std::string limiter() const;  ///< limited_by joined with "+"
};

/// Computes the theoretical occupancy. A block over max_threads_per_block, a thread over the
/// register limit or a block over the shared-memory limit gives blocks_per_sm 0 with
/// `cannot_launch` saying why. Throws std::invalid_argument when threads_per_block < 1,
/// registers or shared bytes are negative, or the limits are incomplete (a zero field).
Occupancy compute_occupancy(const LaunchResources& r, const SmLimits& l);

nlohmann::json to_json(const Occupancy& o);

}  // namespace vb::analysis
