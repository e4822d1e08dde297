#include "analysis/gpu_estimate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace vb::analysis {
namespace {

constexpr double kStream = 0.89;
constexpr double kDramLatencyNs = 1000;  // loaded latency, fitted on study 1 (see the header)
constexpr double kLaunchUs = 2.0;
constexpr double kFfmaPath = 0.97;
constexpr double kBandLow = 0.7, kBandHigh = 1.6;
// Model 2's band: the 10th and 90th percentiles of measured / estimated over the first blind
// study's 32 variants (bench/results/ranking-cuda-measured-h200.json; median 1.33).
constexpr double kBand2Low = 0.9, kBand2High = 2.25;
constexpr double kWidenLow = 0.9, kWidenHigh = 1.25;
constexpr double kSmL2BytesPerClk = 64;    // L2 -> SM, per SM (heuristic; see the header)
constexpr double kSmemBytesPerClk = 128;   // shared memory, per SM (32 banks x 4 B)
constexpr double kBarrierCost = 0.25;      // a barrier round, in DRAM round trips per 32 warps
constexpr double kNextLaunchUs = 1.0;
constexpr double kL2BytesPerClkPerSm = 40;  // L2 -> SM for operand tiles (heuristic; header)
constexpr double kRingInFlight = 0.75;      // share of a staging ring in flight (heuristic)
constexpr double kMmaSyncWarpsPerSmsp = 4;  // warps per sub-partition mma.sync needs (heuristic)
// Model 5: an L2 hit's latency in SM clocks (pointer chase: 200 cycles V100..H100, Table 3 of
// PMC10448217; 222-339, mean 279, across the SMs of an L40, arXiv 2606.22588; the upper middle).
constexpr double kL2HitClk = 300;
// Model 6 (see the header): the unloaded DRAM latency of the mean-value analysis's delay station
// (pointer chase on H100 ~500-700 ns, Luo et al. 2024: the middle); the share of the spec's L2 a
// row's re-reads can use (two partitions, a far line held twice: 1 / 1.5, heuristic, derived);
// warp instructions issued per clock per SM (4 sub-partitions x 1, Volta..Hopper whitepapers);
// MUFU results per clock per SM (CUDA C++ Programming Guide, arithmetic instruction throughput).
constexpr double kRowDramLatencyNs = 600;
constexpr double kL2ReuseShare = 2.0 / 3.0;
constexpr double kIssuePerClkPerSm = 4;
constexpr double kMufuPerClkPerSm = 16;

// Model 5: exact mean-value analysis of a closed network with one queueing station (the SM's
// share of DRAM bandwidth, demand `d` ns per program cycle) and one delay station (`z` ns of
// latency per cycle) visited by `n` programs (Reiser & Lavenberg, "Mean-Value Analysis of
// Closed Multichain Queuing Networks", JACM 1980; Lazowska et al., "Quantitative System
// Performance", 1984, ch. 6). Returns the station's utilisation X(n) x d, in (0, 1).
double mva_utilisation(int n, double d, double z) {
  double q = 0, x = 0;
  for (int i = 1; i <= n; ++i) {
    const double r = d * (1 + q);
    x = i / (z + r);
    q = x * r;
  }
  return x * d;
}

// Model 6: the row program's terms (see the header). `g` has tile_bytes > 0 and valid steps;
// `m` has global loads; `n` resident programs, `busy` SMs, `programs` per busy SM.
RowProgramTerms row_program_terms(const LaunchGeometry& g, const SassMix& m, const TargetSpec& t,
                                  int n, double busy, double programs) {
  RowProgramTerms r;
  r.resident = n;
  r.programs = programs;
  const double clock = t.clock_ghz > 0 ? t.clock_ghz : 1.5;
  const double steps = g.dram_steps;
  r.passes = 1 + static_cast<int>(std::lround(static_cast<double>(g.cached_steps) / steps));
  const double per_thread = g.tile_bytes / std::max(1, g.threads);
  if (m.load_loops > 0 && m.load_loop_min_ldg_bytes > 0)
    r.unroll = std::max(1, static_cast<int>(std::lround(m.load_loop_min_ldg_bytes / per_thread)));
  r.rounds = std::max(1, static_cast<int>(std::ceil(steps / r.unroll - 1e-9)));
  const double read = steps * g.tile_bytes, written = g.write_bytes;
  if (r.passes > 1) {
    r.l2_capacity_bytes = t.limits ? t.limits->l2_mb * 1e6 * kL2ReuseShare : 0;
    r.reuse_distance_bytes = n * busy * (read + written);
    if (r.l2_capacity_bytes > 0)
      r.l2_hit = std::min(1.0, r.l2_capacity_bytes / r.reuse_distance_bytes);
  }
  r.dram_bytes = read * (1 + (r.passes - 1) * (1 - r.l2_hit)) + written;
  const double bw_sm = t.memory_bandwidth_gbs / t.compute_units * kStream;  // bytes per ns
  r.demand_ns = r.dram_bytes / bw_sm;
  r.latency_ns = r.rounds * kRowDramLatencyNs +
                 r.rounds * (r.passes - 1) *
                     (r.l2_hit * kL2HitClk / clock + (1 - r.l2_hit) * kRowDramLatencyNs);
  r.utilisation = mva_utilisation(n, r.demand_ns, r.latency_ns);
  const double warps = std::ceil(g.threads / 32.0);
  const double trips = steps / r.unroll;  // iterations of each load loop
  r.instructions_per_warp = static_cast<double>(m.total);
  r.mufu_per_warp = static_cast<double>(m.mufu);
  if (m.load_loops > 0 && m.load_loop_total > 0) {
    r.instructions_per_warp += (trips - 1) * static_cast<double>(m.load_loop_total);
    r.mufu_per_warp += (trips - 1) * static_cast<double>(m.load_loop_mufu);
  }
  r.issue_us = programs * warps * r.instructions_per_warp / (kIssuePerClkPerSm * clock * 1e3);
  r.mufu_us = programs * warps * r.mufu_per_warp * 32 / (kMufuPerClkPerSm * clock * 1e3);
  return r;
}

bool is_unverified(const TargetSpec& t, const std::string& field) {
  for (const auto& u : t.unverified)
    if (u == field || field.rfind(u + ".", 0) == 0 || u.rfind(field + ".", 0) == 0) return true;
  return false;
}

// "sm_90a" -> 90; "sm_121a" -> 121; 0 when unparsable.
int sm_number(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return 0;
  return std::atoi(arch.c_str() + 3);
}

}  // namespace

