#include "eval/evaluator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <mutex>
#include <thread>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/parallel.h"
#include "core/random.h"
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
    for (const auto& a : *v) b += a.v.size() * sizeof(double);
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

std::uint64_t hash_parallel(const void* data, std::size_t n) {
  constexpr std::size_t kChunk = 1 << 20;
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<std::uint64_t> hs(chunks);
  const auto* p = static_cast<const char*>(data);
  parallel_for(static_cast<std::int64_t>(chunks), 8, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t c = lo; c < hi; ++c) {
      const std::size_t off = static_cast<std::size_t>(c) * kChunk;
      hs[static_cast<std::size_t>(c)] = runner::fnv1a64(p + off, std::min(kChunk, n - off));
    }
  });
  return runner::fnv1a64(hs.data(), hs.size() * sizeof(std::uint64_t));
}

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

const char* kStageNames[] = {"smoke", "shape_sweep", "stability", "determinism", "edge"};

// ---- the evaluation session ------------------------------------------------------------------

class Session {
 public:
  Session(const KernelType& t, const Backend& b, const EvalOptions& o, EvalReport& r)
      : type_(t), backend_(b), opt_(o), rep_(r), runner_(b.name()) {}

  bool start(const std::string& lib) {
    auto reply = runner_.start(lib, std::chrono::seconds(60));
    if (reply.kind == RunnerReply::Kind::Ok) return true;
    rep_.verdict = reply.kind == RunnerReply::Kind::Crash ? "CRASH" : "FAIL";
    rep_.failed_stage = "load";
    rep_.guard = "load";
    rep_.reason = "cannot load the kernel library: " + reply.message;
    return false;
  }

