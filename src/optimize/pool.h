// The optimizer's worker pool (issue 21): experiments fanned out over Dask distributed.
// `vladbud optimize|autotune --workers N` starts a local Dask cluster (one worker per GPU, the
// rest build workers; for the CPU backend one worker per group of cores), `--scheduler ADDRESS`
// joins an existing one whose workers joined with Dask's own `dask worker ADDRESS --resources
// "gpu-h200=1"`. The C++ side starts `python -m vladbud.pool` (python/vladbud/pool.py) and talks
// to it by JSON lines; builds go to any worker, measurements only to workers owning the folder's
// device (a Dask resource), one comparison never spans two devices, and the keep/revert decision
// stays here (loop.cpp). Without either flag nothing here runs: the loop is today's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "optimize/measure.h"
#include "optimize/problem_file.h"

namespace vb::opt {

/// How to reach the workers.
struct PoolOptions {
  int workers = 0;          ///< --workers N: a local cluster of N workers (0: not set)
  /// A local cluster's CUDA architecture: every worker builds for it (VB_CUDA_ARCH), so a build
  /// done ahead has the key the measuring GPU worker computes. "" = the target_arch() of the
  /// first folder backend with a selectable architecture (Backend::has_target_arch) when it can
  /// be determined (a GPU or VB_CUDA_ARCH here), else none.
  std::string cuda_arch;
  std::string scheduler;    ///< --scheduler tcp://HOST:PORT: an existing Dask scheduler
  /// Registered backends of the kernel folders; the pool gets their devices' kinds (a worker
  /// per GPU for a GPU device, a share of the cores for a host one). Throws
  /// std::invalid_argument (from Pool's constructor) for an unregistered name.
  std::vector<std::string> backends;
  double task_timeout_s = 1800;      ///< one task longer than this is given up (lost)
  double no_worker_timeout_s = 300;  ///< a request waits this long with no worker for its device
  double connect_timeout_s = 30;     ///< to reach the scheduler / start the local workers
  std::filesystem::path log;         ///< the pool's stderr (Dask's logs); empty: inherited
};

/// True when the options ask for a pool at all (--workers or --scheduler given).
bool pool_requested(const PoolOptions& o);

/// Checks the flags before anything starts: throws std::invalid_argument naming the problem
/// and the fix for --workers < 1 (when given), both --workers and --scheduler, a scheduler
/// address that is not tcp://HOST:PORT (or tls://), or non-positive timeouts.
void check_pool_options(const PoolOptions& o, bool workers_given);

/// One event the pool reported (a worker joining or leaving), for the run's report.
struct PoolEvent {
  std::string kind;    ///< "worker-joined", "worker-left"
  std::string worker;  ///< the worker's address
  double time = 0;     ///< Unix seconds
};

/// The client of one `python -m vladbud.pool` process. Thread-safe: several loops may submit.
class Pool {
 public:
  /// Starts the pool process and waits for its ready line. Throws std::runtime_error with the
  /// pool's own message (scheduler unreachable, Dask not installed, ...) when it cannot start.
  explicit Pool(const PoolOptions& o);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// Sends a request (see pool.py's protocol; "id" is assigned here) and returns its id.
  int submit(nlohmann::json request);
  /// Waits for the reply to `id` ({"ok": true, "result": ...} or {"lost": true, "reason"}).
  /// A pool process that died answers every pending request as lost.
  nlohmann::json wait(int id);
  /// wait() until `deadline` (steady clock): the reply, or nullopt when the deadline passed
  /// first (the request is then still pending; cancel() it or wait again).
  std::optional<nlohmann::json> wait_until(int id, std::chrono::steady_clock::time_point deadline);
  /// Gives up request `id`: a queued task never starts, a running one's result is dropped on
  /// arrival; it never counts as lost and wait() must not be called for it afterwards.
  void cancel(int id);