GpuEstimate estimate_gpu_time(const GpuEstimateInput& in, const TargetSpec& t) {
  if (!std::isfinite(in.flops) || !std::isfinite(in.bytes) || in.flops < 0 || in.bytes < 0 ||
      (in.flops == 0 && in.bytes == 0))
    throw std::invalid_argument(fmt::format(
        "estimate: flops and bytes must be finite, >= 0 and not both 0 (got {} and {})",
        in.flops, in.bytes));
  const auto fp32 = t.peak_for(DType::F32);
  if (t.memory_bandwidth_gbs <= 0 || !fp32 || *fp32 <= 0 || t.compute_units <= 0)
    throw std::invalid_argument("estimate: target " + t.id +
                                " needs memory_bandwidth_gbs, peak_tflops.fp32 and compute_units");
  if (in.occupancy.active_warps <= 0)
    throw std::invalid_argument("estimate: the kernel has no active warps (it cannot launch)");
  if (in.launch && in.launch->tile_bytes != 0 &&
      (!std::isfinite(in.launch->tile_bytes) || in.launch->tile_bytes < 0 ||
       in.launch->dram_steps < 1 || in.launch->cached_steps < 0))
    throw std::invalid_argument(fmt::format(
        "estimate: a row program needs tile_bytes > 0 (finite), dram_steps >= 1 and cached_steps "
        ">= 0 (got {} B, {} and {})",
        in.launch->tile_bytes, in.launch->dram_steps, in.launch->cached_steps));
  if (in.launch && (!std::isfinite(in.launch->write_bytes) || in.launch->write_bytes < 0))
    throw std::invalid_argument(fmt::format(
        "estimate: a program's write_bytes must be finite and >= 0 (got {})", in.launch->write_bytes));
  if (in.mix && (in.mix->load_loops < 0 || in.mix->load_loop_total < 0 || in.mix->load_loop_mufu < 0 ||
                 in.mix->load_loop_min_ldg_bytes < 0 || in.mix->load_loop_total > in.mix->total ||
                 in.mix->load_loop_mufu > in.mix->mufu))
    throw std::invalid_argument(fmt::format(
        "estimate: malformed SASS load-loop counts ({} loops, {} of {} instructions, {} of {} MUFU, "
        "{} B per thread)",
        in.mix->load_loops, in.mix->load_loop_total, in.mix->total, in.mix->load_loop_mufu,
        in.mix->mufu, in.mix->load_loop_min_ldg_bytes));

  GpuEstimate e;
  const int sm = sm_number(in.arch);
  // Warps resident per busy SM, and the busy SMs: the theoretical occupancy, or (model 2) what
  // the recorded grid actually fills.
  double warps = in.occupancy.active_warps;
  double busy_sms = t.compute_units;
  double resident_blocks = 0;  // per busy SM (model 2)
  const LaunchGeometry* g = in.launch ? &*in.launch : nullptr;
  if (g && !(g->blocks > 0 && g->threads > 0 && g->blocks_per_sm > 0)) g = nullptr;
  if (g) {
    busy_sms = std::min<double>(t.compute_units, static_cast<double>(g->blocks));
    resident_blocks = std::min<double>(g->blocks_per_sm, static_cast<double>(g->blocks) / busy_sms);
    warps = resident_blocks * std::ceil(g->threads / 32.0);
  }
  double low = in.launch ? kBand2Low : kBandLow, high = in.launch ? kBand2High : kBandHigh;
  auto widen = [&](std::string why) {
    low *= kWidenLow;
    high *= kWidenHigh;
    e.widened_by.push_back(std::move(why));
  };
  auto factor = [&](std::string name, double v, std::string src) {
    e.factors.push_back({std::move(name), v, std::move(src)});
    return v;
  };

  // ---- memory -------------------------------------------------------------------------------
  const double bw = t.memory_bandwidth_gbs;  // GB/s == bytes/ns
  e.ideal_memory_us = in.bytes / (bw * 1e3);
  double mem_eff = factor("stream", kStream,
                          "measured H200 read 95 % / copy 82 % / write 90 % of datasheet "
                          "(bench/results/targets-h200.md), mean; transferred to all NVIDIA targets");
  if (in.mix) {
    const SassMix& m = *in.mix;
    double in_flight = 1;
    std::string src;
    if (m.ldgsts > 0 || m.tma > 0) {
      src = "heuristic: cp.async/TMA staging is asynchronous, not limited by registers";
    } else if (m.ldg > 0 && g && g->tile_bytes > 0) {
      // Model 6: resident programs, each rounds of dependent loads per pass, its DRAM bytes the
      // reads, the re-reads L2 lost and the writes (see the header).
      const double clock = t.clock_ghz > 0 ? t.clock_ghz : 1.5;
      const double bw_sm = bw / t.compute_units;  // bytes per ns per SM
      const int n = std::max(1, static_cast<int>(std::lround(resident_blocks)));
      const RowProgramTerms r = row_program_terms(*g, m, t, n, busy_sms,
                                                  static_cast<double>(g->blocks) / busy_sms);
      e.row_program = r;
      const double per_sm_cap = kSmL2BytesPerClk * clock / bw_sm;
      in_flight =
          std::clamp(std::min(r.utilisation, per_sm_cap) * busy_sms / t.compute_units, 0.02, 1.0);
      src = fmt::format(
          "model 6, mean-value analysis (Reiser & Lavenberg 1980): {} resident programs per SM, "
          "each {:.0f} DRAM B (demand {:.0f} ns at {:.1f} GB/s per SM x stream) + latency {:.0f} "
          "ns ({} pass(es) of {} round(s): {} step(s) of {:.0f} B, {} issued together, {:.0f} ns "
          "DRAM, re-reads {:.0f} % from L2 at {:.0f} clk); SM's DRAM share {:.0f} % busy; {:.0f} "
          "of {} SMs busy",
          n, r.dram_bytes, r.demand_ns, bw_sm, r.latency_ns, r.passes, r.rounds, g->dram_steps,
          g->tile_bytes, r.unroll, kRowDramLatencyNs, r.l2_hit * 100, kL2HitClk,
          r.utilisation * 100, busy_sms, t.compute_units);
      if (r.passes > 1) {
        const double written = g->write_bytes, read = g->dram_steps * g->tile_bytes;
        mem_eff *= factor(
            "l2_reuse", (read + written) / r.dram_bytes,
            r.l2_capacity_bytes > 0
                ? fmt::format("model 6: {} later pass(es) re-read {:.0f} B per program; "
                              "{:.1f} MB enter L2 during a program's life ({} resident x {:.0f} "
                              "SMs x {:.0f} B) vs {:.1f} MB usable (2/3 of the spec's L2, "
                              "heuristic): {:.0f} % hit (LRU stack distance, Mattson et al. 1970)",
                              r.passes - 1, read, r.reuse_distance_bytes / 1e6, n, busy_sms,
                              read + written, r.l2_capacity_bytes / 1e6, r.l2_hit * 100)
                : std::string("model 6: the spec records no L2 size; every re-read taken as an "
                              "L2 hit"));
        if (r.l2_capacity_bytes <= 0) widen("no L2 size in the spec: re-reads assumed L2 hits");
      }
    } else if (m.ldg > 0) {
      const double needed = bw / t.compute_units * kDramLatencyNs;  // bytes per SM
      const long loads = g ? std::clamp<long>(m.ldg, 1, 8) : std::clamp<long>(m.ldg, 1, 4);
      const double per_thread = m.mean_load_bytes() * loads;
      double supplied = warps * 32.0 * per_thread;
      if (g && g->row_bytes > 0)  // one row per block at a time: no more than a row in flight
        supplied = resident_blocks * std::min(g->threads * per_thread, g->row_bytes);
      // Busy SMs only; each at most its L2-to-SM bandwidth.
      const double clock = t.clock_ghz > 0 ? t.clock_ghz : 1.5;
      const double per_sm_cap = kSmL2BytesPerClk * clock / (bw / t.compute_units);
      const double per_sm = std::min({supplied / needed, per_sm_cap});
      in_flight = std::clamp(per_sm * busy_sms / t.compute_units, 0.02, 1.0);
      src = fmt::format(
          "Little's law: {:.0f} B in flight per busy SM supplied ({:.1f} warps x 32 x {:.1f} "
          "B/load x {} loads) vs {:.0f} B needed ({:.1f} GB/s per SM x {:.0f} ns, latency "
          "heuristic); {:.0f} of {} SMs busy{}",
          supplied, warps, m.mean_load_bytes(), loads, needed, bw / t.compute_units,
          kDramLatencyNs, busy_sms, t.compute_units, g ? " (launch record)" : "");
    } else {
      src = "no global loads in the SASS";
    }
    mem_eff *= factor("in_flight", in_flight, src);
    if (in_flight < 0.5) widen("few bytes in flight (latency-bound region of Little's law)");
    const long local = m.ldl + m.stl;
    if (local > 0) {
      const double ratio = static_cast<double>(local) / std::max<long>(1, m.ldg + m.stg + m.ldgsts + m.tma);
      mem_eff *= factor("local", 1 / (1 + ratio),
                        fmt::format("heuristic: {} LDL/STL vs {} LDG/STG/LDGSTS/TMA, each local "
                                    "access costed as one global access",
                                    local, m.ldg + m.stg + m.ldgsts + m.tma));
      widen("local-memory traffic (spills or runtime-indexed arrays)");
    }
    if (g && g->tile_bytes <= 0 && m.barriers > 0 && m.ldg > 0 && m.ldgsts == 0 && m.tma == 0) {
      const double wpb = std::ceil(g->threads / 32.0);
      mem_eff *= factor("phases", 1 / (1 + m.barriers * kBarrierCost * wpb / 32.0),
                        fmt::format("heuristic: {} block barriers x {:.0f} warps per block: phases "
                                    "without loads in flight",
                                    m.barriers, wpb));
    }
  }
  if (g && g->memset_bytes > 0) e.ideal_memory_us += g->memset_bytes / (bw * 1e3);
  e.memory_us = e.ideal_memory_us / mem_eff;

  // ---- compute ------------------------------------------------------------------------------
  const bool sixteen = in.dtype == DType::F16 || in.dtype == DType::BF16;
  const bool tc_sass = in.mix && (in.mix->hmma > 0 || in.mix->hgmma > 0 || in.mix->other_mma > 0);
  const auto tc_peak = t.peak(dtype_name(in.dtype));
  double comp_eff = 1;
  if (sixteen && tc_sass && tc_peak) {
    const SassMix& m = *in.mix;
    e.peak_tflops = *tc_peak;
    e.peak_key = std::string(dtype_name(in.dtype)) + " (tensor cores)";
    double path = 0.85;
    std::string src = "heuristic: mma.sync is this architecture's tensor-core path";
    bool heuristic = true;
    const bool tcgen05 = m.other_mma > 0 && m.hmma == 0 && m.hgmma == 0;
    if (sm >= 90 && sm < 100) {
      if (m.hgmma > 0) {
        path = 0.90;
        src = "measured H200: wgmma 890 of 989 TFLOP/s (bench/results/targets-h200.md)";
      } else {
        path = 0.66;
        src = "measured H200: mma.sync 653 of 989 TFLOP/s (bench/results/targets-h200.md)";
      }
      heuristic = false;
    } else if (sm >= 100 && sm < 120) {
      path = tcgen05 ? 0.85 : 0.35;
      src = tcgen05 ? "heuristic: tcgen05 reaches most of the datasheet peak"
                    : "heuristic: the sm_100 datasheet peak assumes tcgen05; mma.sync reaches a "
                      "fraction of it";
    }
    comp_eff *= factor("path", path, src);
    if (heuristic) widen("tensor-core path efficiency is a heuristic for " + in.arch);
    const bool mma_sync = m.hgmma == 0 && m.hmma > 0 && !tcgen05;
    if (mma_sync && g) {
      // Model 4: warps per sub-partition feeding mma.sync (see the header).
      const double per_smsp = warps / 4.0;
      comp_eff *= factor(
          "mma_warps", std::min(1.0, per_smsp / kMmaSyncWarpsPerSmsp),
          fmt::format("heuristic: {:.2f} warps per SM sub-partition vs {:.0f} needed to keep "
                      "mma.sync's tensor pipe busy across the k-step's LDSM/barrier waits (the "
                      "H200 probe's 653 TFLOP/s ran 16 warps per sub-partition, "
                      "src/backends/cuda/probes/cuda_ceilings.cu)",
                      per_smsp, kMmaSyncWarpsPerSmsp));
    } else {
      comp_eff *= factor("latency", std::min(1.0, warps / 4.0),
                         "one active warp per SM sub-partition feeds its tensor core "
                         "(architecture whitepapers)");
    }
    if (mma_sync && g && m.loop_tensor > 0 && m.loop_hmma_flops > 0 && m.loop_total > 0) {
      // Model 4: issue slots of the hot loop. A sub-partition issues one warp instruction per
      // clock (Volta..Hopper whitepapers), shared by its warps; the loop's HMMAs need
      // loop_hmma_flops / (FLOP per clock per sub-partition at the path's rate) clocks.
      const double clock = t.clock_ghz > 0 ? t.clock_ghz : 1.5;
      const double flop_per_clk = *tc_peak * path * 1e12 / (t.compute_units * 4.0 * clock * 1e9);
      const double mma_clk = m.loop_hmma_flops / flop_per_clk;
      const double issue_clk = static_cast<double>(m.loop_total);
      comp_eff *= factor(
          "issue", std::min(1.0, mma_clk / issue_clk),
          fmt::format("hot loop: {} instructions ({} MMAs, {:.0f} FLOP per warp) issue in {:.0f} "
                      "clocks at 1 per clock per sub-partition (whitepapers) vs {:.0f} clocks of "
                      "HMMA at {:.0f} FLOP/clk per sub-partition",
                      m.loop_total, m.loop_tensor, m.loop_hmma_flops, issue_clk, mma_clk,
                      flop_per_clk));
    }
    if (g && g->operand_bytes_per_flop > 0) {
      // Operand tiles: L2 bandwidth, and bytes in flight of the staging ring (model 3).
      const double clock = t.clock_ghz > 0 ? t.clock_ghz : 1.5;
      const double roof_per_sm = *tc_peak * path * 1e12 / t.compute_units;  // FLOP/s per SM
      const double need_bw = roof_per_sm * g->operand_bytes_per_flop;        // B/s per SM
      const double l2_bw = kL2BytesPerClkPerSm * clock * 1e9;
      double eff = std::min(1.0, l2_bw / need_bw);
      std::string src = fmt::format(
          "operand tiles: {:.4f} B/FLOP need {:.0f} GB/s per SM at the path's rate; L2 {:.0f} GB/s "
          "per SM (40 B/clk, heuristic)",
          g->operand_bytes_per_flop, need_bw / 1e9, l2_bw / 1e9);
      if ((m.ldgsts > 0 || m.tma > 0) && g->smem_per_block > 0) {
        const double in_flight = kRingInFlight * g->smem_per_block * resident_blocks;
        const double ring_bw = in_flight / (kDramLatencyNs * 1e-9);
        eff = std::min(eff, ring_bw / need_bw);
        src += fmt::format("; ring: {:.0f} KB in flight per SM / {:.0f} ns = {:.0f} GB/s",
                           in_flight / 1024, kDramLatencyNs, ring_bw / 1e9);
      }
      comp_eff *= factor("operands", std::clamp(eff, 0.05, 1.0), src);
    }
    if (m.hgmma == 0 && m.hmma_flops > 0 && m.smem_read_bytes > 0) {
      // Shared-memory bandwidth per FLOP of the warp tile (mma.sync reads its fragments
      // through LDSM/LDS; wgmma reads shared memory in the tensor core and is not bound here).
      const double clock = t.clock_ghz > 0 ? t.clock_ghz : 1.5;
      const double b_per_flop = static_cast<double>(m.smem_read_bytes) / m.hmma_flops;
      const double smem_tflops = kSmemBytesPerClk * clock * 1e9 * t.compute_units / b_per_flop / 1e12;
      const double cap = std::min(1.0, smem_tflops / (*tc_peak * path));
      comp_eff *= factor("smem",
                         cap, fmt::format("shared memory: {:.3f} B per FLOP ({} B LDSM/LDS per {:.0f} "
                                          "HMMA FLOPs per warp) at 128 B/clk/SM = {:.0f} TFLOP/s",
                                          b_per_flop, m.smem_read_bytes, m.hmma_flops, smem_tflops));
    }
  } else if (sixteen && tc_sass) {
    // Tensor-core SASS but the spec records no peak for the dtype (GB10): the fp32 peak is the
    // pessimistic roof (the spec's own note); the FFMA issue model does not apply to MMAs.
    e.peak_tflops = *fp32;
    e.peak_key = "fp32 (no " + std::string(dtype_name(in.dtype)) + " peak in the spec)";
    comp_eff *= factor("path", 1.0,
                       "heuristic: tensor cores reach at least the fp32 rate; the spec has no "
                       "16-bit peak to do better");
    comp_eff *= factor("latency", std::min(1.0, warps / 4.0),
                       "one active warp per SM sub-partition feeds its tensor core "
                       "(architecture whitepapers)");
    widen("no " + std::string(dtype_name(in.dtype)) + " peak in the spec: fp32 roof for MMAs");
  } else {
    e.peak_tflops = *fp32;
    e.peak_key = "fp32";
    comp_eff *= factor("path", kFfmaPath, "measured H200 FFMA probe 65.3 of 67 TFLOP/s");
    if (in.mix && !e.row_program) {
      const SassMix& m = *in.mix;
      const double clock = t.clock_ghz > 0 ? t.clock_ghz : 1.5;
      const double lanes_per_smsp = *fp32 * 1e3 / (2 * clock * t.compute_units * 4);
      const double cpi = std::max(1.0, 32.0 / std::max(1.0, lanes_per_smsp));
      const double fp_instr = static_cast<double>(m.ffma + m.fadd_fmul);
      double mix = 1;
      if (m.total > 0 && fp_instr > 0) {
        const double useful = (2.0 * m.ffma + m.fadd_fmul) / 2.0 * cpi;
        mix = std::clamp(useful / std::max(fp_instr * cpi, static_cast<double>(m.total)), 0.05, 1.0);
      } else {
        mix = 0.05;
      }
      comp_eff *= factor(
          "mix", mix,
          fmt::format("issue model: {} FFMA + {} FADD/FMUL of {} instructions, {:.1f} cycles per "
                      "fp32 warp instruction ({:.0f} FP32 lanes per SMSP from the spec)",
                      m.ffma, m.fadd_fmul, m.total, cpi, lanes_per_smsp));
    }
    comp_eff *= factor("latency", std::min(1.0, warps / 8.0),
                       "heuristic: 2 warps per SM sub-partition cover the FFMA latency with ILP");
  }
  if (g && g->blocks > 0) {
    const double w = static_cast<double>(g->blocks) / t.compute_units;
    comp_eff *= factor("waves", w / std::ceil(w),
                       fmt::format("wave quantization: {} blocks on {} SMs = {:.2f} waves (launch "
                                   "record)",
                                   g->blocks, t.compute_units, w));
  }
  e.ideal_compute_us = in.flops / (e.peak_tflops * 1e6);
  e.compute_us = e.ideal_compute_us / comp_eff;
  if (e.row_program) {
    // Model 6: the instruction roofline of the row program (issue and MUFU), replacing "mix".
    const RowProgramTerms& r = *e.row_program;
    const double issue = std::max(r.issue_us, r.mufu_us);
    const double eff = issue > e.compute_us && issue > 0 ? e.compute_us / issue : 1.0;
    comp_eff *= factor(
        "row_issue", eff,
        fmt::format("model 6, instruction roofline (Ding & Williams 2019): {:.0f} programs per SM "
                    "x {:.0f} warps x {:.0f} instructions ({:.0f} MUFU) per warp at 4 per clock "
                    "per SM (whitepapers) = {:.3g} us, MUFU at 16 per clock per SM (CUDA C++ "
                    "Programming Guide) = {:.3g} us",
                    r.programs, std::ceil((g ? g->threads : 32) / 32.0), r.instructions_per_warp,
                    r.mufu_per_warp, r.issue_us, r.mufu_us));
    e.compute_us = e.ideal_compute_us / comp_eff;
  }

  if (!in.mix) widen("no SASS instruction mix (cuobjdump not available)");
  if (in.block_size_assumed) widen("block size assumed (256 threads)");
  if (is_unverified(t, "memory_bandwidth_gbs") ||
      is_unverified(t, "peak_tflops." + e.peak_key.substr(0, e.peak_key.find(' '))))
    widen("the spec's peak or bandwidth is unverified");

  const int launches = g ? std::max(1, g->launches) : 1;
  e.launch_us = kLaunchUs + (launches - 1) * kNextLaunchUs;
  factor("launch_us", e.launch_us,
         fmt::format("heuristic: 2 us launch-to-completion floor + 1 us per further launch ({} "
                     "launches)",
                     launches));
  const bool mem_bound = e.memory_us >= e.compute_us;
  e.bound = mem_bound ? "memory" : "compute";
  e.time_us = std::max(e.memory_us, e.compute_us) + e.launch_us;
  e.low_us = e.time_us * low;
  e.high_us = e.time_us * high;
  e.basis = mem_bound
                ? fmt::format("memory {:.3g} us (roofline {:.3g} us at {:.0f} GB/s / efficiency "
                              "{:.2f}) + launch {:.0f} us",
                              e.memory_us, e.ideal_memory_us, bw, mem_eff, e.launch_us)
                : fmt::format("compute {:.3g} us (roofline {:.3g} us at {:.4g} TFLOP/s {} / "
                              "efficiency {:.2f}) + launch {:.0f} us",
                              e.compute_us, e.ideal_compute_us, e.peak_tflops, e.peak_key,
                              comp_eff, e.launch_us);
  return e;
}