  // Runs one correctness case: generate, call once, check every guard and the oracle.
  // `reuse` keeps the arena contents (same inputs, determinism) instead of regenerating.
  std::optional<Failure> run_case(const Problem& p, const std::string& regime, std::uint64_t seed,
                                  double* rel_error, std::uint64_t* out_hash = nullptr,
                                  bool reuse = false) {
    if (!reuse) {
      std::size_t total = 0;
      for (const auto& t : p.inputs) total += RunnerClient::footprint(t.nbytes());
      for (const auto& t : p.outputs) total += RunnerClient::footprint(t.nbytes());
      runner_.reset_arena(total);
      placed_ = place(p);
      type_.generate(p, seed, regime, placed_.in);
    }
    const auto in_hashes = input_hashes(placed_);
    for (const auto& o : placed_.out) poison(o);
    json cmd = call_command(p, {&placed_}, 0, 1, 1, 0.0, 1e9, false);
    auto reply = runner_.command(cmd, std::chrono::milliseconds(
                                          static_cast<long long>(opt_.call_timeout_s * 1000)));
    if (auto f = reply_failure(reply)) return f;
    if (auto f = check_guards(placed_, in_hashes, reply)) return f;
    if (out_hash) *out_hash = output_hash(placed_);
    const auto ref = oracle(p, regime, seed, placed_);
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

  // The timing protocol (DESIGN §4): rotating input sets larger than the LLC, warm-up, then
  // repeats until min count and min time; a final untimed verification call.
  std::optional<Failure> time_problem(const Problem& p, TimingResult& tr) {
    std::size_t set_bytes = 0, foot = 0;
    for (const auto& t : p.inputs) set_bytes += t.nbytes(), foot += RunnerClient::footprint(t.nbytes());
    for (const auto& t : p.outputs) set_bytes += t.nbytes(), foot += RunnerClient::footprint(t.nbytes());
    std::size_t llc = opt_.llc_bytes ? opt_.llc_bytes : detect_cpu().llc_bytes;
    if (llc == 0) llc = 64ull << 20;
    std::size_t n_sets = std::max<std::size_t>(2, (2 * llc + set_bytes - 1) / std::max<std::size_t>(set_bytes, 1));
    n_sets = std::min<std::size_t>(n_sets, 256);
    while (n_sets > 2 && n_sets * foot > opt_.max_rotation_bytes) --n_sets;
    tr.rotation_sets = static_cast<int>(n_sets);
    tr.rotation_bytes = static_cast<double>(n_sets * set_bytes);
    progress(fmt::format("[timing] {} {}: filling {} rotating input sets ({:.0f} MiB > 2x LLC {:.0f} MiB)",
                         p.size.label, dtype_name(p.dtype), n_sets, tr.rotation_bytes / 1048576.0,
                         static_cast<double>(llc) / 1048576.0));
    runner_.reset_arena(n_sets * foot);
    std::vector<Placed> sets;
    for (std::size_t s = 0; s < n_sets; ++s) {
      sets.push_back(place(p));
      type_.generate(p, timing_seed(s), "normal", sets.back().in);
      for (const auto& o : sets.back().out) poison(o);
    }
    std::vector<std::uint64_t> in_hashes;
    for (const auto& s : sets) {
      auto h = input_hashes(s);
      in_hashes.insert(in_hashes.end(), h.begin(), h.end());
    }
    std::vector<const Placed*> ptrs;
    for (const auto& s : sets) ptrs.push_back(&s);
    const double max_t = opt_.quick ? std::min(opt_.max_time_s, 1.0) : opt_.max_time_s;
    const double min_t = opt_.quick ? std::min(opt_.min_time_s, 0.15) : opt_.min_time_s;
    const int min_reps = opt_.quick ? std::min(opt_.min_reps, 5) : opt_.min_reps;
    json cmd = call_command(p, ptrs, 3, min_reps, 10000000, min_t, max_t, true);
    progress(fmt::format("[timing] {} {}: timing (min {} calls, min {:.2f} s)", p.size.label,
                         dtype_name(p.dtype), min_reps, min_t));
    // Warm-up + timed calls + verification; allow generous slack over max_t.
    const double budget_s = opt_.call_timeout_s * 5 + max_t * 2;
    auto reply = runner_.command(
        cmd, std::chrono::milliseconds(static_cast<long long>(budget_s * 1000)));
    if (auto f = reply_failure(reply)) return f;
    // Guards over every set.
    std::size_t hi = 0;
    for (const auto& s : sets) {
      for (std::size_t i = 0; i < s.in.size(); ++i, ++hi) {
        if (auto g = band_failure(s.in_off[i], s.in[i])) return g;
        if (hash_parallel(s.in[i].data, s.in[i].desc.nbytes()) != in_hashes[hi])
          return Failure{"FAIL", "input_mutation",
                         fmt::format("input '{}' was modified during timing", s.in[i].desc.name)};
      }
      for (std::size_t i = 0; i < s.out.size(); ++i)
        if (auto g = band_failure(s.out_off[i], s.out[i])) return g;
    }
    const auto vset = reply.body.at("verify_set").get<std::size_t>();
    if (runner::hex64(output_hash(sets[vset])) != reply.body.at("verify_hash").get<std::string>())
      return Failure{"FAIL", "async_write",
                     "outputs changed after the kernel returned (work escaping the call, e.g. a "
                     "background thread)"};
    // Fresh values every call: the last timed set's output must match ITS oracle.
    const auto ref = oracle(p, "normal", timing_seed(vset), sets[vset]);
    double rel = 0;
    if (auto f = check_outputs(p, sets[vset], *ref, &rel)) {
      f->reason = "timed call on rotating set " + std::to_string(vset) + ": " + f->reason;
      if (f->guard == "accuracy") f->guard = "fresh_inputs";
      return f;
    }
    // Statistics.
    std::vector<double> us;
    for (auto ns : reply.body.at("times_ns")) us.push_back(ns.get<double>() / 1000.0);
    if (us.empty()) return Failure{"FAIL", "timer_cross_check", "no timed calls"};
    tr.reps = static_cast<int>(us.size());
    tr.median_us = percentile(us, 0.5);
    tr.p10_us = percentile(us, 0.1);
    tr.p90_us = percentile(us, 0.9);
    std::vector<double> dev;
    for (double u : us) dev.push_back(std::fabs(u - tr.median_us));
    tr.noise = tr.median_us > 0 ? percentile(dev, 0.5) / tr.median_us : 0;
    tr.parent_wall_s = reply.parent_wall_s;
    tr.timed_sum_s = 0;
    for (double u : us) tr.timed_sum_s += u * 1e-6;
    const double busy_s = reply.body.value("busy_ns", 0.0) * 1e-9;
    if (tr.timed_sum_s > tr.parent_wall_s * 1.001 + 1e-4 || busy_s > tr.parent_wall_s * 1.001 + 1e-4)
      return Failure{"INVALID", "timer_cross_check",
                     fmt::format("the runner reports {:.4f} s of kernel time but the parent's clock "
                                 "saw only {:.4f} s for the whole command",
                                 std::max(tr.timed_sum_s, busy_s), tr.parent_wall_s)};
    return std::nullopt;
  }

  void progress(const std::string& s) const {
    if (opt_.progress) opt_.progress(s);
  }

 private:
  std::uint64_t timing_seed(std::size_t s) const { return derive_seed(opt_.seed, 0x71e0 + s); }

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

  static std::vector<std::uint64_t> input_hashes(const Placed& pl) {
    std::vector<std::uint64_t> h;
    for (const auto& t : pl.in) h.push_back(hash_parallel(t.data, t.desc.nbytes()));
    return h;
  }

  static std::uint64_t output_hash(const Placed& pl) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (const auto& t : pl.out) h = runner::fnv1a64(t.data, t.desc.nbytes(), h);
    return h;
  }

