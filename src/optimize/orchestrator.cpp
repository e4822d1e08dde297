#include "optimize/orchestrator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "backends/backend.h"
#include "bridge/pipeline.h"
#include "core/paths.h"
#include "core/util.h"
#include "optimize/problem_file.h"

namespace vb::opt {

namespace fs = std::filesystem;
using json = nlohmann::json;

double expected_gain(const KernelEntry& e, double ceiling_pct) {
  const double share_now = e.time_share / std::max(e.speedup(), 1e-9);
  const double headroom =
      e.pct_peak > 0 ? std::clamp(1.0 - e.pct_peak / ceiling_pct, 0.0, 1.0) : 1.0;
  return share_now * headroom;
}

std::optional<std::size_t> choose_next(const std::vector<KernelEntry>& entries, double ceiling_pct) {
  std::optional<std::size_t> best;
  double g = -1;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (e.status != "pending" && e.status != "active") continue;
    if (e.budget_s > 0 && e.spent_s >= e.budget_s) continue;
    const double x = expected_gain(e, ceiling_pct);
    if (x > g) g = x, best = i;
  }
  return best;
}

double amdahl_speedup(const std::vector<KernelEntry>& entries) {
  double rest = 1, now = 0;
  for (const auto& e : entries) {
    rest -= e.time_share;
    now += e.time_share / std::max(e.speedup(), 1e-9);
  }
  return 1.0 / std::max(std::max(rest, 0.0) + now, 1e-9);
}

void assign_budgets(std::vector<KernelEntry>& entries, double total_s) {
  double sum = 0;
  for (const auto& e : entries) sum += e.time_share;
  const double n = static_cast<double>(std::max<std::size_t>(entries.size(), 1));
  for (auto& e : entries)
    e.budget_s = total_s * (0.5 / n + (sum > 0 ? 0.5 * e.time_share / sum : 0.5 / n));
}

