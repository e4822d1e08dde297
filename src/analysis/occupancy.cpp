#include "analysis/occupancy.h"

#include <algorithm>
#include <climits>
#include <stdexcept>

#include <fmt/format.h>

namespace vb::analysis {
namespace {

long round_up(long x, long unit) { return (x + unit - 1) / unit * unit; }

double raw_limit(const TargetSpec& t, const char* key, double fallback) {
  const auto lim = t.raw.find("limits");
  if (lim == t.raw.end() || !lim->is_object()) return fallback;
  const auto v = lim->find(key);
  return v != lim->end() && v->is_number() ? v->get<double>() : fallback;
}

}  // namespace

SmLimits SmLimits::from_spec(const TargetSpec& t) {
  if (!t.limits)
    throw std::invalid_argument("target " + t.id +
                                " has no occupancy limits (data/targets/" + t.id +
                                ".json needs a \"limits\" object)");
  const GpuLimits& g = *t.limits;
  SmLimits l;
  l.warp_size = g.warp_size;
  l.max_warps_per_sm = static_cast<int>(
      raw_limit(t, "max_warps_per_sm", g.warp_size > 0 ? g.max_threads_per_sm / g.warp_size : 0));
  l.max_blocks_per_sm = g.max_blocks_per_sm;
  l.registers_per_sm = g.registers_per_sm;
  // Per-block register file: 64K on every compute capability from 7.0 to 12.x (CUDA C++
  // Programming Guide, "Maximum number of 32-bit registers per thread block").
  l.registers_per_block = std::min(g.registers_per_sm, 65536);
  if (g.max_registers_per_thread > 0) l.max_registers_per_thread = g.max_registers_per_thread;
  l.shared_memory_per_sm_bytes = static_cast<long>(g.max_shared_memory_per_sm_kb * 1024);
  l.shared_memory_per_block_bytes = static_cast<long>(g.max_shared_memory_per_block_kb * 1024);
  l.reserved_shared_memory_per_block_bytes =
      static_cast<long>(raw_limit(t, "reserved_shared_memory_per_block_kb", 1) * 1024);
  l.max_threads_per_block = static_cast<int>(raw_limit(t, "max_threads_per_block", 1024));
  return l;
}

std::string Occupancy::limiter() const {
  std::string s;
  for (const auto& x : limited_by) s += (s.empty() ? "" : "+") + x;
  return s;
}

Occupancy compute_occupancy(const LaunchResources& r, const SmLimits& l) {
  if (r.threads_per_block < 1)
    throw std::invalid_argument(fmt::format("occupancy: threads per block must be >= 1, got {}",
                                            r.threads_per_block));
  if (r.registers_per_thread < 0 || r.static_shared_bytes < 0 || r.dynamic_shared_bytes < 0)
    throw std::invalid_argument("occupancy: registers and shared-memory bytes must be >= 0");
  if (l.warp_size <= 0 || l.max_warps_per_sm <= 0 || l.max_blocks_per_sm <= 0 ||
      l.registers_per_sm <= 0 || l.registers_per_block <= 0 || l.register_allocation_unit <= 0 ||
      l.sub_partitions <= 0 || l.shared_memory_per_sm_bytes <= 0 ||
      l.shared_memory_allocation_unit <= 0 || l.max_threads_per_block <= 0)
    throw std::invalid_argument("occupancy: incomplete SM limits (a limit is zero)");

  Occupancy o;
  o.max_warps = l.max_warps_per_sm;
  o.warps_per_block = static_cast<int>(round_up(r.threads_per_block, l.warp_size) / l.warp_size);

  // Warps.
  o.blocks_by_warps = l.max_warps_per_sm / o.warps_per_block;
  // Blocks.
  o.blocks_by_blocks = l.max_blocks_per_sm;
  // Registers, allocated per warp within each sub-partition.
  o.regs_per_warp_allocated = static_cast<int>(
      round_up(static_cast<long>(r.registers_per_thread) * l.warp_size, l.register_allocation_unit));
  if (o.regs_per_warp_allocated == 0) {
    o.blocks_by_registers = INT_MAX;
  } else {
    const long per_block_hw = static_cast<long>(o.regs_per_warp_allocated) *
                              round_up(o.warps_per_block, l.sub_partitions);
    const long per_block_sw = static_cast<long>(o.regs_per_warp_allocated) * o.warps_per_block;
    if (r.registers_per_thread > l.max_registers_per_thread) {
      o.blocks_by_registers = 0;
      o.cannot_launch = fmt::format("{} registers per thread exceed the limit of {}",
                                    r.registers_per_thread, l.max_registers_per_thread);
    } else if (per_block_hw > l.registers_per_block || per_block_sw > l.registers_per_block) {
      o.blocks_by_registers = 0;
      o.cannot_launch = fmt::format(
          "a block of {} threads x {} registers needs {} registers, over the {} per block",
          r.threads_per_block, r.registers_per_thread, std::max(per_block_hw, per_block_sw),
          l.registers_per_block);
    } else {
      const int warps_per_smsp =
          (l.registers_per_sm / l.sub_partitions) / o.regs_per_warp_allocated;
      o.blocks_by_registers = warps_per_smsp * l.sub_partitions / o.warps_per_block;
    }
  }
  // Shared memory.
  const long smem = r.static_shared_bytes + r.dynamic_shared_bytes +
                    l.reserved_shared_memory_per_block_bytes;
  o.shared_bytes_per_block_allocated = round_up(smem, l.shared_memory_allocation_unit);
  const long block_limit = l.shared_memory_per_block_bytes + l.reserved_shared_memory_per_block_bytes;
  if (l.shared_memory_per_block_bytes > 0 && o.shared_bytes_per_block_allocated > block_limit) {
    o.blocks_by_shared = 0;
    if (o.cannot_launch.empty())
      o.cannot_launch = fmt::format(
          "{} bytes of shared memory per block exceed the {} bytes a block may use",
          r.static_shared_bytes + r.dynamic_shared_bytes, l.shared_memory_per_block_bytes);
  } else {
    o.blocks_by_shared =
        static_cast<int>(l.shared_memory_per_sm_bytes / o.shared_bytes_per_block_allocated);
  }
  if (r.threads_per_block > l.max_threads_per_block) {
    o.blocks_by_warps = 0;
    if (o.cannot_launch.empty())
      o.cannot_launch = fmt::format("{} threads per block exceed the limit of {}",
                                    r.threads_per_block, l.max_threads_per_block);
  }

  o.blocks_per_sm = std::min({o.blocks_by_warps, o.blocks_by_registers, o.blocks_by_shared,
                              o.blocks_by_blocks});
  o.active_warps = o.blocks_per_sm * o.warps_per_block;
  o.occupancy = static_cast<double>(o.active_warps) / o.max_warps;
  if (o.blocks_per_sm == 0 && o.cannot_launch.empty())
    o.cannot_launch = "a single block does not fit on an SM";
  if (o.blocks_by_warps == o.blocks_per_sm) o.limited_by.push_back("warps");
  if (o.blocks_by_registers == o.blocks_per_sm) o.limited_by.push_back("registers");
  if (o.blocks_by_shared == o.blocks_per_sm) o.limited_by.push_back("shared memory");
  if (o.blocks_by_blocks == o.blocks_per_sm) o.limited_by.push_back("blocks");
  return o;
}

nlohmann::json to_json(const Occupancy& o) {
  auto lim = [](int v) { return v == INT_MAX ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json j{{"warps_per_block", o.warps_per_block},
                   {"regs_per_warp_allocated", o.regs_per_warp_allocated},
                   {"shared_bytes_per_block_allocated", o.shared_bytes_per_block_allocated},
                   {"blocks_by_warps", o.blocks_by_warps},
                   {"blocks_by_registers", lim(o.blocks_by_registers)},
                   {"blocks_by_shared", o.blocks_by_shared},
                   {"blocks_by_blocks", o.blocks_by_blocks},
                   {"blocks_per_sm", o.blocks_per_sm},
                   {"active_warps", o.active_warps},
                   {"max_warps", o.max_warps},
                   {"occupancy", o.occupancy},
                   {"limited_by", o.limited_by}};
  if (!o.cannot_launch.empty()) j["cannot_launch"] = o.cannot_launch;
  return j;
}

}  // namespace vb::analysis
