// `vladbud targets`: the hardware targets VladBud knows; here, the local CPU and its measured
// ceilings (`--calibrate` re-measures them).
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "eval/run_all.h"
#include "targets/ceilings.h"
#include "targets/cpu_info.h"

namespace vb::cli {

namespace {
struct TargetsArgs {
  bool json = false, calibrate = false;
};

void run_targets(const TargetsArgs& a) {
  const CpuInfo cpu = detect_cpu();
  const Ceilings c = local_cpu_ceilings(a.calibrate, progress_printer(true));
  if (a.json) {
    nlohmann::json t = {{"id", "local-cpu"},
                        {"vendor", cpu.vendor},
                        {"name", cpu.model},
                        {"kind", "cpu"},
                        {"local", true},
                        {"arch", cpu.arch},
                        {"logical_cores", cpu.logical_cores},
                        {"caches_bytes", {{"l1d", cpu.l1d_bytes}, {"l2", cpu.l2_bytes}, {"llc", cpu.llc_bytes}}},
                        {"isa", cpu.isa},
                        {"measured", ceilings_summary_json(c)},
                        {"peaks", ceilings_summary_json(c)["peak_tflops"]},
                        {"sources", {"measured on this machine by the vladbud ceilings probe"}}};
    std::cout << nlohmann::json{{"targets", {t}}}.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("local-cpu  {} ({}; {} logical cores; L1d {} KiB, L2 {} KiB, LLC {} MiB)\n",
                           cpu.model, cpu.arch, cpu.logical_cores, cpu.l1d_bytes / 1024,
                           cpu.l2_bytes / 1024, cpu.llc_bytes >> 20);
  std::string isa;
  for (const auto& f : cpu.isa) isa += (isa.empty() ? "" : " ") + f;
  std::cout << "  isa: " << isa << "\n";
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
  std::cout << "  datasheet: not in the spec database yet (measured ceilings are used for % of peak)\n";
}
}  // namespace

void add_targets(CLI::App& app) {
  auto args = std::make_shared<TargetsArgs>();
  auto* c = app.add_subcommand(
      "targets",
      "List the hardware targets: the local CPU with its measured ceilings (memory bandwidth,\n"
      "FMA peak per dtype), cached per machine; --calibrate re-measures them.");
  c->add_flag("--json", args->json, "JSON: {targets: [{id, vendor, kind, local, peaks, sources}]}");
  c->add_flag("--calibrate", args->calibrate, "re-run the ceiling probes (about 15 s)");
  c->callback([args] { run_targets(*args); });
}

}  // namespace vb::cli
