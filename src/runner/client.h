// Parent side of the isolated runner (DESIGN §4): spawns vladbud-runner, owns the shared
// arena with guard bands, sends commands and turns a crash or hang into a verdict.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/protocol.h"

namespace vb {

/// Outcome of one command sent to the runner.
struct RunnerReply {
  enum class Kind { Ok, Error, Timeout, Crash };
  Kind kind = Kind::Crash;
  nlohmann::json body;       ///< the reply object (Ok and Error)
  std::string message;       ///< error / crash / timeout description
  std::string guard;         ///< guard name reported by the runner, if any
  double parent_wall_s = 0;  ///< the parent's own clock around the command
};

/// A child runner process plus the shared memory arena it maps.
///
/// Layout of each buffer in the arena: [guard band][data, 64-byte aligned][guard band]; the
/// bands hold a large finite value in every dtype (runner::kGuardBandWord) that check_guards() verifies after every
/// call, so a write of even one element past either end of any buffer is caught, and a read
/// there poisons the result it feeds.
class RunnerClient {
 public:
  /// Guard band size on each side of every buffer (bytes).
  static constexpr std::size_t kGuardBytes = runner::kGuardBandBytes;
  /// The uids (and gids) runners drop to when VladBud runs as root: one per runner process,
  /// kSandboxIdBase + (its pid mod kSandboxIdSpan), so no two live runners of one pid namespace
  /// share one (runners in two containers without user namespaces may: pids repeat there).
  /// A shared uid (the former "nobody") let one runner's candidate reach every other runner
  /// running at the same time (the pool runs evaluators side by side): the kernel checks only
  /// uid equality for prlimit64, setpriority, sched_setaffinity/setscheduler, ioprio_set and
  /// SIGIO ownership (F_SETOWN), and a runner is dumpable from its exec until it closes itself.
  /// 0x7E000000 + [0, 2^22) (pid_max is at most 2^22) lies above the container ranges systemd
  /// hands out (0x00080000-0x6FFFFFFF) and below its reserved 0x7FFE0000 and the 2^31 limit of
  /// signed uid_t users (systemd's "UID and GID ranges" document); the ids need no passwd entry.
  static constexpr unsigned kSandboxIdBase = 0x7E000000u;
  static constexpr unsigned kSandboxIdSpan = 1u << 22;
  /// The sandbox uid of the runner process `pid` (see kSandboxIdBase).
  static unsigned sandbox_id(long pid) {
    return kSandboxIdBase + static_cast<unsigned>(pid) % kSandboxIdSpan;
  }
  /// Which ids this process can drop runners to, from /proc/self/uid_map and gid_map (a user
  /// namespace, e.g. rootless podman or userns-remapped docker, often maps only 65536 ids):
  /// `per_runner` when [kSandboxIdBase, + kSandboxIdSpan) is mapped for uids and gids, else one
  /// `shared` id for every runner (65534 when mapped, else the highest mapped id), with `note`
  /// saying that concurrent runners can then reach each other and why. Computed once.
  struct SandboxIds {
    bool per_runner = true;
    unsigned shared = 65534;
    std::string note;
    /// The uid/gid for the runner process `pid`.
    unsigned for_pid(long pid) const { return per_runner ? sandbox_id(pid) : shared; }
  };
  static const SandboxIds& sandbox_ids();
  /// The running runner's process id, or -1.
  long pid() const { return pid_; }
  /// RLIMIT_NPROC (processes plus threads of the runner's uid) set for the runner when
  /// VladBud runs as root: max(4096, 16 x hardware threads). Room for a correct kernel's thread
  /// team on any host (e.g. OMP_NUM_THREADS=300, or one thread per hardware thread on a
  /// 384-thread machine), while still ending a fork bomb.
  static std::size_t sandbox_process_limit();

  /// `flavour` is how the runner executes kernels (a backend's Device::runner_flavour(); passed
  /// as "--backend <flavour_name>"). Memory limit: the child's address space (arena included)
  /// is capped at `memory_limit_bytes` (not under sanitizers, which reserve terabytes of shadow
  /// memory); exceeding it makes allocations fail in the candidate. With the Cuda flavour the
  /// address space is not capped (a CUDA context reserves a huge virtual range); the limit is
  /// instead the device memory the candidate may hold beyond its buffers.
  explicit RunnerClient(runner::Flavour flavour, std::size_t memory_limit_bytes = 16ull << 30);
  ~RunnerClient();
  RunnerClient(const RunnerClient&) = delete;
  RunnerClient& operator=(const RunnerClient&) = delete;

  /// Starts the runner process (and loads `library`). Throws std::runtime_error if the runner
  /// binary cannot be started; a library the runner cannot load gives an Error reply.
  RunnerReply start(const std::string& library, std::chrono::milliseconds timeout);
  /// Runs the runner through a launcher instead of executing it directly: the child executes
  /// `prefix[0]` (an absolute path) with arguments prefix[1..], `runner`, "--backend", flavour
  /// (e.g. {"/usr/bin/qemu-aarch64", "-cpu", "max,sve=on", "-L", "/usr/aarch64-linux-gnu"} and a
  /// cross-built runner). An empty prefix restores the direct execution of runner_path().
  /// Takes effect at the next start().
  void set_launcher(std::vector<std::string> prefix, std::string runner);

