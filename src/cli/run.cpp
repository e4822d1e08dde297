// `vladbud run`: all nine kernels (or one) on every local target, as one table.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/paths.h"
#include "eval/report.h"
#include "eval/run_all.h"
#include "ladder/rank.h"

namespace vb::cli {

namespace {
struct RunArgs {
  bool all = false, json = false, quick = false, progress = false;
  bool no_remote = false, emulate = false;
  std::string kernel, report, results = "results.tsv";
};

void run_run(const RunArgs& a) {
  std::vector<const KernelType*> types;
  if (a.all == !a.kernel.empty()) {
    std::cerr << "vladbud run: give either --all or one kernel type (" << kernel_type_names()
              << ")\n";
    throw CLI::RuntimeError(kUsage);
  }
  if (a.all) {
    types = all_kernel_types();
  } else {
    const KernelType* kt = find_kernel_type(a.kernel);
    if (!kt) {
      std::cerr << "vladbud run: unknown kernel type '" << a.kernel
                << "'; choose one of: " << kernel_type_names() << "\n";
      throw CLI::RuntimeError(kUsage);
    }
    types.push_back(kt);
  }
  EvalOptions o;
  o.quick = a.quick;
  o.progress = progress_printer(a.progress);
  std::cerr << "vladbud run: local target: cpu; measuring or loading this machine's ceilings...\n";
  auto t = run_local_cpu(types, o, [&](std::size_t i, const EvalReport& r) {
    std::cerr << fmt::format(
        "[{}/{}] {:<17} {:<8} {:>6.1f} s{}\n", i + 1, types.size(), r.kernel, r.verdict, r.seconds,
        r.timing ? fmt::format("  {:.1f} us, {:.1f}% of {} ceiling", r.timing->median_us,
                               r.timing->roofline.pct_peak, r.timing->roofline.bound)
                 : "");
    try {
      append_results_row(a.results, results_row(r, "local-cpu", "run"));
    } catch (const std::exception& e) {
      std::cerr << "warning: result not logged: " << e.what() << "\n";
    }
  });
  const std::vector<TargetResults> targets{t};
  // Remote targets (--all): the starters climbed up the confidence ladder (rungs 0, 1, 3; rung 2
  // natively/under QEMU only with --emulate, which takes minutes more).
  std::vector<TargetSpec> remote;
  std::vector<std::vector<ladder::ClimbResult>> climbs;
  if (a.all && !a.no_remote) {
    try {
      remote = ladder::remote_cpu_targets();
      ladder::ClimbOptions lo;
      lo.quick = true;
      lo.max_rung = 3;
      lo.skip_emulation = !a.emulate;
      lo.progress = [](const std::string& m) { std::cerr << m << "\n"; };
      std::cerr << "vladbud run: remote targets (ladder" << (a.emulate ? ", with rung 2" : ", rungs 0/1/3")
                << "): " << remote.size() << "\n";
      climbs = ladder::climb_starters(types, remote, lo);
    } catch (const std::exception& e) {
      std::cerr << "vladbud run: remote targets skipped: " << e.what() << "\n";
      remote.clear();
      climbs.clear();
    }
  }
  if (!a.report.empty()) {
    write_file_atomic(a.report, "# vladbud run\n\n" + format_run_table(targets, true));
    std::cerr << "report written to " << a.report << "\n";
  }
  if (a.json) {
    auto j = run_to_json(targets);
    for (auto& r : ladder::remote_targets_json(remote, climbs)) j["targets"].push_back(r);
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << format_run_table(targets, false);
    if (!remote.empty()) std::cout << ladder::format_remote_table(remote, climbs);
  }
  int worst = 0;
  for (const auto& r : t.kernels) worst = std::max(worst, exit_code_for(r.verdict));
  if (worst) throw CLI::RuntimeError(worst);
}
}  // namespace

void add_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* c = app.add_subcommand(
      "run",
      "Generate, build and evaluate the starter kernels on every local target (here: the CPU),\n"
      "and print the table kernel x (correctness, accuracy, stability, determinism, latency,\n"
      "performance, % of the measured ceiling, bound). Exit code 0 only when all PASS.");
  c->add_flag("--all", args->all, "all nine kernel types");
  c->add_option("kernel", args->kernel, "one kernel type instead of --all");
  c->add_flag("--json", args->json, "print JSON: {targets: [{id, local, kernels: [...]}]}");
  c->add_option("--report", args->report, "also write the table as Markdown to this file");
  c->add_flag("--quick", args->quick, "fewer sizes per stage and short timing windows");
  c->add_flag("--progress", args->progress, "print per-case progress to stderr");
  c->add_flag("--no-remote", args->no_remote,
              "--all without the remote CPU targets of the spec DB (ladder rungs 0, 1, 3)");
  c->add_flag("--emulate", args->emulate,
              "--all: also rung 2 for remote targets (qemu-aarch64 for Arm, native for AVX-512)");
  c->add_option("--results", args->results, "results.tsv to append to")->capture_default_str();
  c->callback([args] { run_run(*args); });
}

}  // namespace vb::cli
