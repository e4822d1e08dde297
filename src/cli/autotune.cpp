// `vladbud autotune`: the main job in one process: profile -> extract -> optimize -> verify ->
// rank -> report, each stage the library function its own subcommand calls (bridge/pipeline.h,
// optimize/orchestrator.h, optimize/report_md.h). A failed stage stops the run with its name,
// the reason and the fix; what earlier stages wrote stays in the workspace.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <set>

#include "backends/backend.h"
#include "bridge/pipeline.h"
#include "bridge/run_workspace.h"
#include "cli/commands.h"
#include "core/dtype.h"
#include "core/paths.h"
#include "optimize/loop.h"
#include "optimize/measure.h"
#include "optimize/orchestrator.h"
#include "optimize/pool.h"
#include "optimize/report_md.h"
#include "targets/cpu_info.h"
#include "targets/load_record.h"

namespace vb::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_autotune_stop{false};

extern "C" void on_autotune_signal(int sig) {
  if (g_autotune_stop.exchange(true)) {  // second Ctrl-C: stop at once (the best is in place)
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

struct AutotuneArgs {
  std::string model, class_name, module, config, model_args = "{}", input_shape = "1,64",
                                                  dtype = "fp32", device = "cpu", budget = "3m",
                                                  workspace = "workspace";
  std::string backend;  ///< the starters' backend ("": the --device's default backend)
  int top = 3, plateau = 20, reps = 9;
  std::uint64_t seed = 1;
  bool json = false, no_git = false, no_rank = false, no_pytorch = false;
  std::string compile = "auto";  ///< verify against torch.compile: on, off, auto (on for a GPU device)
  int workers = 0, batch = 0;     ///< the optimize stage's worker pool (issue 21)
  std::string scheduler;
  CLI::Option* workers_opt = nullptr;
};

/// A stage that failed: its exit code, what went wrong and how to fix it.
struct StageFailure {
  int code;
  std::string what, fix;
};

constexpr int kStages = 6;

std::string fmt_secs(double s) {
  const int t = static_cast<int>(s + 0.5);
  return t >= 60 ? fmt::format("{}m{:02d}s", t / 60, t % 60) : fmt::format("{}s", t);
}

// What the stages wrote so far (for the failure message).
std::string kept_files(const fs::path& ws) {
  std::string out;
  for (const char* f : {"profile.json", "kernels", "results.tsv", "orchestration.json",
                        "verify.json", "rank.json", "report.md", "progress.png"})
    if (fs::exists(ws / f)) out += (out.empty() ? "" : ", ") + (ws / f).string() + (fs::is_directory(ws / f) ? "/" : "");
  return out.empty() ? "nothing" : out;
}

std::function<void(const std::string&)> live_line(std::ostream& log) {
  const bool tty = ::isatty(&log == &std::cout ? 1 : 2);
  return [tty, &log](const std::string& s) {
    if (tty) log << "\r\33[K  " << s << std::flush;
    else log << "  " << s << "\n" << std::flush;
  };
}

void run_autotune(AutotuneArgs a) {
  std::ostream& log = a.json ? std::cerr : std::cout;
  auto usage = [](const std::string& m) {
    std::cerr << "vladbud autotune: " << m << "\n";
    throw CLI::RuntimeError(kUsage);
  };
  // ---- every input checked before anything is written ----
  if (a.model.empty() && a.module.empty()) {
    if (!a.class_name.empty() && a.class_name != "GPT2") {
      std::string lower = a.class_name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      usage("--class-name " + a.class_name + ": the default model, models/gpt2.py, has class " +
            "GPT2" + (lower == "gpt2" ? " (class names are case-sensitive)" : "") +
            "; for your own model pass --model FILE.py (or --module) as well");
    }
    a.model = (vladbud_home() / "models" / "gpt2.py").string();
    a.class_name = "GPT2";
  }
  // The same spellings as bench and run (fp32 / float32 / float, ...), passed on canonical.
  if (const auto dt = parse_dtype(a.dtype)) {
    a.dtype = dtype_name(*dt);
  } else {
    usage("--dtype must be one of fp32, fp16, bf16 (got '" + a.dtype + "')");
  }
  opt::PoolOptions po;
  po.workers = a.workers;
  po.scheduler = a.scheduler;
  try {
    opt::check_pool_options(po, a.workers_opt && a.workers_opt->count() > 0);
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
  if (a.batch < 0 || a.batch > 64) usage("--batch must be in [1, 64] (0: the device's measurement slots + 1)");
  if (a.batch > 0 && !opt::pool_requested(po))
    usage("--batch needs --workers N or --scheduler ADDRESS");
  ProfileRequest preq;
  preq.model = a.model;
  preq.class_name = a.class_name;
  preq.module = a.module;
  preq.config = a.config;
  preq.model_args = a.model_args;
  preq.input_shape = a.input_shape;
  preq.dtype = a.dtype;
  preq.device = a.device;
  preq.workspace = a.workspace;
  try {
    check_profile_request(preq);
  } catch (const BridgeUsageError& e) {
    usage(e.what());
  }
  // The starters' backend: --backend, else the model device's default backend
  // (check_profile_request refused a device no backend runs on). Its device must time kernels
  // (the optimizer compares times) and be the model's device; both are said before profiling.
  const Backend* chosen =
      a.backend.empty() ? backend_for_torch_device(a.device) : find_backend(a.backend);
  if (!chosen) usage("unknown --backend '" + a.backend + "'; available: " + backend_names());
  if (const std::string why = chosen->device().timing_unavailable(); !why.empty())
    usage("--backend " + chosen->name() + ": " + why);
  if (chosen->device().torch_device() != a.device)
    usage(fmt::format("--backend {} runs its kernels on the '{}' device, but the model runs on "
                      "--device {}: pass --device {} (or leave --backend out)",
                      chosen->name(), chosen->device().torch_device(), a.device,
                      chosen->device().torch_device()));
  double budget_s = 0;
  try {
    budget_s = opt::parse_budget(a.budget);
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    usage(m.rfind("--budget", 0) == 0 ? m : "--budget " + m);
  }
  if (a.top < 1) usage("--top must be at least 1 (how many kernel groups to extract)");
  if (a.plateau < 0) usage("--plateau must be >= 0 (0: never move on at a plateau)");
  if (a.reps < 6)
    usage("--reps must be >= 6 (verify's paired rounds per in-model comparison: fewer give no 95 % "
          "interval for the decision; the default is 9)");
  // The earlier run in the workspace stays in place until the profile succeeded: the profile
  // writes beside it (bridge/run_workspace.h), so bad input that only Python sees (a wrong
  // --class-name) loses nothing.
  RunWorkspace rw;
  try {
    rw = prepare_run_workspace(a.workspace);
  } catch (const BridgeUsageError& e) {
    usage(e.what());
  }
  const fs::path ws = rw.ws;
  preq.workspace = rw.staging.string();

  const auto t0 = Clock::now();
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  json stages = json::array();
  int stage_no = 0;
  std::string stage_name;
  Clock::time_point stage_t0;
  // The 1-minute load average at the start, at the stage boundaries and at each progress line
  // of the optimize stage. Above the core count + 1 (this run's own threads count too), other
  // work competed with the measurements: the warning reads the samples from the run's first
  // minute on only (before it, the average is mostly what ran before this run: a new user got
  // the busy warning from README's first command, whose setup.sh build had just loaded both
  // cores; the timings' own contention checks cover that minute). The summary and --json give
  // every figure seen, so a run shorter than a minute no longer reports 0.
  LoadRecord loads(60);
  loads.sample(0);
  auto sample_load = [&] { loads.sample(since(t0)); };
  auto begin = [&](const std::string& name, const std::string& what) {
    sample_load();
    ++stage_no;
    stage_name = name;
    stage_t0 = Clock::now();
    log << fmt::format("\n== [{}/{}] {}: {} ==\n", stage_no, kStages, name, what) << std::flush;
  };
  auto done = [&](const std::string& note) {
    sample_load();
    const double s = since(stage_t0);
    stages.push_back({{"name", stage_name}, {"seconds", s}, {"status", "ok"}});
    log << fmt::format("[{}/{}] {} done in {}{}\n", stage_no, kStages, stage_name, fmt_secs(s),
                       note.empty() ? "" : ": " + note)
        << std::flush;
  };
  const std::string wsq = ws.string();
  // The command as the user can type it here (build/vladbud from the repository root), for the
  // fix lines.
  const std::string vb = [] {
    const fs::path exe = self_exe_dir() / "vladbud";
    std::error_code ec;
    const fs::path rel = fs::relative(exe, fs::current_path(), ec);
    if (!ec && !rel.empty() && rel.begin()->string() != "..") return rel.string();
    return exe.string();
  }();
  auto fail = [&](const StageFailure& f) {
    log << std::flush;
    abandon_run_workspace(rw);  // before the profile succeeded: the earlier run stays in place
    std::cerr << fmt::format("\nvladbud autotune: stage {}/{} ({}) failed: {}\n  fix: {}\n  kept: {}\n",
                             stage_no, kStages, stage_name, f.what, f.fix,
                             rw.committed || rw.staging == ws ? kept_files(ws) : "nothing of this run");
    std::cerr << earlier_run_note(rw, vb);
    if (a.json)
      std::cout << json{{"failed_stage", stage_name}, {"stage", stage_no}, {"error", f.what},
                        {"fix", f.fix}, {"workspace", ws.string()}, {"stages", stages}}
                       .dump(2)
                << "\n";
    throw CLI::RuntimeError(f.code);
  };
  // A bare number below a minute is seconds: said first (a new user's `--budget 3` ran no
  // experiment, the header saying only "optimizer budget 3").
  if (const std::string w = opt::budget_warning(a.budget); !w.empty()) log << w << "\n";
  log << fmt::format(
      "vladbud autotune: {} ({}), input {}, {} on {}, optimizer budget {}, top {}, workspace {}\n",
      a.class_name, a.model.empty() ? a.module : a.model, a.input_shape, a.dtype, a.device,
      fmt_secs(budget_s), a.top, wsq);
  if (rw.has_earlier)
    log << "the earlier run in " << wsq << " stays in place until the profile succeeds\n";

  // ---- 1. profile ----
  begin("profile", fmt::format("torch.profiler over the forward of {} ({} warm-up, {} profiled)",
                               a.class_name, preq.warmup, preq.iters));
  ProfileOutcome prof;
  try {
    log << "  starting Python with torch (" << bridge_python() << ")...\n" << std::flush;
    prof = profile_model(preq);
  } catch (const BridgeUsageError& e) {
    fail({kUsage, e.what(), "correct the model options (--model, --class-name, --model-args, --module, --config)"});
  } catch (const EmptyProfileError& e) {
    fail({kFail, e.what(), "profile a model whose forward runs PyTorch operators (eager mode)"});
  } catch (const std::exception& e) {
    const std::string m = e.what();
    const bool no_torch = m.find("No module named 'torch'") != std::string::npos ||
                          m.find("has no torch") != std::string::npos;
    bool model_error = false;
    for (const char* k : {"SyntaxError", "IndentationError", "NameError", "ImportError",
                          "ModuleNotFoundError", "TypeError", "AttributeError", "RuntimeError"})
      model_error = model_error || m.find(k) != std::string::npos;
    if (model_error && !no_torch)
      fail({kFail, m,
            "the model raised a Python error while it was imported, built or run (the last "
            "lines above name the file and line): fix " +
                (a.model.empty() ? std::string("the module") : a.model) +
                " or its --model-args"});
    fail({kFail, m,
          "run `bash scripts/setup.sh` (it makes .venv with torch) or set VB_PYTHON to a Python "
          "that has torch; the message above holds the Python side's error"});
  }
  // The profile succeeded: the earlier run is moved aside and the new run takes its place.
  try {
    commit_run_workspace(rw);
  } catch (const std::exception& e) {
    fail({kFail, e.what(), "pass another --workspace (the earlier run is named above)"});
  }
  log << format_profile_summary(prof, preq, 10);
  if (!rw.archived.empty())
    log << "the earlier run in " << wsq << " was moved to " << rw.archived.string() << "\n";
  done("wrote " + (ws / "profile.json").string());

  // ---- 2. extract ----
  const Backend& be = *chosen;
  const std::string backend = be.name();
  begin("extract", fmt::format("the {} largest (type, shapes, dtype) groups into {}/kernels/ ({} starters)",
                               a.top, wsq, backend));
  std::vector<fs::path> dirs;
  try {
    dirs = extract_kernels(prof.profile, a.top, backend, ws);
  } catch (const std::exception& e) {
    fail({kFail, e.what(),
          "profile a model that spends its time in the nine kernel types (matmul, attention, "
          "norms, ...), see the table above"});
  }
  for (const auto& d : dirs) {
    const auto mp = read_model_problem(d);
    log << fmt::format("  {:<28} {:>5.1f}%  {} {} {}  bound {}\n", d.filename().string(),
                       100 * mp->doc.value("share", 0.0), mp->type->name(), mp->size.label,
                       mp->doc.value("dtype", ""), mp->doc.value("bound", ""));
  }
  done(fmt::format("{} kernel folder(s)", dirs.size()));

  // ---- 3. optimize ----
  begin("optimize", fmt::format("the search over each kernel's @vb-param space, {} in all; next "
                                "kernel by expected end-to-end gain; Ctrl-C stops, keeping the best",
                                fmt_secs(budget_s)));
  opt::OrchestratorOptions oo;
  oo.budget_s = budget_s;
  oo.plateau_k = a.plateau;
  oo.loop.seed = a.seed;
  oo.loop.git = !a.no_git;
  if (!a.no_pytorch) oo.loop.pytorch_baseline = opt::time_pytorch_baseline;
  oo.loop.progress = [live = live_line(log), &loads, t0](const std::string& line) {
    loads.sample(std::chrono::duration<double>(Clock::now() - t0).count());
    live(line);
  };
  g_autotune_stop = false;
  oo.loop.stop = &g_autotune_stop;
  std::unique_ptr<opt::Pool> pool;
  if (opt::pool_requested(po)) {
    po.backends = {backend};
    po.log = ws / "cache" / "pool.log";
    try {
      pool = std::make_unique<opt::Pool>(po);
    } catch (const std::exception& e) {
      fail({kFail, e.what(),
            "check --workers / --scheduler (README: Many GPUs, many hosts), or leave them out for "
            "the sequential loop"});
    }
    oo.loop.pool = pool.get();
    oo.parallel = opt::parallel_folders(*pool);
    oo.loop.batch = a.batch;  // 0: each folder's device's measurement slots + 1
    log << "  " << opt::format_pool_line(*pool, a.batch) << "\n";
  }
  json orch;
  {
    auto old_int = std::signal(SIGINT, on_autotune_signal);
    auto old_term = std::signal(SIGTERM, on_autotune_signal);
    std::string err;
    try {
      orch = opt::run_orchestrator(ws, oo);
    } catch (const std::exception& e) {
      err = e.what();
    }
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
    log << "\n";
    if (pool) {
      log << "  " << opt::format_pool_summary(opt::pool_summary(*pool));
      pool.reset();  // the local cluster is not needed by the later stages
    }
    if (!err.empty()) fail({kFail, err, "re-run `" + vb + " extract` and `" + vb + " optimize --workspace " + wsq + "`"});
  }
  if (g_autotune_stop)
    fail({130, "interrupted (Ctrl-C)",
          "the best versions are in place; finish with `" + vb + " verify --workspace " + wsq +
              " && " + vb + " report --workspace " + wsq + "`, or re-run `" + vb + " optimize --workspace " +
              wsq + "` to resume"});
  std::string errors;
  for (const auto& k : orch["kernels"])
    if (k.value("status", "") == "error")
      errors += fmt::format("\n    {}: {}", k.value("dir", ""), k.value("reason", ""));
  if (!fs::exists(ws / "results.tsv"))
    fail({kFail, "no kernel could be optimized:" + errors,
          "the search proposer needs tunables ('// @vb-param' lines, README: The optimizer): "
          "every shipped starter declares some, so a folder without them has an edited source "
          "(re-run `vladbud extract`, or use `vladbud optimize --proposer agent`)"});
  log << opt::format_status(ws);
  if (!errors.empty()) log << "  not optimized (kept at the starter):" << errors << "\n";
  // Not "expected end-to-end": read beside verify's measured speedup vs PyTorch it looked like a
  // contradiction.
  done(opt::amdahl_statement(orch.value("amdahl_speedup", 1.0)));

  // ---- 4. verify ----
  VerifyRequest vreq;
  vreq.workspace = ws;
  vreq.reps = a.reps;
  vreq.compile =
      a.compile == "on" || (a.compile == "auto" && be.device().kind() == DeviceKind::Gpu);
  begin("verify", fmt::format("each type's best kernel alone in {}: correct, intercepts the profiled "
                              "calls, faster beyond the noise ({} paired rounds){}; the winners "
                              "together vs the baseline",
                              a.class_name, a.reps,
                              vreq.compile ? ", again inside torch.compile" : ""));
  json ver;
  try {
    ver = verify_model(vreq);
  } catch (const KernelBuildError& e) {
    std::cerr << e.diagnostics;
    fail({kFail, e.what(),
          "the kernel folder's best/ version no longer builds: remove that best/ folder to fall "
          "back to the starter, then `" + vb + " verify --workspace " + wsq + "`"});
  } catch (const std::exception& e) {
    fail({kFail, e.what(),
          "see the message; `" + vb + " verify --workspace " + wsq + "` re-runs this stage alone"});
  }
  log << format_verify(ver, prof.profile, ws);
  if (ver.value("verdict", "FAIL") != "PASS")
    fail({kFail,
          "a candidate kernel is wrong in the model or misses calls the profile attributed to its "
          "type (see the candidates above; " + (ws / "verify.json").string() + ")",
          "`" + vb + " verify --diagnose --workspace " + wsq + "` names the kernel type that breaks "
          "it; remove that folder's best/ (or fix its source), re-run verify, then `" + vb + " "
          "report --workspace " + wsq + "`"});
  done(fmt::format("{}, end-to-end {:.3f}x vs {} ({} of {} candidates handed over)",
                   ver.value("verdict", ""), ver.value("speedup", 0.0),
                   ver.value("end_to_end", json::object()).value("baseline", "eager"),
                   ver.value("kernels_in", json::array()).size(),
                   ver.value("candidates", json::array()).size()));

  // ---- 5. rank ----
  json rank;
  if (a.no_rank) {
    begin("rank", "skipped (--no-rank)");
    stages.push_back({{"name", "rank"}, {"seconds", 0}, {"status", "skipped"}});
  } else {
    begin("rank", fmt::format("the best kernels up the confidence ladder for the spec DB's {} "
                              "targets that are not this machine (rungs 0, 1, 3)",
                              be.device().targets_label()));
    RankWorkspaceOptions ro;
    // One line per (kernel, target) climb; the climbers' per-rung lines are left out.
    ro.progress = [&log](const std::string& m) {
      if (m.rfind("[remote ", 0) == 0) log << "  " << m << "\n" << std::flush;
    };
    try {
      rank = rank_workspace(ws, ro);
    } catch (const std::exception& e) {
      fail({kFail, e.what(),
            "`" + vb + " targets` lists the spec DB; --no-rank skips this stage, then `" + vb + " "
            "report --workspace " + wsq + "`"});
    }
    log << rank.value("table", std::string());
    done(fmt::format("{} target(s), wrote {}", rank["targets"].size(), (ws / "rank.json").string()));
  }

  // ---- 6. report ----
  begin("report", "report.md (per kernel, Amdahl, verify, remote targets) and progress.png");
  opt::ReportFiles rep;
  try {
    rep = opt::write_report(ws);
  } catch (const std::exception& e) {
    fail({kFail, e.what(), "`" + vb + " report --workspace " + wsq + "` re-runs this stage alone"});
  }
  log << "  " << rep.report_md.string() << "\n";
  if (rep.png_written) log << "  " << rep.progress_png.string() << "\n";
  else log << "  no progress.png: " << rep.png_note << "\n";
  done("");

  // ---- summary ----
  std::set<std::string> plugged;  // folders whose kernel verify handed over
  std::map<std::string, std::string> decision;  // folder -> in / dropped
  for (const auto& k : ver.value("candidates", json::array())) {
    const bool handed = k.value("handed_over", false);
    const json shapes = k.value("shapes", json::array());
    if (shapes.empty()) {
      const std::string f = fs::path(k.value("folder", "")).filename().string();
      decision[f] = handed ? "in" : "dropped";
      if (handed) plugged.insert(f);
      continue;
    }
    // A type decided per shape (matmul): each folder is in when the type is handed over, its
    // shape was not left to PyTorch ("in" absent: every shape is served) and its own kernel is
    // the one bound there ("serves"; another folder's may serve the same weight shape).
    for (const auto& r : shapes) {
      if (!r.is_object()) continue;
      const std::string f = fs::path(r.value("folder", "")).filename().string();
      const auto flag = [&](const char* k) { return !r.contains(k) || !r[k].is_boolean() || r[k].get<bool>(); };
      const bool in = handed && flag("in") && flag("serves");
      decision[f] = in ? "in" : "dropped";
      if (in) plugged.insert(f);
    }
  }
  json kernels = json::array();
  log << fmt::format("\n== summary ({} in all) ==\n", fmt_secs(since(t0)));
  log << fmt::format("{:<22} {:>6} {:>12} {:>12} {:>8} {:>10} {:>9}  {}\n", "kernel", "share",
                     "starter_us", "best_us", "speedup", "vs_pytorch", "in model", "status");
  bool marked = false;  // a figure timed under contention: "*" and opt::contended_footnote()
  for (const auto& k : orch["kernels"]) {
    const std::string dir = k.value("dir", "");
    // best.json's flags: the best figure (and its ratio to PyTorch), the starter's figure.
    const bool best_busy = best_figure_contended(ws / "kernels" / dir),
               base_busy = baseline_figure_contended(ws / "kernels" / dir);
    marked = marked || best_busy || base_busy;
    double pt_us = 0;
    try {
      pt_us = json::parse(read_file(ws / "kernels" / dir / "problem.json")).value("pytorch_us", 0.0);
    } catch (const std::exception&) {
    }
    const double base = k.value("baseline_us", 0.0), best = k.value("best_us", 0.0);
    const std::string status = k.value("status", "");
    const std::string vs = pt_us > 0 && best > 0
                               ? fmt::format("{:.3f}x{}", pt_us / best, best_busy ? "*" : "")
                               : "n/a";
    log << fmt::format("{:<22} {:>5.1f}% {:>12} {:>12} {:>7.3f}x {:>10} {:>9}  {}\n", dir,
                       100 * k.value("time_share", 0.0),
                       fmt::format("{:.2f}{}", base, base_busy ? "*" : ""),
                       fmt::format("{:.2f}{}", best, best_busy ? "*" : ""),
                       k.value("speedup", 1.0), vs, decision.count(dir) ? decision[dir] : "-",
                       status);
    kernels.push_back({{"dir", dir}, {"kernel", k.value("kernel", "")},
                       {"time_share", k.value("time_share", 0.0)}, {"starter_us", base},
                       {"best_us", best}, {"best_contended", best_busy},
                       {"starter_contended", base_busy}, {"speedup", k.value("speedup", 1.0)},
                       {"pytorch_us", pt_us > 0 ? json(pt_us) : json(nullptr)},
                       {"experiments", k.value("experiments", 0)}, {"kept", k.value("kept", 0)},
                       {"status", status}, {"reason", k.value("reason", "")},
                       {"verified", decision.count(dir) > 0},
                       {"handed_over", plugged.count(dir) > 0}});
  }
  if (marked) log << opt::contended_footnote() << "\n";
  const json lat = ver.value("latency", json::object());
  const json e2e = ver.value("end_to_end", json::object());
  const std::string in = opt::handed_over_list(ver);
  log << fmt::format(
      "(in model: the folder's kernel was handed over (in) or dropped by verify, which says why; "
      "speedup: over the starter, interleaved medians)\nverify: {}; handed over: "
      "{}\nend-to-end: {:.3f}x vs {} ({} {:.2f} ms, with what is handed over {:.2f} ms per "
      "forward){}\n",
      // With nothing handed over the model is PyTorch's own: a bare "PASS" would claim a check
      // of kernels that are not in it (a new user read it so).
      // A FAIL with nothing handed over is a dropped candidate's (wrong in the model, or a
      // failed intercept or combination check), not PyTorch's model's.
      in.empty() ? (ver.value("verdict", "") == "PASS"
                        ? fmt::format("PASS on {} seed(s), of PyTorch's own model (nothing handed over)",
                                      ver.value("seeds", json::array()).size())
                        : fmt::format("{}: a candidate failed in the model (verify above says which) "
                                      "and was dropped; nothing handed over, the model is PyTorch's own",
                                      ver.value("verdict", "")))
                 : fmt::format("{} on {} seed(s)", ver.value("verdict", ""),
                               ver.value("seeds", json::array()).size()),
      in.empty() ? "nothing (no kernel made the model faster beyond the noise)" : in,
      ver.value("speedup", 0.0), e2e.value("baseline", "eager") == "compile" ? "torch.compile" : "eager PyTorch",
      e2e.value("baseline", "eager"), lat.value("baseline_ms", 0.0), lat.value("vladbud_ms", 0.0),
      ver.value("speedup", 0.0) >= 1.0 ? "" : " -- below 1.0x: please report it");
  log << "report: " << rep.report_md.string()
      << (rep.png_written ? " and " + rep.progress_png.string() : std::string()) << "\n";
  log << loads.summary() << "\n";
  const std::string busy = contention_warning(loads.max_checked().value_or(0), detect_cpu().logical_cores);
  // Folders whose kept version was decided under contention with no quiet rounds to confirm
  // it (best.json's kept_contended, written by the optimizer's loop).
  std::string kept_busy;
  for (const auto& k : orch["kernels"]) {
    const fs::path meta = ws / "kernels" / k.value("dir", "") / "best" / "best.json";
    try {
      if (fs::exists(meta) && json::parse(read_file(meta)).value("kept_contended", false))
        kept_busy += (kept_busy.empty() ? "" : ", ") + k.value("dir", "");
    } catch (const std::exception&) {
    }
  }
  const bool contended = !busy.empty() || !kept_busy.empty();
  if (!busy.empty()) log << busy << "\n";
  if (!kept_busy.empty())
    log << "warning: the kept version of " << kept_busy
        << " was decided while other tasks competed for the cores and no quiet rounds came to "
           "confirm it; re-run `vladbud optimize` on a quiet machine\n";
  if (a.json)
    std::cout << json{{"workspace", ws.string()},
                      {"seconds", since(t0)},
                      {"stages", stages},
                      {"kernels", kernels},
                      {"amdahl_speedup", orch.value("amdahl_speedup", 1.0)},
                      // The highest 1-minute load average seen (null: not sampled); the
                      // details, and the figure the busy-machine check read, in load_average.
                      {"max_load_average", loads.max() ? json(*loads.max()) : json(nullptr)},
                      {"load_average", loads.to_json()},
                      {"contended", contended},
                      {"verify", {{"verdict", ver.value("verdict", "")},
                                  {"speedup", ver.value("speedup", 0.0)},
                                  {"kernels_in", ver.value("kernels_in", json::array())},
                                  {"kernels_dropped", ver.value("kernels_dropped", json::array())},
                                  {"end_to_end", e2e},
                                  {"baseline_ms", lat.value("baseline_ms", 0.0)},
                                  {"vladbud_ms", lat.value("vladbud_ms", 0.0)}}},
                      {"report_md", rep.report_md.string()},
                      {"progress_png", rep.png_written ? rep.progress_png.string() : ""}}
                     .dump(2)
              << "\n";
}

}  // namespace

void add_autotune(CLI::App& app) {
  auto a = std::make_shared<AutotuneArgs>();
  auto* c = app.add_subcommand(
      "autotune",
      "The main job in one process: profile the model -> extract its largest kernel groups -> "
      "optimize them (the orchestrator, within --budget) -> verify the best kernels plugged into "
      "the model -> rank them for the spec DB's remote targets (the confidence ladder) -> write "
      "workspace/report.md and progress.png. Without --model: the bundled GPT-2 small. A failed "
      "stage stops the run naming the stage and the fix; earlier stages' files stay. An earlier "
      "run in the workspace stays in place while the new one is profiled (beside it, in "
      "<workspace>.new-<pid>) and is moved to <workspace>.prev-<time> once the profile "
      "succeeded, so bad input moves nothing; a non-empty folder no autotune run wrote is "
      "refused. A busy machine (load average above the cores + 1) is warned about after "
      "the summary. Exit codes: 0 done, 1 a stage failed, 2 bad input, 130 Ctrl-C.");
  c->add_option("--model", a->model, "Python file defining the model class (default: models/gpt2.py)");
  c->add_option("--class-name", a->class_name, "nn.Module class (default with the default model: GPT2)");
  c->add_option("--module", a->module, "importable module instead of --model (transformers, ...)");
  c->add_option("--config", a->config, "transformers config: config.json, a folder, or a cached name");
  c->add_option("--model-args", a->model_args, "constructor keyword arguments as a JSON object")
      ->capture_default_str();
  c->add_option("--input-shape", a->input_shape, "BATCH,SEQ of the input")->capture_default_str();
  c->add_option("--dtype", a->dtype, "fp32, fp16 or bf16 (the model is cast to it)")->capture_default_str();
  c->add_option("--device", a->device, "cpu or cuda (cuda: CUDA starters, NVIDIA remote targets)")
      ->capture_default_str();
  c->add_option("--backend", a->backend,
                "backend of the starter kernels (default: the --device's own: cpu or cuda); its "
                "device must be able to time kernels");
  c->add_option("--budget", a->budget,
                "the optimizer's wall-clock budget: 90s, 3m, 1h, 1h30m (a bare number is seconds: "
                "3 is three seconds)")
      ->capture_default_str();
  c->add_option("--top", a->top, "kernel groups to extract and optimize")->capture_default_str();
  c->add_option("--plateau", a->plateau, "move on after this many experiments without a keep")
      ->capture_default_str();
  c->add_option("--seed", a->seed, "seed of the search proposer")->capture_default_str();
  c->add_option("--reps", a->reps, "verify: paired timed rounds per in-model comparison")
      ->capture_default_str();
  c->add_option("--compile", a->compile,
                "verify against torch.compile of the model (VladBud's ops inside the compiled "
                "graph): on, off, or auto = on for --device cuda")
      ->check(CLI::IsMember({"on", "off", "auto"}))
      ->capture_default_str();
  c->add_option("--workspace", a->workspace, "workspace folder")->capture_default_str();
  c->add_flag("--no-rank", a->no_rank, "skip the remote-target ranking stage");
  c->add_flag("--no-pytorch", a->no_pytorch, "do not time PyTorch per kernel (speedup vs PyTorch n/a)");
  c->add_flag("--no-git", a->no_git, "do not commit kept versions even inside a git repository");
  c->add_flag("--json", a->json, "print a JSON summary on stdout (the progress goes to stderr)");
  a->workers_opt = c->add_option("--workers", a->workers,
                                 "optimize over a local Dask cluster of N workers (see `vladbud "
                                 "optimize --help`)");
  c->add_option("--scheduler", a->scheduler,
                "optimize over an existing Dask cluster (tcp://HOST:8786)");
  c->add_option("--batch", a->batch,
                "with a pool: candidates in flight per kernel folder (default: the measurement "
                "slots of the folder's device + 1)");
  c->callback([a] { run_autotune(*a); });
}

}  // namespace vb::cli
