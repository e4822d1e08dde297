#include "optimize/pool.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <regex>
#include <stdexcept>

#include "core/paths.h"
#include "core/process.h"
#include "backends/backend.h"
#include "core/util.h"
#include "optimize/cache.h"

extern char** environ;

namespace vb::opt {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool pool_requested(const PoolOptions& o) { return o.workers > 0 || !o.scheduler.empty(); }

void check_pool_options(const PoolOptions& o, bool workers_given) {
  if (workers_given && !o.scheduler.empty())
    throw std::invalid_argument(
        "--workers and --scheduler exclude each other: --workers N starts a local cluster, "
        "--scheduler ADDRESS joins an existing one; pass one of them");
  if (workers_given && o.workers < 1)
    throw std::invalid_argument(fmt::format(
        "--workers must be at least 1 (got {}); leave it out for the sequential loop", o.workers));
  if (!o.scheduler.empty()) {
    static const std::regex addr(R"(^(tcp|tls)://[A-Za-z0-9._\-\[\]:]+:\d{1,5}$)");
    if (!std::regex_match(o.scheduler, addr))
      throw std::invalid_argument("--scheduler '" + o.scheduler +
                                  "' is not a Dask scheduler address; pass what `dask scheduler` "
                                  "prints, e.g. tcp://10.0.0.5:8786");
  }
  if (!(o.task_timeout_s > 0) || !(o.no_worker_timeout_s > 0) || !(o.connect_timeout_s > 0))
    throw std::invalid_argument("the pool's timeouts must be positive seconds");
}

namespace {

bool read_line(int fd, std::string& buf, std::string& line) {
  while (true) {
    const auto nl = buf.find('\n');
    if (nl != std::string::npos) {
      line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      return true;
    }
    char tmp[65536];
    const ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(tmp, static_cast<std::size_t>(n));
  }
}

}  // namespace

Pool::Pool(const PoolOptions& o) {
  check_pool_options(o, o.workers != 0);
  if (!pool_requested(o)) throw std::invalid_argument("a pool needs --workers N or --scheduler ADDRESS");
  const std::string py = project_python();
  if (!have_program(py))
    throw std::runtime_error("no Python interpreter '" + py +
                             "' for the worker pool; run scripts/setup.sh (it makes .venv with "
                             "Dask) or set VB_PYTHON");
  std::vector<std::string> argv = {py, "-m", "vladbud.pool"};
  if (o.workers > 0) argv.insert(argv.end(), {"--workers", std::to_string(o.workers)});
  else argv.insert(argv.end(), {"--scheduler", o.scheduler});
  // The pool learns the kinds of the folders' devices, never the backends' names.
  std::string kinds;
  for (const auto& b : o.backends) {
    const std::string k = device_kind_name(require_backend(b).device().kind());
    if (("," + kinds + ",").find("," + k + ",") == std::string::npos)
      kinds += (kinds.empty() ? "" : ",") + k;
  }
  if (!kinds.empty()) argv.insert(argv.end(), {"--devices", kinds});
  if (o.workers > 0) {
    // One function names the architecture for the build workers and the GPU workers alike:
    // the backend's own target_arch() (for CUDA: VB_CUDA_ARCH, else the first GPU's compute
    // capability), of the first folder backend that builds for a selectable architecture.
    std::string arch = o.cuda_arch;
    for (const auto& b : o.backends) {
      const Backend& be = require_backend(b);
      if (!arch.empty() || !be.has_target_arch()) continue;
      try {
        arch = be.target_arch();
      } catch (const std::exception&) {
        // No GPU and no VB_CUDA_ARCH: no GPU worker either; device_resource() says so.
      }
    }
    if (!arch.empty()) argv.insert(argv.end(), {"--cuda-arch", arch});
  }
  argv.insert(argv.end(), {"--task-timeout", fmt::format("{}", o.task_timeout_s),
                           "--no-worker-timeout", fmt::format("{}", o.no_worker_timeout_s),
                           "--connect-timeout", fmt::format("{}", o.connect_timeout_s)});
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot make pipes for the pool: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
  if (!o.log.empty()) {
    fs::create_directories(o.log.parent_path());
    posix_spawn_file_actions_addopen(&fa, 2, o.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  // The environment: PYTHONPATH with this tree's bridge package first; VB = this binary, so
  // that local workers run the same vladbud.
  std::vector<std::string> env;
  const std::string pkg = (vladbud_home() / "python").string();
  bool have_vb = false;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    if (s.rfind("PYTHONPATH=", 0) == 0) continue;
    if (s.rfind("VB=", 0) == 0) have_vb = true;
    env.push_back(s);
  }
  const char* old = std::getenv("PYTHONPATH");
  env.push_back("PYTHONPATH=" + pkg + (old && *old ? ":" + std::string(old) : ""));
  if (!have_vb) env.push_back("VB=" + fs::read_symlink("/proc/self/exe").string());
  env.push_back("PYTHONUNBUFFERED=1");
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, py.c_str(), &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(to_child[0]);
  ::close(from_child[1]);
  if (rc != 0) {
    ::close(to_child[1]);
    ::close(from_child[0]);
    throw std::runtime_error("cannot start " + py + " -m vladbud.pool: " + std::strerror(rc));
  }
  pid_ = pid;
  in_fd_ = to_child[1];
  out_fd_ = from_child[0];
  ::signal(SIGPIPE, SIG_IGN);  // a dead pool is a lost reply, not a dead optimizer
  std::string buf, line;
  json ready;
  while (true) {
    if (!read_line(out_fd_, buf, line)) {
      int st = 0;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
      throw std::runtime_error(fmt::format(
          "the worker pool (python -m vladbud.pool) exited before it was ready{}",
          o.log.empty() ? std::string() : "; its log: " + o.log.string()));
    }
    try {
      ready = json::parse(line);
    } catch (const json::exception&) {
      continue;  // a stray line of a library's output
    }
    if (ready.is_object() && (ready.contains("ready") || ready.contains("error"))) break;
  }
  if (ready.contains("error")) {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    ::close(in_fd_);
    ::close(out_fd_);
    throw std::runtime_error("the worker pool could not start: " + ready["error"].get<std::string>());
  }
  scheduler_ = ready.value("scheduler", "");
  workers_ = ready.value("workers", 0);
  const json res = ready.value("resources", json::object());
  for (const auto& [k, v] : res.items()) resources_[k] = v.get<int>();
  const json slots = ready.value("slots", json::object());
  for (const auto& [k, v] : slots.items()) slots_[k] = v.get<int>();
  // The reader keeps the remaining buffered bytes.
  reader_ = std::thread([this, buf]() mutable {
    std::string line;
    while (read_line(out_fd_, buf, line)) {
      json j;
      try {
        j = json::parse(line);
      } catch (const json::exception&) {
        continue;
      }
      std::lock_guard<std::mutex> lk(mu_);
      if (j.contains("event")) {
        events_.push_back({j.value("event", ""), j.value("worker", ""), j.value("time", 0.0)});
      } else if (j.contains("id") && j["id"].is_number_integer()) {
        const int id = j["id"].get<int>();
        if (cancelled_.count(id)) continue;  // given up: nobody waits for it
        if (j.value("lost", false)) ++lost_;
        replies_[id] = j;
      }
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lk(mu_);
    dead_ = true;
    dead_reason_ = "the worker pool process exited";
    cv_.notify_all();
  });
}

Pool::~Pool() {
  if (in_fd_ >= 0) {
    const std::string bye = "{\"op\": \"shutdown\"}\n";
    (void)!::write(in_fd_, bye.data(), bye.size());
    ::close(in_fd_);
  }
  if (pid_ > 0) {
    // Dask closes its local cluster in a few seconds; past 30 s the pool is killed.
    int st = 0;
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      ::usleep(100000);
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
    }
  }
  if (reader_.joinable()) reader_.join();
  if (out_fd_ >= 0) ::close(out_fd_);
}

int Pool::submit(json request) {
  std::lock_guard<std::mutex> lk(mu_);
  const int id = next_id_++;
  request["id"] = id;
  if (dead_) {
    replies_[id] = {{"id", id}, {"lost", true}, {"reason", dead_reason_}};
    ++lost_;
    return id;
  }
  const std::string line = request.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::size_t off = 0;
  while (off < line.size()) {
    const ssize_t w = ::write(in_fd_, line.data() + off, line.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      replies_[id] = {{"id", id}, {"lost", true}, {"reason", "the worker pool process is gone"}};
      ++lost_;
      break;
    }
    off += static_cast<std::size_t>(w);
  }
  return id;
}

json Pool::wait(int id) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return replies_.count(id) || dead_; });
  auto it = replies_.find(id);
  if (it == replies_.end()) {
    ++lost_;
    return {{"id", id}, {"lost", true}, {"reason", dead_reason_}};
  }
  json r = std::move(it->second);
  replies_.erase(it);
  return r;
}

