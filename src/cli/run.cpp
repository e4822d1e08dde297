// `vladbud run`: all nine kernels (or one) on every local target, as one table.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/paths.h"
#include "eval/report.h"
#include "eval/run_all.h"
#include "bridge/bridge.h"
#include "kernels/kernel_type.h"

namespace vb::cli {

namespace {
struct RunArgs {
  bool all = false, json = false, quick = false, progress = false, no_gpu = false, no_cpu = false,
       no_pytorch = false;
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
  std::string target_id = "local-cpu";
  // speedup_vs_pytorch: PyTorch on the same device, dtype and shapes, same protocol (the bridge's
  // `python -m vladbud.baseline`); a missing torch is reported once and the run goes on.
  std::string no_torch;
  auto time_pytorch = [&](EvalReport& r) {
    if (a.no_pytorch || !no_torch.empty() || !r.correct() || !r.timing) return;
    const KernelType* kt = find_kernel_type(r.kernel);
    const Size ts = kt->benchmark_size(r.backend);
    try {
      const auto b = pytorch_baseline(kt->make_problem(ts, r.timing->dtype),
                                      r.backend == "cuda" ? "cuda" : "cpu", r.timing->rotation_sets,
                                      r.timing->rotation_bytes, a.quick);
      r.pytorch_us = b.at("median_us").get<double>();
      r.pytorch_op = b.value("op", "");
    } catch (const std::exception& e) {
      no_torch = e.what();
      std::cerr << "vladbud run: no PyTorch baseline (speedup_vs_pytorch n/a): "
                << no_torch.substr(0, 300) << "\n";
    }
  };
  auto on_done = [&](std::size_t i, EvalReport& r) {
    time_pytorch(r);
    std::cerr << fmt::format(
        "[{}/{}] {:<17} {:<8} {:>6.1f} s{}\n", i + 1, types.size(), r.kernel, r.verdict, r.seconds,
        r.timing ? fmt::format("  {:.1f} us, {:.1f}% of {} ceiling{}", r.timing->median_us,
                               r.timing->roofline.pct_peak, r.timing->roofline.bound,
                               r.pytorch_us ? fmt::format(", {:.2f}x PyTorch",
                                                          *r.pytorch_us / r.timing->median_us)
                                            : "")
                 : "");
    try {
      append_results_row(a.results, results_row(r, target_id, "run"));
    } catch (const std::exception& e) {
      std::cerr << "warning: result not logged: " << e.what() << "\n";
    }
  };
  if (a.no_cpu && a.no_gpu) {
    std::cerr << "vladbud run: --no-cpu and --no-gpu leave no local target\n";
    throw CLI::RuntimeError(kUsage);
  }
  std::vector<TargetResults> targets;
  if (!a.no_cpu) targets.push_back(run_local_cpu(types, o, on_done));
  // The local GPU, when there is one: the CUDA starters at rung 5.
  std::string why_no_gpu;
  target_id = "local-gpu0";
  if (!a.no_gpu) {
    std::cerr << "vladbud run: local target: cuda (GPU); detecting...\n";
    if (auto g = run_local_gpu(types, o, on_done, &why_no_gpu))
      targets.push_back(std::move(*g));
    else {
      std::string why = why_no_gpu;
      if (why.rfind("no GPU: ", 0) == 0) why = why.substr(8);
      std::cerr << "vladbud run: no GPU: cuda backend skipped (" << why << ")\n";
    }
  }
  if (!a.report.empty()) {
    write_file_atomic(a.report, "# vladbud run\n\n" + format_run_table(targets, true));
    std::cerr << "report written to " << a.report << "\n";
  }
  if (a.json)
    std::cout << run_to_json(targets).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << format_run_table(targets, false);
  int worst = 0;
  for (const auto& t : targets)
    for (const auto& r : t.kernels) worst = std::max(worst, exit_code_for(r.verdict));
  if (worst) throw CLI::RuntimeError(worst);
}
}  // namespace

void add_run(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* c = app.add_subcommand(
      "run",
      "Generate, build and evaluate the starter kernels on every local target (the CPU, and\n"
      "the first NVIDIA GPU with the CUDA starters when one is present),\n"
      "and print the table kernel x (correctness, accuracy, stability, determinism, latency,\n"
      "performance, % of the measured ceiling, bound). Exit code 0 only when all PASS.");
  c->add_flag("--all", args->all, "all nine kernel types");
  c->add_option("kernel", args->kernel, "one kernel type instead of --all");
  c->add_flag("--json", args->json, "print JSON: {targets: [{id, local, kernels: [...]}]}");
  c->add_option("--report", args->report, "also write the table as Markdown to this file");
  c->add_flag("--quick", args->quick, "fewer sizes per stage and short timing windows");
  c->add_flag("--progress", args->progress, "print per-case progress to stderr");
  c->add_flag("--no-gpu", args->no_gpu, "evaluate the CPU only, even when a GPU is present");
  c->add_flag("--no-cpu", args->no_cpu, "skip the local CPU (e.g. only the GPU on a GPU machine)");
  c->add_flag("--no-pytorch", args->no_pytorch,
              "do not time PyTorch on the same problems (speedup_vs_pytorch n/a)");
  c->add_option("--results", args->results, "results.tsv to append to")->capture_default_str();
  c->callback([args] { run_run(*args); });
}

}  // namespace vb::cli