GpuEstimate estimate_gpu_call(const std::vector<GpuEstimateInput>& parts, const TargetSpec& t,
                              int launches) {
  if (parts.empty()) throw std::invalid_argument("estimate: a call needs at least one launch");
  GpuEstimate sum;
  double body = 0, low_body = 0, high_body = 0, biggest = -1;
  std::vector<std::string> bases;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    GpuEstimateInput in = parts[i];
    if (in.launch) in.launch->launches = 1;
    const GpuEstimate e = estimate_gpu_time(in, t);
    const double b = std::max(e.memory_us, e.compute_us);
    body += b;
    low_body += b * e.low_us / e.time_us;
    high_body += b * e.high_us / e.time_us;
    sum.memory_us += e.memory_us;
    sum.compute_us += e.compute_us;
    sum.ideal_memory_us += e.ideal_memory_us;
    sum.ideal_compute_us += e.ideal_compute_us;
    if (b > biggest) {
      biggest = b;
      sum.peak_tflops = e.peak_tflops;
      sum.peak_key = e.peak_key;
      sum.bound = e.bound;
    }
    for (const auto& f : e.factors)
      if (f.name != "launch_us")
        sum.factors.push_back(
            {f.name, f.value, fmt::format("launch {} of {}: {}", i + 1, parts.size(), f.source)});
    for (const auto& w : e.widened_by)
      if (std::find(sum.widened_by.begin(), sum.widened_by.end(), w) == sum.widened_by.end())
        sum.widened_by.push_back(w);
    bases.push_back(fmt::format("{:.3g} us {}", b, e.bound));
  }
  launches = std::max<int>(launches, static_cast<int>(parts.size()));
  sum.launch_us = kLaunchUs + (launches - 1) * kNextLaunchUs;
  sum.factors.push_back({"launch_us", sum.launch_us,
                         fmt::format("heuristic: 2 us launch-to-completion floor + 1 us per further "
                                     "launch ({} launches)",
                                     launches)});
  sum.time_us = body + sum.launch_us;
  const double low_ratio = low_body / body, high_ratio = high_body / body;
  sum.low_us = low_body + sum.launch_us * low_ratio;
  sum.high_us = high_body + sum.launch_us * high_ratio;
  std::string joined;
  for (const auto& b : bases) joined += (joined.empty() ? "" : " + ") + b;
  sum.basis = fmt::format("sum of {} launches estimated separately: {} + launch {:.0f} us",
                          parts.size(), joined, sum.launch_us);
  return sum;
}