std::optional<json> Pool::wait_until(int id, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_until(lk, deadline, [&] { return replies_.count(id) || dead_; })) return std::nullopt;
  auto it = replies_.find(id);
  if (it == replies_.end()) {
    ++lost_;
    return json{{"id", id}, {"lost", true}, {"reason", dead_reason_}};
  }
  json r = std::move(it->second);
  replies_.erase(it);
  return r;
}

void Pool::cancel(int id) {
  std::lock_guard<std::mutex> lk(mu_);
  cancelled_.insert(id);
  auto it = replies_.find(id);
  if (it != replies_.end()) {
    if (it->second.value("lost", false)) --lost_;  // it arrived lost before anyone waited
    replies_.erase(it);
  }
  if (dead_) return;
  const std::string line = json{{"op", "cancel"}, {"id", id}}.dump() + "\n";
  (void)!::write(in_fd_, line.data(), line.size());
}

int Pool::slots(const std::string& resource) const {
  auto it = slots_.find(resource);
  return it == slots_.end() ? 0 : it->second;
}

int default_batch(const Pool& pool, const std::string& backend) {
  return std::max(1, pool.slots(pool.device_resource(backend))) + 1;
}

std::string Pool::device_resource(const std::string& backend) const {
  // The pool's resource names: "cpu-<model>" for host devices, "gpu-<name>" for GPUs
  // (python/vladbud/pool.py cpu_resource, gpu_resource).
  const DeviceKind kind = require_backend(backend).device().kind();
  const std::string prefix = kind == DeviceKind::Host ? "cpu-" : "gpu-";
  std::string best;
  int n = 0;
  for (const auto& [k, v] : resources_)
    if (k.rfind(prefix, 0) == 0 && v > n) best = k, n = v;
  if (best.empty()) {
    std::string have;
    for (const auto& [k, v] : resources_) have += fmt::format("{}{}={}", have.empty() ? "" : ", ", k, v);
    throw std::runtime_error(fmt::format(
        "no worker of the pool at {} owns a {} device (worker resources: {}); start one with "
        "`dask worker {} --resources \"{}NAME=1\"`",
        scheduler_, backend, have.empty() ? "none" : have, scheduler_, prefix));
  }
  return best;
}