  /// Directories (absolute paths) the runner must be able to read after dropping to the sandbox
  /// uid, e.g. the Python installation of a runner script under /root (mode 0700): in the
  /// runner's private mount namespace their blocking ancestor is replaced by a tmpfs that holds
  /// only read-only bind mounts of them. Takes effect at the next start(); ignored when the
  /// runner gets no private file system (then it also keeps the caller's uid).
  void set_reachable(std::vector<std::string> dirs) { reach_ = std::move(dirs); }

  /// True while the child process is running.
  bool alive() const { return pid_ > 0; }

  /// Resets the arena to hold `total_bytes` of buffers plus their guard bands (grows the
  /// shared memory and remaps it in both processes when needed). Invalidates old offsets.
  void reset_arena(std::size_t total_bytes);
  /// Bytes needed in reset_arena() for a buffer of `bytes` (bands and alignment included).
  static std::size_t footprint(std::size_t bytes);
  /// Allocates a buffer of `bytes` after reset_arena(); returns its offset. Guard bands filled.
  std::size_t alloc(std::size_t bytes);
  /// Pointer to arena offset `off` in this process.
  char* ptr(std::size_t off) const { return base_ + off; }
  /// Checks the bands around the buffer at `off` of `bytes`; on damage returns a description
  /// ("wrote 4 bytes past the end (first at +0)"), else "".
  std::string check_guards(std::size_t off, std::size_t bytes) const;

  /// Sends a command and waits up to `timeout` for the reply. Timeout kills the runner
  /// (Kind::Timeout); a dead runner gives Kind::Crash with the signal and its last stderr.
  RunnerReply command(const nlohmann::json& cmd, std::chrono::milliseconds timeout);

  /// Stepped calls (issue 18 classes 7 and 8; see "stepped" in protocol.h). Whether this
  /// runner can be stepped: not under a sanitizer, whose process is not the runner's.
  bool can_step() const { return sanitizer_exe_.empty(); }
  /// Waits up to `timeout` for the next line of the runner without sending a command (a step
  /// report or the final reply of a stepped call).
  RunnerReply next_message(std::chrono::milliseconds timeout);
  /// Waits up to `timeout` until every thread of the runner is stopped (it stops itself after
  /// each step report). Kind::Ok when stopped; Crash when it died; Timeout (runner killed) when
  /// some thread still runs, e.g. because the candidate sent the process SIGCONT itself.
  RunnerReply wait_stopped(std::chrono::milliseconds timeout);
  /// Sends one line (a "go") without waiting for a reply, then continues the stopped runner
  /// (SIGCONT). False when the runner is gone.
  bool resume_with(const nlohmann::json& line);
  /// Kills the runner (if alive) and reaps it. Under a sanitizer the runner is first asked
  /// to exit and given time to print the sanitizer's summary (collected in sanitizer_log()).
  void stop();

  /// Runs every later start() of the runner under NVIDIA compute-sanitizer (`tool`:
  /// "memcheck", "racecheck", "initcheck", "synccheck") found at `sanitizer_exe`. "" = off.
  void set_sanitizer(std::string sanitizer_exe, std::string tool);
  /// Everything the runner processes wrote to stderr while under the sanitizer (capped at
  /// 1 MiB), including compute-sanitizer's findings and "ERROR SUMMARY" lines.
  const std::string& sanitizer_log() const { return sanitizer_log_; }

  /// The last few KiB (at least 4) the runner process wrote to its stdout and stderr since the
  /// last start(), as far as they were read while waiting for replies: the candidate's and the
  /// driver's diagnostics (the tests' mock driver writes its launch records there).
  const std::string& output_tail() const { return stderr_tail_; }

  /// "" when the last start() gave the runner a private file system view (issue 18 class 5):
  /// its own mount and IPC namespaces, every inherited mount read-only, and a fresh empty
  /// tmpfs on /tmp, /var/tmp and /dev/shm (TMPDIR=/tmp) that disappears with the runner, so
  /// nothing it writes reaches another runner process. Otherwise a warning naming what was
  /// unavailable and why (e.g. no root and unprivileged user namespaces disabled); the runner
  /// then only gets a private TMPDIR, removed when it stops, and the shared /tmp stays writable.
  const std::string& filesystem_warning() const { return fs_warning_; }

 private:
  RunnerReply read_reply(std::chrono::milliseconds timeout,
                         std::chrono::steady_clock::time_point t0);
  RunnerReply crashed(const std::string& context);

  runner::Flavour flavour_;
  std::size_t memory_limit_;
  std::vector<std::string> launcher_;  ///< empty: fexecve the runner directly
  std::string launcher_runner_;
  std::vector<std::string> reach_;  ///< see set_reachable()
  pid_t pid_ = -1;
  int arena_fd_ = -1;
  int cmd_fd_ = -1;
  int reply_fd_ = -1;
  int err_fd_ = -1;
  char* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::string reply_buf_;
  std::string stderr_tail_;
  std::string sanitizer_exe_, sanitizer_tool_, sanitizer_log_;
  std::string sanitizer_runner_;  ///< world-executable copy of the runner (under a sanitizer)
  std::string fs_warning_;        ///< see filesystem_warning()
  std::string fallback_tmp_;      ///< private TMPDIR made when namespaces are unavailable
  void keep_stderr(const char* data, std::size_t n);
  void drain_until_exit(std::chrono::milliseconds limit);
};

}  // namespace vb
