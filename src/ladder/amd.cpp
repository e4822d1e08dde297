#include "ladder/amd.h"

#include <fmt/format.h>
#include <algorithm>

#include "backends/triton/toolchain.h"
#include "ladder/triton_compile.h"
#include "targets/spec_db.h"

namespace vb::ladder {

using nlohmann::json;

namespace {

class AmdClimber final : public TargetClimber {
 public:
  std::string name() const override { return "amd"; }
  bool handles(const TargetSpec& t) const override {
    return t.kind == "gpu" && t.vendor == "AMD" && t.isa.rfind("gfx", 0) == 0;
  }
  std::string backend() const override { return "triton"; }
  std::vector<TargetSpec> remote_targets() const override {
    std::vector<TargetSpec> out;
    for (const auto& t : load_spec_db())
      if (handles(t)) out.push_back(t);
    return out;
  }

  ClimbResult climb(const KernelType& type, const Variant& variant, const TargetSpec& target,
                    const ClimbOptions& opts) const override {
    ClimbResult r;
    r.target_id = target.id;
    r.kernel = type.name();
    r.variant = variant.name;
    r.backend = variant.backend;
    const Size size = opts.size ? *opts.size : type.benchmark_size(DeviceKind::Gpu);
    const Problem p = type.make_problem(size, opts.dtype);
    const std::string tool = "triton -> amdgcn (hip:" + target.isa + ":64)";
    if (!accepts(variant.backend)) {
      r.rejected = true;
      r.confidence = "rejected";
      r.evidence.push_back(make_evidence(kStaticReject, "reject", tool,
                                    "a " + variant.backend + " source cannot run on " + target.id +
                                        " (the AMD climber compiles Triton sources)"));
      r.stop_reason = "wrong backend for this target";
      return r;
    }
    const auto& tc = triton_toolchain();
    if (!tc.error.empty()) {
      r.evidence.push_back(make_evidence(kStaticReject, "unavailable", tool, "unavailable: " + tc.error));
      r.stop_reason = "no Triton here";
      r.confidence = "none";
      return r;
    }
    // rung 0: compile every launched kernel for the target.
    if (opts.progress) opts.progress("  [rung 0] " + tool + ": " + variant.source.string());
    const TritonCompile res = triton_compile_only(variant.source, p, "hip:" + target.isa + ":64");
    const std::string version = "triton " + res.triton_version;
    if (res.arch_unsupported) {
      auto e = make_evidence(kStaticReject, "unavailable", tool, "unavailable: " + res.diagnostics);
      e.tool_version = version;
      r.evidence.push_back(e);
      r.stop_reason = "the installed Triton cannot compile for " + target.isa;
      r.confidence = "none";
      return r;
    }
    if (!res.ok) {
      r.rejected = true;
      r.confidence = "rejected";
      auto e = make_evidence(kStaticReject, "reject", tool, res.diagnostics.empty() ? "compile failed" : res.diagnostics);
      e.tool_version = version;
      r.evidence.push_back(e);
      r.stop_reason = "does not compile for " + target.isa;
      return r;
    }
    const json& kernels = res.kernels;
    const double lds_limit = target.raw.value("/limits/lds_kb_per_cu"_json_pointer, 0.0) * 1024;
    for (const auto& k : kernels) {
      if (lds_limit > 0 && k.value("lds_bytes", 0) > lds_limit) {
        r.rejected = true;
        r.confidence = "rejected";
        auto e = make_evidence(kStaticReject, "reject", tool,
                          fmt::format("{} needs {} B of LDS per workgroup; {} has {:.0f} B per CU",
                                      k.value("name", ""), k.value("lds_bytes", 0), target.id, lds_limit));
        e.tool_version = version;
        r.evidence.push_back(e);
        r.stop_reason = "LDS over the target's limit";
        return r;
      }
    }
    auto e0 = make_evidence(kStaticReject, "pass", tool,
                       fmt::format("{} kernel(s) compile for {}", kernels.size(), target.isa));
    e0.tool_version = version;
    r.evidence.push_back(e0);
    r.highest_rung = kStaticReject;
    if (opts.max_rung < kStaticSignals) return finish(r, "--max-rung");
    // rung 1: the amdgcn's numbers.
    std::string summary;
    for (const auto& k : kernels)
      summary += fmt::format(
          "{}{}: {} VGPR, {} AGPR, {} SGPR, spills {}/{}, LDS {} B, scratch {} B, occupancy {} "
          "waves/SIMD, {} MFMA, {} instr (warps {}, stages {})",
          summary.empty() ? "" : "; ", k.value("name", ""), k.value("vgpr", 0), k.value("agpr", 0),
          k.value("sgpr", 0), k.value("vgpr_spill", 0), k.value("sgpr_spill", 0),
          k.value("lds_bytes", 0), k.value("scratch_bytes", 0), k.value("occupancy", 0),
          k.value("mfma", 0) + k.value("wmma", 0), k.value("instructions", 0),
          k.value("num_warps", 0), k.value("num_stages", 0));
    auto e1 = make_evidence(kStaticSignals, "pass", "amdgcn (" + target.isa + ")", summary,
                       json{{"kernels", kernels}});
    e1.tool_version = version;
    r.evidence.push_back(e1);
    r.highest_rung = kStaticSignals;
    if (opts.max_rung < kCorrectness) return finish(r, "--max-rung");
    r.evidence.push_back(make_evidence(
        kCorrectness, "skipped", "triton interpreter",
        "not climbed per target: `vladbud bench " + type.name() +
            " --backend triton --source SRC` runs the evaluator's stages in Triton's interpreter "
            "on the CPU (target independent)"));
    if (opts.max_rung < kAnalytical) return finish(r, "--max-rung");
    try {
      Estimate est = amd_estimate(target, opts.dtype, type.flops(p), type.min_bytes(p), kernels);
      r.evidence.push_back(make_evidence(kAnalytical, "pass", "roofline (" + target.id + " spec)",
                                    fmt::format("{:.4g} us [{:.4g}, {:.4g}]: {}", est.time_us,
                                                est.low_us, est.high_us, est.basis),
                                    json{{"estimate_us", est.time_us}, {"low_us", est.low_us},
                                         {"high_us", est.high_us}, {"size", size.label}}));
      r.estimate = est;
      r.highest_rung = kAnalytical;
    } catch (const std::invalid_argument& e) {
      r.evidence.push_back(make_evidence(kAnalytical, "unavailable", "roofline", e.what()));
    }
    if (opts.max_rung < kSimulation) return finish(r, "--max-rung");
    r.evidence.push_back(make_evidence(kSimulation, "unavailable", "none",
                                  "unavailable: no AMD GPU cycle simulator installed"));
    r.evidence.push_back(make_evidence(kRealHardware, "unavailable", "none",
                                  "unavailable: no " + target.name + " here"));
    return finish(r, "no AMD GPU here (rungs 4 and 5 unavailable)");
  }

