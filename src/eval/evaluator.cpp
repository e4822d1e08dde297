#include "eval/evaluator.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <unordered_map>

#include "core/parallel.h"
#include "core/paths.h"
#include "core/random.h"
#include "core/uncached.h"
#include "eval/compare.h"
#include "runner/client.h"
#include "runner/protocol.h"
#include "targets/cpu_info.h"

namespace vb {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using Outputs = std::vector<Array64>;

// ---- oracle cache ----------------------------------------------------------------------------

// Rounded oracle outputs keyed by (kernel, size, dtype, regime, seed). Inputs are a pure
// function of that key, so a hit is exact. Bounded to ~2 GiB; cleared wholesale when full.
class OracleCache {
 public:
  std::shared_ptr<const Outputs> get(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void put(const std::string& key, std::shared_ptr<const Outputs> v) {
    std::size_t b = 0;
    for (const auto& a : *v) b += (a.v.size() + a.scale.size()) * sizeof(double);
    std::lock_guard<std::mutex> l(mu_);
    if (bytes_ + b > (2ull << 30)) {
      map_.clear();
      bytes_ = 0;
    }
    map_[key] = std::move(v);
    bytes_ += b;
  }
  void clear() {
    std::lock_guard<std::mutex> l(mu_);
    map_.clear();
    bytes_ = 0;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const Outputs>> map_;
  std::size_t bytes_ = 0;
};

OracleCache& oracle_cache() {
  static OracleCache c;
  return c;
}

// ---- helpers ---------------------------------------------------------------------------------

void poison(const TensorView& t) {
  const std::size_t n = static_cast<std::size_t>(t.desc.numel());
  if (t.desc.dtype == DType::F32) {
    auto* p = static_cast<std::uint32_t*>(t.data);
    std::fill(p, p + n, runner::kPoisonF32);
  } else if (t.desc.dtype == DType::F16 || t.desc.dtype == DType::BF16) {
    auto* p = static_cast<std::uint16_t*>(t.data);
    std::fill(p, p + n, t.desc.dtype == DType::F16 ? runner::kPoisonF16 : runner::kPoisonBF16);
  } else {
    std::memset(t.data, 0xff, t.desc.nbytes());
  }
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// One set of tensors of a problem placed in the arena.
struct Placed {
  std::vector<std::size_t> in_off, out_off;
  std::vector<TensorView> in, out;
};

// A failed case: verdict (FAIL/TIMEOUT/CRASH/INVALID), guard and one-line reason.
struct Failure {
  std::string verdict, guard, reason;
};

// Untimed calls at the start of every timing batch.
constexpr int kBatchWarmup = 2;
// Batches after which the minimum timed duration is waived (see time_problem).
constexpr int kMaxFreshBatches = 8;
constexpr int kQuickFreshBatches = 3;

const char* kStageNames[] = {"smoke", "shape_sweep", "stability", "determinism", "edge"};

// ---- the evaluation session ------------------------------------------------------------------

class Session {
 public:
  Session(const KernelType& t, const Backend& b, const EvalOptions& o, EvalReport& r)
      : type_(t), backend_(b), opt_(o), rep_(r), runner_(b.device().runner_flavour()) {
    if (!o.sanitizer.empty()) {
      const Sanitizer* san = b.sanitizer();
      if (!san)
        throw std::runtime_error("--sanitize: backend " + b.name() + " has no sanitizer");
      const std::string exe = san->find_executable();
      if (exe.empty()) throw std::runtime_error(san->not_found_message());
      runner_.set_sanitizer(exe, o.sanitizer);
    }
    if (!o.runner_launcher.empty()) {
      runner_.set_launcher(o.runner_launcher, o.runner_binary);
    } else if (auto rp = b.device().runner_program(); !rp.launcher.empty()) {
      // The device's own runner program (e.g. the Triton interpreter runner, a Python script).
      runner_.set_launcher(rp.launcher, rp.program);
      runner_.set_reachable(rp.reachable);
    }
    if (!o.device_lock.empty()) {
      // flock(2) needs only a read descriptor. An existing file is opened without O_CREAT:
      // another user's lock file in a sticky /tmp refuses O_CREAT (fs.protected_regular).
      lock_fd_ = ::open(o.device_lock.c_str(), O_RDONLY | O_CLOEXEC);
      if (lock_fd_ < 0 && errno == ENOENT) {
        lock_fd_ = ::open(o.device_lock.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
      }
      if (lock_fd_ < 0)
        throw std::runtime_error("cannot open the device lock " + o.device_lock + ": " +
                                 std::strerror(errno) +
                                 " (VB_DEVICE_LOCK must name a file in a writable directory "
                                 "shared by the evaluators of this device; unset it when "
                                 "this evaluator has the device to itself)");
    }
  }

  // Holds EvalOptions::device_lock (exclusive) for its lifetime; nests (only the outermost
  // holder locks and unlocks); does nothing without a lock file. Throws std::runtime_error
  // when flock(2) fails (other than EINTR): measuring without the lock would not be exclusive.
  class DeviceHold {
   public:
    explicit DeviceHold(Session& s) : s_(s) {
      if (s_.lock_fd_ < 0 || s_.lock_depth_++ > 0) return;
      while (::flock(s_.lock_fd_, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        --s_.lock_depth_;
        throw std::runtime_error("cannot lock the device lock " + s_.opt_.device_lock + ": " +
                                 std::strerror(errno));
      }
    }
    ~DeviceHold() {
      if (s_.lock_fd_ >= 0 && --s_.lock_depth_ == 0) ::flock(s_.lock_fd_, LOCK_UN);
    }
    DeviceHold(const DeviceHold&) = delete;
    DeviceHold& operator=(const DeviceHold&) = delete;

   private:
    Session& s_;
  };

  ~Session() {
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool start(const std::string& lib) {
    lib_ = lib;
    // Loading runs the library's initializers and creates the device context: device work.
    RunnerReply reply;
    {
      DeviceHold hold(*this);
      reply = runner_.start(lib, call_timeout());
    }
    note_filesystem();
    if (reply.kind == RunnerReply::Kind::Ok) {
      // A device runner reports the device it opened (its L2 sizes the timing rotation).
      if (reply.body.contains("device") && reply.body["device"].is_object())
        device_l2_ = reply.body["device"].value("l2_bytes", std::size_t{0});
      return true;
    }
    rep_.verdict = reply.kind == RunnerReply::Kind::Crash     ? "CRASH"
                   : reply.kind == RunnerReply::Kind::Timeout ? "TIMEOUT"
                                                              : "FAIL";
    rep_.failed_stage = "load";
    rep_.guard = reply.kind == RunnerReply::Kind::Timeout ? "timeout" : "load";
    rep_.reason = "cannot load the kernel library: " + reply.message;
    return false;
  }

  // Runs one correctness case: generate, call once, check every guard and the oracle.
  // Inputs are generated into parent-private memory and copied into the arena, so the oracle
  // and the mutation check never read what the candidate could have touched.
  // `reuse` keeps the arena and private inputs (same values, determinism) instead of
  // regenerating. `changed` describes element changes made to the private inputs since they
  // were generated (one_element_changes); it keys the oracle.
  std::optional<Failure> run_case(const Problem& p, const std::string& regime, std::uint64_t seed,
                                  double* rel_error, std::uint64_t* out_hash = nullptr,
                                  bool reuse = false, const std::string& changed = {}) {
    if (!reuse) {
      std::size_t total = 0;
      for (const auto& t : p.inputs) total += RunnerClient::footprint(t.nbytes());
      for (const auto& t : p.outputs) total += RunnerClient::footprint(t.nbytes());
      if (auto f = reset_arena(total)) return f;
      placed_ = place(p);
      private_ = private_inputs(p, seed, regime);
    }
    for (std::size_t i = 0; i < placed_.in.size(); ++i)
      std::memcpy(placed_.in[i].data, private_[i].data(), private_[i].size());
    for (const auto& o : placed_.out) poison(o);
    json cmd = call_command(p, {&placed_}, 0, 0, {0}, false);
    RunnerReply reply;
    {
      DeviceHold hold(*this);
      reply = runner_.command(cmd, call_timeout());
    }
    if (auto f = reply_failure(reply)) return f;
    if (auto f = check_guards(placed_, reply)) return f;
    if (out_hash) *out_hash = output_hash(placed_);
    const auto ref = oracle(p, regime, seed, private_, changed);
    auto fail = check_outputs(p, placed_, *ref, rel_error);
    if (fail && fail->guard == "poisoned_output") {
      // Unwritten now -- but is something still writing? Look again after a pause.
      const std::uint64_t h0 = output_hash(placed_);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (output_hash(placed_) != h0)
        return Failure{"FAIL", "async_write",
                       "outputs were still being written after the kernel returned (work "
                       "escaping the call, e.g. a background thread)"};
    }
    return fail;
  }

  // Restarts the runner process (a fresh process forgets any state the candidate kept).
  std::optional<Failure> restart() {
    RunnerReply reply;
    {
      DeviceHold hold(*this);
      reply = runner_.start(lib_, call_timeout());
    }
    note_filesystem();
    if (reply.kind == RunnerReply::Kind::Ok) return std::nullopt;
    return reply_failure(reply);
  }

  // Memory across calls (issue 18 class 5). After a passing call on fresh inputs, changes ONE
  // element of a floating input at a random position (drawn from the run's fresh seed), calls
  // again on the same buffers, and requires the oracle's output for the changed inputs; three
  // times per dtype, each change on top of the last (a cache sampling every 64th element
  // survives one dtype's check with probability 64^-3). A kernel that caches results on a hash of a sample
  // of its inputs (every 64th element, the first row, ...) misses a change outside the sample
  // and returns its stale output. Only changes that a stale output would fail are used (a
  // change can be invisible, e.g. in a row that cross_entropy ignores): up to 16 positions
  // are tried per change.
  std::optional<Failure> one_element_changes(const Problem& p, const std::string& regime,
                                             std::uint64_t seed, double* rel_error) {
    std::vector<std::size_t> floats;
    for (std::size_t i = 0; i < p.inputs.size(); ++i)
      if (is_floating(p.inputs[i].dtype) && p.inputs[i].numel() > 0) floats.push_back(i);
    if (floats.empty()) return std::nullopt;
    constexpr int kChanges = 3, kAttempts = 16;
    auto prev = oracle(p, regime, seed, private_);
    std::string history;  // the changes so far: the oracle cache key of the changed inputs
    for (int k = 0; k < kChanges; ++k) {
      bool visible = false;
      std::size_t idx = 0;
      std::int64_t pos = 0;
      double was = 0, now = 0;
      std::shared_ptr<const Outputs> ref;
      for (int a = 0; a < kAttempts && !visible; ++a) {
        // Positions differ between dtypes, so one run covers more of them.
        const std::uint64_t r = derive_seed(
            derive_seed(rep_.fresh_seed ^ 0x0e1e3e47ULL, static_cast<std::uint64_t>(p.dtype)),
            static_cast<std::uint64_t>(k * kAttempts + a));
        idx = floats[r % floats.size()];
        const TensorView v{p.inputs[idx], private_[idx].data()};
        pos = static_cast<std::int64_t>((r >> 20) % static_cast<std::uint64_t>(v.desc.numel()));
        was = v.get(pos);
        // Far from the old value and of the opposite sign, still well inside every dtype.
        now = std::isfinite(was) ? (was >= 0 ? -1.0 : 1.0) * (std::fabs(was) + 2.0) : 1.5;
        v.set(pos, now);
        now = v.get(pos);
        const std::string tag = fmt::format("{}|one-element {}:{}", history, idx, pos);
        ref = oracle(p, regime, seed, private_, tag);
        visible = stale_would_fail(p, *prev, *ref);
        if (visible) {
          history = tag;
        } else {
          v.set(pos, was);
        }
      }
      if (!visible) {
        progress(fmt::format("    no visible one-element change found in {} tries", kAttempts));
        continue;
      }
      progress(fmt::format("    one element changed: '{}' element {} ({} -> {})",
                           p.inputs[idx].name, pos, was, now));
      auto fail = run_case(p, regime, seed, rel_error, nullptr, /*reuse=*/true, history);
      if (fail) {
        if (fail->guard == "accuracy" || fail->guard == "poisoned_output")
          fail->guard = "fresh_inputs";
        fail->reason = fmt::format(
            "after one element of input '{}' changed (element {} of {}: {} -> {}) between two "
            "calls on the same buffers, {} (a kernel that caches results on a hash of a sample "
            "of its inputs returns a stale output; recompute on every call)",
            p.inputs[idx].name, pos, p.inputs[idx].numel(), was, now, fail->reason);
        return fail;
      }
      prev = ref;
    }
    return std::nullopt;
  }

  // The timing protocol (DESIGN §4). Input sets rotate over more than 2x the last-level cache,
  // and no set is ever timed twice with the same values: each batch times every set at most
  // once, and sets are regenerated with new seeds before reuse. The parent fixes the number of
  // calls, checks the runner's times against its own clock, verifies randomly chosen sets it
  // picks after the reply (inputs intact, outputs right), and pings the runner afterwards.
  std::optional<Failure> time_problem(const Problem& p, TimingResult& tr) {
    std::size_t set_bytes = 0, foot = 0;
    for (const auto& t : p.inputs)
      set_bytes += t.nbytes(), foot += RunnerClient::footprint(t.nbytes());
    for (const auto& t : p.outputs)
      set_bytes += t.nbytes(), foot += RunnerClient::footprint(t.nbytes());
    // The last-level cache the inputs must not fit in, as the device says: the CPU's LLC, or a
    // GPU's L2 as the runner read it (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).
    const Device& device = backend_.device();
    std::size_t llc = opt_.llc_bytes ? opt_.llc_bytes : device.timing_cache_bytes(device_l2_);
    if (llc == 0) llc = 64ull << 20;
    // Strictly more than 2x the cache: floor(2 llc / set) + 1 sets.
    std::size_t n_sets =
        std::max<std::size_t>(2, 2 * llc / std::max<std::size_t>(set_bytes, 1) + 1);
    // At least the minimum count of timed calls, so that one batch of fresh sets can time it:
    // every further batch regenerates and re-verifies sets larger than the cache, which for a
    // large problem costs far more than its calls (a 64x50257x768 fp32 matmul: ~1 s of input
    // generation and fp64 oracle per batch of two sets against ~0.1 s of calls). Memory
    // permitting: the cap below wins.
    // Only for sets of at least half the device's cache: smaller ones regenerate cheaply, and
    // their later batches reuse buffers with fresh values, so even a short screen still
    // catches a kernel that caches results by buffer address (kernels/bad/cpu/caches_result).
    const int min_reps = opt_.quick ? std::min(opt_.min_reps, 5) : opt_.min_reps;
    std::size_t device_cache = device.timing_cache_bytes(device_l2_);
    if (device_cache == 0) device_cache = 64ull << 20;
    if (2 * set_bytes >= device_cache)
      n_sets = std::max<std::size_t>(n_sets, static_cast<std::size_t>(std::max(2, min_reps)));
    n_sets = std::min<std::size_t>(n_sets, 256);
    // The cap counts the arena and the parent-private copies of the inputs.
    std::size_t in_bytes = 0;
    for (const auto& t : p.inputs) in_bytes += t.nbytes();
    while (n_sets > 2 && (n_sets + 1) * (foot + in_bytes) > opt_.max_rotation_bytes) --n_sets;
    tr.rotation_sets = static_cast<int>(n_sets);
    tr.rotation_bytes = static_cast<double>(n_sets * set_bytes);
    progress(fmt::format("[timing] {} {}: {} rotating input sets ({:.0f} MiB; {} {:.0f} MiB)",
                         p.size.label, dtype_name(p.dtype), n_sets, tr.rotation_bytes / 1048576.0,
                         device.timing_cache_name(), static_cast<double>(llc) / 1048576.0));
    if (auto f = reset_arena((n_sets + 1) * foot)) return f;
    std::vector<Placed> sets;  // sets[0] is the warm-up set; 1..n_sets are timed
    for (std::size_t s = 0; s <= n_sets; ++s) sets.push_back(place(p));
    // Stepped timing (issue 18 classes 7 and 8): each timed set's inputs live in parent-private
    // memory until the runner, stopped right before that set's call, gets them. Without
    // stepping (under a sanitizer) every set is written into the arena as it is generated.
    const bool stepped = runner_.can_step();
    std::vector<std::uint64_t> seeds(n_sets + 1);
    std::vector<std::vector<std::vector<char>>> priv(n_sets + 1);
    std::vector<std::vector<char>> poisoned(p.outputs.size());
    for (std::size_t i = 0; i < p.outputs.size(); ++i) {
      poisoned[i].resize(p.outputs[i].nbytes());
      poison(TensorView{p.outputs[i], poisoned[i].data()});
    }
    // Writes set s into the arena, bypassing the caches: its inputs and poisoned outputs.
    auto reveal = [&](std::size_t s) {
      for (std::size_t i = 0; i < sets[s].in.size(); ++i)
        copy_uncached(sets[s].in[i].data, priv[s][i].data(), priv[s][i].size());
      for (std::size_t i = 0; i < sets[s].out.size(); ++i)
        copy_uncached(sets[s].out[i].data, poisoned[i].data(), poisoned[i].size());
    };
    std::uint64_t next_seed = 0;
    auto fill = [&](std::size_t s) {
      seeds[s] = timing_seed(next_seed++);
      refill_private(p, seeds[s], "normal", priv[s]);
      if (!stepped || s == 0) reveal(s);
    };
    for (std::size_t s = 0; s <= n_sets; ++s) fill(s);
    std::vector<const Placed*> ptrs;
    for (const auto& s : sets) ptrs.push_back(&s);

    const double max_t = opt_.quick ? std::min(opt_.max_time_s, 1.0) : opt_.max_time_s;
    const double min_t = opt_.quick ? std::min(opt_.min_time_s, 0.15) : opt_.min_time_s;
    // Fresh-set batches before the minimum count alone ends the timing (--quick: 3, enough for
    // 5+ calls of a short kernel; regenerating sets larger than the cache dominates the cost).
    const int max_batches = opt_.quick ? kQuickFreshBatches : kMaxFreshBatches;
    // Warm-up and a first estimate of one call's time, on the warm-up set alone (stepped: the
    // timed sets are not in the arena yet).
    RunnerReply warm;
    {
      DeviceHold hold(*this);
      warm = runner_.command(
          call_command(p, stepped ? std::vector<const Placed*>{&sets[0]} : ptrs, 3, 0, {}, false),
          call_timeout(4));
    }
    if (auto f = reply_failure(warm)) return f;
    // (cuda: less the runner's host<->device staging of all the sets, which is not a call.)
    const double est_s =
        std::max(1e-7, (warm.parent_wall_s - warm.body.value("staging_ns", 0.0) * 1e-9) / 3.0);
    std::vector<double> us;
    double timed_total = 0, wall_total = 0;
    std::random_device rd;
    std::mt19937_64 pick(rd());
    // The staging credit of one step: moving one set's bytes three times at 0.5 GB/s, so a
    // forged staging_ns cannot hide much kernel time.
    const double step_staging_cap_s = 3.0 * static_cast<double>(set_bytes) / 0.5e9 + 0.005;
    for (int batch = 0; batch < 64; ++batch) {
      const double want_s = std::max(0.0, min_t - timed_total);
      std::size_t k = static_cast<std::size_t>(std::ceil(want_s / est_s));
      k = std::max<std::size_t>(
          k, static_cast<std::size_t>(std::max(0, min_reps - static_cast<int>(us.size()))));
      k = std::clamp<std::size_t>(k, 1, n_sets);
      k = std::min<std::size_t>(
          k, static_cast<std::size_t>(std::max(1.0, (max_t - timed_total) / est_s)));
      std::vector<std::size_t> order;
      for (std::size_t i = 1; i <= k; ++i) order.push_back(i);
      progress(fmt::format("[timing] {} {}: batch {}: {} calls", p.size.label, dtype_name(p.dtype),
                           batch + 1, k));
      // Other work competing for the cores right now (our threads are idle at this point):
      // the least of three samples 10 ms apart, so a momentary blip -- or the kernel's own
      // OpenMP workers still spinning after the last call (libgomp spins ~10-20 ms before it
      // sleeps) -- does not count.
      // Only tasks beyond the cores the call leaves idle compete (a GPU call keeps one busy).
      int others = 1 << 20;
      for (int i = 0; i < 3; ++i) {
        if (i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        others = std::min(others, runnable_tasks() - 1);
      }
      others = competing_tasks(others, usable_cores(), device.timing_host_threads());
      tr.other_runnable = std::max(tr.other_runnable, others);
      const double budget_s =
          opt_.call_timeout_s + 4.0 * est_s * static_cast<double>(k + kBatchWarmup + 1) + 5.0;
      const auto budget = std::chrono::milliseconds(static_cast<long long>(budget_s * 1000));
      // Untimed calls on the warm-up set first: the kernel's threads may have gone to sleep
      // while we regenerated inputs, and waking them is not the kernel's latency.
      // Stepped, the last timed call's outputs stay as it left them (its snapshot covers writes
      // after return); otherwise the runner re-runs the last set untimed and hashes its outputs
      // right after return.
      json cmd = call_command(p, ptrs, kBatchWarmup, 0, order, !stepped);
      cmd["stepped"] = stepped;
      // The device is ours from the batch's command to its final reply (a stepped batch's
      // stops included: the parent's clock runs between them).
      std::optional<DeviceHold> hold;
      hold.emplace(*this);
      auto reply = runner_.command(cmd, budget);
      // Stepped: k + 1 stop points, one before each timed call and one after the last.
      // At each the parent snapshots the outputs of the call that just returned and reveals
      // the next set; the parent's clock runs from "go" to the next stop point.
      std::vector<std::uint64_t> snapshot(k);
      std::vector<double> step_wall, step_staging;
      std::chrono::steady_clock::time_point resumed_at;  // when the runner last got "go"
      for (std::size_t j = 0; stepped && j <= k; ++j) {
        if (auto f = reply_failure(reply)) return f;
        if (!reply.body.contains("step") || !reply.body["step"].is_number_unsigned() ||
            reply.body["step"].get<std::size_t>() != j)
          return Failure{"CRASH", "protocol",
                         fmt::format("the runner's reply at timed call {} of {} is not its step "
                                     "report (forged reply?)",
                                     j, k)};
        const auto reached = std::chrono::steady_clock::now();
        if (j > 0) {
          step_wall.push_back(std::chrono::duration<double>(reached - resumed_at).count());
          step_staging.push_back(std::clamp(reply.body.value("staging_ns", 0.0) * 1e-9, 0.0,
                                            step_staging_cap_s));
        }
        const auto stopped = runner_.wait_stopped(call_timeout());
        if (stopped.kind != RunnerReply::Kind::Ok) {
          if (stopped.guard == "work_between_calls")
            return Failure{"FAIL", stopped.guard, stopped.message};
          return reply_failure(stopped);
        }
        if (j > 0) snapshot[j - 1] = output_hash(sets[order[j - 1]]);
        if (j < k) reveal(order[j]);
        resumed_at = std::chrono::steady_clock::now();
        if (!runner_.resume_with({{"op", "go"}}))
          return Failure{"CRASH", "crash", "the runner died while stopped between timed calls"};
        reply = runner_.next_message(budget);
      }
      hold.reset();
      if (auto f = reply_failure(reply)) return f;
      // The reply must account for exactly the calls we asked for.
      const auto& b = reply.body;
      if (!b.contains("times_ns") || !b["times_ns"].is_array() || b["times_ns"].size() != k ||
          !b.contains("verify_set") || !b.contains("verify_hash") ||
          b["verify_set"].get<std::size_t>() != order.back())
        return Failure{"CRASH", "protocol",
                       "the runner's reply does not match the calls requested (forged reply?)"};
      double batch_sum = 0;
      std::vector<double> batch_ns;
      for (const auto& ns : b["times_ns"]) {
        const double v = ns.get<double>();
        if (!(v > 0))
          return Failure{"CRASH", "protocol", "non-positive time in the runner's reply"};
        us.push_back(v / 1000.0);
        batch_ns.push_back(v * 1e-9);
        batch_sum += v * 1e-9;
      }
      double wall = 0;
      if (stepped) {
        // The parent's clock over each step (from "go" to the next stop point) holds the call,
        // the runner's staging and a wake-up. The runner cannot claim more than that, and the
        // typical step must not hide more than half a call beyond a scheduling slack: the
        // medians are robust to a few steps delayed by other load (issue 18 class 9), the
        // warm-up and verification calls lie outside every step.
        std::vector<double> overhead;
        for (std::size_t j = 0; j < k; ++j) {
          const double w = std::max(0.0, step_wall[j] - step_staging[j]);
          wall += w;
          overhead.push_back(w - batch_ns[j]);
        }
        if (batch_sum > wall * 1.001 + 1e-4)
          return Failure{"INVALID", "timer_cross_check",
                         fmt::format("the runner reports {:.4f} s of kernel time but the "
                                     "parent's clock saw only {:.4f} s",
                                     batch_sum, wall)};
        const double med_over = percentile(overhead, 0.5);
        const double med_call = percentile(batch_ns, 0.5);
        if (med_over > 0.5 * med_call + 0.010)
          return Failure{
              "INVALID", "timer_cross_check",
              fmt::format("the parent's clock saw {:.1f} us more than the reported call in the "
                          "median step (median call {:.1f} us): the reported times are not "
                          "credible",
                          med_over * 1e6, med_call * 1e6)};
      } else {
        // The parent's clock around the whole command: the calls reported must account for
        // the time that passed beyond the untimed warm-up and verification calls and IPC.
        // The runner's own data handling (cuda: host<->device staging; both: the hash of the
        // verified outputs) is credited, capped at moving the sets' bytes three times at
        // 0.5 GB/s, so a forged staging_ns cannot hide much kernel time.
        const double staging_cap_s = 3.0 * tr.rotation_bytes / 0.5e9 + 0.05;
        const double staging_s = std::min(staging_cap_s, b.value("staging_ns", 0.0) * 1e-9);
        wall = std::max(0.0, reply.parent_wall_s - std::max(0.0, staging_s));
        const double max_call = *std::max_element(batch_ns.begin(), batch_ns.end());
        if (batch_sum > wall * 1.001 + 1e-4)
          return Failure{"INVALID", "timer_cross_check",
                         fmt::format("the runner reports {:.4f} s of kernel time but the "
                                     "parent's clock saw only {:.4f} s",
                                     batch_sum, wall)};
        if (wall > 1.5 * (batch_sum + (kBatchWarmup + 2) * max_call) + 0.05)
          return Failure{
              "INVALID", "timer_cross_check",
              fmt::format("the parent's clock saw {:.4f} s for {} calls reported as {:.4f} s: "
                          "the reported times are not credible",
                          wall, k, batch_sum)};
      }
      // Guards over every set used, and full verification of two sets chosen now.
      for (std::size_t si : order) {
        for (std::size_t i = 0; i < sets[si].in.size(); ++i)
          if (auto g = band_failure(sets[si].in_off[i], sets[si].in[i])) return g;
        for (std::size_t i = 0; i < sets[si].out.size(); ++i)
          if (auto g = band_failure(sets[si].out_off[i], sets[si].out[i])) return g;
      }
      if (runner::hex64(output_hash(sets[order.back()])) != b["verify_hash"].get<std::string>())
        return Failure{"FAIL", "async_write",
                       "outputs changed after the kernel returned (work escaping the call, e.g. "
                       "a background thread)"};
      timed_total += batch_sum;
      wall_total += wall;
      // Enough: the minimum count and the minimum time -- or the minimum count and 8 batches of
      // fresh sets, since regenerating sets larger than the LLC costs far more than the calls.
      const bool enough = static_cast<int>(us.size()) >= min_reps &&
                          (timed_total >= min_t || batch + 1 >= max_batches);
      const bool last = enough || timed_total >= max_t || batch == 63;
      // Full verification of two sets on the first and the last batch and on a random quarter
      // of the others, decided after the reply: a kernel that skips work on some calls cannot
      // know which outputs will be checked.
      std::vector<std::size_t> check;
      if (batch == 0 && last) {
        // The whole timing in one batch (large sets: enough of them for the minimum count):
        // ceil(k/2) sets (at least 2, at most 8) drawn at random after the reply. A kernel
        // must skip work on more than half of the calls to move the median, so up to 16 calls
        // one of them is always verified, and beyond that it escapes 8 independent draws with
        // probability < 2^-8 (two sets per batch before).
        std::vector<std::size_t> pool(order);
        const std::size_t want =
            std::min<std::size_t>(k, std::clamp<std::size_t>((k + 1) / 2, 2, 8));
        for (std::size_t j = 0; j < want; ++j) {
          const std::size_t i = j + static_cast<std::size_t>(pick() % (pool.size() - j));
          std::swap(pool[j], pool[i]);
          check.push_back(pool[j]);
        }
      } else if (batch == 0 || last || pick() % 4 == 0) {
        check.push_back(order.back());
        if (k > 1) check.push_back(order[pick() % (k - 1)]);
      }
      for (std::size_t si : check) {
        const auto& in = priv[si];
        for (std::size_t i = 0; i < in.size(); ++i)
          if (std::memcmp(in[i].data(), sets[si].in[i].data, in[i].size()) != 0)
            return Failure{"FAIL", "input_mutation",
                           fmt::format("input '{}' of rotating set {} was modified during timing",
                                       sets[si].in[i].desc.name, si)};
        const auto ref = oracle(p, "normal", seeds[si], in);
        double rel = 0;
        if (auto f = check_outputs(p, sets[si], *ref, &rel)) {
          f->reason = "timed call on rotating set " + std::to_string(si) + ": " + f->reason;
          if (f->guard == "accuracy" || f->guard == "poisoned_output") f->guard = "fresh_inputs";
          return f;
        }
      }
      // Stepped: every call's outputs are as they were when it returned -- checked after the
      // verification above, so a write that landed later either changed them here or was not
      // there when they were verified.
      for (std::size_t j = 0; stepped && j < k; ++j)
        if (output_hash(sets[order[j]]) != snapshot[j])
          return Failure{"FAIL", "async_write",
                         fmt::format("the outputs of timed call {} (set {}) changed after the "
                                     "call returned (work escaping the call, e.g. a thread "
                                     "that kept running)",
                                     j, order[j])};
      if (last) break;
      // Fresh values for every set before any is timed again.
      for (std::size_t si : order) fill(si);
    }
    // The runner must still be alive and in step (no forged reply followed by an exit).
    const long long nonce = static_cast<long long>(pick() >> 2);
    auto pong = runner_.command({{"op", "ping"}, {"nonce", nonce}}, std::chrono::seconds(10));
    if (auto f = reply_failure(pong)) return f;
    if (pong.body.value("pong", -1LL) != nonce)
      return Failure{"CRASH", "protocol", "the runner answered a ping out of step"};
    tr.reps = static_cast<int>(us.size());
    tr.median_us = percentile(us, 0.5);
    tr.p10_us = percentile(us, 0.1);
    tr.p90_us = percentile(us, 0.9);
    std::vector<double> dev;
    for (double u : us) dev.push_back(std::fabs(u - tr.median_us));
    tr.noise = tr.median_us > 0 ? percentile(dev, 0.5) / tr.median_us : 0;
    tr.parent_wall_s = wall_total;
    tr.timed_sum_s = timed_total;
    return std::nullopt;
  }

  // Grows the arena (and on cuda its device twin); running out of memory is the candidate's
  // failure (DESIGN §4: OOM is a failure, not a skip).
  std::optional<Failure> reset_arena(std::size_t bytes) {
    try {
      DeviceHold hold(*this);  // device allocations
      runner_.reset_arena(bytes);
    } catch (const std::runtime_error& e) {
      return Failure{"FAIL", backend_.device().oom_guard(),
                     fmt::format("cannot hold the {:.0f} MiB of buffers: {}",
                                 static_cast<double>(bytes) / 1048576.0, e.what())};
    }
    return std::nullopt;
  }

  void progress(const std::string& s) const {
    if (opt_.progress) opt_.progress(s);
  }

 private:
  // Timing sets use the run's fresh seed, so their values cannot be known in advance.
  std::uint64_t timing_seed(std::size_t s) const {
    return derive_seed(rep_.fresh_seed ^ 0x5eed71e0ULL, s);
  }

  std::chrono::milliseconds call_timeout(double factor = 1.0) const {
    // compute-sanitizer slows kernels down 10-100x.
    if (!opt_.sanitizer.empty()) factor *= 20;
    const double s = std::clamp(opt_.call_timeout_s * factor, 0.001, 86400.0);
    return std::chrono::milliseconds(static_cast<long long>(s * 1000));
  }

  // Records the runner's missing private file system once in the report (issue 18 class 5).
  void note_filesystem() {
    const std::string& w = runner_.filesystem_warning();
    if (!w.empty() && std::find(rep_.warnings.begin(), rep_.warnings.end(), w) == rep_.warnings.end())
      rep_.warnings.push_back(w);
  }

  // True if outputs equal to `stale` (the oracle before a change) fail the comparison with
  // `fresh` (the oracle after it): the change is visible to the checks.
  bool stale_would_fail(const Problem& p, const Outputs& stale, const Outputs& fresh) const {
    for (std::size_t i = 0; i < p.outputs.size(); ++i) {
      std::vector<char> buf(p.outputs[i].nbytes());
      const TensorView v{p.outputs[i], buf.data()};
      for (std::int64_t k = 0; k < stale[i].numel(); ++k)
        v.set(k, stale[i].v[static_cast<std::size_t>(k)]);
      if (!compare_output(v, fresh[i], type_.compare_row_length(p, static_cast<int>(i))).ok)
        return true;
    }
    return false;
  }

  // Inputs of (problem, seed, regime) generated into parent-private memory.
  std::vector<std::vector<char>> private_inputs(const Problem& p, std::uint64_t seed,
                                                const std::string& regime) const {
    std::vector<std::vector<char>> bufs;
    refill_private(p, seed, regime, bufs);
    return bufs;
  }

  // The same, into `bufs`, reusing its memory when the sizes match (the timing protocol
  // regenerates its rotating sets every batch: fresh allocations of sets larger than the
  // LLC cost a page fault per 4 KiB). Every byte is zeroed before the generator runs, as a
  // fresh buffer would be.
  void refill_private(const Problem& p, std::uint64_t seed, const std::string& regime,
                      std::vector<std::vector<char>>& bufs) const {
    bufs.resize(p.inputs.size());
    std::vector<TensorView> views;
    for (std::size_t i = 0; i < p.inputs.size(); ++i) {
      if (bufs[i].size() == p.inputs[i].nbytes())
        std::fill(bufs[i].begin(), bufs[i].end(), char{0});
      else
        bufs[i].assign(p.inputs[i].nbytes(), char{0});
      views.push_back({p.inputs[i], bufs[i].data()});
    }
    type_.generate(p, seed, regime, views);
  }

  Placed place(const Problem& p) {
    Placed pl;
    for (const auto& t : p.inputs) {
      pl.in_off.push_back(runner_.alloc(t.nbytes()));
      pl.in.push_back({t, runner_.ptr(pl.in_off.back())});
    }
    for (const auto& t : p.outputs) {
      pl.out_off.push_back(runner_.alloc(t.nbytes()));
      pl.out.push_back({t, runner_.ptr(pl.out_off.back())});
    }
    return pl;
  }

  static std::uint64_t output_hash(const Placed& pl) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const auto& t : pl.out) h = runner::fnv1a64(t.data, t.desc.nbytes(), h);
    return h;
  }

  json call_command(const Problem& p, const std::vector<const Placed*>& sets, int warmup,
                    std::size_t warmup_set, const std::vector<std::size_t>& order,
                    bool verify) const {
    json js = json::array();
    for (const Placed* s : sets) {
      json in = json::array(), out = json::array();
      for (std::size_t i = 0; i < s->in.size(); ++i)
        in.push_back({{"off", s->in_off[i]},
                      {"dtype", dtype_name(s->in[i].desc.dtype)},
                      {"shape", s->in[i].desc.shape}});
      for (std::size_t i = 0; i < s->out.size(); ++i)
        out.push_back({{"off", s->out_off[i]},
                       {"dtype", dtype_name(s->out[i].desc.dtype)},
                       {"shape", s->out[i].desc.shape}});
      js.push_back({{"in", in}, {"out", out}});
    }
    return {{"op", "call"},
            {"sets", js},
            {"attrs", p.attrs},
            {"warmup", warmup},
            {"warmup_set", warmup_set},
            {"order", order},
            {"verify", verify}};
  }

  std::optional<Failure> reply_failure(const RunnerReply& r) const {
    switch (r.kind) {
      case RunnerReply::Kind::Ok:
        return std::nullopt;
      case RunnerReply::Kind::Timeout:
        return Failure{"TIMEOUT", "timeout", r.message};
      case RunnerReply::Kind::Crash:
        return Failure{"CRASH", "crash", r.message};
      case RunnerReply::Kind::Error:
        // A CUDA fault reported by the runner is a crash; escaped event timing is INVALID.
        if (r.guard == "crash") return Failure{"CRASH", "crash", r.message};
        if (r.guard == "timer_cross_check") return Failure{"INVALID", r.guard, r.message};
        // An emulator that cannot compute the case faithfully (the stage loop accepts it only
        // for the dtypes the device declares, Device::may_be_inconclusive).
        if (r.guard == "inconclusive") return Failure{"INCONCLUSIVE", r.guard, r.message};
        return Failure{"FAIL", r.guard.empty() ? "kernel_error" : r.guard, r.message};
    }
    return std::nullopt;
  }

  std::optional<Failure> band_failure(std::size_t off, const TensorView& t) const {
    const std::string g = runner_.check_guards(off, t.desc.nbytes());
    if (g.empty()) return std::nullopt;
    return Failure{"FAIL", "guard_band",
                   fmt::format("out-of-bounds write around '{}' ({} bytes): {}", t.desc.name,
                               t.desc.nbytes(), g)};
  }

  std::optional<Failure> check_guards(const Placed& pl, const RunnerReply& reply) const {
    for (std::size_t i = 0; i < pl.in.size(); ++i)
      if (auto f = band_failure(pl.in_off[i], pl.in[i])) return f;
    for (std::size_t i = 0; i < pl.out.size(); ++i)
      if (auto f = band_failure(pl.out_off[i], pl.out[i])) return f;
    for (std::size_t i = 0; i < pl.in.size(); ++i)
      if (std::memcmp(pl.in[i].data, private_[i].data(), private_[i].size()) != 0)
        return Failure{"FAIL", "input_mutation",
                       fmt::format("input '{}' was modified by the kernel (inputs are read-only)",
                                   pl.in[i].desc.name)};
    if (!reply.body.contains("verify_hash") || !reply.body["verify_hash"].is_string())
      return Failure{"CRASH", "protocol", "the runner's reply lacks the output hash"};
    if (runner::hex64(output_hash(pl)) != reply.body.at("verify_hash").get<std::string>())
      return Failure{"FAIL", "async_write",
                     "outputs changed after the kernel returned (work escaping the call, e.g. a "
                     "background thread)"};
    return std::nullopt;
  }

  std::shared_ptr<const Outputs> oracle(const Problem& p, const std::string& regime,
                                        std::uint64_t seed,
                                        const std::vector<std::vector<char>>& inputs,
                                        const std::string& changed = {}) {
    // `changed`: the inputs differ from those of (regime, seed) by these element changes.
    std::string key = fmt::format("{}|{}|{}|{}|{}{}", p.kernel, p.size.label, dtype_name(p.dtype),
                                  regime, seed, changed);
    for (double a : p.attrs) key += fmt::format("|{}", a);
    if (auto hit = oracle_cache().get(key)) return hit;
    std::vector<Array64> ins;
    for (std::size_t i = 0; i < p.inputs.size(); ++i)
      ins.push_back(to_array64(TensorView{p.inputs[i], const_cast<char*>(inputs[i].data())}));
    auto outs = std::make_shared<Outputs>();
    type_.reference(p, ins, *outs);
    if (outs->size() != p.outputs.size())
      throw std::runtime_error("oracle of " + p.kernel + " returned the wrong number of outputs");
    for (std::size_t i = 0; i < outs->size(); ++i) {
      auto& a = (*outs)[i];
      const DType dt = p.outputs[i].dtype;
      parallel_for(a.numel(), 1 << 16, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t k = lo; k < hi; ++k)
          a.v[static_cast<std::size_t>(k)] = round_to_dtype(a.v[static_cast<std::size_t>(k)], dt);
      });
    }
    oracle_cache().put(key, outs);
    return outs;
  }

  std::optional<Failure> check_outputs(const Problem& p, const Placed& pl, const Outputs& ref,
                                       double* rel_error) const {
    for (std::size_t i = 0; i < pl.out.size(); ++i) {
      const auto c =
          compare_output(pl.out[i], ref[i], type_.compare_row_length(p, static_cast<int>(i)));
      if (rel_error) *rel_error = std::max(*rel_error, c.rel_error);
      if (!c.ok) {
        const std::string guard = c.failure == "poisoned"  ? "poisoned_output"
                                  : c.failure == "nan_inf" ? "nan_inf_pattern"
                                                           : "accuracy";
        return Failure{"FAIL", guard,
                       fmt::format("output '{}': {}", pl.out[i].desc.name, c.reason)};
      }
    }
    return std::nullopt;
  }

  const KernelType& type_;
  const Backend& backend_;
  const EvalOptions& opt_;
  EvalReport& rep_;
  int lock_fd_ = -1;     ///< EvalOptions::device_lock, open; -1 without one
  int lock_depth_ = 0;   ///< DeviceHold nesting
  RunnerClient runner_;
  Placed placed_;
  std::vector<std::vector<char>> private_;
  std::string lib_;
  std::size_t device_l2_ = 0;

 public:
  /// Ends the runner (under a sanitizer: lets it print its summary) and returns the
  /// sanitizer's log ("" without a sanitizer).
  std::string finish_sanitizer() {
    runner_.stop();
    return runner_.sanitizer_log();
  }
};

// Sizes of the determinism stage: the type's first test size, then the test size with the most
// input elements and the one with the longest rows (last dimension of the first input), without
// repeats; the smoke size when the type has no test sizes.
std::vector<Size> determinism_sizes(const KernelType& type) {
  const auto tests = type.test_sizes();
  if (tests.empty()) return {type.smoke_size()};
  std::vector<Size> out{tests.front()};
  std::size_t largest = 0, longest = 0;
  std::int64_t most = -1, row = -1;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    const Problem p = type.make_problem(tests[i], DType::F32);
    std::int64_t n = 0;
    for (const auto& t : p.inputs) n += t.numel();
    const std::int64_t len = p.inputs.front().shape.empty() ? 1 : p.inputs.front().shape.back();
    if (n > most) most = n, largest = i;
    if (len > row) row = len, longest = i;
  }
  for (std::size_t i : {largest, longest}) {
    const auto same = [&](const Size& s) { return s.label == tests[i].label; };
    if (std::none_of(out.begin(), out.end(), same)) out.push_back(tests[i]);
  }
  return out;
}

struct CaseSpec {
  Size size;
  DType dtype;
  std::string regime = "normal";
  std::uint64_t seed;
  std::string note;
};

// The case list of each of the five stages under `opts` (fresh-seed cases use `fresh_seed`);
// `skipped` gets, per stage, what --quick left out ("" when nothing).
std::vector<std::vector<CaseSpec>> stage_cases(const KernelType& type, const EvalOptions& opts,
                                               std::uint64_t fresh_seed,
                                               std::vector<std::string>& skipped) {
  skipped.assign(5, "");
  const std::vector<DType>& dts = opts.dtypes;
  std::vector<std::vector<CaseSpec>> stages(5);
  for (DType d : dts) {
    stages[0].push_back({type.smoke_size(), d, "normal", opts.seed, ""});
    stages[0].push_back({type.smoke_size(), d, "normal", fresh_seed, "fresh_inputs"});
  }
  auto tests = type.test_sizes();
  if (opts.quick && tests.size() > 1) {
    skipped[1] = fmt::format("--quick: {} of {} sizes", 1, tests.size());
    tests.resize(1);
  }
  for (const auto& sz : tests)
    for (DType d : dts) stages[1].push_back({sz, d, "normal", opts.seed, ""});
  auto stab = type.stability_cases();
  if (opts.quick && stab.size() > 2) {
    skipped[2] = fmt::format("--quick: {} of {} cases", 2, stab.size());
    stab.resize(2);
  }
  for (const auto& c : stab) {
    const auto& cd = c.dtypes.empty() ? dts : c.dtypes;
    for (DType d : cd)
      if (std::find(dts.begin(), dts.end(), d) != dts.end())
        stages[2].push_back({c.size, d, c.regime, opts.seed, c.name});
  }
  // Determinism (issue 18): the first test size, and the largest and the longest-row test sizes,
  // where split-row reductions, atomics or extra threads typically start. Their oracles are
  // already cached by the shape sweep (same seed).
  std::vector<Size> det_sizes = determinism_sizes(type);
  if (opts.quick && det_sizes.size() > 1) {
    skipped[3] = fmt::format("--quick: {} of {} sizes", 1, det_sizes.size());
    det_sizes.resize(1);
  }
  for (const auto& sz : det_sizes)
    for (DType d : dts) stages[3].push_back({sz, d, "normal", opts.seed, "determinism"});
  auto edges = type.edge_sizes();
  if (opts.quick && edges.size() > 3) {
    skipped[4] = fmt::format("--quick: {} of {} sizes", 3, edges.size());
    edges.resize(3);
  }
  for (const auto& sz : edges)
    for (DType d : dts) {
      stages[4].push_back({sz, d, "normal", opts.seed, ""});
      if (!opts.quick) stages[4].push_back({sz, d, "normal", fresh_seed, "fresh seed"});
    }
  return stages;
}

}  // namespace

std::vector<Problem> evaluation_problems(const KernelType& type, const Backend& backend,
                                         const EvalOptions& opts) {
  std::vector<std::string> skipped;
  std::vector<Problem> out;
  if (opts.correctness)
    for (const auto& stage : stage_cases(type, opts, /*fresh_seed=*/0, skipped))
      for (const auto& c : stage) out.push_back(type.make_problem(c.size, c.dtype));
  // `vladbud bench`'s in-use check calls the library outside the sandbox at the smoke size in
  // the timing dtype (bridge/in_use.cpp).
  out.push_back(type.make_problem(type.smoke_size(), opts.timing_dtype));
  if (opts.timing && !backend.device().emulated() && opts.sanitizer.empty()) {
    const Size tsize = opts.timing_size ? *opts.timing_size : type.benchmark_size(backend.device().kind());
    out.push_back(type.make_problem(tsize, opts.timing_dtype));
  }
  return out;
}

void clear_oracle_cache() {
  oracle_cache().clear();
}

EvalReport evaluate(const KernelType& type, const Backend& backend,
                    const std::filesystem::path& source, const EvalOptions& opts) {
  const auto t_start = Clock::now();
  EvalReport rep;
  rep.kernel = type.name();
  rep.backend = backend.name();
  rep.source = source;
  rep.seed = opts.seed;
  rep.fresh_seed = opts.fresh_seed
                       ? opts.fresh_seed
                       : splitmix64(static_cast<std::uint64_t>(
                             std::chrono::system_clock::now().time_since_epoch().count())) %
                             1000000007ULL;
  for (const char* n : kStageNames) rep.stages.push_back({n, "NOT RUN", 0, 0, ""});
  std::optional<Session> session;
  auto finish = [&] {
    if (session && !opts.sanitizer.empty()) {
      // compute-sanitizer's findings fail the candidate whatever the stages said.
      const SanitizerFindings f = backend.sanitizer()->parse_log(session->finish_sanitizer());
      if (f.errors > 0 || (!f.saw_summary && !f.first.empty())) {
        const std::string before = rep.verdict == "PASS" ? "" : " (evaluator: " + rep.reason + ")";
        rep.verdict = "FAIL";
        rep.guard = "sanitizer";
        if (rep.failed_stage.empty()) rep.failed_stage = "sanitizer";
        rep.reason = fmt::format("compute-sanitizer {}: {} error(s): {}{}", opts.sanitizer,
                                 f.errors, f.first, before);
      }
    }
    rep.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
    return rep;
  };

  std::vector<std::string> skipped;
  const std::vector<std::vector<CaseSpec>> stages = stage_cases(type, opts, rep.fresh_seed, skipped);
  const Size tsize = opts.timing_size ? *opts.timing_size : type.benchmark_size(backend.device().kind());
  const Problem tp = type.make_problem(tsize, opts.timing_dtype);

  if (opts.progress) opts.progress(fmt::format("[build] {} ({})", source.string(), backend.name()));
  // A backend whose libraries are specialized per problem is built for every case of this run.
  rep.build = backend.needs_build_problems()
                  ? backend.build_for(source, evaluation_problems(type, backend, opts))
                  : backend.build(source);
  {
    // The ladder's source screen says what rung 0 would reject (a warning here: the runner's
    // sandbox contains process, file and socket calls).
    std::ifstream f(source);
    std::stringstream text;
    text << f.rdbuf();
    for (const auto& finding : backend.screen_source(text.str()))
      rep.warnings.push_back("source screen (ladder rung 0 rejects this source for every target): " +
                             finding);
  }
  if (!rep.build.ok) {
    rep.verdict = "FAIL";
    rep.failed_stage = "build";
    rep.guard = "build";
    const auto& d = rep.build.diagnostics;
    auto pos = d.find(": error:");  // GCC and Clang: "file:line:col: error: message"
    if (pos == std::string::npos) pos = d.find("error");
    std::string line = pos == std::string::npos ? d : d.substr(d.rfind('\n', pos) + 1);
    line = line.substr(0, line.find('\n'));
    rep.reason = "compilation failed: " + (line.empty() ? std::string("see diagnostics") : line);
    return finish();
  }

  session.emplace(type, backend, opts, rep);
  Session& s = *session;
  if (!s.start(rep.build.library.string())) return finish();

  const Device& device = backend.device();
  std::string inconclusive;  // the first inconclusive case, "" when none
  for (std::size_t si = 0; si < 5; ++si) {
    StageResult& st = rep.stages[si];
    if (!opts.correctness) {
      st.status = "SKIP";
      st.detail = "--timing-only: correctness not checked";
      rep.verdict = "UNVERIFIED";
      continue;
    }
    if (stages[si].empty()) {
      st.status = "SKIP";
      st.detail = "the kernel type declares no cases for this stage";
      continue;
    }
    std::optional<Failure> fail;
    const CaseSpec* failed = nullptr;
    std::uint64_t first_hash = 0;
    int n_inconclusive = 0;
    std::string first_inconclusive;
    for (const auto& c : stages[si]) {
      Problem p = type.make_problem(c.size, c.dtype);
      s.progress(fmt::format("[{}/5 {}] {} {}{}", si + 1, kStageNames[si], c.size.label,
                             dtype_name(c.dtype), c.note.empty() ? "" : " (" + c.note + ")"));
      double rel = 0;
      try {
        if (si == 3) {
          // Determinism: three calls on identical inputs must agree bitwise.
          fail = s.run_case(p, c.regime, c.seed, &rel, &first_hash);
          for (int rep_i = 1; rep_i < 3 && !fail; ++rep_i) {
            std::uint64_t h = 0;
            // A fresh runner process for each repetition: a result memoised in the candidate's
            // memory cannot make a nondeterministic kernel look deterministic.
            fail = s.restart();
            if (!fail) fail = s.run_case(p, c.regime, c.seed, &rel, &h, /*reuse=*/true);
            if (!fail && h != first_hash)
              fail = Failure{"FAIL", "determinism",
                             fmt::format("call {} (in a fresh runner process) on identical "
                                         "inputs gave different output bits (nondeterministic "
                                         "reduction order or a race)",
                                         rep_i + 1)};
          }
        } else if (c.note == "fresh_inputs") {
          // Same buffers, new values: a kernel that caches results by pointer or shape fails.
          fail = s.run_case(p, c.regime, c.seed, &rel, nullptr, /*reuse=*/false);
          if (fail && fail->guard == "accuracy") fail->guard = "fresh_inputs";
          // Then one element at a time: a cache keyed on a sample of the inputs fails.
          if (!fail) fail = s.one_element_changes(p, c.regime, c.seed, &rel);
        } else {
          fail = s.run_case(p, c.regime, c.seed, &rel);
        }
      } catch (const nlohmann::json::exception& e) {
        fail = Failure{"CRASH", "protocol", std::string("unreadable runner reply: ") + e.what()};
      }
      ++st.cases;
      st.max_rel_error = std::max(st.max_rel_error, rel);
      if (fail && fail->verdict == "INCONCLUSIVE") {
        if (!device.may_be_inconclusive(c.dtype)) {
          // Only the device's declared gaps may be inconclusive: anything else is a failure.
          fail = Failure{"FAIL", "kernel_error",
                         fmt::format("the runner called a {} case inconclusive, which the {} "
                                     "device never is for this dtype: {}",
                                     dtype_name(c.dtype), device.name(), fail->reason)};
        } else {
          // Neither pass nor fail: counted, and the stage goes on with its other cases.
          if (n_inconclusive++ == 0)
            first_inconclusive = fmt::format("{} {}: {}", c.size.label, dtype_name(c.dtype),
                                             fail->reason);
          fail.reset();
          continue;
        }
      }
      if (fail) {
        failed = &c;
        break;
      }
    }
    if (fail) {
      st.status = fail->verdict;  // FAIL, TIMEOUT or CRASH
      st.detail = fail->reason;
      rep.verdict = fail->verdict;
      rep.guard = fail->guard;
      rep.failed_stage = kStageNames[si];
      rep.failed_size = failed->size.label;
      rep.failed_dtype = std::string(dtype_name(failed->dtype));
      rep.reason = fail->reason;
      if (failed->regime != "normal") rep.reason += " [regime " + failed->regime + "]";
      if (failed->seed != opts.seed) rep.reason += fmt::format(" [seed {}]", failed->seed);
      return finish();
    }
    if (n_inconclusive > 0) {
      st.status = "INCONCLUSIVE";
      st.detail = fmt::format("{} of {} cases inconclusive (first: {}){}", n_inconclusive,
                              st.cases, first_inconclusive,
                              skipped[si].empty() ? "" : "; " + skipped[si]);
      if (inconclusive.empty())
        inconclusive = fmt::format("{}: {}", kStageNames[si], first_inconclusive);
      continue;
    }
    st.status = "PASS";
    st.detail = skipped[si];
  }
  if (!inconclusive.empty()) {
    // Every conclusive case passed, but some could not be decided here: never a PASS.
    rep.verdict = "INCONCLUSIVE";
    rep.guard = "inconclusive";
    rep.reason = "cases the " + device.name() + " cannot decide (" + inconclusive +
                 "); the other cases passed";
    return finish();
  }

  if (!opts.timing) return finish();
  if (device.emulated()) {
    s.progress("[timing] skipped: the " + device.name() +
               " emulates the device; its times say nothing about the kernel's speed");
    return finish();
  }
  if (!opts.sanitizer.empty()) {
    s.progress("[timing] skipped: kernels under compute-sanitizer are not timed");
    return finish();
  }
  TimingResult tr;
  tr.size_label = tsize.label;
  tr.load_average = system_load_average();
  tr.dtype = opts.timing_dtype;
  std::optional<Failure> tf;
  try {
    tf = s.time_problem(tp, tr);
  } catch (const nlohmann::json::exception& e) {
    tf = Failure{"CRASH", "protocol", std::string("unreadable runner reply: ") + e.what()};
  }
  if (auto f = tf) {
    rep.verdict = f->verdict;
    rep.guard = f->guard;
    rep.failed_stage = "timing";
    rep.failed_size = tsize.label;
    rep.failed_dtype = std::string(dtype_name(opts.timing_dtype));
    rep.reason = f->reason;
    return finish();
  }
  tr.flops = type.flops(tp);
  tr.bytes = type.min_bytes(tp);
  Ceilings c;
  try {
    Session::DeviceHold hold(s);  // a ceilings probe (when not cached) runs on the device
    c = opts.ceilings ? *opts.ceilings : backend.device().local_ceilings(false, opts.progress);
  } catch (const std::exception& e) {
    rep.verdict = "FAIL";
    rep.guard = "ceilings";
    rep.failed_stage = "timing";
    rep.reason = std::string("no ceilings to place the result on: ") + e.what();
    return finish();
  }
  tr.roofline = roofline_point(c, opts.timing_dtype, tr.flops, tr.bytes, tr.median_us * 1e-6);
  static std::atomic<bool> recalibrated{false};
  if (tr.roofline.pct_peak > 100.0 && !opts.ceilings && !recalibrated.exchange(true)) {
    // Cached ceilings measured while the machine was busy are too low; re-measure once per
    // process before calling a result impossible.
    s.progress("[timing] above the cached ceiling: re-measuring this machine's ceilings once");
    // Keep the best of the old and new measurement per ceiling: a re-measurement on a busy
    // machine must not lower the roofs for every later run.
    Ceilings fresh = c;
    try {
      Session::DeviceHold hold(s);
      fresh = backend.device().local_ceilings(true, opts.progress);
    } catch (const std::exception& e) {
      s.progress(std::string("[timing] re-measuring failed: ") + e.what());
    }
    merge_best(fresh, c);
    c = fresh;
    write_file_atomic(ceilings_cache_path(c.machine_id), nlohmann::json(c).dump(2));
    tr.roofline = roofline_point(c, opts.timing_dtype, tr.flops, tr.bytes, tr.median_us * 1e-6);
  }
  tr.ceiling_source = fmt::format("measured {} ({})", c.measured_at, c.cpu_model);
  rep.timing = tr;
  if (tr.roofline.pct_peak > 100.0) {
    rep.verdict = "INVALID";
    rep.guard = "above_ceiling";
    rep.failed_stage = "timing";
    rep.failed_size = tsize.label;
    rep.failed_dtype = std::string(dtype_name(opts.timing_dtype));
    rep.reason = fmt::format(
        "{:.1f}% of the {} ceiling ({:.3g} {}) is physically impossible: the timing or the work "
        "is not real (if the kernel is honest, recalibrate: vladbud targets --calibrate)",
        tr.roofline.pct_peak, tr.roofline.bound, tr.roofline.ceiling,
        tr.roofline.bound == "memory" ? "GB/s" : "TFLOP/s");
  }
  return finish();
}

}  // namespace vb
