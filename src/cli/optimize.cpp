// `vladbud optimize`: the autonomous loop on one kernel folder (--kernel) or, without it, the
// orchestrator over every workspace/kernels/* folder (src/optimize/).
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>

#include "bridge/pipeline.h"
#include "cli/commands.h"
#include "eval/report.h"
#include "kernels/kernel_type.h"
#include "optimize/loop.h"
#include "optimize/measure.h"
#include "optimize/orchestrator.h"
#include "optimize/pool.h"

namespace vb::cli {

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int sig) {
  if (g_stop.exchange(true)) {  // second Ctrl-C: stop at once (the best version is in place)
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

struct OptimizeArgs {
  std::string budget = "30m", kernel, workspace = "workspace", proposer = "search", agent_cmd,
              reproduce;
  double agent_timeout = 900, ceiling = 90;
  std::uint64_t seed = 1;
  int plateau = 20, max_experiments = 0, rounds = 3, max_rounds = 0, first_round = 0;
  bool json = false, no_git = false, verbose = false, no_pytorch = false;
  // The worker pool (issue 21).
  int workers = 0, batch = 0;
  std::string scheduler;
  double task_timeout = 1800, connect_timeout = 30;
  CLI::Option* workers_opt = nullptr;
  // A pool worker's task: measure one file at the folder's problem (python/vladbud/pool.py).
  std::string measure, mode = "quick", best;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "vladbud optimize: " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

std::function<void(const std::string&)> live_printer() {
  const bool tty = ::isatty(2);
  return [tty](const std::string& s) {
    if (tty) std::fprintf(stderr, "\r\33[K%s", s.c_str());
    else std::fprintf(stderr, "%s\n", s.c_str());
    std::fflush(stderr);
  };
}

void reproduce(const OptimizeArgs& a) {
  const auto p = opt::read_problem_file(a.kernel);
  const KernelType* kt = find_kernel_type(p.kernel);
  const Backend* be = find_backend(p.backend);
  if (!be) usage_error("backend '" + p.backend + "' is not built into this vladbud");
  if (!std::filesystem::is_regular_file(a.reproduce))
    usage_error("--reproduce '" + a.reproduce + "' is not a file");
  EvalOptions o;
  o.timing_size = p.size;
  o.timing_dtype = p.dtype;
  o.progress = progress_printer(a.verbose);
  const EvalReport r = evaluate(*kt, *be, a.reproduce, o);
  if (a.json) std::cout << report_to_json(r).dump(2) << "\n";
  else std::cout << format_key_values(r);
  if (const int c = exit_code_for(r.verdict)) throw CLI::RuntimeError(c);
}

// The worker side of a pool task: one JSON line on stdout.
void measure_task(const OptimizeArgs& a) {
  if (a.kernel.empty()) usage_error("--measure needs --kernel DIR (the folder's problem.json)");
  try {
    const auto r = opt::run_measure_task(a.kernel, a.measure, a.mode, a.best, a.rounds,
                                         a.first_round, progress_printer(a.verbose));
    std::cout << r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } catch (const std::exception& e) {
    usage_error(e.what());
  }
}

void run_optimize(const OptimizeArgs& a) {
  if (a.first_round != 0 && (a.measure.empty() || a.mode != "compare"))
    usage_error("--first-round belongs to a pool worker's compare task (--measure FILE --mode "
                "compare --best FILE); the optimizer's own comparisons count their rounds");
  if (!a.measure.empty()) return measure_task(a);
  opt::PoolOptions po;
  po.workers = a.workers;
  po.scheduler = a.scheduler;
  po.task_timeout_s = a.task_timeout;
  po.connect_timeout_s = a.connect_timeout;
  const bool workers_given = a.workers_opt && a.workers_opt->count() > 0;
  try {
    opt::check_pool_options(po, workers_given);
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }
  if (a.batch < 0 || a.batch > 64)
    usage_error("--batch must be in [1, 64] (0: the device's measurement slots + 1)");
  if (a.batch > 0 && !opt::pool_requested(po))
    usage_error("--batch needs --workers N or --scheduler ADDRESS (without them the loop judges "
                "one candidate at a time)");
  double budget = 0;
  try {
    budget = opt::parse_budget(a.budget);
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    usage_error(m.rfind("--budget", 0) == 0 ? m : "--budget " + m);
  }
  if (a.proposer != "search" && a.proposer != "agent")
    usage_error("--proposer must be 'search' or 'agent' (got '" + a.proposer + "')");
  if (a.proposer == "agent" && a.agent_cmd.empty())
    usage_error("--proposer agent needs --agent-cmd 'COMMAND' (run in the kernel folder, which "
                "holds program.md)");
  if (a.rounds < 2 || a.rounds > 20) usage_error("--rounds must be in [2, 20]");
  if (a.max_rounds != 0 && (a.max_rounds < a.rounds || a.max_rounds > 60))
    usage_error("--max-rounds must be 0 (4 x --rounds) or in [--rounds, 60]");
  if (!a.reproduce.empty()) {
    if (a.kernel.empty()) usage_error("--reproduce needs --kernel DIR (the folder's problem.json)");
    return reproduce(a);
  }
  // A bare number below a minute is seconds: said first, before any progress line.
  if (const std::string w = opt::budget_warning(a.budget); !w.empty())
    std::fprintf(stderr, "%s\n", w.c_str());
  g_stop = false;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  opt::OptimizeOptions o;
  o.budget_s = budget;
  o.proposer = a.proposer;
  o.agent_cmd = a.agent_cmd;
  o.agent_timeout_s = a.agent_timeout;
  o.seed = a.seed;
  o.max_experiments = a.max_experiments;
  o.rounds = a.rounds;
  o.max_rounds = a.max_rounds;
  o.ceiling_pct = a.ceiling;
  o.git = !a.no_git;
  if (!a.no_pytorch) o.pytorch_baseline = opt::time_pytorch_baseline;
  o.progress = live_printer();
  o.eval_progress = progress_printer(a.verbose && !a.json);
  o.stop = &g_stop;
  nlohmann::json out;
  std::unique_ptr<opt::Pool> pool;
  try {
    if (opt::pool_requested(po)) {
      po.backends = opt::folder_backends(a.kernel.empty() ? opt::kernel_folders(a.workspace)
                                                          : std::vector<std::filesystem::path>{a.kernel});
      po.log = (a.kernel.empty() ? std::filesystem::path(a.workspace)
                                 : opt::default_workspace(a.kernel)) / "cache" / "pool.log";
      const auto t_pool = std::chrono::steady_clock::now();
      pool = std::make_unique<opt::Pool>(po);
      o.pool = pool.get();
      o.batch = a.batch;  // 0: each folder's device's measurement slots + 1
      // Starting the workers is part of the run: the budget left is what the loops get.
      const double start_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_pool).count();
      o.budget_s = std::max(1e-3, budget - start_s);
      o.progress(fmt::format("{}; started in {:.1f} s of the {:.0f} s budget",
                             opt::format_pool_line(*pool, a.batch), start_s, budget));
    }
    if (!a.kernel.empty()) {
      o.plateau_k = 0;  // one folder: run for the whole budget
      if (!a.workspace.empty() && a.workspace != "workspace") o.workspace = a.workspace;
      const auto s = opt::optimize_kernel(a.kernel, o);
      out = {{"dir", s.dir},           {"kernel", s.kernel},       {"experiments", s.experiments},
             {"kept", s.kept},         {"pruned", s.pruned},       {"baseline_us", s.baseline_us},
             {"best_us", s.best_us},   {"speedup", s.speedup()},   {"pct_peak", s.pct_peak},
             {"seconds", s.seconds},   {"stop_reason", s.stop_reason},
             {"experiments_run", s.experiments_run},
             {"experiments_per_hour", s.seconds > 0 ? 3600.0 * s.experiments_run / s.seconds : 0.0},
             {"lost", s.lost},
             // best.json's flags: the figure was timed while other work competed for the cores
             {"baseline_contended", baseline_figure_contended(a.kernel)},
             {"best_contended", best_figure_contended(a.kernel)}};
    } else {
      if (!std::filesystem::is_directory(a.workspace))
        usage_error("workspace '" + a.workspace +
                    "' does not exist: run `vladbud extract` first, or pass --kernel DIR");
      opt::OrchestratorOptions oo;
      oo.budget_s = o.budget_s;
      oo.plateau_k = a.plateau;
      oo.ceiling_pct = a.ceiling;
      oo.loop = o;
      if (pool) oo.parallel = opt::parallel_folders(*pool);
      out = opt::run_orchestrator(a.workspace, oo);
    }
  } catch (const CLI::RuntimeError&) {
    throw;
  } catch (const std::exception& e) {
    if (::isatty(2)) std::fprintf(stderr, "\n");
    usage_error(e.what());
  }
  if (::isatty(2)) std::fprintf(stderr, "\n");
  if (pool) out["pool"] = opt::pool_summary(*pool);
  if (a.json) {
    std::cout << out.dump(2) << "\n";
  } else if (!a.kernel.empty()) {
    std::cout << fmt::format(
        "kernel: {}\nexperiments: {}\nkept: {}\npruned: {}\nbaseline_us: {:.3f}\nbest_us: {:.3f}\n"
        "speedup: {:.3f}x\npct_peak: {:.1f}\nseconds: {:.1f}\nexperiments_per_hour: {:.0f}\n"
        "stop_reason: {}\n",
        out["dir"].get<std::string>(), out["experiments"].get<int>(), out["kept"].get<int>(),
        out["pruned"].get<int>(), out["baseline_us"].get<double>(), out["best_us"].get<double>(),
        out["speedup"].get<double>(), out["pct_peak"].get<double>(), out["seconds"].get<double>(),
        out["experiments_per_hour"].get<double>(), out["stop_reason"].get<std::string>());
    if (out["baseline_contended"].get<bool>() || out["best_contended"].get<bool>())
      std::cout << fmt::format(
          "warning: {} timed while other work competed for the cores: not trustworthy; the next "
          "run re-measures it\n",
          out["best_contended"].get<bool>() && out["baseline_contended"].get<bool>()
              ? "baseline_us and best_us were"
              : out["best_contended"].get<bool>() ? "best_us was" : "baseline_us was");
    if (pool) std::cout << opt::format_pool_summary(out["pool"]);
  } else {
    std::cout << opt::format_status(a.workspace);
    if (pool) std::cout << opt::format_pool_summary(out["pool"]);
  }
  if (g_stop) throw CLI::RuntimeError(130);
}

}  // namespace

void add_optimize(CLI::App& app) {
  auto a = std::make_shared<OptimizeArgs>();
  auto* c = app.add_subcommand(
      "optimize",
      "The autonomous loop: propose a candidate (search over the source's @vb-param space, or an "
      "external agent), build, run the quick checks, then the full five stages, time it "
      "interleaved with the best, keep it only when faster beyond the measured noise. Every "
      "experiment is a results.tsv row. With --kernel DIR: one kernel folder; without: every "
      "workspace/kernels/* folder, the next one by expected end-to-end gain (Amdahl). Ctrl-C "
      "stops after the current phase; the best version is always in place; re-running resumes.");
  c->add_option("--budget", a->budget, "wall-clock budget: 90s, 30m, 1h, 1h30m (a bare number is seconds)")->capture_default_str();
  c->add_option("--kernel", a->kernel, "one kernel folder (problem.json + one editable source)");
  c->add_option("--workspace", a->workspace,
                "workspace (kernels/, results.tsv, orchestration.json)")->capture_default_str();
  c->add_option("--proposer", a->proposer, "search or agent")->capture_default_str();
  c->add_option("--agent-cmd", a->agent_cmd,
                "the agent command (bash -c, in the kernel folder, with program.md)");
  c->add_option("--agent-timeout", a->agent_timeout, "seconds an agent run may take")->capture_default_str();
  c->add_option("--seed", a->seed, "seed of the search proposer")->capture_default_str();
  c->add_option("--plateau", a->plateau,
                "orchestrator: move on after this many experiments without a keep")->capture_default_str();
  c->add_option("--ceiling", a->ceiling, "stop a kernel at this % of its roofline ceiling")->capture_default_str();
  c->add_option("--max-experiments", a->max_experiments, "stop after N experiments (0: budget only)");
  c->add_option("--rounds", a->rounds, "interleaved timing rounds per side before a keep")->capture_default_str();
  c->add_option("--max-rounds", a->max_rounds,
                "most rounds per side one comparison may take: an undecided candidate (consistent "
                "wins the noise threshold cannot confirm, e.g. on a loaded machine) gets --rounds "
                "more until the signed-rank test keeps it or can no longer (0 = 4 x --rounds, at least 12)")
      ->capture_default_str();
  c->add_option("--reproduce", a->reproduce,
                "evaluate one candidate file (from a results.tsv row) at the folder's problem, "
                "all five stages and timing, then exit");
  c->add_flag("--no-pytorch", a->no_pytorch,
              "do not time PyTorch at the folder's problem (results.tsv's speedup_vs_pytorch n/a)");
  c->add_flag("--no-git", a->no_git, "do not commit kept versions even inside a git repository");
  c->add_flag("--verbose", a->verbose, "print the evaluator's progress lines");
  c->add_flag("--json", a->json, "print the summary as JSON");
  a->workers_opt = c->add_option(
      "--workers", a->workers,
      "fan the experiments out over a local Dask cluster of N workers (one per GPU, the rest "
      "build ahead; for the CPU backend one per group of cores); without it or --scheduler: the "
      "sequential loop");
  c->add_option("--scheduler", a->scheduler,
                "fan the experiments out over an existing Dask cluster (tcp://HOST:8786; workers "
                "join with `dask worker ADDRESS --resources \"gpu-h200=1\"`)");
  c->add_option("--batch", a->batch,
                "with a pool: candidates in flight per kernel folder, each built and screened "
                "ahead, judged in proposal order as soon as its screen is back (default: the "
                "measurement slots of the folder's device + 1)");
  c->add_option("--task-timeout", a->task_timeout,
                "with a pool: seconds one task may run before it is recorded as lost (a hung "
                "device)")->capture_default_str();
  c->add_option("--connect-timeout", a->connect_timeout,
                "with a pool: seconds to reach the scheduler or start the local workers")
      ->capture_default_str();
  c->add_option("--measure", a->measure,
                "(a pool worker's task) measure FILE at the --kernel folder's problem and print "
                "one JSON line; see --mode");
  c->add_option("--mode", a->mode, "with --measure: build, quick, full, timing or compare")
      ->capture_default_str();
  c->add_option("--best", a->best, "with --measure --mode compare: the best version's file");
  c->add_option("--first-round", a->first_round,
                "with --measure --mode compare: the index of its first round (rounds added to a "
                "comparison continue the best-first / candidate-first alternation)")
      ->capture_default_str();
  c->callback([a] { run_optimize(*a); });
}

}  // namespace vb::cli
