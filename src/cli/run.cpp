// `vladbud run`: all nine kernels (or one) on every local target, as one table.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "backends/backend.h"
#include "cli/commands.h"
#include "core/paths.h"
#include "eval/report.h"
#include "eval/run_all.h"
#include "ladder/rank.h"
#include "bridge/bridge.h"
#include "kernels/kernel_type.h"

namespace vb::cli {

namespace {
struct RunArgs {
  bool all = false, json = false, quick = false, progress = false, no_gpu = false, no_cpu = false,
       no_pytorch = false, emulate = false;
  std::vector<std::string> remote{"cpu"};
  bool remote_given = false;   ///< --remote was on the command line (a single kernel climbs too)
  std::string remote_backend;  ///< --remote-backend: whose starters climb ("" = each target's default)
  std::string dtype = "fp32";
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
  // --remote and --remote-backend are checked before any local work, so a typo costs nothing.
  // --remote names target families (ladder::target_family: cpu, nvidia, amd), or none.
  std::vector<std::string> families;
  bool none = false;
  for (const auto& w : a.remote) {
    if (w == "none") none = true;
    else if (std::find(families.begin(), families.end(), w) == families.end()) families.push_back(w);
  }
  if (none && !families.empty()) {
    std::cerr << "vladbud run: --remote none cannot be combined with target families\n";
    throw CLI::RuntimeError(kUsage);
  }
  const bool climb = (a.all || a.remote_given) && !families.empty();
  if (!a.remote_backend.empty()) {
    if (!find_backend(a.remote_backend)) {
      std::cerr << "vladbud run: unknown --remote-backend '" << a.remote_backend
                << "'; available: " << backend_names() << "\n";
      throw CLI::RuntimeError(kUsage);
    }
    if (!climb) {
      std::cerr << "vladbud run: --remote-backend picks the starters of remote targets: give "
                   "--remote FAMILY (cpu, nvidia, amd) or --all\n";
      throw CLI::RuntimeError(kUsage);
    }
  }
  std::vector<TargetSpec> remote;
  if (climb) {
    std::vector<std::pair<std::string, std::vector<TargetSpec>>> by_family;
    try {
      by_family = ladder::remote_targets_by_family();
    } catch (const std::exception& e) {
      std::cerr << "vladbud run: remote targets skipped: " << e.what() << "\n";
    }
    for (const auto& f : families) {
      auto it = std::find_if(by_family.begin(), by_family.end(),
                             [&](const auto& g) { return g.first == f; });
      if (it == by_family.end() && !by_family.empty()) {
        std::string k;
        for (const auto& g : by_family) k += (k.empty() ? "" : ", ") + g.first;
        std::cerr << "vladbud run: --remote: no remote targets of family '" << f
                  << "'; choose from " << k << " (comma-separated), or none\n";
        throw CLI::RuntimeError(kUsage);
      }
      if (it != by_family.end())
        for (const auto& t : it->second) remote.push_back(t);
    }
  }
  EvalOptions o;
  o.quick = a.quick;
  const auto dt = parse_dtype(a.dtype);
  if (!dt || !is_floating(*dt) || *dt == DType::F64) {
    std::cerr << "vladbud run: --dtype must be fp16, bf16 or fp32 (got '" << a.dtype << "')\n";
    throw CLI::RuntimeError(kUsage);
  }
  o.timing_dtype = *dt;
  o.progress = progress_printer(a.progress);
  std::string target_id;  // the local target being run (for results.tsv)
  // speedup_vs_pytorch: PyTorch on the same device, dtype and shapes, same protocol (the bridge's
  // `python -m vladbud.baseline`); a missing torch is reported once and the run goes on.
  std::string no_torch;
  auto time_pytorch = [&](EvalReport& r) {
    if (a.no_pytorch || !no_torch.empty() || !r.correct() || !r.timing) return;
    const KernelType* kt = find_kernel_type(r.kernel);
    const Device& dev = require_backend(r.backend).device();
    const Size ts = kt->benchmark_size(dev.kind());
    try {
      const auto b = pytorch_baseline(kt->make_problem(ts, r.timing->dtype), dev.torch_device(),
                                      r.timing->rotation_sets, r.timing->rotation_bytes, a.quick);
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
        r.timing ? fmt::format("  {:.1f} us, {:.1f}% of {} ceiling{}{}", r.timing->median_us,
                               r.timing->roofline.pct_peak, r.timing->roofline.bound,
                               r.pytorch_us ? fmt::format(", {:.2f}x PyTorch",
                                                          *r.pytorch_us / r.timing->median_us)
                                            : "",
                               timed_under_contention(r)
                                   ? fmt::format(" (timed while {} other task(s) competed for "
                                                 "the cores: not trustworthy)",
                                                 r.timing->other_runnable)
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
  // Every registered backend's starters on its local device, when this machine has it (rung 5);
  // --no-cpu / --no-gpu leave out the host / GPU devices.
  std::vector<TargetResults> targets;
  for (const Backend* be : all_backends()) {
    const Device& dev = be->device();
    const bool host = dev.kind() == DeviceKind::Host;
    if (host ? a.no_cpu : a.no_gpu) continue;
    if (dev.emulated()) {  // rung 2 (correctness only) is not a measured local target
      std::cerr << "vladbud run: " << be->name() << " backend skipped (its " << dev.name()
                << " is an emulator: correctness only, `vladbud bench TYPE --backend "
                << be->name() << "`)\n";
      continue;
    }
    if (host)
      std::cerr << "vladbud run: local target: " << be->name()
                << "; measuring or loading this machine's ceilings...\n";
    else
      std::cerr << "vladbud run: local target: " << be->name() << " (" << dev.name()
                << "); detecting...\n";
    target_id = dev.local_target_id();
    std::string why;
    if (auto t = run_local(*be, types, o, on_done, &why)) {
      targets.push_back(std::move(*t));
    } else {
      const std::string none = "no " + dev.name() + ": ";
      if (why.rfind(none, 0) == 0) why = why.substr(none.size());
      std::cerr << "vladbud run: " << none << be->name() << " backend skipped (" << why << ")\n";
    }
  }
  // Remote targets: the starters climbed up the confidence ladder (rungs 0, 1, 3; rung 2
  // natively/under QEMU only with --emulate, which takes minutes more), after the local ones.
  std::vector<std::vector<ladder::ClimbResult>> climbs;
  if (!remote.empty()) {
    try {
      ladder::ClimbOptions lo;
      lo.quick = true;
      lo.max_rung = 3;
      lo.skip_emulation = !a.emulate;
      lo.progress = [](const std::string& m) { std::cerr << m << "\n"; };
      std::cerr << "vladbud run: remote targets (ladder"
                << (a.emulate ? ", with rung 2" : ", rungs 0/1/3")
                << (a.remote_backend.empty() ? "" : ", " + a.remote_backend + " starters")
                << "): " << remote.size() << "\n";
      climbs = ladder::climb_starters(types, remote, lo, a.remote_backend);
    } catch (const std::exception& e) {
      std::cerr << "vladbud run: remote targets skipped: " << e.what() << "\n";
      remote.clear();
      climbs.clear();
    }
  }
  if (!a.report.empty()) {
    std::string md = "# vladbud run\n\n" + format_run_table(targets, true);
    if (!remote.empty()) md += "## Remote targets (confidence ladder)\n\n```\n" +
                               ladder::format_remote_table(remote, climbs) + "```\n";
    write_file_atomic(a.report, md);
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
  // Rows timed while other work competed for the cores are marked in the table and the JSON;
  // the run ends saying which and how to re-time them (the exit code is the verdicts' alone).
  if (const std::string w = run_contention_warning(targets); !w.empty()) std::cerr << w << "\n";
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
  c->add_option("--dtype", args->dtype,
                "dtype of the timed problems: fp16, bf16, fp32 (correctness always runs all three)")
      ->capture_default_str();
  c->add_flag("--progress", args->progress, "print per-case progress to stderr");
  c->add_flag("--no-gpu", args->no_gpu, "evaluate the CPU only, even when a GPU is present");
  c->add_flag("--no-cpu", args->no_cpu, "skip the local CPU (e.g. only the GPU on a GPU machine)");
  c->add_flag("--no-pytorch", args->no_pytorch,
              "do not time PyTorch on the same problems (speedup_vs_pytorch n/a)");
  auto* remote = c->add_option(
      "--remote", args->remote,
      "remote targets climbed up the confidence ladder (rungs 0, 1, 3), by family, "
      "comma-separated: cpu (the spec DB's CPUs), nvidia (one NVIDIA GPU per architecture, "
      "compile-only: several minutes of nvcc the first time), amd (the AMD GPUs, Triton "
      "starters compiled for gfx*), or none. Default with --all: cpu; a single kernel climbs "
      "only when --remote is given");
  remote->delimiter(',')->capture_default_str();
  c->add_option("--remote-backend", args->remote_backend,
                "whose starters the remote targets climb: a registered backend (e.g. triton: the "
                "Triton starters on NVIDIA and AMD GPUs); default: each target's own (cpu, cuda "
                "on NVIDIA, triton on AMD)");
  c->add_flag("--emulate", args->emulate,
              "--all: also rung 2 for remote CPU targets (qemu-aarch64 for Arm, native for AVX-512)");
  c->add_option("--results", args->results, "results.tsv to append to")->capture_default_str();
  c->callback([args, remote] {
    args->remote_given = remote->count() > 0;
    run_run(*args);
  });
}

}  // namespace vb::cli
