#include "ladder/triton_nvidia.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

#include "analysis/gpu_estimate.h"
#include "analysis/occupancy.h"
#include "analysis/ptxas_report.h"
#include "analysis/sass_mix.h"
#include "backends/triton/toolchain.h"
#include "core/process.h"
#include "ladder/nvidia.h"
#include "ladder/rank.h"
#include "ladder/triton_compile.h"

namespace vb::ladder {

namespace fs = std::filesystem;
using nlohmann::json;

int cuda_capability_of_isa(const std::string& isa) {
  static const std::regex re(R"(^sm_(\d+)([af]?)$)");
  std::smatch m;
  if (!std::regex_match(isa, m, re))
    throw std::invalid_argument("not an NVIDIA GPU architecture: \"" + isa +
                                "\" (want sm_<digits> with an optional a/f suffix, e.g. sm_90a)");
  return std::stoi(m[1].str());
}

namespace {

// One captured launch with its rung-1 numbers.
struct LaunchedKernel {
  json record;                           // triton_build.py compile's record
  analysis::PtxasFunction ptxas;         // the entry's ptxas -v numbers
  std::optional<analysis::SassMix> mix;  // absent without cuobjdump
  int threads = 0;                       // num_warps x warp size
  long dynamic_smem = 0;                 // Triton metadata "shared" (the launch's dynamic size)
  long blocks = 1;                       // programs of the launch (grid product)
  analysis::Occupancy occupancy;
};

// `cuobjdump --dump-sass CUBIN` text, or "" with `why` set.
std::string dump_sass(const std::string& cuobjdump, const std::string& cubin, std::string& why) {
  if (cuobjdump.empty()) {
    why = "cuobjdump not found (bash scripts/setup.sh installs it into .venv; VB_CUOBJDUMP overrides)";
    return "";
  }
  const ProcessResult s = run_process({cuobjdump, "--dump-sass", cubin}, std::chrono::minutes(2));
  if (!s.ok()) {
    why = "cuobjdump --dump-sass failed: " + s.err.substr(0, 300);
    return "";
  }
  return s.out;
}

class TritonNvidiaClimber final : public TargetClimber {
 public:
  std::string name() const override { return "triton-nvidia"; }
  bool handles(const TargetSpec& t) const override { return t.kind == "gpu" && t.vendor == "NVIDIA"; }
  std::string backend() const override { return "triton"; }
  std::vector<TargetSpec> remote_targets() const override { return remote_nvidia_targets(); }
  ClimbResult climb(const KernelType& type, const Variant& variant, const TargetSpec& target,
                    const ClimbOptions& opts) const override;