std::vector<PoolEvent> Pool::events() const {
  std::lock_guard<std::mutex> lk(mu_);
  return events_;
}

int Pool::lost() const {
  std::lock_guard<std::mutex> lk(mu_);
  return lost_;
}

std::vector<fs::path> kernel_folders(const fs::path& ws) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(ws / "kernels", ec)) return out;
  for (const auto& e : fs::directory_iterator(ws / "kernels", ec))
    if (e.is_directory() && fs::exists(e.path() / "problem.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> folder_backends(const std::vector<fs::path>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    try {
      const std::string b = read_problem_file(d).backend;
      if (std::find(out.begin(), out.end(), b) == out.end()) out.push_back(b);
    } catch (const std::exception&) {
    }
  }
  return out;
}

int parallel_folders(const Pool& pool) {
  int n = 0;
  for (const auto& [k, v] : pool.resources())
    if (k.rfind("gpu-", 0) == 0 || k.rfind("cpu-", 0) == 0) n += v;
  return std::max(2, n);
}

std::string format_resources(const Pool& pool) {
  std::string s;
  for (const auto& [k, v] : pool.resources()) s += fmt::format("{}{}={}", s.empty() ? "" : ", ", k, v);
  return s.empty() ? "none" : s;
}

std::string format_pool_line(const Pool& pool, int batch) {
  std::string slots, windows;
  for (const auto& [k, v] : pool.resources()) {
    const int n = pool.slots(k);
    if (n <= 0) continue;
    slots += fmt::format("{}{}={}", slots.empty() ? "" : ", ", k, n);
    windows += fmt::format("{}{} on {}", windows.empty() ? "" : ", ", std::max(1, n) + 1, k);
  }
  return fmt::format("worker pool: {} workers at {} (resources {}); measurement slots {}; "
                     "candidates in flight per folder: {}",
                     pool.workers(), pool.scheduler(), format_resources(pool),
                     slots.empty() ? "none" : slots,
                     batch > 0 ? fmt::format("{} (--batch)", batch)
                               : (windows.empty() ? "2" : windows) + " (the slots + 1)");
}