 private:
  static ClimbResult finish(ClimbResult& r, const std::string& why) {
    r.stop_reason = why;
    r.confidence = r.estimate ? "analytical" : "static";
    return r;
  }
};

}  // namespace

Estimate amd_estimate(const TargetSpec& target, DType dtype, double flops, double bytes,
                      const json& kernels) {
  if (target.memory_bandwidth_gbs <= 0)
    throw std::invalid_argument("unavailable: " + target.id + " has no memory bandwidth in the spec DB");
  int matrix = 0, spills = 0, launches = 0;
  const json* main = nullptr;
  long long most = -1;
  for (const auto& k : kernels) {
    matrix += k.value("mfma", 0) + k.value("wmma", 0);
    spills += k.value("vgpr_spill", 0) + k.value("sgpr_spill", 0);
    ++launches;
    long long work = 1;  // programs x warps: the launch with the most work sets the occupancy
    if (k.contains("grid") && k["grid"].is_array())
      for (const auto& g : k["grid"]) work *= g.get<long long>();
    work *= k.value("num_warps", 4);
    if (work > most) most = work, main = &k;
  }
  const bool sixteen = dtype == DType::F16 || dtype == DType::BF16;
  const bool use_matrix = matrix > 0 && sixteen;
  const auto peak = use_matrix ? target.peak_for(dtype) : target.peak_for(DType::F32);
  if (!peak || *peak <= 0)
    throw std::invalid_argument("unavailable: " + target.id + " has no peak for " +
                                std::string(dtype_name(dtype)));
  const double path = use_matrix ? 0.7 : 0.5;
  const int occ = main ? main->value("occupancy", 0) : 0;
  const double hide = occ > 0 ? std::min(1.0, occ / 4.0) : 0.5;
  const double t_mem = bytes / (target.memory_bandwidth_gbs * 1e9 * 0.85 * hide) * 1e6;
  const double t_cmp = flops / (*peak * 1e12 * path * hide) * 1e6;
  Estimate e;
  e.rung = kAnalytical;
  e.time_us = std::max(t_mem, t_cmp) + 4.0 * launches;
  e.low_us = e.time_us * 0.5;
  e.high_us = e.time_us * (spills > 0 ? 3.0 : 2.0);
  e.basis = fmt::format(
      "{}-bound: {:.3g} us memory ({:.3g} MB at {:.0f} GB/s x 0.85), {:.3g} us compute ({:.3g} "
      "GFLOP at {:.0f} TFLOP/s {} x {}), occupancy {} waves/SIMD -> hide {:.2f}, {} launch(es) x 4 "
      "us{}",
      t_mem >= t_cmp ? "memory" : "compute", t_mem, bytes / 1e6, target.memory_bandwidth_gbs,
      t_cmp, flops / 1e9, *peak, use_matrix ? "MFMA" : "vector fp32", path, occ, hide, launches,
      spills > 0 ? fmt::format(", {} spills widen the band", spills) : "");
  return e;
}

const TargetClimber& amd_climber() {
  static const AmdClimber c;
  return c;
}

}  // namespace vb::ladder