  /// The scheduler's address, worker count, and resources ({"gpu-h200": 1, ...}) at start.
  const std::string& scheduler() const { return scheduler_; }
  int workers() const { return workers_; }
  const std::map<std::string, int>& resources() const { return resources_; }
  /// Measurements (timed tasks: quick, timing, compare) the workers owning device resource
  /// `resource` run at once: the timed task takes every unit of one worker, so one per worker
  /// owning it (pool.py's measurement_slots; a worker started with --resources "gpu-h200=2"
  /// is still one). 0 when no worker owns it.
  int slots(const std::string& resource) const;
  /// The device resource measurements of `backend` go to: for a backend whose device is the
  /// host the "cpu-*" resource held by the most workers, for a GPU device the "gpu-*" one (ties:
  /// the first by name). Throws std::invalid_argument for an unregistered backend and
  /// std::runtime_error naming the fix when no worker owns such a device.
  std::string device_resource(const std::string& backend) const;
  /// Events so far (workers that joined or left).
  std::vector<PoolEvent> events() const;
  /// Lost requests so far.
  int lost() const;

 private:
  void read_loop();
  int pid_ = -1, in_fd_ = -1, out_fd_ = -1;
  std::string scheduler_;
  int workers_ = 0;
  std::map<std::string, int> resources_, slots_;
  std::set<int> cancelled_;  ///< ids given up: their replies are dropped
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, nlohmann::json> replies_;
  std::vector<PoolEvent> events_;
  int next_id_ = 1, lost_ = 0;
  bool dead_ = false;
  std::string dead_reason_;
  std::thread reader_;
};

/// The kernel folders of a workspace (workspace/kernels/* holding problem.json), sorted; empty
/// when there is none (the orchestrator then says what to do).
std::vector<std::filesystem::path> kernel_folders(const std::filesystem::path& workspace);

/// The distinct backends named by the folders' problem.json files (unreadable ones skipped).
std::vector<std::string> folder_backends(const std::vector<std::filesystem::path>& dirs);

/// The default window of a folder's loop over `pool` (OptimizeOptions::batch 0): the
/// measurement slots of the device its `backend` measures on, plus one candidate built ahead.
/// A larger window only queues screens on the device and delays the decisions (each candidate
/// is judged in proposal order, as soon as its screen is back). Throws like device_resource().
int default_batch(const Pool& pool, const std::string& backend);

/// Kernel folders the orchestrator runs at once over `pool`: the number of device units the
/// workers own (the "gpu-*" and "cpu-*" resources summed), at least 2 (so that one folder's
/// candidates build while another's are measured).
int parallel_folders(const Pool& pool);

/// "gpu-h200=1, cpu-amd-epyc=8" (or "none").
std::string format_resources(const Pool& pool);

/// The run's pool line: "worker pool: 9 workers at tcp://... (resources gpu-h200=2); measurement
/// slots gpu-h200=1; candidates in flight per folder: 2 (the slots + 1)" (or "N (--batch)" when
/// `batch` > 0).
std::string format_pool_line(const Pool& pool, int batch);

/// The pool's part of a run summary: {"scheduler", "workers", "resources", "lost",
/// "events": [{"event", "worker", "time"}]}.
nlohmann::json pool_summary(const Pool& pool);

/// The text lines of pool_summary: workers, lost experiments, and each worker that left.
std::string format_pool_summary(const nlohmann::json& summary);

/// A Measurer whose measurements run as pool tasks on the workers owning the problem's device
/// (Pool::device_resource): measure() submits (or finds the prefetched task) and waits;
/// prefetch() submits a build task (any worker) and the measurement after it; interleave() is
/// one "compare" task. A lost task comes back as verdict "LOST". Past set_deadline()'s time a
/// wait ends: verdict "CANCELLED" (interleave: `cancelled`) and the request and its build are
/// cancelled (Pool::cancel); discard_prefetched() cancels every prefetched pair not collected.
/// `ext` is the source extension.
std::unique_ptr<Measurer> make_pool_measurer(Pool& pool, const KernelProblem& problem,
                                             const std::string& ext);

}  // namespace vb::opt
