#include "optimize/loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "backends/backend.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/util.h"
#include "eval/report.h"
#include "optimize/cache.h"
#include "optimize/decision.h"
#include "optimize/pool.h"
#include "optimize/proposer.h"
#include "targets/cpu_info.h"

namespace vb::opt {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double parse_budget(const std::string& text) {
  static const std::regex whole(R"(^\s*(\d+(\.\d+)?)\s*$)");
  static const std::regex part(R"((\d+(\.\d+)?)([hms]))");
  const std::string form =
      "'" + text + "' is not a budget; use e.g. 90s, 30m, 1h, 1h30m or a number of seconds";
  std::smatch m;
  double s = 0;
  auto num = [&](const std::string& digits) {
    try {
      return std::stod(digits);
    } catch (const std::out_of_range&) {
      throw std::invalid_argument("--budget must be at most a week, 168h (got '" + text + "')");
    }
  };
  if (std::regex_match(text, m, whole)) {
    s = num(m[1]);
  } else {
    std::string rest = text;
    if (rest.empty()) throw std::invalid_argument(form);
    while (!rest.empty()) {
      if (!std::regex_search(rest, m, part) || m.position(0) != 0) throw std::invalid_argument(form);
      const double v = num(m[1]);
      const char u = m[3].str()[0];
      s += v * (u == 'h' ? 3600 : u == 'm' ? 60 : 1);
      rest = m.suffix();
    }
  }
  if (!(s > 0)) throw std::invalid_argument("--budget must be positive (got '" + text + "')");
  // std::stod gives inf past DBL_MAX digits; a week is far beyond any optimization session.
  if (!(s <= 7 * 24 * 3600.0))
    throw std::invalid_argument("--budget must be at most a week, 168h (got '" + text + "')");
  return s;
}

std::string budget_warning(const std::string& text) {
  static const std::regex whole(R"(^\s*(\d+(\.\d+)?)\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, whole)) return "";
  double s = 0;
  try {
    s = parse_budget(text);
  } catch (const std::invalid_argument&) {
    return "";
  }
  if (s >= 60) return "";
  const std::string n = m[1];
  return fmt::format("warning: --budget {} is {} second{} (a bare number is seconds); for minutes "
                     "write {}m",
                     n, n, s == 1 ? "" : "s", n);
}

fs::path editable_source(const fs::path& dir, const std::string& backend) {
  std::string ext;
  if (const Backend* b = find_backend(backend))
    ext = b->source_extension();
  else
    throw std::runtime_error("problem.json names backend '" + backend +
                             "', which this vladbud does not know (available: " + backend_names() +
                             ")");
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) found.push_back(e.path());
  if (found.empty())
    throw std::runtime_error(dir.string() + " holds no editable source (*" + ext +
                             "): copy the starter in, e.g. `cp kernels/" + backend + "/<type>" +
                             ext + " " + dir.string() + "/` or run `vladbud extract`");
  if (found.size() > 1) {
    std::string names;
    for (const auto& f : found) {
      if (!names.empty()) names += ' ';
      names += f.filename().string();
    }
    throw std::runtime_error(dir.string() + " holds several *" + ext + " files (" + names +
                             "); a kernel folder has exactly one editable source");
  }
  return found.front();
}

void require_timed_devices(const std::vector<fs::path>& dirs) {
  for (const auto& d : dirs) {
    std::string backend;
    try {
      backend = read_problem_file(d).backend;
    } catch (const std::exception&) {
      continue;  // the folder's loop names its bad problem.json
    }
    const Backend* b = find_backend(backend);
    if (!b) continue;
    if (const std::string why = b->device().timing_unavailable(); !why.empty())
      throw std::runtime_error(
          fmt::format("cannot optimize {} (backend {}): {}", d.string(), backend, why));
  }
}

fs::path default_workspace(const fs::path& dir) {
  const fs::path d = fs::absolute(dir).lexically_normal();
  const fs::path clean = d.filename().empty() ? d.parent_path() : d;
  if (clean.parent_path().filename() == "kernels") return clean.parent_path().parent_path();
  return clean;
}

json read_kernel_state(const fs::path& dir) {
  try {
    if (fs::exists(dir / "state.json")) {
      auto j = json::parse(read_file(dir / "state.json"));
      if (j.is_object()) return j;
    }
  } catch (const std::exception&) {
  }
  return json::object();
}

namespace {

/// A screen lost by this factor or more triggers a re-timing of the best (see experiment()).
constexpr double kSuspectScreenLoss = 1.5;
/// The best re-timed at this factor or more of its recorded screen: the machine runs slow.
constexpr double kSlowPhase = 1.5;
/// A starting baseline this factor or more above the interleaved rounds' figure for the same
/// source is replaced (remeasure_implausible_baseline).
constexpr double kImplausibleBaseline = 1.25;
/// A keep decided on rounds timed while other tasks competed for the cores is confirmed on
/// uncontended rounds: up to this many batches of `rounds` more rounds are timed to find them.
constexpr int kQuietBatches = 3;

/// Pairs (round i of both sides) in which neither side saw other runnable tasks.
void quiet_pairs(const Interleaved& iv, std::vector<TimingSample>* best,
                 std::vector<TimingSample>* cand) {
  best->clear(), cand->clear();
  for (std::size_t i = 0; i < std::min(iv.best.size(), iv.cand.size()); ++i)
    if (iv.best[i].other_runnable == 0 && iv.cand[i].other_runnable == 0)
      best->push_back(iv.best[i]), cand->push_back(iv.cand[i]);
}

std::string git_out(const fs::path& dir, std::vector<std::string> args, const std::string& index,
                    bool* ok) {
  std::vector<std::string> argv;
  if (!index.empty()) argv = {"env", "GIT_INDEX_FILE=" + index};
  argv.push_back("git");
  argv.push_back("-C");
  argv.push_back(dir.string());
  for (auto& a : args) argv.push_back(std::move(a));
  ProcessResult r = run_process(argv, std::chrono::seconds(60));
  *ok = r.ok();
  std::string out = r.ok() ? r.out : r.err;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

std::string git_commit_files(const fs::path& dir, const std::string& branch,
                             const std::vector<fs::path>& files, const std::string& message,
                             std::string* error) {
  auto fail = [&](const std::string& e) {
    if (error) *error = e;
    return std::string();
  };
  if (!have_program("git")) return fail("git is not installed");
  // Folders optimized at once (the orchestrator's threads) share the branch and the temporary
  // index's name: one commit at a time.
  static std::mutex git_mu;
  std::lock_guard<std::mutex> git_lock(git_mu);
  bool ok = false;
  const std::string top = git_out(dir, {"rev-parse", "--show-toplevel"}, "", &ok);
  if (!ok) return fail("not inside a git repository");
  const std::string ref = "refs/heads/" + branch;
  std::string parent = git_out(dir, {"rev-parse", "--verify", "-q", ref}, "", &ok);
  if (!ok) parent = git_out(dir, {"rev-parse", "--verify", "-q", "HEAD"}, "", &ok);
  if (!ok) parent.clear();
  const fs::path index = fs::temp_directory_path() /
                         fmt::format("vladbud-index-{}-{}", ::getpid(), content_hash(branch));
  fs::remove(index);
  if (!parent.empty()) {
    git_out(top, {"read-tree", parent}, index.string(), &ok);
    if (!ok) return fail("git read-tree failed");
  }
  for (const auto& f : files) {
    const std::string blob = git_out(top, {"hash-object", "-w", fs::absolute(f).string()}, "", &ok);
    if (!ok) return fail("git hash-object failed: " + blob);
    const std::string rel = fs::relative(fs::absolute(f), top).string();
    git_out(top, {"update-index", "--add", "--cacheinfo", "100644," + blob + "," + rel},
            index.string(), &ok);
    if (!ok) return fail("git update-index failed for " + rel);
  }
  const std::string tree = git_out(top, {"write-tree"}, index.string(), &ok);
  fs::remove(index);
  if (!ok) return fail("git write-tree failed: " + tree);
  std::vector<std::string> ct;
  git_out(top, {"config", "user.email"}, "", &ok);
  if (!ok) ct = {"-c", "user.name=vladbud", "-c", "user.email=vladbud@localhost"};
  ct.insert(ct.end(), {"commit-tree", tree, "-m", message});
  if (!parent.empty()) ct.insert(ct.end(), {"-p", parent});
  const std::string commit = git_out(top, ct, "", &ok);
  if (!ok) return fail("git commit-tree failed: " + commit);
  const std::vector<std::string> upd = {"update-ref", ref, commit};
  git_out(top, upd, "", &ok);
  if (!ok) return fail("git update-ref failed");
  return commit;
}

namespace {

std::string today_yyyymmdd() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char b[16];
  std::strftime(b, sizeof b, "%Y%m%d", &tm);
  return b;
}

std::string sanitize_ref(std::string s) {
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '-';
  return s.empty() ? std::string("model") : s;
}

std::string fmt_left(double s) {
  s = std::max(0.0, s);
  const int m = static_cast<int>(s) / 60, sec = static_cast<int>(s) % 60;
  return m >= 60 ? fmt::format("{}h{:02d}m", m / 60, m % 60) : fmt::format("{}m{:02d}s", m, sec);
}

// Lines of results.tsv that belong to kernel folder `kdir` (by the "kdir=" token).
std::vector<std::string> kernel_rows(const fs::path& results, const std::string& kdir) {
  std::vector<std::string> out;
  std::ifstream in(results);
  std::string line;
  const std::string tok = "kdir=" + kdir + " ";
  while (std::getline(in, line))
    if (line.find(tok) != std::string::npos) out.push_back(line);
  return out;
}

int max_experiment_in_rows(const std::vector<std::string>& rows) {
  static const std::regex re(R"( exp=(\d+) )");
  int n = 0;
  for (const auto& r : rows) {
    std::smatch m;
    if (std::regex_search(r, m, re)) n = std::max(n, std::stoi(m[1]));
  }
  return n;
}

class Loop {
 public:
  Loop(const fs::path& dir, const OptimizeOptions& o) : opt_(o) {
    if (!fs::exists(dir))
      throw std::runtime_error("kernel folder " + dir.string() +
                               " does not exist (create it with `vladbud extract`, or pass an "
                               "existing workspace/kernels/NN_<type> folder)");
    if (!fs::is_directory(dir))
      throw std::runtime_error(dir.string() + " is not a folder (--kernel takes a kernel folder "
                                              "holding problem.json and one editable source)");
    dir_ = fs::absolute(dir).lexically_normal();
    if (dir_.filename().empty()) dir_ = dir_.parent_path();
    kdir_ = dir_.filename().string();
    problem_ = read_problem_file(dir_);
    src_ = editable_source(dir_, problem_.backend);
    backend_ = &require_backend(problem_.backend);
    // The loop compares candidates by their times: a device that is never timed (an emulator)
    // cannot serve it (a given measurer, e.g. a test's, brings its own times).
    if (!o.measurer) require_timed_devices({dir_});
    ext_ = src_.extension().string();
    ws_ = o.workspace.empty() ? default_workspace(dir_) : fs::absolute(o.workspace);
    results_ = ws_ / "results.tsv";
    cache_ = std::make_unique<MeasurementCache>(ws_ / "cache" / "measurements.jsonl");
    if (o.measurer) {
      meas_ = o.measurer;
    } else if (o.pool) {
      owned_ = make_pool_measurer(*o.pool, problem_, ext_);
      meas_ = owned_.get();
    } else {
      owned_ = make_evaluator_measurer(problem_, o.eval_progress);
      meas_ = owned_.get();
    }
    machine_ = machine_id(detect_cpu());
    std::string dims;
    for (const auto& [k, v] : problem_.size.dims) dims += fmt::format("{}{}", k, v);
    for (const auto& [k, v] : problem_.size.attrs) dims += fmt::format("@{}{}", k, v);
    key_suffix_ = fmt::format("|{}|{}|{}|{}|{}", problem_.kernel, problem_.size.label, dims,
                              dtype_name(problem_.dtype), machine_);
    if (!meas_->cache_scope().empty()) key_suffix_ += "|" + meas_->cache_scope();
    window_size_ = o.batch > 0 ? o.batch
                   : (o.pool && !o.measurer) ? default_batch(*o.pool, problem_.backend)
                                             : 1;
  }

  KernelSummary run() {
    start_ = Clock::now();
    KernelSummary s;
    s.dir = dir_.string();
    s.kernel = problem_.kernel;
    try {
      setup();
    } catch (...) {
      meas_->discard_prefetched();  // the candidates built ahead (prebuild_window) are not judged
      throw;
    }
    // From here on a measurement still queued when the budget ends is given up (the starter's
    // measurement in setup() always completes: the loop needs its baseline).
    meas_->set_deadline(start_ + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(opt_.budget_s)));
    loop_start_ = Clock::now();
    while (true) {
      std::string why = stop_reason();
      if (!why.empty()) {
        s.stop_reason = why;
        break;
      }
      if (window_size_ > 1) {
        const std::string r = run_window();
        if (!r.empty()) {
          s.stop_reason = r;
          break;
        }
        continue;
      }
      ProposeContext ctx{best_text_, dir_, src_.filename().string(), problem_.backend,
                         experiments_ + 1, recent_results()};
      std::optional<Proposal> p;
      p = proposer_->propose(ctx);
      if (!p) {
        s.stop_reason = "exhausted";
        break;
      }
      if (stopping()) {
        s.stop_reason = "interrupted";
        break;
      }
      Feedback fb = experiment(*p);
      if (cancelled_) {
        s.stop_reason = "budget";
        break;
      }
      ++judged_;
      if (!fb.lost) proposer_->observe(*p, fb);
      save_state();
      live();
    }
    // Candidates still in the window are not experiments: their queued work is given up (they
    // stay in the proposer's tried set, as a stopped run's do).
    window_.clear();
    prebuilt_.clear();
    meas_->discard_prefetched();
    save_state();
    s.experiments = experiments_;
    s.experiments_run = experiments_ - experiments_at_start_;
    s.lost = lost_;
    s.kept = kept_;
    s.pruned = proposer_->pruned();
    s.since_keep = experiments_ - last_keep_;
    s.baseline_us = baseline_us_;
    s.best_us = best_us_;
    s.speedup_vs_starter = speedup_;
    s.pct_peak = best_pct_;
    s.seconds = elapsed();
    s.carried = carried_;
    s.carry.best_hash = content_hash(best_text_);
    s.carry.experiments = experiments_;
    s.carry.screen_us = best_quick_us_;
    s.carry.experiment_s =
        judged_ > 0 ? std::chrono::duration<double>(Clock::now() - loop_start_).count() / judged_
                    : setup_quick_s_;
    return s;
  }

 private:
  // The window (a pool): up to window_size_ candidates proposed ahead, each built on any
  // worker and screened on the device's workers as soon as it is proposed (prefetch); the
  // oldest is judged by experiment() as soon as its screen is back, exactly as the
  // one-at-a-time loop judges it, then the next candidate joins. Decisions thus follow the
  // proposal order whatever did the work (a fixed seed and window give the same results.tsv
  // with 1 worker or 9). A candidate joins only when the budget left covers its wait (the
  // candidates ahead of it and itself, at this call's mean time per judged experiment), so no
  // work is queued that the budget cannot judge. Returns a stop reason ("exhausted",
  // "interrupted", "budget") or "" to go on.
  std::string run_window() {
    while (static_cast<int>(window_.size()) < window_size_ && (!prebuilt_.empty() || !exhausted_)) {
      const int ahead = static_cast<int>(window_.size());
      if (opt_.max_experiments > 0 &&
          experiments_ - experiments_at_start_ + ahead >= opt_.max_experiments)
        break;
      if (!budget_covers(ahead)) break;
      std::optional<Proposal> p;
      if (!prebuilt_.empty()) {  // proposed and built while the starter was measured
        p = std::move(prebuilt_.front());
        prebuilt_.pop_front();
      } else {
        ProposeContext ctx{best_text_, dir_, src_.filename().string(), problem_.backend,
                           experiments_ + 1 + ahead, recent_results()};
        p = proposer_->propose(ctx);
      }
      if (!p) {
        exhausted_ = true;
        break;
      }
      if (p->reject_reason.empty()) {
        const std::string h = content_hash(p->source);
        const fs::path cand = dir_ / "tried" / (h + ext_);
        if (!fs::exists(cand)) {
          fs::create_directories(cand.parent_path());
          write_file_atomic(cand, p->source);
        }
        if (!cache_->get(quick_key(h + key_suffix_))) meas_->prefetch({cand}, EvalMode::Quick);
      }
      window_.push_back(std::move(*p));
    }
    if (window_.empty()) return exhausted_ ? "exhausted" : "budget";
    if (stopping()) return "interrupted";
    const Proposal p = std::move(window_.front());
    window_.pop_front();
    Feedback fb = experiment(p);
    if (cancelled_) return "budget";
    ++judged_;
    if (!fb.lost) proposer_->observe(p, fb);
    save_state();
    live();
    return "";
  }

  // True when the budget left covers a candidate that joins the window behind `ahead` others:
  // (ahead + 1) x the mean wall time per judged experiment of this call (before the first
  // judgement: the starter's screen in setup(), a build and a screen).
  bool budget_covers(int ahead) const {
    const double per =
        judged_ > 0 ? std::chrono::duration<double>(Clock::now() - loop_start_).count() / judged_
                    : setup_quick_s_;
    return elapsed() + (ahead + 1) * per <= opt_.budget_s;
  }

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  bool stopping() const { return opt_.stop && opt_.stop->load(); }

  std::string stop_reason() const {
    if (stopping()) return "interrupted";
    if (elapsed() >= opt_.budget_s) return "budget";
    if (opt_.max_experiments > 0 && experiments_ - experiments_at_start_ >= opt_.max_experiments)
      return "max_experiments";
    if (opt_.plateau_k > 0 && experiments_ - last_keep_ >= opt_.plateau_k) return "plateau";
    if (opt_.ceiling_pct > 0 && best_pct_ >= opt_.ceiling_pct) return "ceiling";
    return "";
  }

  // PyTorch at the folder's problem, once per folder (stored in problem.json): the rows'
  // speedup_vs_pytorch. A failure is said once and leaves the column n/a.
  void time_pytorch() { problem_ = store_pytorch_baseline(dir_, opt_); }
  /// True when PyTorch is timed after the starter's build is queued: a fresh start with a window
  /// on a GPU device, whose builds (host cores) overlap the PyTorch timing (the device); no
  /// screen is queued before it ends. On a host device the builds would share the cores PyTorch
  /// is timed on: it is timed first there.
  bool pytorch_after_prefetch() const {
    return window_size_ > 1 && backend_->device().kind() == DeviceKind::Gpu;
  }

  void setup() {
    // The best version when one is saved (the source may hold an interrupted edit).
    const fs::path start =
        fs::exists(dir_ / "best" / src_.filename()) ? dir_ / "best" / src_.filename() : src_;
    if (opt_.proposer == "search") {
      const ParamSyntax& syntax = backend_->param_syntax();
      std::vector<TunableParam> params;
      try {
        params = parse_params(read_file(start), syntax);
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(fmt::format("{}: malformed @vb-param, {}", start.string(), e.what()));
      }
      if (params.empty())
        throw std::runtime_error(start.string() + " declares no tunable parameters: add " +
                                 syntax.how_to_declare() +
                                 " (README: The optimizer), or use --proposer agent");
    }
    const fs::path best_dir = dir_ / "best";
    // PyTorch's figure only fills a column of the rows: on a GPU with a pool it is timed while
    // the starter builds on the pool's workers (after its build is queued below), not before.
    if (!pytorch_after_prefetch() || fs::exists(dir_ / "best" / src_.filename())) time_pytorch();
    best_file_ = best_dir / src_.filename();
    const json st = read_kernel_state(dir_);
    if (fs::exists(best_file_)) {
      best_text_ = read_file(best_file_);
      if (read_file(src_) != best_text_) {
        // A run stopped between writing a candidate and restoring (agent edit) or between the
        // two renames of a keep: the best version wins.
        write_file_atomic(src_, best_text_);
        say(fmt::format("{}: restored the best version into {}", kdir_, src_.filename().string()));
      }
      json meta = json::object();
      try {
        meta = json::parse(read_file(best_dir / "best.json"));
      } catch (const std::exception&) {
      }
      baseline_us_ = meta.value("baseline_us", st.value("baseline_us", 0.0));
      best_pct_ = meta.value("pct_peak", 0.0);
      speedup_ = meta.value("speedup", 1.0);
      experiments_ = st.value("experiments", 0);
      kept_ = st.value("kept", 0);
      last_keep_ = st.value("last_keep", 0);
      experiments_ = std::max(experiments_, max_experiment_in_rows(kernel_rows(results_, kdir_)));
      const bool same = meta.value("hash", "") == content_hash(best_text_);
      baseline_contended_ = meta.value("baseline_contended", false);
      const bool replace = kept_ == 0 && baseline_contended_;
      kept_contended_ = meta.contains("kept_contended") && meta["kept_contended"].is_boolean() &&
                        meta["kept_contended"].get<bool>();
      if (meta.contains("starter_history") && meta["starter_history"].is_string())
        starter_history_ = meta["starter_history"].get<std::string>();
      if (reuse_carry(meta, same, replace)) return finish_setup(st);
      // The machine may be busier or quieter than when the run stopped: measure the best now.
      if (window_size_ > 1) meas_->prefetch({best_file_}, EvalMode::Quick);
      const auto t_quick = Clock::now();
      const Measurement q = meas_->measure(best_file_, EvalMode::Quick);
      setup_quick_s_ = std::chrono::duration<double>(Clock::now() - t_quick).count();
      if (!q.correct() || !q.timed)
        throw std::runtime_error(fmt::format(
            "{}: the saved best version fails the quick checks now ({} {}: {}); inspect it or "
            "remove {} to start over from the editable source",
            best_file_.string(), q.verdict, q.guard, q.reason, best_dir.string()));
      best_quick_us_ = q.median_us;
      // The figures at the problem's size: the screen's own, or (reduced screens) a timing at
      // the problem's size, taken only when one is needed.
      Measurement m = q;
      if (screens_reduced() &&
          (!same || !meta.contains("best_us") || baseline_us_ <= 0 || best_pct_ <= 0 || replace)) {
        m = meas_->measure(best_file_, EvalMode::TimingOnly);
        if (!m.correct() || !m.timed)
          throw std::runtime_error(fmt::format(
              "{}: the saved best version fails its timing at the problem's size now ({} {}: "
              "{}); inspect it or remove {} to start over from the editable source",
              best_file_.string(), m.verdict, m.guard, m.reason, best_dir.string()));
      }
      best_us_ = same ? meta.value("best_us", m.median_us) : m.median_us;
      if (baseline_us_ <= 0) baseline_us_ = m.median_us;
      if (best_pct_ <= 0) best_pct_ = m.pct_peak;
      // Nothing kept yet, so the best is the starting source: a baseline measured under
      // contention is replaced by this measurement when this one is quieter (a re-run
      // replaces it: issue 16's 7990 us starter that measures 26 us).
      if (replace && m.other_runnable == 0)
        replace_baseline(m, fmt::format("the starting source {} measured {:.2f} us before, while "
                                        "other tasks competed for the cores; {:.2f} us now with none",
                                        src_.filename().string(), baseline_us_, m.median_us));
      if (kept_contended_ && kept_ > 0 && !stopping()) reconfirm_contended_keep();
    } else {
      best_text_ = read_file(src_);
      // With a window (a pool): the starter builds on any worker, then is screened on the
      // device, as every candidate is (several folders' starters build at once), and the first
      // window's candidates build meanwhile.
      // (The starter's wait, setup_quick_s_, runs from its prefetch: the first estimate of an
      // experiment's time, build and screen, for the window's budget rule; PyTorch's timing is
      // no part of it.) On a GPU PyTorch is timed next: the starter is only built ahead, its
      // screen queued after that timing (a screen would share the device with it; the
      // starter's build may be a cache hit).
      const auto t_quick = Clock::now();
      if (window_size_ > 1) {
        if (pytorch_after_prefetch())
          meas_->prebuild({src_});
        else
          meas_->prefetch({src_}, EvalMode::Quick);
        prebuild_window();
      }
      double pytorch_s = 0;
      if (pytorch_after_prefetch()) {
        const auto t_torch = Clock::now();
        time_pytorch();
        pytorch_s = std::chrono::duration<double>(Clock::now() - t_torch).count();
      }
      Measurement m = meas_->measure(src_, EvalMode::Quick);
      if (!m.correct() || !m.timed)
        throw std::runtime_error(fmt::format(
            "{}: the starting source fails the quick checks ({} in {}, guard {}: {}); the loop "
            "needs a correct baseline (try `vladbud bench --kernel {} --source {}`)",
            src_.string(), m.verdict, m.failed_stage, m.guard, m.reason, problem_.kernel,
            src_.string()));
      // Reduced screens: the starter's screen is the reference of every screen until a fresh
      // one replaces it; one timed under contention is re-done (up to twice), as the baseline.
      for (int i = 0; i < 2 && screens_reduced() && m.other_runnable > 0 && !stopping(); ++i) {
        const Measurement again = meas_->measure(src_, EvalMode::Quick);
        if (again.correct() && again.timed &&
            (again.other_runnable < m.other_runnable ||
             (again.other_runnable == m.other_runnable && again.median_us < m.median_us)))
          m = again;
      }
      setup_quick_s_ = std::chrono::duration<double>(Clock::now() - t_quick).count() - pytorch_s;
      best_quick_us_ = m.median_us;
      // Reduced screens: the baseline is timed at the problem's size (the screen only
      // filters; keeps and every reported figure are at the problem's size).
      const EvalMode base_mode = screens_reduced() ? EvalMode::TimingOnly : EvalMode::Quick;
      if (screens_reduced()) {
        say(fmt::format("{}: quick screens time {} (the problem's sets are large); keeps are "
                        "decided at {}",
                        kdir_, meas_->screen_label(), problem_.size.label));
        m = meas_->measure(src_, base_mode);
        if (!m.correct() || !m.timed)
          throw std::runtime_error(fmt::format(
              "{}: the starting source fails its timing at the problem's size ({} guard {}: "
              "{}); the loop needs a correct baseline (try `vladbud bench --kernel {} --source "
              "{}`)",
              src_.string(), m.verdict, m.guard, m.reason, problem_.kernel, src_.string()));
      }
      // Other work competed for the cores while it was timed: up to two more tries, the least
      // contended (then the fastest) kept. Still contended: stored with a flag, replaced by
      // the next run's quieter measurement (above) while nothing has been kept. Each try says
      // which it is and the figure the tries ended with is said (a new user saw the same line
      // twice and never the re-measured figure).
      constexpr int kTries = 2;
      int timings = 1;  // correct, timed measurements compared
      for (int i = 0; i < kTries && m.other_runnable > 0 && !stopping(); ++i) {
        say(fmt::format("{}: the starting source was timed at {:.2f} us while {} other task(s) "
                        "competed for the cores: measuring it again (try {} of {})",
                        kdir_, m.median_us, m.other_runnable, i + 1, kTries));
        const Measurement again = meas_->measure(src_, base_mode);
        if (!again.correct() || !again.timed) continue;
        ++timings;
        if (again.other_runnable < m.other_runnable ||
            (again.other_runnable == m.other_runnable && again.median_us < m.median_us))
          m = again;
      }
      if (timings > 1)
        say(fmt::format("{}: starting source: {:.2f} us ({} other task{} competed in the quietest "
                        "of {} timings)",
                        kdir_, m.median_us, m.other_runnable, m.other_runnable == 1 ? "" : "s",
                        timings));
      if (!screens_reduced()) best_quick_us_ = m.median_us;
      baseline_contended_ = m.other_runnable > 0;
      baseline_us_ = best_us_ = m.median_us;
      best_pct_ = m.pct_peak;
      install(best_text_, 0);
      ResultsRow row = base_row("baseline", m);
      row.description = prefix(0) + "baseline: the starting source " + src_.filename().string() +
                        (baseline_contended_
                             ? fmt::format(" (timed while {} other task(s) competed for the "
                                           "cores: suspect; the next run re-measures it)",
                                           m.other_runnable)
                             : std::string()) +
                        (screens_reduced() ? fmt::format(" (quick screens time {}: {:.2f} us)",
                                                         meas_->screen_label(), best_quick_us_)
                                           : std::string()) +
                        "; reproduce: " + reproduce_cmd(src_);
      append_results_row(results_, row);
    }
    finish_setup(st);
  }

  // True (and the best's figures set) when the previous turn of this run left the folder as it
  // is now (OptimizeOptions::carry): the same best version (`same`: best.json names it too) and
  // experiment count, nothing flagged for a re-check (`replace`: a baseline timed under
  // contention with nothing kept; kept_contended_), and the figures on record. The best is
  // then not measured again: the screens' reference is the one that turn ended with, as if
  // its loop had gone on (a small gift of budget re-ran the whole setup before), and the
  // first estimate of an experiment's time is that turn's mean.
  bool reuse_carry(const json& meta, bool same, bool replace) {
    if (!opt_.carry) return false;
    const LoopCarry& c = *opt_.carry;
    const double best_us = meta.value("best_us", 0.0);
    if (!same || c.best_hash != content_hash(best_text_) || c.experiments != experiments_ ||
        replace || (kept_contended_ && kept_ > 0) || !(c.screen_us > 0) || !(best_us > 0) ||
        !(baseline_us_ > 0) || !(best_pct_ > 0))
      return false;
    best_quick_us_ = c.screen_us;
    best_us_ = best_us;
    setup_quick_s_ = std::max(c.experiment_s, 0.0);
    carried_ = true;
    say(fmt::format("{}: as its last turn left it: the best's figures carried over ({:.2f} us, "
                    "screens against {:.2f} us), not measured again",
                    kdir_, best_us_, best_quick_us_));
    return true;
  }

  // The end of setup() on either path: the branch, the proposer and state.json.
  void finish_setup(const json& st) {
    experiments_at_start_ = experiments_;
    branch_ = st.value("branch", "");
    if (branch_.empty()) {
      std::string model = problem_.model;
      if (model.empty()) {
        try {
          const auto prof = json::parse(read_file(ws_ / "profile.json"));
          if (prof.is_object() && prof.contains("model") && prof["model"].is_string())
            model = prof["model"].get<std::string>();
        } catch (const std::exception&) {
        }
      }
      if (model.empty()) model = ws_.filename().string();
      branch_ = "vladbud/" + today_yyyymmdd() + "-" + sanitize_ref(model);
    }
    if (!proposer_) make_proposer(st);
    save_state();
  }

  // The proposer of opt_.proposer over best_text_, its state restored from `st` (state.json)
  // when it was saved by the same proposer.
  void make_proposer(const json& st) {
    if (opt_.proposer == "search") {
      auto params = parse_params(best_text_, backend_->param_syntax());
      proposer_ = make_search_proposer(
          opt_.seed,
          chain_pruners({builtin_pruner(params, backend_->device().limits()), opt_.extra_pruner}),
          backend_->param_syntax());
    } else if (opt_.proposer == "agent") {
      if (opt_.agent_cmd.empty())
        throw std::runtime_error("--proposer agent needs --agent-cmd 'COMMAND' (run in the kernel "
                                 "folder with program.md)");
      AgentOptions ao;
      ao.command = opt_.agent_cmd;
      ao.timeout_s = opt_.agent_timeout_s;
      ao.protected_files.push_back(fs::read_symlink("/proc/self/exe"));
      if (fs::exists(runner_path())) ao.protected_files.push_back(runner_path());
      const fs::path inc = vladbud_home() / "kernels" / "include";
      if (fs::exists(inc))
        for (const auto& e : fs::directory_iterator(inc))
          if (e.is_regular_file()) ao.protected_files.push_back(e.path());
      proposer_ = make_agent_proposer(ao);
    } else {
      throw std::runtime_error("--proposer must be 'search' or 'agent' (got '" + opt_.proposer + "')");
    }
    if (st.value("proposer", "") == proposer_->name() && st.contains("proposer_state"))
      proposer_->restore(st["proposer_state"]);
  }

  // A fresh start with a window (a pool): the first window's candidates are proposed now and
  // built on any worker (Measurer::prebuild) while the starter builds and is screened, instead
  // of after its screen. They join the window in run_window(), in this order and under the same
  // budget rule, and only then are their screens queued. Only for the search proposer: it reads
  // no results, so these are the very proposals run_window() would make (same best source,
  // seed and experiment numbers), and a fixed seed and window give the same decisions.
  void prebuild_window() {
    if (window_size_ <= 1 || opt_.proposer != "search") return;
    make_proposer(read_kernel_state(dir_));
    std::vector<fs::path> files;
    for (int ahead = 0; ahead < window_size_; ++ahead) {
      if (opt_.max_experiments > 0 && ahead >= opt_.max_experiments) break;
      ProposeContext ctx{best_text_, dir_, src_.filename().string(), problem_.backend,
                         experiments_ + 1 + ahead, recent_results()};
      std::optional<Proposal> p = proposer_->propose(ctx);
      if (!p) {
        exhausted_ = true;
        break;
      }
      if (p->reject_reason.empty()) {
        const fs::path cand = dir_ / "tried" / (content_hash(p->source) + ext_);
        if (!fs::exists(cand)) {
          fs::create_directories(cand.parent_path());
          write_file_atomic(cand, p->source);
        }
        files.push_back(cand);
      }
      prebuilt_.push_back(std::move(*p));
    }
    if (!files.empty()) meas_->prebuild(files);
  }

  void say(const std::string& s) const {
    if (opt_.progress) opt_.progress(s);
  }

  /// The measurement cache's key of a quick screen: it names the screen's size when reduced,
  /// so a screen timed at another size (an older version, another device setting) never
  /// answers for this one.
  std::string quick_key(const std::string& key) const {
    return "quick|" + key + (screens_reduced() ? "|screen " + meas_->screen_label() : "");
  }
  /// True when quick screens time a reduced size (Measurer::screen_label()).
  bool screens_reduced() const { return !meas_->screen_label().empty(); }
  /// " (screened at LABEL)" for a row whose screen figure is at a reduced size, else "".
  std::string screen_at() const {
    return screens_reduced() ? " (screened at " + meas_->screen_label() + ")" : std::string();
  }

  void live() const {
    say(fmt::format("{}: exp {} | kept {} | best {:.3f}x ({:.1f} us, {:.0f}% of ceiling) | {} left",
                    kdir_, experiments_, kept_, speedup_, best_us_,
                    best_pct_, fmt_left(opt_.budget_s - elapsed())));
  }

  std::string prefix(int n) const {
    return fmt::format("kdir={} exp={} proposer={} ", kdir_, n, opt_.proposer);
  }

  std::string reproduce_cmd(const fs::path& f) const {
    return fmt::format("vladbud optimize --kernel {} --reproduce {}", dir_.string(), f.string());
  }

  ResultsRow base_row(const std::string& tag, const Measurement& m) const {
    ResultsRow r;
    r.tag = tag;
    r.kernel_type = problem_.kernel;
    r.correctness = m.verdict;
    r.target = meas_->target();
    r.backend = problem_.backend;
    if (m.timed) {
      r.latency_us = m.median_us;
      r.throughput_tflops = m.tflops;
      r.pct_peak = m.pct_peak;
      r.bandwidth_gb_s = m.gbs;
      // PyTorch was timed at the problem's size: no ratio for a reduced screen's figure.
      const bool at_size = m.size_label.empty() || m.size_label == problem_.size.label;
      if (at_size && problem_.raw.contains("pytorch_us") && problem_.raw["pytorch_us"].is_number() &&
          m.median_us > 0)
        r.speedup_vs_pytorch =
            fmt::format("{:.3f}", problem_.raw["pytorch_us"].get<double>() / m.median_us);
    }
    return r;
  }

  std::string recent_results() const {
    auto rows = kernel_rows(results_, kdir_);
    if (rows.size() > 30) rows.erase(rows.begin(), rows.end() - 30);
    std::string s = results_header() + "\n";
    for (const auto& r : rows) s += r + "\n";
    return s;
  }

  // Writes `text` as the new best (history, best/, then the editable source, each an atomic
  // rename) and commits it when the workspace is in a git repository.
  void install(const std::string& text, int n) {
    const std::string h = content_hash(text);
    const fs::path hist = dir_ / "history" / fmt::format("{:04d}_{}{}", n, h, ext_);
    if (n == 0) starter_history_ = hist.filename().string();
    fs::create_directories(hist.parent_path());
    write_file_atomic(hist, text);
    fs::create_directories(best_file_.parent_path());
    write_file_atomic(best_file_, text);
    write_file_atomic(best_file_.parent_path() / "best.json",
                      json{{"hash", h},
                           {"experiment", n},
                           {"best_us", best_us_},
                           {"baseline_us", baseline_us_},
                           {"baseline_contended", baseline_contended_},
                           {"kept_contended", kept_contended_},
                           {"starter_history", starter_history_},
                           {"pct_peak", best_pct_},
                           {"speedup", speedup_},
                           {"source", src_.filename().string()},
                           {"history", hist.filename().string()},
                           {"saved_at", utc_now_iso8601()}}
                          .dump(2));
    write_file_atomic(src_, text);
    best_text_ = text;
    if (opt_.git) {
      std::string err;
      const std::string c = git_commit_files(
          dir_, branch_, {src_, best_file_, best_file_.parent_path() / "best.json", hist},
          fmt::format("vladbud: {} experiment {}: {:.2f} us ({:.3f}x the starter)", kdir_, n,
                      best_us_, speedup_),
          &err);
      if (!c.empty()) say(fmt::format("{}: committed {} on {}", kdir_, c.substr(0, 10), branch_));
    }
  }

  Measurement cached_measure(const std::string& key, const fs::path& f, EvalMode mode, bool* hit) {
    if (auto j = cache_->get(key)) {
      *hit = true;
      return measurement_from_json(*j);
    }
    const Measurement m = meas_->measure(f, mode);
    if (!m.lost() && !m.cancelled()) cache_->put(key, measurement_to_json(m));
    return m;
  }

  Feedback experiment(const Proposal& p) {
    const int n = experiments_ + 1;
    Feedback fb;
    fb.best_us = best_quick_us_;
    const std::string h = content_hash(p.source);
    const fs::path cand = dir_ / "tried" / (h + ext_);
    if (!fs::exists(cand)) {
      fs::create_directories(cand.parent_path());
      write_file_atomic(cand, p.source);
    }
    const std::string head = prefix(n) + p.description + ": ";
    const std::string repro = "; reproduce: " + reproduce_cmd(cand);
    auto finish = [&](ResultsRow row, const std::string& what) {
      row.description = head + what + repro;
      append_results_row(results_, row);
      experiments_ = n;
      return fb;
    };
    Measurement none;
    none.verdict = "FAIL";
    // Rejected before building: the agent broke the rules, or the rung-0 screen refuses it.
    std::string reject = p.reject_reason, guard = p.reject_guard;
    if (reject.empty() && p.config.empty()) {
      try {
        const ParamSyntax& syntax = backend_->param_syntax();
        const auto params = parse_params(p.source, syntax);
        const Config cfg = current_config(p.source, params, syntax);
        auto pr = chain_pruners({builtin_pruner(params, backend_->device().limits()),
                                 opt_.extra_pruner});
        if (auto r = pr(p.source, cfg)) reject = *r, guard = "static_screen";
      } catch (const std::invalid_argument& e) {
        reject = std::string("malformed @vb-param: ") + e.what(), guard = "static_screen";
      }
    }
    if (!reject.empty()) {
      none.guard = guard;
      ResultsRow row = base_row("revert", none);
      return finish(row, "rejected unevaluated (" + guard + "): " + reject);
    }
    bool hit_q = false, hit_f = false, hit_c = false;
    const std::string key = h + key_suffix_;
    // Given up at the deadline (a pool's queue): no row, the run stops (run() sees cancelled_).
    auto cancelled = [&] {
      cancelled_ = true;
      fb.lost = true;  // not fed back to the proposer
      return fb;
    };
    Measurement q = cached_measure(quick_key(key), cand, EvalMode::Quick, &hit_q);
    std::string cached_note = hit_q ? " [replayed from the cache]" : "";
    std::string screen_note;  // said in the row when the screen was re-done (below)
    if (q.cancelled()) return cancelled();
    if (q.lost()) return lost(fb, q.reason, head, repro, q);
    fb.correct = q.correct() && q.timed;
    fb.cand_us = q.median_us;
    if (!fb.correct) {
      return finish(base_row("revert", q),
                    fmt::format("quick checks failed in {} (guard {}): {}{}", q.failed_stage,
                                q.guard, q.reason, cached_note));
    }
    if (q.median_us >= best_quick_us_) {
      double vs = best_quick_us_;
      // A loss by a wide margin may be the machine's doing: a slow phase (on a shared VM,
      // memory-bandwidth contention from neighbours that no runnable-task count shows: the
      // same reduce screen measured 1.9 and 15 ms minutes apart) stretches every timing.
      // The best is re-timed now; when it too runs >= kSlowPhase x its recorded screen, the
      // candidate is re-screened and judged against that fresh, same-phase figure (and the
      // re-screen replaces the cached screen).
      // A screen replayed from the cache was timed at another moment: such a loss is always
      // re-screened (against the best's current screen). A screen timed while other tasks
      // competed for the cores (Measurement::other_runnable) is re-done back to back with the
      // best, and the better of the candidate's two screens is judged against that fresh
      // figure: a single screen under load can be off by 2x either way (a 2x faster rmsnorm
      // measured 872 vs 783 us with a compiler on both cores), and the screen only filters:
      // the full stages and the interleaved rounds still decide.
      const bool contended = q.other_runnable > 0;
      if ((q.median_us >= kSuspectScreenLoss * best_quick_us_ || contended) && !stopping()) {
        Measurement b;
        if (!hit_q || contended) {
          b = meas_->measure(best_file_, EvalMode::Quick);
          if (b.cancelled()) return cancelled();
        }
        const bool fresh_best = (!hit_q || contended) && b.correct() && b.timed;
        // Reduced screens: no interleaved round re-times the best's screen, so a fresh,
        // uncontended screen of it becomes the reference for the next candidates.
        if (fresh_best && screens_reduced() && b.other_runnable == 0) best_quick_us_ = b.median_us;
        const bool slow = fresh_best && b.median_us >= kSlowPhase * best_quick_us_;
        const bool paired = fresh_best && contended;
        if (hit_q || slow || paired) {
          const Measurement q2 = meas_->measure(cand, EvalMode::Quick);
          if (q2.cancelled()) return cancelled();
          if (q2.lost()) return lost(fb, q2.reason, head, repro, q);
          if (q2.correct() && q2.timed) {
            const double first = q.median_us;
            // A cached first screen was timed at another moment: only the fresh one counts.
            const Measurement better = paired && !hit_q && q.median_us < q2.median_us ? q : q2;
            cache_->put(quick_key(key), measurement_to_json(q2));
            cached_note =
                paired ? fmt::format(" (re-screened back to back with the best, {:.2f} us: the "
                                     "first screen, {:.2f} us, ran while {} other task(s) "
                                     "competed for the cores; the re-screen {:.2f} us)",
                                     b.median_us, first, q.other_runnable, q2.median_us)
                : slow ? fmt::format(" (re-screened: the machine ran slow, the best measured "
                                     "{:.2f} us now vs its screen's {:.2f} us; first screen "
                                     "{:.2f} us)",
                                     b.median_us, best_quick_us_, first)
                       : fmt::format(" (re-screened: the cached screen, {:.2f} us, was timed "
                                     "at another moment)",
                                     first);
            screen_note = cached_note;
            q = better;
            if (slow || paired) vs = b.median_us;
            fb.cand_us = q.median_us;
          }
        }
      }
      if (q.median_us >= vs)
        return finish(base_row("revert", q),
                      fmt::format("quick screen: {:.2f} us vs best {:.2f} us: not faster{}{}",
                                  q.median_us, vs, screen_at(), cached_note));
    }
    if (stopping()) return fb;  // interrupted: no row for an unfinished experiment
    const Measurement f = cached_measure("full|" + key, cand, EvalMode::Full, &hit_f);
    if (f.cancelled()) return cancelled();
    if (f.lost()) return lost(fb, f.reason, head, repro, q);
    if (!f.correct()) {
      Measurement shown = q;
      shown.verdict = f.verdict;
      fb.correct = false;
      return finish(base_row("revert", shown),
                    fmt::format("passed the quick screen ({:.2f} us) but failed the full stages in "
                                "{} (guard {}): {}",
                                q.median_us, f.failed_stage, f.guard, f.reason));
    }
    if (stopping()) return fb;
    // Interleaved ABBA rounds of the best (A) and the candidate (B).
    // "cmp2": decisions since the contention rule (a keep cached before it may have been won
    // only under contention, never confirmed on quiet rounds) are not replayed.
    const std::string ck = "cmp2|" + key + "|" + content_hash(best_text_);
    json cmp;
    if (auto c = cache_->get(ck)) {
      cmp = *c;
      hit_c = true;
    } else {
      Interleaved iv = meas_->interleave(best_file_, cand, opt_.rounds, 0);
      // Default: 4 x rounds, at least 12 (the signed-rank test needs 9 won pairs; --rounds 2
      // would give 8) and at most 60 (the flag's own cap).
      const int max_rounds = opt_.max_rounds > 0 ? opt_.max_rounds
                                                 : std::clamp(4 * opt_.rounds, 12, 60);
      KeepDecision d;
      if (iv.error.empty() && !iv.lost && !iv.cancelled)
        d = decide_keep(iv.best, iv.cand, opt_.strictness, max_rounds);
      // Undecided (a loaded machine: consistent wins that the noise threshold cannot confirm):
      // more rounds, until the signed-rank test keeps it or can no longer, or the folder's
      // budget ends (a new user's GPT-2 LM head spent 84 s of a 65 s budget in one such
      // comparison, and the third folder got no experiment).
      while (iv.error.empty() && !iv.lost && !iv.cancelled && !d.keep && d.more_rounds &&
             !stopping() && elapsed() < opt_.budget_s) {
        const int add = std::min<int>(opt_.rounds, max_rounds - static_cast<int>(iv.best.size()));
        const Interleaved more =
            meas_->interleave(best_file_, cand, add, static_cast<int>(iv.best.size()));
        iv.best.insert(iv.best.end(), more.best.begin(), more.best.end());
        iv.cand.insert(iv.cand.end(), more.cand.begin(), more.cand.end());
        iv.error = more.error;
        iv.lost = more.lost;
        iv.cancelled = more.cancelled;
        if (more.last_cand.timed) iv.last_cand = more.last_cand;
        iv.best.resize(std::min(iv.best.size(), iv.cand.size()));
        iv.cand.resize(iv.best.size());
        if (iv.error.empty() && !iv.lost && !iv.cancelled)
          d = decide_keep(iv.best, iv.cand, opt_.strictness, max_rounds, false);
      }
      // Cut by the budget: not a decision to replay from the cache (a later run, with more
      // budget, decides it again).
      const bool budget_cut = !d.keep && d.more_rounds && iv.error.empty() && !iv.lost &&
                              !iv.cancelled && elapsed() >= opt_.budget_s;
      if (budget_cut)
        d.reason += fmt::format("; undecided after {} rounds when the folder's budget ended "
                                "(more rounds might have kept it): not kept",
                                iv.best.size());
      // A keep decided on rounds in which other tasks competed for the cores may be the
      // contention's doing: a version with fewer threads wins while a core is busy (a new
      // user's GPT-2 run kept NUM_THREADS 1 at "2.38x" while a build ran beside it; the
      // starter was faster on the quiet machine). Such a keep must hold on the rounds without
      // contention: up to kQuietBatches x `rounds` more rounds are timed, and once `rounds`
      // uncontended pairs exist the decision is made on them alone (the noise threshold and
      // signed-rank tests as above, one look). When no quiet rounds come, the keep stands
      // and says it was decided under contention. No batch starts once the folder's budget
      // has ended (as the comparison's added rounds above): the keep then stands flagged, as
      // when no quiet rounds come, and says the budget ended first.
      bool contended_keep = false;
      std::string contention_note;
      auto contended = [](const std::vector<TimingSample>& v) {
        return std::count_if(v.begin(), v.end(),
                             [](const TimingSample& t) { return t.other_runnable > 0; });
      };
      if (d.keep && iv.error.empty() && !iv.lost && !iv.cancelled &&
          contended(iv.best) + contended(iv.cand) > 0) {
        std::vector<TimingSample> qb, qc;
        quiet_pairs(iv, &qb, &qc);
        const int need = std::max(opt_.rounds, 3);
        bool quiet_cut = false;  // the budget ended before enough quiet rounds came
        for (int b = 0; b < kQuietBatches && static_cast<int>(qb.size()) < need && !stopping(); ++b) {
          if (elapsed() >= opt_.budget_s) {
            quiet_cut = true;
            break;
          }
          say(fmt::format("{}: the keep was decided while other tasks competed for the "
                               "cores; timing {} more rounds to confirm it without them",
                               kdir_, opt_.rounds));
          const Interleaved more =
              meas_->interleave(best_file_, cand, opt_.rounds, static_cast<int>(iv.best.size()));
          iv.best.insert(iv.best.end(), more.best.begin(), more.best.end());
          iv.cand.insert(iv.cand.end(), more.cand.begin(), more.cand.end());
          iv.error = more.error, iv.lost = more.lost, iv.cancelled = more.cancelled;
          if (more.last_cand.timed) iv.last_cand = more.last_cand;
          iv.best.resize(std::min(iv.best.size(), iv.cand.size()));
          iv.cand.resize(iv.best.size());
          if (!iv.error.empty() || iv.lost || iv.cancelled) break;
          quiet_pairs(iv, &qb, &qc);
        }
        if (iv.error.empty() && !iv.lost && !iv.cancelled) {
          const long busy = contended(iv.best) + contended(iv.cand);
          if (static_cast<int>(qb.size()) >= need) {
            const KeepDecision dq = decide_keep(qb, qc, opt_.strictness);
            contention_note = fmt::format(
                "; decided on the {} rounds without other tasks on the cores ({} of {} timings "
                "had them)",
                qb.size(), busy, iv.best.size() + iv.cand.size());
            d = dq;
            if (!dq.keep) d.reason = "kept under contention but not confirmed without it: " + dq.reason;
          } else {
            contended_keep = true;
            contention_note = fmt::format(
                "; KEPT UNDER CONTENTION: {} of {} timings had other tasks on the cores and "
                "only {} uncontended pair(s) came{}; re-run on a quiet machine to confirm",
                busy, iv.best.size() + iv.cand.size(), qb.size(),
                quiet_cut ? " before the folder's budget ended (no more rounds timed)" : "");
          }
        }
      }
      // An incumbent timed far above its own record in these rounds (median >= kSlowPhase x
      // best_us_: a slow phase, or a slowdown of the best alone, that no runnable-task count
      // showed; a new user's GPT-2 run kept a matmul at "4.47x" with the best at 6814 us in the
      // rounds against its recorded 1699 us, the candidate at 1524 us) makes the gain and the
      // speedup these rounds give meaningless. Such a keep is re-decided on `rounds` fresh
      // rounds; when the best is that slow there too, nothing is kept. Once the folder's
      // budget has ended no fresh rounds are timed (as the comparison's added rounds above):
      // the keep is not made, not cached, and the row says so.
      bool slow_rounds = false;  // not decided: the best ran slow in both sets of rounds
      if (d.keep && iv.error.empty() && !iv.lost && !iv.cancelled && best_us_ > 0 &&
          d.base_us >= kSlowPhase * best_us_ && !stopping() && elapsed() >= opt_.budget_s) {
        slow_rounds = true;
        d.keep = false;
        d.reason = fmt::format(
            "not decided: the best ran {:.2f} us in the rounds against its recorded {:.2f} us "
            "(>= {:.1f}x: a slow phase or a slowed incumbent), and the folder's budget ended "
            "before fresh rounds could re-decide it; nothing kept",
            d.base_us, best_us_, kSlowPhase);
        contention_note.clear();
        contended_keep = false;
      } else if (d.keep && iv.error.empty() && !iv.lost && !iv.cancelled && best_us_ > 0 &&
                 d.base_us >= kSlowPhase * best_us_ && !stopping()) {
        const double first_base = d.base_us;
        say(fmt::format("{}: the best ran {:.2f} us in the rounds, {:.1f}x its recorded {:.2f} us; "
                        "timing {} fresh rounds before deciding",
                        kdir_, first_base, first_base / best_us_, best_us_, opt_.rounds));
        const Interleaved fresh = meas_->interleave(best_file_, cand, std::max(opt_.rounds, 3),
                                                    static_cast<int>(iv.best.size()));
        iv.error = fresh.error, iv.lost = fresh.lost, iv.cancelled = fresh.cancelled;
        if (fresh.last_cand.timed) iv.last_cand = fresh.last_cand;
        if (iv.error.empty() && !iv.lost && !iv.cancelled) {
          KeepDecision d2 = decide_keep(fresh.best, fresh.cand, opt_.strictness);
          if (d2.base_us >= kSlowPhase * best_us_) {
            slow_rounds = true;
            d2.keep = false;
            d2.reason = fmt::format(
                "not decided: the best ran {:.2f} us and then {:.2f} us in two sets of rounds "
                "against its recorded {:.2f} us (>= {:.1f}x: a slow phase or a slowed incumbent), "
                "so neither set can judge the candidate; nothing kept",
                first_base, d2.base_us, best_us_, kSlowPhase);
          } else {
            d2.reason += fmt::format(
                "; re-decided on {} fresh rounds: the first rounds timed the best at {:.2f} us, "
                ">= {:.1f}x its recorded {:.2f} us",
                fresh.best.size(), first_base, kSlowPhase, best_us_);
          }
          d = d2;
          contention_note.clear();
          contended_keep = d.keep && contended(fresh.best) + contended(fresh.cand) > 0;
          if (contended_keep)
            contention_note = "; KEPT UNDER CONTENTION: the fresh rounds had other tasks on the cores";
        }
      }
      if (iv.cancelled) return cancelled();
      if (iv.lost) return lost(fb, iv.error, head, repro, q);
      if (!iv.error.empty()) {
        cmp = {{"keep", false}, {"error", iv.error}, {"verdict", iv.last_cand.verdict},
               {"guard", iv.last_cand.guard}};
      } else {
        // The candidate's last round, rescaled to the median over rounds (throughput and
        // % of the ceiling go as 1 / latency).
        const Measurement& last_c = iv.last_cand;
        const double to_median = last_c.median_us / std::max(d.cand_us, 1e-12);
        cmp = {{"keep", d.keep},         {"reason", d.reason + contention_note},
               {"base_us", d.base_us},
               {"cand_us", d.cand_us},   {"gain", d.gain},     {"threshold", d.threshold},
               {"p_value", d.p_value},   {"rounds", d.pairs},  {"test", d.test},
               {"pct_peak", last_c.pct_peak * to_median},
               {"tflops", last_c.tflops * to_median}, {"gbs", last_c.gbs * to_median}};
      }
      if (stopping()) return fb;
      // A keep decided under contention is not replayed from the cache: a later run decides
      // it again; nor is a comparison left undecided by a slow best.
      if (contended_keep) cmp["contended"] = true;
      else if (slow_rounds || budget_cut) cmp["undecided"] = true;
      else cache_->put(ck, cmp);
    }
    const std::string note = hit_c ? " [replayed from the cache]" : "";
    if (cmp.contains("error")) {
      Measurement shown = q;
      shown.verdict = cmp.value("verdict", "FAIL");
      if (shown.verdict == "PASS") shown.verdict = "FAIL";
      fb.correct = false;
      return finish(base_row("revert", shown), cmp["error"].get<std::string>() + note);
    }
    Measurement shown = q;
    shown.median_us = cmp["cand_us"].get<double>();
    shown.size_label = problem_.size.label;  // the interleaved rounds' figure
    shown.tflops = cmp.value("tflops", q.tflops);
    shown.gbs = cmp.value("gbs", q.gbs);
    shown.pct_peak = cmp.value("pct_peak", q.pct_peak);
    const bool keep = cmp["keep"].get<bool>();
    if (keep) {
      speedup_ *= cmp["base_us"].get<double>() / std::max(shown.median_us, 1e-12);
      best_us_ = shown.median_us;
      // Reduced screens: the next screens compare with this version's screen.
      best_quick_us_ = screens_reduced() ? q.median_us : shown.median_us;
      best_pct_ = shown.pct_peak;
      // Once a keep in the chain was decided under contention, the best's gain over the
      // starter is unconfirmed until a quiet re-run checks it (reconfirm_contended_keep).
      kept_contended_ = kept_contended_ || cmp.value("contended", false);
      install(p.source, n);
      ++kept_;
      last_keep_ = n;
      fb.kept = true;
    } else if (!screens_reduced() && !cmp.value("undecided", false)) {
      best_quick_us_ = cmp["base_us"].get<double>();  // a fresh measurement of the best
    }
    Feedback out = finish(base_row(keep ? "keep" : "revert", shown),
                          fmt::format("quick {:.2f} us{}{}, full stages PASS, {}{}", q.median_us,
                                      screen_at(), screen_note, cmp["reason"].get<std::string>(),
                                      note));
    if (!keep && kept_ == 0 && !hit_c) remeasure_implausible_baseline(cmp["base_us"].get<double>());
    return out;
  }

  // Nothing kept yet, so the interleaved rounds just timed the starting source (their median,
  // over >= `rounds` rounds, is sturdier than setup()'s one screen). A baseline >= 1.25x that
  // figure was implausible (timed in a slow moment that no runnable-task count showed, as
  // GPT-2's 64x3072x768 matmul: 2735 us at setup, 1874-1994 us in every later round): it is
  // replaced, with a "baseline" row saying so (report.md and status read the last one).
  void remeasure_implausible_baseline(double starter_us) {
    if (!(starter_us > 0) || baseline_us_ < kImplausibleBaseline * starter_us) return;
    Measurement m;
    m.timed = true;
    m.median_us = starter_us;
    m.pct_peak = best_pct_ * baseline_us_ / starter_us;
    m.tflops = problem_.raw.value("flops", 0.0) / (starter_us * 1e-6) / 1e12;
    m.gbs = problem_.raw.value("bytes", 0.0) / (starter_us * 1e-6) / 1e9;
    replace_baseline(m, fmt::format("the interleaved rounds timed the starting source at {:.2f} "
                                    "us; the {:.2f} us timed at the start was implausible "
                                    "(>= {:.2f}x)",
                                    starter_us, baseline_us_, kImplausibleBaseline));
  }

  // A re-run of a folder whose best was kept under contention (best.json's kept_contended): the
  // starting source (history's experiment 0) against the best in interleaved rounds, decided on
  // the uncontended pairs alone, as a contended keep is in experiment(). Confirmed: the
  // baseline and the speedup are re-anchored on these rounds and the flag is cleared. Not
  // confirmed: the starting source is the best again. No quiet rounds: the flag stays.
  void reconfirm_contended_keep() {
    // The starting source of this start: best.json names it; an older best.json does not, and
    // then only a single history/0000_* file is unambiguous (a folder started over has two).
    fs::path starter;
    if (!starter_history_.empty()) {
      starter = dir_ / "history" / starter_history_;
    } else if (fs::is_directory(dir_ / "history")) {
      int n0 = 0;
      for (const auto& e : fs::directory_iterator(dir_ / "history"))
        if (e.path().filename().string().rfind("0000_", 0) == 0) starter = e.path(), ++n0;
      if (n0 != 1) starter.clear();
    }
    if (starter.empty() || !fs::exists(starter)) {
      say(fmt::format("{}: the best version was kept under contention, but its starting source "
                      "is not on record in history/ (best.json names none, or it was removed); "
                      "the keep stays flagged: remove {} to start over from the editable source",
                      kdir_, (dir_ / "best").string()));
      return;
    }
    say(fmt::format("{}: the best version was kept while other tasks competed for the cores; "
                    "re-checking it against the starting source",
                    kdir_));
    Interleaved iv;
    std::vector<TimingSample> qb, qc;
    const int need = std::max(opt_.rounds, 3);
    for (int b = 0; b < kQuietBatches + 1 && static_cast<int>(qb.size()) < need && !stopping(); ++b) {
      const Interleaved more =
          meas_->interleave(starter, best_file_, opt_.rounds, static_cast<int>(iv.best.size()));
      if (!more.error.empty() || more.lost || more.cancelled) return;  // the flag stays
      iv.best.insert(iv.best.end(), more.best.begin(), more.best.end());
      iv.cand.insert(iv.cand.end(), more.cand.begin(), more.cand.end());
      iv.best.resize(std::min(iv.best.size(), iv.cand.size()));
      iv.cand.resize(iv.best.size());
      quiet_pairs(iv, &qb, &qc);
    }
    if (static_cast<int>(qb.size()) < need) {
      say(fmt::format("{}: still no quiet rounds; the keep stays flagged (best.json "
                      "kept_contended)", kdir_));
      return;
    }
    const KeepDecision d = decide_keep(qb, qc, opt_.strictness);
    Measurement m;
    m.timed = true;
    const double old_best_us = best_us_;
    if (d.keep) {
      baseline_us_ = d.base_us;
      best_us_ = d.cand_us;
      speedup_ = d.base_us / std::max(d.cand_us, 1e-12);
    } else {
      best_text_ = read_file(starter);
      write_file_atomic(best_file_, best_text_);
      write_file_atomic(src_, best_text_);
      baseline_us_ = best_us_ = d.base_us;
      speedup_ = 1.0;
      kept_ = 0, last_keep_ = 0;  // the best is the starting source again
      const Measurement q = meas_->measure(best_file_, EvalMode::Quick);  // the screens' reference
      if (q.correct() && q.timed) best_quick_us_ = q.median_us;
    }
    kept_contended_ = false;
    baseline_contended_ = false;
    // % of the ceiling goes as 1 / latency (the same problem).
    if (best_pct_ > 0 && best_us_ > 0) best_pct_ *= old_best_us / best_us_;
    const fs::path meta_file = best_file_.parent_path() / "best.json";
    json meta = json::object();
    try {
      meta = json::parse(read_file(meta_file));
    } catch (const std::exception&) {
    }
    if (!meta.is_object()) meta = json::object();
    meta["best_us"] = best_us_;
    meta["baseline_us"] = baseline_us_;
    meta["speedup"] = speedup_;
    meta["kept_contended"] = false;
    meta["baseline_contended"] = false;
    meta["pct_peak"] = best_pct_;
    if (!d.keep) {
      meta["hash"] = content_hash(best_text_);
      meta["experiment"] = 0;
      meta["history"] = starter.filename().string();
    }
    meta["saved_at"] = utc_now_iso8601();
    write_file_atomic(meta_file, meta.dump(2));
    // The row: latency and % of the ceiling of the best after the check; its description
    // carries both figures for report.md ("contended keep confirmed|reverted: starting source
    // X us, best Y us").
    m.median_us = best_us_;
    m.pct_peak = best_pct_;
    ResultsRow row = base_row("baseline", m);
    row.description =
        prefix(0) +
        fmt::format("baseline re-measured: contended keep {}: starting source {:.2f} us, best "
                    "{:.2f} us, on {} quiet rounds ({}){}",
                    d.keep ? "confirmed" : "reverted", d.base_us, best_us_, qb.size(), d.reason,
                    d.keep ? "" : "; the starting source is the best again") +
        "; reproduce: " + reproduce_cmd(best_file_);
    append_results_row(results_, row);
    say(fmt::format("{}: {}", kdir_, d.keep ? "the contended keep is confirmed on quiet rounds"
                                            : "the contended keep did not hold; back to the starting source"));
  }

  // Replaces the baseline (and the best: nothing is kept) by `m`: best.json's figures, a
  // "baseline re-measured: <why>" row (report.md reads it) and a progress line.
  void replace_baseline(const Measurement& m, const std::string& why) {
    const double old = baseline_us_;
    baseline_us_ = best_us_ = m.median_us;
    best_pct_ = m.pct_peak;
    baseline_contended_ = false;
    const fs::path meta_file = best_file_.parent_path() / "best.json";
    json meta = json::object();
    try {
      meta = json::parse(read_file(meta_file));
    } catch (const std::exception&) {
    }
    meta["best_us"] = best_us_;
    meta["baseline_us"] = baseline_us_;
    meta["baseline_contended"] = false;
    meta["pct_peak"] = best_pct_;
    meta["saved_at"] = utc_now_iso8601();
    write_file_atomic(meta_file, meta.dump(2));
    ResultsRow row = base_row("baseline", m);
    row.description = prefix(0) + "baseline re-measured: " + why +
                      "; reproduce: " + reproduce_cmd(best_file_);
    append_results_row(results_, row);
    say(fmt::format("{}: baseline re-measured: {:.2f} us (was {:.2f} us)", kdir_, m.median_us, old));
  }

  // A lost experiment (a pool task that never came back: its worker died every time, or it
  // hung past the task timeout): one results.tsv row, tag "lost", correctness LOST, with the
  // reason; nothing cached, nothing installed, the proposer not fed back.
  Feedback lost(Feedback fb, const std::string& reason, const std::string& head,
                const std::string& repro, const Measurement& q) {
    Measurement shown = q.lost() ? Measurement{} : q;
    shown.verdict = "LOST";
    ResultsRow row = base_row("lost", shown);
    row.description = head + "lost: " + reason + repro;
    append_results_row(results_, row);
    experiments_ = experiments_ + 1;
    ++lost_;
    fb.lost = true;
    fb.correct = false;
    say(fmt::format("{}: experiment {} lost: {}", kdir_, experiments_, reason.substr(0, 200)));
    return fb;
  }

  void save_state() const {
    if (!proposer_) return;
    const json st = {{"version", 1},
                     {"kernel", problem_.kernel},
                     {"dir", dir_.string()},
                     {"source", src_.filename().string()},
                     {"experiments", experiments_},
                     {"kept", kept_},
                     {"last_keep", last_keep_},
                     {"baseline_us", baseline_us_},
                     {"best_us", best_us_},
                     {"best_pct_peak", best_pct_},
                     {"speedup", speedup_},
                     {"best_hash", content_hash(best_text_)},
                     {"branch", branch_},
                     {"proposer", proposer_->name()},
                     {"proposer_state", proposer_->state()},
                     {"pruned", proposer_->pruned()},
                     {"updated_at", utc_now_iso8601()}};
    write_file_atomic(dir_ / "state.json", st.dump(2));
  }

  OptimizeOptions opt_;
  fs::path dir_, src_, ws_, results_, best_file_;
  std::string kdir_, ext_, machine_, key_suffix_, branch_, best_text_;
  KernelProblem problem_;
  const Backend* backend_ = nullptr;  ///< problem_.backend's (a registered backend: static)
  std::unique_ptr<MeasurementCache> cache_;
  std::unique_ptr<Measurer> owned_;
  Measurer* meas_ = nullptr;
  std::unique_ptr<Proposer> proposer_;
  Clock::time_point start_, loop_start_;
  int experiments_ = 0, experiments_at_start_ = 0, kept_ = 0, last_keep_ = 0, lost_ = 0;
  int window_size_ = 1;          ///< candidates in flight (OptimizeOptions::batch, resolved)
  std::deque<Proposal> window_;  ///< proposed, prefetched, not judged yet (oldest first)
  /// Proposed and built during setup() (prebuild_window), not in the window yet (oldest first).
  std::deque<Proposal> prebuilt_;
  bool exhausted_ = false;       ///< the proposer has nothing left
  bool cancelled_ = false;       ///< a measurement was given up at the deadline
  int judged_ = 0;               ///< experiments judged in this call (not cancelled)
  double setup_quick_s_ = 0;     ///< wall time of setup()'s screen of the starting version
  bool carried_ = false;         ///< setup() took the best's figures from OptimizeOptions::carry
  double baseline_us_ = 0, best_us_ = 0, best_quick_us_ = 0, best_pct_ = 0, speedup_ = 1.0;
  /// The baseline was timed while other tasks competed for the cores (Measurement::
  /// other_runnable): flagged in best.json, replaced by a quieter measurement at the next run.
  bool baseline_contended_ = false;
  /// The best version was kept on rounds timed under contention with no uncontended rounds to
  /// confirm it (experiment()): best.json's "kept_contended".
  bool kept_contended_ = false;
  /// history/ file of this start's starting source (experiment 0): best.json's
  /// "starter_history" ("" in a best.json written before it was recorded).
  std::string starter_history_;
};

}  // namespace

KernelProblem store_pytorch_baseline(const fs::path& dir, const OptimizeOptions& opt) {
  KernelProblem problem = read_problem_file(dir);
  if (!opt.pytorch_baseline) return problem;
  if (problem.raw.contains("pytorch_us") && problem.raw["pytorch_us"].is_number()) return problem;
  const std::string kdir = fs::absolute(dir).lexically_normal().filename().string();
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  // One PyTorch timing at a time in this process: the orchestrator's folders run in threads
  // and would otherwise time on one device at once.
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> serial(one_at_a_time);
  problem = read_problem_file(dir);  // another thread may have stored it meanwhile
  if (problem.raw.contains("pytorch_us") && problem.raw["pytorch_us"].is_number()) return problem;
  say(fmt::format("{}: timing PyTorch at the folder's problem ({} {})", kdir, problem.size.label,
                  dtype_name(problem.dtype)));
  std::string op, why;
  const auto us = opt.pytorch_baseline(problem, &op, &why);
  if (!us) {
    say(fmt::format("{}: no PyTorch baseline (speedup_vs_pytorch n/a): {}", kdir, why.substr(0, 300)));
    return problem;
  }
  problem.raw["pytorch_us"] = *us;
  problem.raw["pytorch_op"] = op;
  json doc = json::parse(read_file(dir / "problem.json"));
  doc["pytorch_us"] = *us;
  doc["pytorch_op"] = op;
  write_file_atomic(dir / "problem.json", doc.dump(2) + "\n");
  return problem;
}

KernelSummary optimize_kernel(const fs::path& dir, const OptimizeOptions& opts) {
  Loop loop(dir, opts);
  return loop.run();
}

}  // namespace vb::opt