std::vector<KernelEntry> load_entries(const fs::path& ws) {
  const fs::path kd = ws / "kernels";
  if (!fs::is_directory(kd))
    throw std::runtime_error(kd.string() +
                             " does not exist: run `vladbud extract` first (or pass --kernel DIR "
                             "for one kernel folder)");
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(kd))
    if (e.is_directory() && fs::exists(e.path() / "problem.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty())
    throw std::runtime_error(kd.string() + " holds no kernel folder with a problem.json: run "
                             "`vladbud extract` first (it writes one folder per kernel group)");
  json orch = json::object();
  try {
    if (fs::exists(ws / "orchestration.json")) orch = json::parse(read_file(ws / "orchestration.json"));
  } catch (const std::exception&) {
  }
  std::vector<KernelEntry> out;
  for (const auto& d : dirs) {
    KernelEntry e;
    e.dir = d.filename().string();
    try {
      const KernelProblem p = read_problem_file(d);
      e.kernel = p.kernel;
      e.time_share = p.time_share;
    } catch (const std::exception& ex) {
      e.status = "error";
      e.reason = ex.what();
    }
    const json st = read_kernel_state(d);
    e.baseline_us = st.value("baseline_us", 0.0);
    e.best_us = st.value("best_us", 0.0);
    e.pct_peak = st.value("best_pct_peak", 0.0);
    e.speedup_x = st.value("speedup", 1.0);
    e.experiments = st.value("experiments", 0);
    e.kept = st.value("kept", 0);
    read_contention(e, d);
    // (Fields are read only when they have their type: a damaged record must not stop a run.)
    auto text = [](const json& k, const char* f) {
      return k.is_object() && k.contains(f) && k[f].is_string() ? k[f].get<std::string>() : std::string();
    };
    if (e.status != "error" && orch.is_object() && orch.contains("kernels") && orch["kernels"].is_array())
      for (const auto& k : orch["kernels"])
        if (text(k, "dir") == e.dir) {
          const std::string s = text(k, "status");
          // Finished kernels stay finished; budget use starts over with each invocation.
          if (s == "plateau" || s == "ceiling" || s == "exhausted") e.status = s;
          else if (e.experiments > 0) e.status = "active";
          e.reason = text(k, "reason");
        }
    out.push_back(e);
  }
  return out;
}

std::string amdahl_statement(double x) {
  return fmt::format(
      "{:.3f}x model-level speedup implied by the optimizer's keeps over the starter kernels "
      "(Amdahl over each folder's speedup over its starter; not a comparison with PyTorch: "
      "`vladbud verify` measures that)",
      x);
}

std::string contended_footnote() {
  return "* timed while other work competed for the cores: not trustworthy; the next run "
         "re-measures it";
}

void read_contention(KernelEntry& e, const fs::path& folder) {
  e.best_contended = best_figure_contended(folder);
  e.baseline_contended = baseline_figure_contended(folder);
}

json orchestration_json(const std::vector<KernelEntry>& entries, double budget_s, double spent_s,
                        const std::string& current) {
  json ks = json::array();
  for (const auto& e : entries)
    ks.push_back({{"dir", e.dir},
                  {"kernel", e.kernel},
                  {"time_share", e.time_share},
                  {"baseline_us", e.baseline_us},
                  {"best_us", e.best_us},
                  {"best_contended", e.best_contended},
                  {"baseline_contended", e.baseline_contended},
                  {"speedup", e.speedup()},
                  {"pct_peak", e.pct_peak},
                  {"experiments", e.experiments},
                  {"kept", e.kept},
                  {"budget_s", e.budget_s},
                  {"spent_s", e.spent_s},
                  {"expected_gain", expected_gain(e)},
                  {"status", e.status},
                  {"reason", e.reason}});
  return {{"updated_at", utc_now_iso8601()}, {"budget_s", budget_s},
          {"spent_s", spent_s},              {"current", current},
          {"amdahl_speedup", amdahl_speedup(entries)}, {"kernels", ks}};
}

namespace {

// A folder that finished before spending its budget (plateau, ceiling, exhausted, error) passes
// what it did not spend to the folders not finished yet (pending, active, running), in
// proportion to their budgets, so that the run's budget is used; which folder runs next is
// still decided by choose_next's expected gain. A running folder's loop keeps its own budget;
// record_loop_end() sends it back to the queue when it ends with budget it was given meanwhile.
void pass_on_unspent(std::vector<KernelEntry>& entries, std::size_t from) {
  KernelEntry& f = entries[from];
  const double left = f.budget_s - f.spent_s;
  if (!(left > 0)) return;
  auto open = [](const KernelEntry& e) {
    return e.status == "pending" || e.status == "active" || e.status == "running";
  };
  double sum = 0;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (i != from && open(entries[i])) sum += entries[i].budget_s;
  if (!(sum > 0)) return;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (i != from && open(entries[i])) entries[i].budget_s += left * entries[i].budget_s / sum;
  f.budget_s = f.spent_s;
}

}  // namespace

// The loop's summary into the orchestrator's entry (status and reason by why it stopped).
// `cut_by_run`: the loop's budget was the run's remaining time, less than the folder's own.
// `given_s`: budget other folders passed on to it while its loop ran (pass_on_unspent).
void record_loop_end(KernelEntry& e, const KernelSummary& s, const OrchestratorOptions& o,
                     bool cut_by_run, double given_s) {
  e.spent_s += s.seconds;
  e.experiments = s.experiments;
  e.kept = s.kept;
  e.baseline_us = s.baseline_us;
  e.best_us = s.best_us;
  e.speedup_x = s.speedup();
  e.pct_peak = s.pct_peak;
  if (s.stop_reason == "plateau")
    e.status = "plateau", e.reason = fmt::format("no keep in {} experiments", o.plateau_k);
  else if (s.stop_reason == "ceiling")
    e.status = "ceiling", e.reason = fmt::format("{:.0f}% of its ceiling", s.pct_peak);
  else if (s.stop_reason == "exhausted")
    e.status = "exhausted", e.reason = "every configuration of its parameter space was tried";
  else if (s.stop_reason == "budget" && !cut_by_run && given_s >= 1 && e.spent_s < e.budget_s - 1)
    e.status = "active";  // given budget by a folder that finished early: its turn comes again
  else if (s.stop_reason == "budget" && !cut_by_run) {
    // Its own budget: spent, or what was left could not cover another experiment (the loop
    // starts none it cannot judge in time). Not picked again in this run either way.
    e.status = "budget";
    e.reason = e.spent_s >= e.budget_s - 1
                   ? fmt::format("spent its {:.0f} s budget", e.budget_s)
                   : fmt::format("its last {:.0f} s of {:.0f} s would not cover another experiment",
                                 e.budget_s - e.spent_s, e.budget_s);
  } else if (s.stop_reason == "budget") {
    // The run's budget ended during its turn: a finished state, not "active" (which `status`
    // reads as a loop still running); a later invocation resumes it (load_entries).
    e.status = "budget";
    e.reason = fmt::format("the run's budget ended during its turn ({:.0f} s of its {:.0f} s spent)",
                           e.spent_s, e.budget_s);
    e.spent_s = e.budget_s;
  } else if (s.stop_reason == "max_experiments") {
    // The user's cap (--max-experiments) reached: finished for this run, never picked again
    // (it was left "active" and re-picked, its setup re-run, each turn N more experiments).
    e.status = "budget";
    e.reason = fmt::format("reached the cap of {} experiment(s) per run (--max-experiments)",
                           o.loop.max_experiments);
  } else if (s.stop_reason == "interrupted")
    e.status = "interrupted", e.reason = "stopped by a stop request (Ctrl-C) during its turn";
  if (s.lost > 0) e.reason += fmt::format("{}{} experiment(s) lost", e.reason.empty() ? "" : "; ", s.lost);
}

json run_orchestrator(const fs::path& ws_in, const OrchestratorOptions& o) {
  const fs::path ws = fs::absolute(ws_in).lexically_normal();
  auto entries = load_entries(ws);
  // Kernels that cannot be timed here (an emulated device) stop the run before anything is
  // timed, with the reason and the fix, rather than failing folder by folder.
  if (!o.loop.measurer) {
    std::vector<fs::path> dirs;
    for (const auto& e : entries) dirs.push_back(ws / "kernels" / e.dir);
    require_timed_devices(dirs);
  }
  const int par = std::max(1, std::min<int>(o.parallel, static_cast<int>(entries.size())));
  assign_budgets(entries, o.budget_s * par);
  const auto t0 = std::chrono::steady_clock::now();
  auto spent = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::mutex mu;  // guards entries and orchestration.json (the loops run in threads when par > 1)
  std::condition_variable cv;
  auto save = [&](const std::string& cur) {
    write_file_atomic(ws / "orchestration.json",
                      orchestration_json(entries, o.budget_s, spent(), cur).dump(2));
  };
  auto current = [&] {
    std::string c;
    for (const auto& e : entries)
      if (e.status == "running") c += (c.empty() ? "" : ",") + e.dir;
    return c;
  };
  {
    std::lock_guard<std::mutex> lk(mu);
    save("");
  }
  // PyTorch at each folder's problem, one folder at a time, before the loops run in parallel:
  // its timing must not share the device with their screens, and the pool's device lock does
  // not cover it (a review found a GPU folder timing PyTorch in its own setup while another
  // folder's screens ran). A loop finds the figure stored and does not time it again; only a
  // lone folder (par 1) times PyTorch in its setup, while its starter builds.
  if (par > 1 && o.loop.pytorch_baseline)
    for (const auto& e : entries) {
      if (e.status == "error") continue;
      try {
        store_pytorch_baseline(ws / "kernels" / e.dir, o.loop);
      } catch (const std::exception&) {
        // the folder's loop reports its bad problem.json
      }
    }
  // What each folder's last turn in this run left for its next (LoopCarry): a folder re-picked
  // with budget given while it ran does not measure its best again when nothing changed.
  std::vector<std::optional<LoopCarry>> carries(entries.size());
  int running = 0;
  std::vector<std::thread> threads;
  std::unique_lock<std::mutex> lk(mu);
  while (spent() < o.budget_s && !(o.loop.stop && o.loop.stop->load())) {
    if (running >= par) {
      cv.wait(lk);
      continue;
    }
    const auto pick = choose_next(entries, o.ceiling_pct);
    if (!pick) {
      if (running == 0) break;
      cv.wait(lk);  // a running folder may finish with budget left for none, or the run ends
      continue;
    }
    KernelEntry& e = entries[*pick];
    OptimizeOptions lo = o.loop;
    lo.workspace = ws;
    lo.plateau_k = o.plateau_k;
    lo.ceiling_pct = o.ceiling_pct;
    lo.carry = carries[*pick];
    lo.budget_s = std::min(e.budget_s - e.spent_s, o.budget_s - spent());
    const bool cut_by_run = lo.budget_s < e.budget_s - e.spent_s;
    if (lo.budget_s <= 0) {
      e.status = "budget";
      e.reason = "no budget left for its turn";
      continue;
    }
    e.status = par > 1 ? "running" : "active";
    e.reason.clear();  // a resumed or re-picked folder's last reason no longer holds
    save(par > 1 ? current() : e.dir);
    const double left_total = o.budget_s - spent();
    auto inner = o.loop.progress;
    lo.progress = [inner, left_total, t_start = std::chrono::steady_clock::now()](const std::string& s) {
      if (!inner) return;
      const double el =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      inner(fmt::format("{} | total {:.0f}s left", s, std::max(0.0, left_total - el)));
    };
    const std::size_t idx = *pick;
    const double budget_at_start = e.budget_s;
    auto work = [&, idx, lo, cut_by_run, budget_at_start] {
      KernelSummary s;
      std::string err;
      try {
        s = optimize_kernel(ws / "kernels" / entries[idx].dir, lo);
      } catch (const std::exception& ex) {
        err = ex.what();
      }
      std::lock_guard<std::mutex> g(mu);
      KernelEntry& k = entries[idx];
      read_contention(k, ws / "kernels" / k.dir);  // what its loop left in best.json
      if (!err.empty()) {
        k.status = "error";
        k.reason = err;
        carries[idx].reset();
      } else {
        if (k.status == "running") k.status = "active";
        record_loop_end(k, s, o, cut_by_run, k.budget_s - budget_at_start);
        carries[idx] = s.carry;
      }
      if (k.status == "plateau" || k.status == "ceiling" || k.status == "exhausted" ||
          k.status == "error" || (err.empty() && s.stop_reason == "max_experiments"))
        pass_on_unspent(entries, idx);
      --running;
      save(current());
      cv.notify_all();
    };
    ++running;
    if (par == 1) {
      lk.unlock();
      work();
      lk.lock();
    } else {
      threads.emplace_back(work);
    }
  }
  // Budget spent or stopped: the running loops see their own budgets (or the stop flag) end.
  while (running > 0) cv.wait(lk);
  // A folder sent back to the queue (given budget while it ran) whose turn the run's end took:
  // finished for this run, not "active" (which `status` reads as a loop still running).
  for (auto& e : entries)
    if ((e.status == "active" || e.status == "running") && e.baseline_us > 0) {
      const bool stopped = o.loop.stop && o.loop.stop->load();
      e.status = stopped ? "interrupted" : "budget";
      e.reason = stopped ? "stopped by a stop request (Ctrl-C) before its next turn"
                         : "the run's budget ended before its next turn";
    }
  lk.unlock();
  for (auto& t : threads) t.join();
  // Folders the budget never reached still get their starter (and PyTorch, at the folder's
  // shape) measured once, one at a time: the report's speedup vs PyTorch, the Amdahl table and
  // verify's own-shape screen need every folder's baseline. This may run past the budget by
  // those measurements (a loop's setup always completes, see loop.h); Ctrl-C skips the folders
  // not started yet.
  for (auto& e : entries) {
    if (o.loop.stop && o.loop.stop->load()) break;
    if ((e.status != "pending" && e.status != "budget") || e.baseline_us > 0) continue;
    OptimizeOptions lo = o.loop;
    lo.workspace = ws;
    lo.budget_s = 0;  // setup (the starter's measurement) only, then "budget"
    auto inner = o.loop.progress;
    lo.progress = [inner](const std::string& s) {
      if (inner) inner(s + " | after the budget: the starter only");
    };
    {
      std::lock_guard<std::mutex> g(mu);
      e.status = "active";
      save(e.dir);
    }
    try {
      const KernelSummary s = optimize_kernel(ws / "kernels" / e.dir, lo);
      std::lock_guard<std::mutex> g(mu);
      e.spent_s += s.seconds;
      e.baseline_us = s.baseline_us;
      e.best_us = s.best_us;
      e.speedup_x = s.speedup();
      e.pct_peak = s.pct_peak;
      e.experiments = s.experiments;
      e.kept = s.kept;
      read_contention(e, ws / "kernels" / e.dir);
      e.status = "budget";
      e.reason = "the budget ran out before its turn: only its starter was measured";
    } catch (const std::exception& ex) {
      std::lock_guard<std::mutex> g(mu);
      e.status = "error";
      e.reason = ex.what();
    }
  }
  std::lock_guard<std::mutex> g(mu);
  save("");
  return orchestration_json(entries, o.budget_s, spent(), "");
}

namespace {

// Field readers that never throw: the value when it has the type, else the default.
double num_or(const json& j, const char* k, double d) {
  return j.is_object() && j.contains(k) && j[k].is_number() ? j[k].get<double>() : d;
}
std::string str_or(const json& j, const char* k, const std::string& d) {
  return j.is_object() && j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : d;
}

// The workspace's orchestration.json ({} when absent). A file that is not a JSON object is
// ignored with one warning on stderr naming it (status then shows the folders' own state).
json read_orchestration(const fs::path& ws) {
  const fs::path f = ws / "orchestration.json";
  if (!fs::exists(f)) return json::object();
  try {
    json j = json::parse(read_file(f));
    if (j.is_object()) return j;
    fmt::print(stderr, "warning: {} is not a JSON object; ignored (a run of `vladbud optimize` "
                       "rewrites it)\n", f.string());
  } catch (const std::exception& e) {
    fmt::print(stderr, "warning: {} is unreadable ({}); ignored (a run of `vladbud optimize` "
                       "rewrites it)\n", f.string(), e.what());
  }
  return json::object();
}

// load_entries (state.json's figures) with the last run's record of each folder laid over them:
// status, reason, budget_s and spent_s as orchestration.json wrote them (load_entries resets
// those for a new run). Fields of the wrong type keep load_entries' values.
std::vector<KernelEntry> status_entries(const fs::path& ws, const json& orch) {
  auto entries = load_entries(ws);
  const json ks = orch.contains("kernels") && orch["kernels"].is_array() ? orch["kernels"] : json::array();
  for (auto& e : entries)
    for (const auto& k : ks)
      if (str_or(k, "dir", "") == e.dir) {
        if (e.status != "error") {  // an unreadable problem.json stays the news
          e.status = str_or(k, "status", e.status);
          e.reason = str_or(k, "reason", "");
        }
        e.budget_s = num_or(k, "budget_s", 0.0);
        e.spent_s = num_or(k, "spent_s", 0.0);
      }
  return entries;
}

// status's own words for a workspace with nothing to show (load_entries' hint names
// optimize's --kernel, which status does not take).
void check_status_workspace(const fs::path& ws) {
  const std::string opt = ws == "workspace" ? "" : " --workspace " + ws.string();
  if (!fs::is_directory(ws))
    throw std::runtime_error(fmt::format(
        "workspace '{}' does not exist: pass --workspace DIR of an autotune or extract run, or "
        "make one with `vladbud autotune{}` (or `vladbud extract{}`)",
        ws.string(), opt, opt));
  if (!fs::is_directory(ws / "kernels"))
    throw std::runtime_error(fmt::format(
        "{} does not exist: no kernel was extracted into {} (an autotune run that stopped "
        "before its extract stage leaves none); run `vladbud extract{}` (or `vladbud "
        "autotune{}`) first, or pass --workspace DIR of another run",
        (ws / "kernels").string(), ws.string(), opt, opt));
}

}  // namespace

json status_json(const fs::path& ws) {
  check_status_workspace(ws);
  const json orch = read_orchestration(ws);
  json j = orchestration_json(status_entries(ws, orch), num_or(orch, "budget_s", 0.0),
                              num_or(orch, "spent_s", 0.0), str_or(orch, "current", ""));
  j["updated_at"] = orch.contains("updated_at") && orch["updated_at"].is_string()
                        ? orch["updated_at"] : json(nullptr);
  if (!orch.empty()) j["orchestration"] = orch;
  return j;
}

std::string format_status(const fs::path& ws) {
  check_status_workspace(ws);
  const json orch = read_orchestration(ws);
  const auto entries = status_entries(ws, orch);
  std::string s = fmt::format("workspace: {}\n", fs::absolute(ws).string());
  if (orch.contains("updated_at")) {
    const std::string cur = str_or(orch, "current", "");
    s += fmt::format("orchestration: updated {}, {:.0f} of {:.0f} s spent, current: {}\n",
                     str_or(orch, "updated_at", "?"), num_or(orch, "spent_s", 0.0),
                     num_or(orch, "budget_s", 0.0), cur.empty() ? "none" : cur);
  }
  s += fmt::format("{:<22} {:>6} {:>11} {:>11} {:>8} {:>7} {:>5} {:>5}  {}\n", "kernel", "share",
                   "start_us", "best_us", "speedup", "%peak", "exps", "kept", "status");
  bool marked = false;  // a figure timed under contention: "*" and the footnote
  for (const auto& e : entries) {
    const auto us = [](double v, bool contended) {
      return fmt::format("{:.2f}{}", v, contended ? "*" : " ");
    };
    marked = marked || e.best_contended || e.baseline_contended;
    s += fmt::format("{:<22} {:>5.1f}% {:>11} {:>11} {:>7.3f}x {:>6.1f}% {:>5} {:>5}  {}{}\n",
                     e.dir, 100 * e.time_share, us(e.baseline_us, e.baseline_contended),
                     us(e.best_us, e.best_contended), e.speedup(), e.pct_peak, e.experiments,
                     e.kept, e.status, e.reason.empty() ? "" : " (" + e.reason + ")");
  }
  if (marked) s += contended_footnote() + "\n";
  s += amdahl_statement(amdahl_speedup(entries)) + "\n";
  return s;
}

}  // namespace vb::opt
