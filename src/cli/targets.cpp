// `vladbud targets`: the hardware targets VladBud knows — the spec database (data/targets/*.json,
// every number with its source) and the local CPU with its measured ceilings (`--calibrate`
// re-measures them). `vladbud targets show ID` prints one target in full with its sources.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <optional>

#include "cli/commands.h"
#include "eval/run_all.h"
#include "targets/ceilings.h"
#include "targets/cpu_info.h"
#include "backends/cuda/gpu_ceilings.h"
#include "targets/amd_detect.h"
#include "targets/nvidia_detect.h"
#include "targets/spec_db.h"

namespace vb::cli {

namespace {
struct TargetsArgs {
  bool json = false, calibrate = false;
  std::string show_id;
};

// A number for tables: 3 significant-ish digits, "-" when absent.
std::string num(std::optional<double> v) {
  if (!v) return "-";
  if (*v >= 100) return fmt::format("{:.0f}", *v);
  if (*v >= 10) return fmt::format("{:.1f}", *v);
  return fmt::format("{:.2f}", *v);
}

// A number for the full view: integral values without decimals, others with 6 significant digits.
std::string exact(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{:.0f}", v);
  return fmt::format("{:.6g}", v);
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The existing local-cpu object (its fields are kept stable) plus its database mapping.
nlohmann::json local_cpu_json(const CpuInfo& cpu, const Ceilings& c, const TargetSpec* entry) {
  const std::string probe =
      "measured on this machine by the vladbud ceilings probe (" + c.measured_at + ")";
  nlohmann::json t = {
      {"id", "local-cpu"},
      {"vendor", cpu.vendor},
      {"name", cpu.model},
      {"kind", "cpu"},
      {"local", true},
      {"derived", entry == nullptr},
      {"db_id", entry ? nlohmann::json(entry->id) : nlohmann::json(nullptr)},
      {"arch", cpu.arch},
      {"logical_cores", cpu.logical_cores},
      {"caches_bytes", {{"l1d", cpu.l1d_bytes}, {"l2", cpu.l2_bytes}, {"llc", cpu.llc_bytes}}},
      {"isa", cpu.isa},
      {"measured", ceilings_summary_json(c)},
      {"peaks", ceilings_summary_json(c)["peak_tflops"]},
      {"sources",
       {{"peaks", probe},
        {"measured", probe},
        {"caches_bytes", "sysfs /sys/devices/system/cpu/cpu0/cache"},
        {"isa", "/proc/cpuinfo flags"}}}};
  return t;
}

nlohmann::json spec_summary_json(const TargetSpec& t, bool local) {
  nlohmann::json j = {
      {"id", t.id},
      {"name", t.name},
      {"vendor", t.vendor},
      {"family", t.family},
      {"kind", t.kind},
      {"isa", t.isa},
      {"local", local},
      {"derived", t.derived},
      {"author_surfaces", t.author_surfaces},
      {"peaks", t.peak_tflops},
      {"memory_bandwidth_gbs", t.memory_bandwidth_gbs},
      {"memory_gb", t.memory_gb},
      {"compute_units", {{"count", t.compute_units}, {"kind", t.compute_unit_kind}}},
      {"rungs", t.rungs},
      {"sources", t.sources},
      {"notes", t.notes},
      {"unverified", t.unverified}};
  if (t.clock_ghz > 0) j["clock_ghz"] = t.clock_ghz;
  return j;
}

void print_local_cpu(const CpuInfo& cpu, const Ceilings& c, const TargetSpec* entry) {
  std::cout << fmt::format(
      "local-cpu{}  {} ({}; {} logical cores; L1d {} KiB, L2 {} KiB, LLC {} MiB)\n",
      entry ? "" : " (derived)", cpu.model, cpu.arch, cpu.logical_cores, cpu.l1d_bytes / 1024,
      cpu.l2_bytes / 1024, cpu.llc_bytes >> 20);
  std::cout << "  isa: " << join(cpu.isa, " ") << "\n";
  std::cout << fmt::format("  measured {} with {}\n", c.measured_at, c.compiler);
  std::cout << fmt::format("  memory bandwidth: {:.1f} GB/s (", c.mem_bw_gbs);
  bool first = true;
  for (const auto& [k, v] : c.bw_probes_gbs) {
    std::cout << (first ? "" : ", ") << k << " " << fmt::format("{:.1f}", v);
    first = false;
  }
  std::cout << ")\n";
  for (const auto& [d, v] : c.peak_tflops) {
    auto m = c.peak_method.count(d) ? c.peak_method.at(d) : std::string();
    std::cout << fmt::format("  peak {}: {:.3f} TFLOP/s ({})\n", dtype_name(d), v, m);
  }
  if (entry) {
    std::cout << fmt::format(
        "  datasheet: {} ({}): memory {:.1f} GB/s, fp32 {} TFLOP/s (measured ceilings are used "
        "for % of peak; `vladbud targets show {}`)\n",
        entry->id, entry->name, entry->memory_bandwidth_gbs, num(entry->peak("fp32")), entry->id);
  } else {
    std::cout << "  datasheet: not in the spec database: reported as local-cpu (derived) from "
                 "detection and the measured ceilings\n";
  }
}

// A detected NVIDIA GPU: its spec (database entry or derived) and measured ceilings.
struct LocalGpu {
  GpuInfo info;
  TargetSpec spec;
  std::optional<Ceilings> ceilings;
  std::string note;  ///< why ceilings are missing
};

std::vector<LocalGpu> local_gpus(const std::vector<TargetSpec>& db, bool calibrate,
                                 std::string* why_none) {
  std::vector<LocalGpu> out;
  for (const GpuInfo& g : detect_nvidia_gpus(why_none)) {
    LocalGpu l{g, resolve_nvidia_device(db, device_attributes(g)), std::nullopt, ""};
    try {
      l.ceilings = local_gpu_ceilings(g, calibrate, progress_printer(true));
    } catch (const std::exception& e) {
      l.note = e.what();
    }
    out.push_back(std::move(l));
  }
  return out;
}

void run_list(const TargetsArgs& a) {
  const std::vector<TargetSpec> db = load_spec_db();
  const CpuInfo cpu = detect_cpu();
  const Ceilings c = local_cpu_ceilings(a.calibrate, progress_printer(true));
  const TargetSpec* cpu_entry = match_cpu(db, cpu);
  std::string why_no_gpu;
  const std::vector<LocalGpu> gpus = local_gpus(db, a.calibrate, &why_no_gpu);
  auto gpu_for = [&](const std::string& id) -> const LocalGpu* {
    for (const auto& g : gpus)
      if (g.spec.id == id) return &g;
    return nullptr;
  };
  // AMD GPUs (amd-smi, rocm-smi or a ROCm torch; none of them here: no target, no error),
  // each with its spec entry when one matches. No ROCm ceilings probe exists yet.
  std::string why_no_amd;
  const std::vector<AmdGpuInfo> amds = detect_amd_gpus(&why_no_amd);
  std::vector<const TargetSpec*> amd_specs;
  for (const auto& g : amds) amd_specs.push_back(match_amd_device(db, g));
  auto amd_for = [&](const std::string& id) -> const AmdGpuInfo* {
    for (std::size_t i = 0; i < amds.size(); ++i)
      if (amd_specs[i] && amd_specs[i]->id == id) return &amds[i];
    return nullptr;
  };
  if (a.json) {
    nlohmann::json list = nlohmann::json::array();
    list.push_back(local_cpu_json(cpu, c, cpu_entry));
    for (const auto& g : gpus)
      if (g.spec.derived) {
        nlohmann::json j = spec_summary_json(g.spec, true);
        if (g.ceilings) j["measured"] = ceilings_summary_json(*g.ceilings);
        list.push_back(std::move(j));
      }
    for (std::size_t i = 0; i < amds.size(); ++i)
      if (!amd_specs[i])
        list.push_back({{"id", fmt::format("local-amd-gpu{}", amds[i].index)},
                        {"name", amds[i].name},
                        {"vendor", "AMD"},
                        {"kind", "gpu"},
                        {"isa", amds[i].gfx_arch},
                        {"local", true},
                        {"derived", true},
                        {"db_id", nullptr},
                        {"detected", amds[i]},
                        {"note", "not in the spec database (no entry's match.name_tokens and isa "
                                 "fit): no peaks or bandwidth to rank against"}});
    for (const auto& t : db) {
      const LocalGpu* g = gpu_for(t.id);
      const AmdGpuInfo* amd = amd_for(t.id);
      const bool local = (cpu_entry && cpu_entry->id == t.id) || g || amd;
      nlohmann::json j = spec_summary_json(t, local);
      if (cpu_entry && cpu_entry->id == t.id) j["measured"] = ceilings_summary_json(c);
      if (g && g->ceilings) j["measured"] = ceilings_summary_json(*g->ceilings);
      if (g && !g->ceilings) j["measured_note"] = g->note;
      if (amd) {
        j["detected"] = nlohmann::json::array();  // every local GPU of this entry
        for (std::size_t i = 0; i < amds.size(); ++i)
          if (amd_specs[i] == &t) j["detected"].push_back(amds[i]);
        j["measured_note"] = "no ROCm ceilings probe yet: the datasheet numbers apply";
      }
      list.push_back(std::move(j));
    }
    nlohmann::json out{{"targets", list}};
    if (amds.empty()) out["amd_detection"] = why_no_amd;
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{:<22} {:<16} {:<11} {:<16} {:>8} {:>8} {:>8} {:>9} {:>8}\n", "id",
                           "vendor", "kind", "isa", "fp64", "fp32", "bf16", "GB/s", "mem GB");
  for (const auto& t : db) {
    const bool local = (cpu_entry && cpu_entry->id == t.id) || amd_for(t.id);
    std::cout << fmt::format("{:<22} {:<16} {:<11} {:<16} {:>8} {:>8} {:>8} {:>9} {:>8}{}\n", t.id,
                             t.vendor, t.kind, t.isa, num(t.peak("fp64")), num(t.peak("fp32")),
                             num(t.peak("bf16")), num(t.memory_bandwidth_gbs), num(t.memory_gb),
                             local ? "  (local)" : "");
  }
  std::cout << fmt::format(
      "{} targets in the spec database (dense peaks, TFLOP/s; `vladbud targets show ID` for "
      "sources)\n\n",
      db.size());
  print_local_cpu(cpu, c, cpu_entry);
  if (gpus.empty()) {
    std::cout << "\nlocal GPU: " << why_no_gpu << "\n";
  }
  for (std::size_t i = 0; i < amds.size(); ++i) {
    const AmdGpuInfo& g = amds[i];
    std::cout << fmt::format(
        "\nlocal AMD GPU {}: {} ({}{}; {}) -> {}\n", g.index, g.name.empty() ? "unnamed" : g.name,
        g.gfx_arch.empty() ? "gfx arch unknown" : g.gfx_arch,
        g.compute_units > 0 ? fmt::format(", {} CUs", g.compute_units) : "", g.detected_by,
        amd_specs[i] ? amd_specs[i]->id
                     : std::string("not in the spec database (no entry's name tokens and isa fit)"));
    if (amd_specs[i])
      std::cout << fmt::format("  ceilings not measured (no ROCm probe yet): datasheet {:.0f} GB/s, "
                               "bf16 {} TFLOP/s (`vladbud targets show {}`)\n",
                               amd_specs[i]->memory_bandwidth_gbs, num(amd_specs[i]->peak("bf16")),
                               amd_specs[i]->id);
  }
  for (const auto& g : gpus) {
    std::cout << fmt::format("\nlocal GPU {}: {} (sm_{}{}, {} SMs) -> {}{}\n", g.info.ordinal,
                             g.info.name, g.info.cc_major, g.info.cc_minor, g.info.sm_count,
                             g.spec.id, g.spec.derived ? " (derived)" : "");
    if (!g.ceilings) {
      std::cout << "  ceilings not measured: " << g.note << "\n";
      continue;
    }
    const Ceilings& gc = *g.ceilings;
    std::cout << fmt::format("  memory bandwidth: measured {:.0f} GB/s, datasheet {:.0f} GB/s\n",
                             gc.mem_bw_gbs, g.spec.memory_bandwidth_gbs);
    for (const auto& [d, v] : gc.peak_tflops)
      std::cout << fmt::format("  peak {}: measured {:.1f} TFLOP/s, datasheet {}\n", dtype_name(d),
                               v, num(g.spec.peak(std::string(dtype_name(d)))));
  }
}

// One JSON value on one line for the text view: objects as "k v, k v", arrays joined.
std::string inline_value(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return exact(v.get<double>());
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const auto& e : v) parts.push_back(inline_value(e));
    return join(parts);
  }
  if (v.is_object()) {
    std::vector<std::string> parts;
    for (const auto& [k, e] : v.items()) parts.push_back(k + " " + inline_value(e));
    return join(parts);
  }
  return v.dump();
}

void print_spec(const TargetSpec& t) {
  std::cout << fmt::format("{}{}  {}\n", t.id, t.derived ? " (derived)" : "", t.name);
  std::cout << fmt::format("  vendor {} | family {} | kind {} | isa {} | author surfaces: {}\n",
                           t.vendor, t.family, t.kind, t.isa, join(t.author_surfaces));
  std::vector<std::string> peaks;
  for (const auto& [k, v] : t.peak_tflops) peaks.push_back(k + " " + exact(v));
  std::cout << "  peak (dense, TFLOP/s; int in TOPS): " << join(peaks) << "\n";
  std::cout << fmt::format(
      "  memory: {} GB{}, {} GB/s\n", exact(t.memory_gb),
      t.raw.contains("memory_type") ? " " + t.raw["memory_type"].get<std::string>() : std::string(),
      exact(t.memory_bandwidth_gbs));
  std::cout << fmt::format("  compute units: {} {}{}\n", t.compute_units, t.compute_unit_kind,
                           t.clock_ghz > 0 ? fmt::format(" @ {:.3g} GHz", t.clock_ghz) : "");
  for (const char* k :
       {"boost_clock_ghz", "caches", "on_chip_memory", "register_file", "vector_width",
        "matrix_instructions", "isa_extensions", "limits", "match"}) {
    if (t.raw.contains(k)) std::cout << fmt::format("  {}: {}\n", k, inline_value(t.raw[k]));
  }
  std::cout << "  rungs (which tool serves each ladder rung here):\n";
  for (const auto& [k, v] : t.rungs) std::cout << fmt::format("    {}: {}\n", k, v);
  std::cout << "  sources:\n";
  for (const auto& [k, v] : t.sources) std::cout << fmt::format("    {}: {}\n", k, v);
  if (!t.notes.empty()) {
    std::cout << "  notes:\n";
    for (const auto& [k, v] : t.notes) std::cout << fmt::format("    {}: {}\n", k, v);
  }
  if (!t.unverified.empty())
    std::cout << "  unverified (no primary source found): " << join(t.unverified) << "\n";
}

void run_show(const TargetsArgs& a) {
  const std::vector<TargetSpec> db = load_spec_db();
  if (a.show_id == "local-cpu") {
    const CpuInfo cpu = detect_cpu();
    const Ceilings c = local_cpu_ceilings(a.calibrate, progress_printer(true));
    const TargetSpec* entry = match_cpu(db, cpu);
    const TargetSpec derived = derive_cpu_spec(cpu, c);
    if (a.json) {
      nlohmann::json j = local_cpu_json(cpu, c, entry);
      j["spec"] = derived.raw;
      std::cout << j.dump(2) << "\n";
      return;
    }
    print_local_cpu(cpu, c, entry);
    std::cout << "\n";
    print_spec(entry ? *entry : derived);
    return;
  }
  const TargetSpec* t = find_target(db, a.show_id);
  if (!t) {
    std::vector<std::string> ids = {"local-cpu"};
    for (const auto& s : db) ids.push_back(s.id);
    std::cerr << fmt::format("vladbud targets show: unknown target \"{}\"; known ids: {}\n",
                             a.show_id, join(ids));
    throw CLI::RuntimeError("unknown target", kUsage);
  }
  if (a.json) {
    nlohmann::json j = t->raw;
    j["local"] = false;
    j["derived"] = t->derived;
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_spec(*t);
}
}  // namespace

void add_targets(CLI::App& app) {
  auto args = std::make_shared<TargetsArgs>();
  auto* c = app.add_subcommand(
      "targets",
      "List the hardware targets: the spec database (data/targets/*.json: dense peaks per dtype,\n"
      "bandwidth, caches, which tool serves each ladder rung, every number with its source) and\n"
      "the local CPU with its measured ceilings (memory bandwidth, FMA peak per dtype), cached "
      "per\n"
      "machine; --calibrate re-measures them. `targets show ID` prints one target in full.");
  c->add_flag("--json", args->json,
              "JSON: {targets: [{id, vendor, kind, local, peaks, sources, ...}]}");
  c->add_flag("--calibrate", args->calibrate, "re-run the ceiling probes (about 15 s)");
  c->require_subcommand(0, 1);
  auto* show = c->add_subcommand(
      "show", "Print one target in full with its sources (exit code 2 for an unknown id).");
  show->add_option("id", args->show_id, "target id (see `vladbud targets`), or local-cpu")
      ->required();
  show->fallthrough();
  c->callback([args, show] {
    if (show->parsed()) {
      run_show(*args);
    } else {
      run_list(*args);
    }
  });
}

}  // namespace vb::cli