 private:
  static ClimbResult finish(ClimbResult& r, const std::string& why) {
    r.stop_reason = why;
    r.confidence = r.estimate ? "analytical" : (r.highest_rung >= kStaticSignals ? "static" : "none");
    return r;
  }
  static ClimbResult reject(ClimbResult& r, RungEvidence e, const std::string& why) {
    e.status = "reject";
    r.evidence.push_back(std::move(e));
    r.rejected = true;
    r.confidence = "rejected";
    r.stop_reason = why;
    return r;
  }
};

ClimbResult TritonNvidiaClimber::climb(const KernelType& type, const Variant& variant,
                                       const TargetSpec& target, const ClimbOptions& opts) const {
  if (!handles(target))
    throw std::invalid_argument("the Triton-on-NVIDIA climber does not serve target " + target.id +
                                " (" + target.vendor + " " + target.kind + ")");
  ClimbResult r;
  r.target_id = target.id;
  r.kernel = type.name();
  r.variant = variant.name;
  r.backend = variant.backend;
  const Size size = opts.size ? *opts.size : type.benchmark_size(DeviceKind::Gpu);
  const Problem p = type.make_problem(size, opts.dtype);
  const analysis::SmLimits limits = analysis::SmLimits::from_spec(target);
  const int cc = cuda_capability_of_isa(target.isa);
  const std::string gpu_target = fmt::format("cuda:{}:{}", cc, limits.warp_size);
  const std::string tool = "triton -> ptx -> cubin (" + gpu_target + ")";
  if (!accepts(variant.backend)) {
    return reject(r, make_evidence(kStaticReject, "reject", tool,
                              "a " + variant.backend + " source is not a Triton source (this climber "
                              "compiles .py Triton kernels for " + target.id + ")"),
                  "wrong backend for this climber");
  }
  const auto& tc = triton_toolchain();
  if (!tc.error.empty()) {
    r.evidence.push_back(make_evidence(kStaticReject, "unavailable", tool, "unavailable: " + tc.error));
    return finish(r, "no Triton here");
  }

  // ---- rung 0: compile every launched kernel for the target ---------------------------------
  if (opts.progress) opts.progress("  [rung 0] " + tool + ": " + variant.source.string());
  const std::string cuobjdump = find_cuobjdump();
  std::string sass_missing;
  std::vector<LaunchedKernel> launched;
  std::vector<std::string> ptxas_errors;
  const TritonCompile res = triton_compile_only(variant.source, p, gpu_target, [&](const json& ks) {
    for (const auto& k : ks) {
      LaunchedKernel lk;
      lk.record = k;
      const analysis::PtxasReport rep = analysis::parse_ptxas_report(k.value("ptxas_report", std::string()));
      if (!rep.errors.empty()) ptxas_errors.push_back(rep.first_error());
      const std::string entry = k.value("entry", k.value("name", std::string()));
      if (const analysis::PtxasFunction* f = rep.find(entry)) lk.ptxas = *f;
      std::string why;
      const std::string sass = dump_sass(cuobjdump, k.value("cubin", std::string()), why);
      if (!why.empty()) sass_missing = why;
      for (const auto& m : analysis::parse_sass_mix(sass))
        if (m.function == entry) lk.mix = m;
      launched.push_back(std::move(lk));
    }
  });
  std::string version = "triton " + res.triton_version;
  if (res.arch_unsupported) {
    auto e = make_evidence(kStaticReject, "unavailable", tool, "unavailable: " + res.diagnostics);
    e.tool_version = version;
    r.evidence.push_back(e);
    return finish(r, "the installed Triton cannot compile for " + target.isa);
  }
  if (!res.ok) {
    auto e = make_evidence(kStaticReject, "reject", tool,
                      "does not compile for " + target.isa + ": " +
                          (res.diagnostics.empty() ? std::string("compile failed") : res.diagnostics));
    e.tool_version = version;
    return reject(r, e, "does not compile for " + target.isa);
  }
  if (!launched.empty()) version += "; ptxas " + launched[0].record.value("ptxas_version", std::string("?"));
  if (!ptxas_errors.empty()) {
    auto e = make_evidence(kStaticReject, "reject", tool,
                      "ptxas rejects the PTX for " + target.isa + ": " + ptxas_errors[0]);
    e.tool_version = version;
    return reject(r, e, "does not assemble for " + target.isa);
  }
  // Resources per launch: what the driver would refuse at launch time.
  for (auto& k : launched) {
    const std::string kname = k.record.value("name", std::string());
    k.threads = k.record.value("num_warps", 4) * limits.warp_size;
    k.dynamic_smem = k.record.value("shared_bytes", 0L);
    if (k.record.contains("grid") && k.record["grid"].is_array())
      for (const auto& g : k.record["grid"]) k.blocks *= std::max(1L, g.get<long>());
    std::string why;
    const long smem = k.ptxas.smem_bytes + k.dynamic_smem;
    if (k.ptxas.registers < 0)
      why = fmt::format("no ptxas report for {} (ptxas -v printed no 'Used N registers' line)", kname);
    else if (k.ptxas.registers > limits.max_registers_per_thread)
      why = fmt::format("{} uses {} registers per thread, over the {} limit of {}", kname,
                        k.ptxas.registers, limits.max_registers_per_thread, target.isa);
    else if (smem > limits.shared_memory_per_block_bytes)
      why = fmt::format("{} needs {} B of shared memory per block (num_stages {}), over the {} B "
                        "per block of {}", kname, smem, k.record.value("num_stages", 0),
                        limits.shared_memory_per_block_bytes, target.id);
    else if (k.threads > limits.max_threads_per_block)
      why = fmt::format("{} launches {} threads per block (num_warps {}), over the {} of {}", kname,
                        k.threads, k.record.value("num_warps", 0), limits.max_threads_per_block,
                        target.id);
    if (!why.empty()) {
      auto e = make_evidence(kStaticReject, "reject", tool, "rejected for " + target.isa + ": " + why);
      e.tool_version = version;
      return reject(r, e, why);
    }
    k.occupancy = analysis::compute_occupancy(
        {k.threads, k.ptxas.registers, k.ptxas.smem_bytes, k.dynamic_smem}, limits);
  }
  auto e0 = make_evidence(kStaticReject, "pass", tool,
                     fmt::format("{} kernel launch(es) compile for {}", launched.size(),
                                 launched.empty() ? target.isa : launched[0].record.value("arch", target.isa)));
  e0.tool_version = version;
  r.evidence.push_back(e0);
  r.highest_rung = kStaticReject;
  if (opts.max_rung < kStaticSignals) return finish(r, "--max-rung");

  // ---- rung 1: ptxas numbers, SASS mix, occupancy per launch --------------------------------
  // The launch the estimate rests on: the most work (programs x warps), as the AMD climber.
  const LaunchedKernel* main = &launched.front();
  for (const auto& k : launched)
    if (k.blocks * k.threads > main->blocks * main->threads) main = &k;
  json ks = json::array();
  std::string summary;
  for (const auto& k : launched) {
    const std::string kname = k.record.value("name", std::string());
    json kj = {{"name", kname},
               {"grid", k.record.value("grid", json::array())},
               {"num_warps", k.record.value("num_warps", 0)},
               {"num_stages", k.record.value("num_stages", 0)},
               {"threads", k.threads},
               {"constexprs", k.record.value("constexprs", json::object())},
               {"registers", k.ptxas.registers},
               {"spill_store_bytes", std::max(0L, k.ptxas.spill_store_bytes)},
               {"spill_load_bytes", std::max(0L, k.ptxas.spill_load_bytes)},
               {"static_shared_bytes", k.ptxas.smem_bytes},
               {"dynamic_shared_bytes", k.dynamic_smem},
               {"occupancy", analysis::to_json(k.occupancy)},
               {"ptxas", analysis::to_json(k.ptxas)},
               {"sass", k.mix ? analysis::to_json(*k.mix) : json(nullptr)}};
    ks.push_back(kj);
    std::string sass_part = "no SASS mix (" + sass_missing + ")";
    if (k.mix) {
      const auto& m = *k.mix;
      sass_part = fmt::format(
          "{} instr: {} HMMA, {} HGMMA, {} other MMA, {} FFMA, {} LDG ({} >=128-bit), {} STG, {} "
          "LDGSTS, {} TMA, {} LDL/STL",
          m.total, m.hmma, m.hgmma, m.other_mma, m.ffma, m.ldg, m.ldg_128 + m.ldg_256, m.stg,
          m.ldgsts, m.tma, m.ldl + m.stl);
    }
    summary += fmt::format(
        "{}{}: {} regs, spills {}/{} B, smem {}+{} B; {} warps x {} programs: occupancy {:.0f}% "
        "({}); {} (stages {})",
        summary.empty() ? "" : "; ", kname, k.ptxas.registers, std::max(0L, k.ptxas.spill_store_bytes),
        std::max(0L, k.ptxas.spill_load_bytes), k.ptxas.smem_bytes, k.dynamic_smem,
        k.record.value("num_warps", 0), k.blocks, k.occupancy.occupancy * 100, k.occupancy.limiter(),
        sass_part, k.record.value("num_stages", 0));
  }
  json d1 = {{"kernels", ks},
             {"main_kernel", main->record.value("name", std::string())},
             {"main_kernel_choice", "the launch with the most programs x warps"},
             {"sass_available", sass_missing.empty()}};
  if (!sass_missing.empty()) d1["sass_missing"] = sass_missing;
  auto e1 = make_evidence(kStaticSignals, "pass",
                     "ptxas -v + " + (sass_missing.empty() ? std::string("cuobjdump --dump-sass")
                                                           : std::string("(no cuobjdump)")) +
                         " (" + main->record.value("arch", target.isa) + ")",
                     summary, d1);
  e1.tool_version = version + (cuobjdump.empty() ? "" : "; " + cuobjdump);
  if (main->occupancy.blocks_per_sm == 0)
    return reject(r, e1, "cannot launch: " + main->occupancy.cannot_launch);
  r.evidence.push_back(e1);
  r.highest_rung = kStaticSignals;
  if (opts.max_rung < kCorrectness) return finish(r, "--max-rung");

  r.evidence.push_back(make_evidence(
      kCorrectness, "skipped", "triton interpreter",
      "not climbed per target: `vladbud bench " + type.name() +
          " --backend triton --source SRC` runs the evaluator's stages in Triton's interpreter on "
          "the CPU (target independent)"));
  if (opts.max_rung < kAnalytical) return finish(r, "--max-rung");

  // ---- rung 3: the CUDA climber's model with the captured launch geometry -------------------
  analysis::LaunchGeometry gm;
  const std::string main_name = main->record.value("name", std::string());
  gm.blocks = 0;
  for (const auto& k : launched)
    if (k.record.value("name", std::string()) == main_name) gm.blocks += k.blocks;
  gm.threads = main->threads;
  gm.blocks_per_sm = main->occupancy.blocks_per_sm;
  gm.launches = static_cast<int>(launched.size());
  if (!p.inputs.empty() && !p.inputs[0].shape.empty())
    gm.row_bytes = static_cast<double>(p.inputs[0].shape.back()) *
                   static_cast<double>(dtype_size(p.inputs[0].dtype));
  gm.operand_bytes_per_flop = type.operand_bytes_per_flop(p, static_cast<double>(gm.blocks));
  gm.smem_per_block = static_cast<double>(main->ptxas.smem_bytes + main->dynamic_smem);
  // Row programs (model 5's geometry, model 6's estimate): kernels without tensor-core MMAs or
  // async copies, not tiled contractions. A program reads input 0's bytes / grid and writes the
  // outputs' bytes / grid; one step loads the tile of the launch's tile constexprs (the product
  // of BLOCK, BLOCK_*, CHUNK and ROWS, Triton's block-size convention in the starters; none: the
  // program's bytes in one step); the SASS's innermost load loops are the passes over those
  // bytes, the first from DRAM, the rest re-reads (L2 hits while the row is still there).
  const bool plain = main->mix && main->mix->tensor_core() == 0 && main->mix->ldgsts == 0 &&
                     main->mix->tma == 0 && main->mix->ldg > 0;
  if (plain && gm.operand_bytes_per_flop <= 0 && gm.blocks > 0 && !p.inputs.empty()) {
    const double elem = static_cast<double>(dtype_size(p.inputs[0].dtype));
    double in_bytes = elem;
    for (const auto d : p.inputs[0].shape) in_bytes *= static_cast<double>(d);
    const double per_program = in_bytes / static_cast<double>(gm.blocks);
    double tile_elems = 1;
    bool named = false;
    const json constexprs = main->record.value("constexprs", json::object());
    for (const auto& [name, v] : constexprs.items()) {
      if (!v.is_number_integer() || v.get<long>() <= 0) continue;
      if (name == "BLOCK" || name == "CHUNK" || name == "ROWS" || name.rfind("BLOCK_", 0) == 0) {
        tile_elems *= static_cast<double>(v.get<long>());
        named = true;
      }
    }
    const double tile = named ? std::min(per_program, tile_elems * elem) : per_program;
    if (per_program > 0 && tile > 0) {
      const int steps = std::max(1, static_cast<int>(std::ceil(per_program / tile - 1e-9)));
      const long passes = steps > 1 ? std::max<long>(1, main->mix->load_loops) : 1;
      gm.tile_bytes = tile;
      gm.dram_steps = steps;
      gm.cached_steps = static_cast<int>((passes - 1) * steps);
      // Model 6: a program's share of the call's outputs (what it writes back through L2).
      double out_bytes = 0;
      for (const auto& o : p.outputs) {
        double b = static_cast<double>(dtype_size(o.dtype));
        for (const auto d : o.shape) b *= static_cast<double>(d);
        out_bytes += b;
      }
      gm.write_bytes = out_bytes / static_cast<double>(gm.blocks);
    }
  }
  analysis::GpuEstimateInput in;
  in.flops = type.flops(p);
  in.bytes = type.min_bytes(p);
  in.dtype = opts.dtype;
  in.mix = main->mix;
  in.occupancy = main->occupancy;
  in.block_size_assumed = false;
  in.arch = target.isa;
  in.launch = gm;
  try {
    const analysis::GpuEstimate est = analysis::estimate_gpu_time(in, target);
    json d3 = analysis::to_json(est);
    d3["size"] = size.label;
    d3["dtype"] = std::string(dtype_name(opts.dtype));
    d3["flops"] = in.flops;
    d3["bytes"] = in.bytes;
    if (gm.tile_bytes > 0)
      d3["row_program"] = {{"tile_bytes", gm.tile_bytes}, {"dram_steps", gm.dram_steps},
                           {"cached_steps", gm.cached_steps}, {"write_bytes", gm.write_bytes},
                           {"load_loops", main->mix ? main->mix->load_loops : 0}};
    auto e3 = make_evidence(kAnalytical, "pass", "roofline from the spec DB + rung-1 efficiency model",
                       fmt::format("{:.4g} us [{:.4g}..{:.4g}] at {} {}: {}", est.time_us, est.low_us,
                                   est.high_us, size.label, dtype_name(opts.dtype), est.basis),
                       d3);
    e3.tool_version = gm.tile_bytes > 0 ? "vb-nvidia-model-6" : "vb-nvidia-model-4";
    r.evidence.push_back(e3);
    Estimate out;
    out.time_us = est.time_us;
    out.low_us = est.low_us;
    out.high_us = est.high_us;
    out.rung = kAnalytical;
    out.basis = est.basis;
    r.estimate = out;
    r.highest_rung = kAnalytical;
  } catch (const std::invalid_argument& e) {
    r.evidence.push_back(make_evidence(kAnalytical, "unavailable", "roofline", e.what()));
  }
  if (opts.max_rung < kSimulation) return finish(r, "--max-rung");
  r.evidence.push_back(make_evidence(kSimulation, "unavailable", "none",
                                "unavailable: no GPU cycle simulator installed"));
  r.evidence.push_back(make_evidence(
      kRealHardware, "unavailable", "none",
      "unavailable: VladBud does not time Triton kernels on NVIDIA GPUs yet (the GPU path, "
      "ahead-of-time cubins launched by the C++ runner, is not built)"));
  return finish(r, "compile-only: Triton kernels are not measured on " + target.id + " here");
}

}  // namespace

const TargetClimber& triton_nvidia_climber() {
  static const TritonNvidiaClimber c;
  return c;
}

}  // namespace vb::ladder