  json call_command(const Problem& p, const std::vector<const Placed*>& sets, int warmup,
                    long min_reps, long max_reps, double min_t, double max_t, bool verify) const {
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
    return {{"op", "call"},     {"sets", js},          {"attrs", p.attrs},
            {"warmup", warmup}, {"min_reps", min_reps}, {"max_reps", max_reps},
            {"min_time_s", min_t}, {"max_time_s", max_t}, {"verify", verify}};
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

  std::optional<Failure> check_guards(const Placed& pl, const std::vector<std::uint64_t>& in_h,
                                      const RunnerReply& reply) const {
    for (std::size_t i = 0; i < pl.in.size(); ++i)
      if (auto f = band_failure(pl.in_off[i], pl.in[i])) return f;
    for (std::size_t i = 0; i < pl.out.size(); ++i)
      if (auto f = band_failure(pl.out_off[i], pl.out[i])) return f;
    for (std::size_t i = 0; i < pl.in.size(); ++i)
      if (hash_parallel(pl.in[i].data, pl.in[i].desc.nbytes()) != in_h[i])
        return Failure{"FAIL", "input_mutation",
                       fmt::format("input '{}' was modified by the kernel (inputs are read-only)",
                                   pl.in[i].desc.name)};
    if (reply.body.contains("verify_hash") &&
        runner::hex64(output_hash(pl)) != reply.body.at("verify_hash").get<std::string>())
      return Failure{"FAIL", "async_write",
                     "outputs changed after the kernel returned (work escaping the call, e.g. a "
                     "background thread)"};
    return std::nullopt;
  }

  std::shared_ptr<const Outputs> oracle(const Problem& p, const std::string& regime,
                                        std::uint64_t seed, const Placed& pl) {
    std::string key = fmt::format("{}|{}|{}|{}|{}", p.kernel, p.size.label, dtype_name(p.dtype),
                                  regime, seed);
    for (double a : p.attrs) key += fmt::format("|{}", a);
    if (auto hit = oracle_cache().get(key)) return hit;
    std::vector<Array64> ins;
    for (const auto& t : pl.in) ins.push_back(to_array64(t));
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
      const auto c = compare_output(pl.out[i], ref[i], type_.compare_row_length(p, static_cast<int>(i)));
      if (rel_error) *rel_error = std::max(*rel_error, c.rel_error);
      if (!c.ok) {
        const std::string guard = c.failure == "poisoned"  ? "poisoned_output"
                                  : c.failure == "nan_inf" ? "nan_inf_pattern"
                                                           : "accuracy";
        return Failure{"FAIL", guard, fmt::format("output '{}': {}", pl.out[i].desc.name, c.reason)};
      }
    }
    return std::nullopt;
  }

  const KernelType& type_;
  const Backend& backend_;
  const EvalOptions& opt_;
  EvalReport& rep_;
  RunnerClient runner_;
  Placed placed_;
};

struct CaseSpec {
  Size size;
  DType dtype;
  std::string regime = "normal";
  std::uint64_t seed;
  std::string note;
};

}  // namespace