json pool_summary(const Pool& pool) {
  json ev = json::array();
  for (const auto& e : pool.events())
    ev.push_back({{"event", e.kind}, {"worker", e.worker}, {"time", e.time}});
  return {{"scheduler", pool.scheduler()}, {"workers", pool.workers()},
          {"resources", pool.resources()}, {"lost", pool.lost()}, {"events", ev}};
}

std::string format_pool_summary(const json& s) {
  std::string out = fmt::format("pool: {} workers at {}, {} task(s) lost\n", s.value("workers", 0),
                                s.value("scheduler", std::string()), s.value("lost", 0));
  const json events = s.value("events", json::array());
  for (const auto& e : events)
    if (e.value("event", "") == "worker-left")
      out += fmt::format("pool: worker {} left (died or was stopped); its tasks went to the others "
                         "or were recorded as lost\n",
                         e.value("worker", std::string()));
  return out;
}

namespace {

const char* mode_name(EvalMode m) {
  switch (m) {
    case EvalMode::Quick: return "quick";
    case EvalMode::Full: return "full";
    case EvalMode::TimingOnly: return "timing";
  }
  return "quick";
}

class PoolMeasurer : public Measurer {
 public:
  PoolMeasurer(Pool& pool, const KernelProblem& p, std::string ext)
      : pool_(pool), problem_(p), ext_(std::move(ext)), resource_(pool.device_resource(p.backend)),
        self_(fs::read_symlink("/proc/self/exe").string()) {}

  /// The workers' evaluators screen at screen_size_for(problem), as a local one would.
  std::string screen_label() const override {
    const std::string l = screen_size_for(problem_).label;
    return l == problem_.size.label ? "" : l;
  }

  Measurement measure(const fs::path& source, EvalMode mode) override {
    const std::string text = read_file(source);
    const std::string key = std::string(mode_name(mode)) + "|" + content_hash(text);
    Ahead a;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = pending_.find(key);
      if (it != pending_.end()) a = it->second, pending_.erase(it);
    }
    if (a.id < 0) {
      json req = request(mode_name(mode), text, resource_);
      std::lock_guard<std::mutex> lk(mu_);
      auto it = built_ahead_.find(content_hash(text));
      if (it != built_ahead_.end()) {  // built ahead (prebuild): after that build, not a second one
        req["after"] = {it->second};
        a.build = it->second;
        built_ahead_.erase(it);
      }
      a.id = pool_.submit(req);
    }
    const auto reply = wait(a);
    if (!reply) {
      Measurement m;
      m.verdict = "CANCELLED";
      m.reason = "the optimizer's budget ran out before this measurement came back";
      return m;
    }
    return to_measurement(*reply);
  }