nlohmann::json to_json(const GpuEstimate& e) {
  nlohmann::json f = nlohmann::json::array();
  for (const auto& x : e.factors) f.push_back({{"name", x.name}, {"value", x.value}, {"source", x.source}});
  nlohmann::json j = {{"estimate_us", e.time_us},     {"low_us", e.low_us},
                      {"high_us", e.high_us},         {"memory_us", e.memory_us},
                      {"compute_us", e.compute_us},   {"launch_us", e.launch_us},
                      {"roofline_memory_us", e.ideal_memory_us},
                      {"roofline_compute_us", e.ideal_compute_us},
                      {"peak_tflops", e.peak_tflops}, {"peak", e.peak_key},
                      {"bound", e.bound},             {"factors", f},
                      {"band_widened_by", e.widened_by}, {"basis", e.basis}};
  if (e.row_program) {
    const RowProgramTerms& r = *e.row_program;
    j["row_program_model"] = {{"resident", r.resident},
                              {"programs_per_sm", r.programs},
                              {"unroll", r.unroll},
                              {"rounds", r.rounds},
                              {"passes", r.passes},
                              {"l2_hit", r.l2_hit},
                              {"l2_capacity_bytes", r.l2_capacity_bytes},
                              {"reuse_distance_bytes", r.reuse_distance_bytes},
                              {"dram_bytes", r.dram_bytes},
                              {"demand_ns", r.demand_ns},
                              {"latency_ns", r.latency_ns},
                              {"utilisation", r.utilisation},
                              {"instructions_per_warp", r.instructions_per_warp},
                              {"mufu_per_warp", r.mufu_per_warp},
                              {"issue_us", r.issue_us},
                              {"mufu_us", r.mufu_us}};
  }
  return j;
}

}  // namespace vb::analysis