void clear_oracle_cache() { oracle_cache().clear(); }

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
  auto finish = [&] {
    rep.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
    return rep;
  };

  if (opts.progress) opts.progress(fmt::format("[build] {} ({})", source.string(), backend.name()));
  rep.build = backend.build(source);
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

  Session s(type, backend, opts, rep);
  if (!s.start(rep.build.library.string())) return finish();

  // Build the case list of each stage.
  const std::vector<DType>& dts = opts.dtypes;
  std::vector<std::vector<CaseSpec>> stages(5);
  std::vector<std::string> skipped(5);
  for (DType d : dts) {
    stages[0].push_back({type.smoke_size(), d, "normal", opts.seed, ""});
    stages[0].push_back({type.smoke_size(), d, "normal", rep.fresh_seed, "fresh_inputs"});
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
  const Size det_size = type.test_sizes().empty() ? type.smoke_size() : type.test_sizes().front();
  for (DType d : dts) stages[3].push_back({det_size, d, "normal", opts.seed, "determinism"});
  auto edges = type.edge_sizes();
  if (opts.quick && edges.size() > 3) {
    skipped[4] = fmt::format("--quick: {} of {} sizes", 3, edges.size());
    edges.resize(3);
  }
  for (const auto& sz : edges)
    for (DType d : dts) {
      stages[4].push_back({sz, d, "normal", opts.seed, ""});
      if (!opts.quick) stages[4].push_back({sz, d, "normal", rep.fresh_seed, "fresh seed"});
    }

  for (std::size_t si = 0; si < 5; ++si) {
    StageResult& st = rep.stages[si];
    if (stages[si].empty()) {
      st.status = "SKIP";
      st.detail = "the kernel type declares no cases for this stage";
      continue;
    }
    std::optional<Failure> fail;
    const CaseSpec* failed = nullptr;
    std::uint64_t first_hash = 0;
    for (const auto& c : stages[si]) {
      Problem p = type.make_problem(c.size, c.dtype);
      s.progress(fmt::format("[{}/5 {}] {} {}{}", si + 1, kStageNames[si], c.size.label,
                             dtype_name(c.dtype), c.note.empty() ? "" : " (" + c.note + ")"));
      double rel = 0;
      if (si == 3) {
        // Determinism: three calls on identical inputs must agree bitwise.
        fail = s.run_case(p, c.regime, c.seed, &rel, &first_hash);
        for (int rep_i = 1; rep_i < 3 && !fail; ++rep_i) {
          std::uint64_t h = 0;
          fail = s.run_case(p, c.regime, c.seed, &rel, &h, /*reuse=*/true);
          if (!fail && h != first_hash)
            fail = Failure{"FAIL", "determinism",
                           fmt::format("call {} on identical inputs gave different output bits "
                                       "(nondeterministic reduction order or a race)",
                                       rep_i + 1)};
        }
      } else if (c.note == "fresh_inputs") {
        // Same buffers, new values: a kernel that caches results by pointer or shape fails.
        fail = s.run_case(p, c.regime, c.seed, &rel, nullptr, /*reuse=*/false);
        if (fail && fail->guard == "accuracy") fail->guard = "fresh_inputs";
      } else {
        fail = s.run_case(p, c.regime, c.seed, &rel);
      }
      ++st.cases;
      st.max_rel_error = std::max(st.max_rel_error, rel);
      if (fail) {
        failed = &c;
        break;
      }
    }
    if (fail) {
      st.status = "FAIL";
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
    st.status = "PASS";
    st.detail = skipped[si];
  }

  if (!opts.timing) return finish();
  TimingResult tr;
  const Size tsize = opts.timing_size ? *opts.timing_size : type.benchmark_size(backend.name());
  const Problem tp = type.make_problem(tsize, opts.timing_dtype);
  tr.size_label = tsize.label;
  tr.dtype = opts.timing_dtype;
  if (auto f = s.time_problem(tp, tr)) {
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
  Ceilings c = opts.ceilings ? *opts.ceilings : local_cpu_ceilings(false, opts.progress);
  tr.roofline = roofline_point(c, opts.timing_dtype, tr.flops, tr.bytes, tr.median_us * 1e-6);
  static std::atomic<bool> recalibrated{false};
  if (tr.roofline.pct_peak > 100.0 && !opts.ceilings && !recalibrated.exchange(true)) {
    // Cached ceilings measured while the machine was busy are too low; re-measure once per
    // process before calling a result impossible.
    s.progress("[timing] above the cached ceiling: re-measuring this machine's ceilings once");
    c = local_cpu_ceilings(true, opts.progress);
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