  void prefetch(const std::vector<fs::path>& sources, EvalMode mode) override {
    for (const auto& s : sources) {
      const std::string text = read_file(s);
      const std::string key = std::string(mode_name(mode)) + "|" + content_hash(text);
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (pending_.count(key)) continue;
      }
      // The build on any worker (it fills the build cache; one started by prebuild() is
      // waited for, not repeated), the measurement after it on a worker that owns the device.
      int b = -1;
      {
        std::lock_guard<std::mutex> lk(mu_);
        auto it = built_ahead_.find(content_hash(text));
        if (it != built_ahead_.end()) b = it->second, built_ahead_.erase(it);
      }
      if (b < 0) b = pool_.submit(request("build", text, ""));
      json m = request(mode_name(mode), text, resource_);
      m["after"] = {b};
      const int id = pool_.submit(m);
      std::lock_guard<std::mutex> lk(mu_);
      pending_[key] = {id, b};
    }
  }

  void prebuild(const std::vector<fs::path>& sources) override {
    for (const auto& s : sources) {
      const std::string text = read_file(s);
      const std::string h = content_hash(text);
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (built_ahead_.count(h)) continue;
      }
      const int b = pool_.submit(request("build", text, ""));
      std::lock_guard<std::mutex> lk(mu_);
      built_ahead_[h] = b;
    }
  }

  void discard_prefetched() override {
    std::map<std::string, Ahead> drop;
    std::map<std::string, int> builds;
    {
      std::lock_guard<std::mutex> lk(mu_);
      drop.swap(pending_);
      builds.swap(built_ahead_);
    }
    for (const auto& [k, a] : drop) {
      pool_.cancel(a.id);
      if (a.build >= 0) pool_.cancel(a.build);
    }
    for (const auto& [k, b] : builds) pool_.cancel(b);
  }

  void set_deadline(std::chrono::steady_clock::time_point d) override {
    std::lock_guard<std::mutex> lk(mu_);
    deadline_ = d;
  }

  Interleaved interleave(const fs::path& best, const fs::path& cand, int rounds,
                         int first_round) override {
    json r = request("compare", read_file(cand), resource_);
    r["best"] = read_file(best);
    r["rounds"] = rounds;
    r["first_round"] = first_round;
    const auto got = wait({pool_.submit(r), -1});
    Interleaved out;
    if (!got) {
      out.cancelled = true;
      out.error = "the optimizer's budget ran out before the interleaved timing came back";
      out.last_cand.verdict = "CANCELLED";
      return out;
    }
    const json& reply = *got;
    if (reply.value("lost", false)) {
      out.lost = true;
      out.error = "the interleaved timing was lost: " + reply.value("reason", std::string("unknown"));
      out.last_cand.verdict = "LOST";
      return out;
    }
    const json& res = reply.at("result");
    if (res.contains("harness_error")) {
      out.error = "the interleaved timing could not run: " + res["harness_error"].get<std::string>();
      out.last_cand.verdict = "FAIL";
      out.last_cand.guard = "harness_error";
      return out;
    }
    return interleaved_from_json(res);
  }

  std::string target() const override { return "local-" + problem_.backend + " via pool " + resource_; }
  std::string cache_scope() const override { return resource_; }

 private:
  struct Ahead {
    int id = -1;     ///< the measurement's request
    int build = -1;  ///< the build before it (prefetched), -1 when none
  };

  // The reply to `a.id`, or nullopt when the deadline passed first (then `a` is cancelled).
  std::optional<json> wait(const Ahead& a) {
    std::optional<std::chrono::steady_clock::time_point> d;
    {
      std::lock_guard<std::mutex> lk(mu_);
      d = deadline_;
    }
    if (!d) return pool_.wait(a.id);
    auto r = pool_.wait_until(a.id, *d);
    if (!r) {
      pool_.cancel(a.id);
      if (a.build >= 0) pool_.cancel(a.build);
    }
    return r;
  }

  json request(const std::string& op, const std::string& text, const std::string& resource) const {
    return {{"op", op},          {"resource", resource}, {"problem", problem_.raw},
            {"ext", ext_},       {"source", text},       {"vladbud", self_}};
  }

  static Measurement to_measurement(const json& reply) {
    Measurement m;
    if (reply.value("lost", false)) {
      m.verdict = "LOST";
      m.reason = reply.value("reason", std::string("unknown"));
      return m;
    }
    const json& res = reply.at("result");
    if (res.contains("harness_error")) {
      m.verdict = "FAIL";
      m.guard = "harness_error";
      m.failed_stage = "build";
      m.reason = "the pool's worker could not evaluate: " + res["harness_error"].get<std::string>();
      return m;
    }
    return measurement_from_json(res);
  }

  Pool& pool_;
  KernelProblem problem_;
  std::string ext_, resource_, self_;
  std::mutex mu_;
  std::map<std::string, Ahead> pending_;  ///< prefetched: mode|hash -> its requests
  std::map<std::string, int> built_ahead_;  ///< prebuild(): content hash -> its build request
  std::optional<std::chrono::steady_clock::time_point> deadline_;
};

}  // namespace

std::unique_ptr<Measurer> make_pool_measurer(Pool& pool, const KernelProblem& problem,
                                             const std::string& ext) {
  return std::make_unique<PoolMeasurer>(pool, problem, ext);
}

}  // namespace vb::opt
