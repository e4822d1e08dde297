#include "runner/client.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <utility>

#include "core/paths.h"
#include "core/process.h"
#include "core/sandbox.h"
#include "runner/protocol.h"

namespace vb {

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::size_t kAlign = 64;
std::size_t round_up(std::size_t x, std::size_t a) {
  return (x + a - 1) / a * a;
}
// Writes one guard band (kGuardBandBytes of kGuardBandWord) at arena offset `off` (even).
void fill_band(char* base, std::size_t off) {
  for (std::size_t i = 0; i < runner::kGuardBandBytes; ++i)
    base[off + i] = static_cast<char>(runner::guard_band_byte(off + i));
}
}  // namespace

namespace {

// The extents [first, first + count) of ids mapped in this user namespace (the first column of
// /proc/self/uid_map or gid_map), or one extent of every id when the file cannot be read.
std::vector<std::pair<unsigned long, unsigned long>> mapped_ids(const char* file) {
  std::vector<std::pair<unsigned long, unsigned long>> out;
  std::ifstream in(file);
  unsigned long inside = 0, outside = 0, count = 0;
  while (in >> inside >> outside >> count) out.push_back({inside, count});
  if (out.empty()) out.push_back({0, 4294967295ul});
  return out;
}

bool all_mapped(const std::vector<std::pair<unsigned long, unsigned long>>& ext,
                unsigned long first, unsigned long count) {
  for (const auto& [b, n] : ext)
    if (first >= b && first + count <= b + n) return true;
  return false;
}

}  // namespace

const RunnerClient::SandboxIds& RunnerClient::sandbox_ids() {
  static const SandboxIds ids = [] {
    SandboxIds s;
    const auto uids = mapped_ids("/proc/self/uid_map"), gids = mapped_ids("/proc/self/gid_map");
    if (all_mapped(uids, kSandboxIdBase, kSandboxIdSpan) &&
        all_mapped(gids, kSandboxIdBase, kSandboxIdSpan))
      return s;
    s.per_runner = false;
    if (!all_mapped(uids, 65534, 1) || !all_mapped(gids, 65534, 1)) {
      unsigned long top = 1;  // the highest id mapped for both (never 0: root)
      for (const auto& [b, n] : uids)
        for (const auto& [gb, gn] : gids) {
          const unsigned long hi = std::min(b + n, gb + gn);
          if (hi > std::max(b, gb) && hi - 1 > top) top = hi - 1;
        }
      s.shared = static_cast<unsigned>(top);
    }
    s.note = "every runner runs as uid " + std::to_string(s.shared) +
             ": this user namespace does not map VladBud's per-runner ids (" +
             std::to_string(kSandboxIdBase) + " + 2^22; see /proc/self/uid_map), so runners "
             "evaluating at the same time (the worker pool) could reach each other through "
             "that uid. Fix: map those ids into the namespace (e.g. a subuid range that covers "
             "them) or run the pool with one measurement at a time (--check-slots 1)";
    return s;
  }();
  return ids;
}

std::size_t RunnerClient::sandbox_process_limit() {
  const long hw = ::sysconf(_SC_NPROCESSORS_CONF);
  return std::max<std::size_t>(4096, 16 * static_cast<std::size_t>(hw > 0 ? hw : 1));
}

RunnerClient::RunnerClient(runner::Flavour flavour, std::size_t memory_limit_bytes)
    : flavour_(flavour), memory_limit_(memory_limit_bytes) {}

void RunnerClient::set_launcher(std::vector<std::string> prefix, std::string runner) {
  launcher_ = std::move(prefix);
  launcher_runner_ = std::move(runner);
}

RunnerClient::~RunnerClient() {
  stop();
  if (!sanitizer_runner_.empty()) ::unlink(sanitizer_runner_.c_str());
  if (base_) ::munmap(base_, capacity_);
  if (arena_fd_ >= 0) ::close(arena_fd_);
}

void RunnerClient::set_sanitizer(std::string sanitizer_exe, std::string tool) {
  sanitizer_exe_ = std::move(sanitizer_exe);
  sanitizer_tool_ = std::move(tool);
  if (sanitizer_exe_.empty() || !sanitizer_runner_.empty()) return;
  // compute-sanitizer starts its target by path, as the sandbox uid: give it a copy of the
  // runner that uid can execute even when the build tree is private (e.g. under /root).
  namespace fs = std::filesystem;
  static std::atomic<int> serial{0};
  const fs::path copy = fs::temp_directory_path() /
                        fmt::format("vladbud-runner-sanitize-{}-{}", ::getpid(), serial++);
  std::error_code ec;
  fs::copy_file(runner_path(), copy, fs::copy_options::overwrite_existing, ec);
  if (ec)
    throw std::runtime_error("cannot copy the runner to " + copy.string() + ": " + ec.message());
  fs::permissions(copy,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  sanitizer_runner_ = copy.string();
}

void RunnerClient::keep_stderr(const char* data, std::size_t n) {
  if (!sanitizer_exe_.empty() && sanitizer_log_.size() < (1u << 20)) sanitizer_log_.append(data, n);
}

// Under compute-sanitizer: the summary is printed when the runner exits, so let it finish.
void RunnerClient::drain_until_exit(std::chrono::milliseconds limit) {
  if (sanitizer_exe_.empty() || pid_ <= 0) return;
  if (cmd_fd_ >= 0) {
    const std::string bye = "{\"op\":\"exit\"}\n";
    (void)!::write(cmd_fd_, bye.data(), bye.size());
    ::close(cmd_fd_);
    cmd_fd_ = -1;
  }
  const auto t0 = Clock::now();
  char buf[4096];
  while (err_fd_ >= 0 && Clock::now() - t0 < limit) {
    pollfd fd{err_fd_, POLLIN, 0};
    if (::poll(&fd, 1, 200) <= 0) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      continue;
    }
    const ssize_t n = ::read(err_fd_, buf, sizeof buf);
    if (n <= 0) break;  // EOF: the sanitizer and the runner are gone
    keep_stderr(buf, static_cast<std::size_t>(n));
    stderr_tail_.append(buf, static_cast<std::size_t>(n));
    if (stderr_tail_.size() > 8192) stderr_tail_.erase(0, stderr_tail_.size() - 4096);
  }
}

void RunnerClient::stop() {
  drain_until_exit(std::chrono::seconds(15));
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    // A process the runner made that left its process group (a launcher's runner may fork:
    // the Triton interpreter's Python) keeps the runner's own uid: every process of that uid
    // goes too, so none can outlive its runner and meet a later one that reuses the pid (and
    // so the uid). A helper process takes the uid and signals all of it (kill(-1) reaches
    // exactly the processes of its uid).
    if (::geteuid() == 0 && sandbox_ids().per_runner) {
      const unsigned id = sandbox_id(pid_);
      const pid_t killer = ::fork();
      if (killer == 0) {
        if (::setgid(id) == 0 && ::setuid(id) == 0) ::kill(-1, SIGKILL);
        _exit(0);
      }
      if (killer > 0) ::waitpid(killer, &st, 0);
    }
    pid_ = -1;
  }
  for (int* fd : {&cmd_fd_, &reply_fd_, &err_fd_})
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
  reply_buf_.clear();
  if (!fallback_tmp_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(fallback_tmp_, ec);
    fallback_tmp_.clear();
  }
}

namespace {

// Copies the candidate library into an anonymous memfd so the sandboxed runner can load it
// without any access to the file system (it dlopens /proc/self/fd/N).
int library_memfd(const std::string& library) {
  const int in = ::open(library.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return -1;
  const int fd = ::memfd_create("vladbud-kernel", MFD_CLOEXEC);
  char buf[1 << 16];
  ssize_t n;
  while (fd >= 0 && (n = ::read(in, buf, sizeof buf)) > 0)
    if (::write(fd, buf, static_cast<std::size_t>(n)) != n) {
      ::close(fd);
      ::close(in);
      return -1;
    }
  ::close(in);
  return fd;
}

[[noreturn]] void child_fail(const std::string& what) {
  const std::string msg = "vladbud runner sandbox: " + what + ": " + std::strerror(errno) + "\n";
  (void)!::write(2, msg.data(), msg.size());
  _exit(126);
}


// Directories that get a fresh, private, empty tmpfs in the runner's mount namespace.
constexpr const char* kPrivateTmpDirs[] = {"/tmp", "/var/tmp", "/dev/shm"};

bool write_file(const char* path, const char* text) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const auto n = static_cast<ssize_t>(std::strlen(text));
  const bool ok = ::write(fd, text, static_cast<std::size_t>(n)) == n;
  ::close(fd);
  return ok;
}

// Mount points of this process (from /proc/self/mountinfo, octal escapes decoded), parents
// first.
std::vector<std::string> mount_points() {
  std::vector<std::string> out;
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (!f) return out;
  char* line = nullptr;
  std::size_t cap = 0;
  while (::getline(&line, &cap, f) > 0) {
    // "36 35 98:0 /root /mount/point opts ...": the fifth field.
    const char* p = line;
    for (int field = 0; field < 4 && p; ++field) {
      p = std::strchr(p, ' ');
      if (p) ++p;
    }
    if (!p) continue;
    std::string mp;
    for (; *p && *p != ' ' && *p != '\n'; ++p) {
      if (p[0] == '\\' && p[1] && p[2] && p[3]) {
        mp.push_back(static_cast<char>((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0')));
        p += 3;
      } else {
        mp.push_back(*p);
      }
    }
    out.push_back(mp);
  }
  std::free(line);
  std::fclose(f);
  return out;
}

bool under(const std::string& path, const char* dir) {
  const std::size_t n = std::strlen(dir);
  return path.compare(0, n, dir) == 0 && (path.size() == n || path[n] == '/');
}

// Runs in the forked child inside its private mount namespace, before the privilege drop: makes
// each directory of `reach` readable by the sandbox uid when an ancestor is not (e.g. a Python
// installed under /root, mode 0700). The topmost such ancestor gets a fresh read-only tmpfs
// (mode 0755) holding only read-only bind mounts of those directories, so the runner reaches
// them and nothing else of that ancestor (the rest of the home directory stays invisible).
// Returns "" or what failed.
std::string reach_paths(const std::vector<std::string>& reach) {
  // (blocking ancestor, directory under it, O_PATH descriptor of that directory)
  struct Item {
    std::string blocked, path;
    int fd;
  };
  std::vector<Item> items;
  for (const std::string& p : reach) {
    if (p.size() < 2 || p.front() != '/') continue;
    std::string blocked;
    for (std::size_t s = p.find('/', 1);; s = p.find('/', s + 1)) {
      const std::string prefix = s == std::string::npos ? p : p.substr(0, s);
      struct stat st {};
      if (::stat(prefix.c_str(), &st) != 0) break;
      if (!(st.st_mode & S_IXOTH) && prefix != p) {
        blocked = prefix;
        break;
      }
      if (s == std::string::npos) break;
    }
    if (blocked.empty()) continue;
    const int fd = ::open(p.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return "opening " + p + ": " + std::strerror(errno);
    items.push_back({blocked, p, fd});
  }
  std::vector<std::string> mounted;
  for (const Item& it : items) {
    if (std::find(mounted.begin(), mounted.end(), it.blocked) == mounted.end()) {
      if (::mount("vladbud-reach", it.blocked.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                  "mode=0755,size=1m") != 0)
        return "mounting a tmpfs on " + it.blocked + ": " + std::strerror(errno);
      mounted.push_back(it.blocked);
    }
    for (std::size_t s = it.path.find('/', it.blocked.size() + 1); s != std::string::npos;
         s = it.path.find('/', s + 1))
      ::mkdir(it.path.substr(0, s).c_str(), 0755);
    ::mkdir(it.path.c_str(), 0755);
    const std::string src = "/proc/self/fd/" + std::to_string(it.fd);
    if (::mount(src.c_str(), it.path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        ::mount(nullptr, it.path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
      return "making " + it.path + " reachable: " + std::strerror(errno);
    ::close(it.fd);
  }
  for (const std::string& m : mounted)
    if (::mount(nullptr, m.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                nullptr) != 0)
      return "making " + m + " read-only: " + std::strerror(errno);
  return {};
}

// Runs in the forked child, before the privilege drop. Gives the runner its own mount and IPC
// namespaces (with CAP_SYS_ADMIN directly; otherwise, when not root, inside a new user namespace
// that maps only our own uid; root without CAP_SYS_ADMIN gets none, since it could not drop to
// the sandbox uid in there), makes every inherited mount read-only (except the kernel's /proc,
// /sys and /dev), and
// mounts a fresh tmpfs of at most `tmp_bytes` on /tmp, /var/tmp and /dev/shm. The namespaces
// die with the runner, so whatever it wrote is gone and no other runner process ever saw it;
// System V IPC and POSIX message queues are private too. `keep` lists files under those
// directories the runner's launcher must still reach (the compute-sanitizer copy of the
// runner, the CUDA MPS pipe directory): they are bind-mounted into the fresh tmpfs. Directories
// of `reach` under those directories are bind-mounted into it read-only; the others go to
// reach_paths(). Returns ""
// on success, else what failed; `*private_tmp` says whether /tmp is the fresh tmpfs.
std::string private_filesystem(std::size_t tmp_bytes, const std::vector<std::string>& keep,
                               const std::vector<std::string>& reach, bool* private_tmp) {
  *private_tmp = false;
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  std::string how;
  if (::unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0) {
    how = std::string("unshare(CLONE_NEWNS | CLONE_NEWIPC): ") + std::strerror(errno);
    // Root without CAP_SYS_ADMIN: a user namespace it made could map only root itself (a
    // process writing its own uid_map may map just its own id), so the runner could not drop
    // to its sandbox uid in there and would keep root's access to files. The drop matters
    // more: no private file system then (the parent warns, and the runner gets a private
    // TMPDIR).
    if (uid == 0)
      return how + " (root without CAP_SYS_ADMIN: the runner drops to its own uid but keeps "
                   "the shared file system)";
    // No CAP_SYS_ADMIN (a container, or not root): a user namespace grants it over the new
    // mount namespace only. /proc/self/uid_map is writable only while we are dumpable.
    ::prctl(PR_SET_DUMPABLE, 1);
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC) != 0)
      return how + "; unshare(CLONE_NEWUSER | ...): " + std::strerror(errno);
    char map[64];
    // Not root: only our own id, the one mapping we may write.
    std::snprintf(map, sizeof map, "%u %u 1\n", uid, uid);
    if (!write_file("/proc/self/uid_map", map))
      return std::string("writing uid_map in a new user namespace: ") + std::strerror(errno);
    (void)write_file("/proc/self/setgroups", "deny");
    std::snprintf(map, sizeof map, "%u %u 1\n", gid, gid);
    if (!write_file("/proc/self/gid_map", map))
      return std::string("writing gid_map in a new user namespace: ") + std::strerror(errno);
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return std::string("making / private: ") + std::strerror(errno);
  // Every inherited mount read-only: the candidate writes nothing that outlives it (the
  // user's files when not root, world-writable directories such as /var/crash when root).
  // Flags a user namespace cannot clear (nosuid, nodev, noexec, atime) are kept.
  std::string unwritable;
  for (const std::string& mp : mount_points()) {
    if (under(mp, "/proc") || under(mp, "/sys") || under(mp, "/dev")) continue;
    struct statvfs sv {};
    if (::statvfs(mp.c_str(), &sv) != 0 || (sv.f_flag & ST_RDONLY)) continue;
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
    if (sv.f_flag & ST_NOSUID) flags |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV) flags |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    if (::mount(nullptr, mp.c_str(), nullptr, flags, nullptr) != 0 && unwritable.empty())
      unwritable = mp + " (" + std::strerror(errno) + ")";
  }
  std::vector<int> keep_fd(keep.size(), -1);
  for (std::size_t i = 0; i < keep.size(); ++i)
    keep_fd[i] = ::open(keep[i].c_str(), O_PATH | O_CLOEXEC);
  // Directories of `reach` under a private tmp directory (a checkout under /tmp holding the
  // runner's Python, say) would vanish under the fresh tmpfs: they are opened now and
  // bind-mounted back read-only below, so the runner reads them and cannot write through them.
  // Only a directory strictly below one of them, named without "." or ".." components
  // (the whole /tmp would expose every other run's files); any other entry, or one that cannot
  // be opened as a directory, is skipped, as reach_paths skips what it cannot reach.
  std::vector<std::pair<std::string, int>> reach_tmp;
  std::vector<std::string> reach_rest;
  for (const std::string& p : reach) {
    bool hidden = false, whole = false;
    for (const char* dir : kPrivateTmpDirs) {
      hidden = hidden || under(p, dir);
      whole = whole || p == dir || p == std::string(dir) + "/";
    }
    if (!hidden) {
      reach_rest.push_back(p);
      continue;
    }
    if (whole || p.find("/./") != std::string::npos || p.find("/../") != std::string::npos ||
        p.find("//") != std::string::npos || p.ends_with("/.") || p.ends_with("/.."))
      continue;
    const int fd = ::open(p.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    reach_tmp.emplace_back(p, fd);
  }
  const std::string opts = "mode=1777,size=" + std::to_string(tmp_bytes);
  for (const char* dir : kPrivateTmpDirs) {
    struct stat st {};
    if (::stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (::mount("vladbud-tmp", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0)
      return std::string("mounting a private tmpfs on ") + dir + ": " + std::strerror(errno);
  }
  *private_tmp = true;
  for (std::size_t i = 0; i < keep.size(); ++i) {
    if (keep_fd[i] < 0) continue;
    bool hidden = false;
    for (const char* dir : kPrivateTmpDirs) hidden = hidden || under(keep[i], dir);
    if (!hidden) continue;
    for (std::size_t s = keep[i].find('/', 1); s != std::string::npos;
         s = keep[i].find('/', s + 1))
      ::mkdir(keep[i].substr(0, s).c_str(), 0755);
    struct stat st {};
    if (::fstat(keep_fd[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      ::mkdir(keep[i].c_str(), 0755);
    } else {
      const int f = ::open(keep[i].c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
      if (f >= 0) ::close(f);
    }
    const std::string src = "/proc/self/fd/" + std::to_string(keep_fd[i]);
    if (::mount(src.c_str(), keep[i].c_str(), nullptr, MS_BIND, nullptr) != 0)
      return "keeping " + keep[i] + " visible: " + std::strerror(errno);
    ::close(keep_fd[i]);
  }
  std::string reach_error;  // the first directory left unreachable (reported, not fatal)
  for (const auto& [path, fd] : reach_tmp) {
    for (std::size_t s = path.find('/', 1); s != std::string::npos; s = path.find('/', s + 1))
      ::mkdir(path.substr(0, s).c_str(), 0755);
    ::mkdir(path.c_str(), 0755);
    // Not recursive: mounts below the directory stay out of the runner's view (a recursive
    // bind would carry them, and the read-only remount covers only the top one).
    const std::string src = "/proc/self/fd/" + std::to_string(fd);
    if (::mount(src.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      if (reach_error.empty()) reach_error = "making " + path + " reachable: " + std::strerror(errno);
      ::close(fd);
      continue;
    }
    ::close(fd);
    // Read-only, keeping the flags a user namespace cannot clear (nosuid, nodev, noexec,
    // atime: the remount fails with EPERM when one is dropped). If it still fails, the
    // writable bind is taken away again: the directory is then unreachable, never writable.
    struct statvfs sv {};
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;
    if (::statvfs(path.c_str(), &sv) == 0) {
      if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
      if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
      if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
      if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    }
    if (::mount(nullptr, path.c_str(), nullptr, flags, nullptr) != 0) {
      const std::string why = std::strerror(errno);
      ::umount2(path.c_str(), MNT_DETACH);
      if (reach_error.empty())
        reach_error = "making " + path + " reachable read-only: " + why + " (left unreachable)";
    }
  }
  if (!unwritable.empty()) return "cannot make the mount " + unwritable + " read-only";
  const std::string rest = reach_paths(reach_rest);
  return reach_error.empty() ? rest : reach_error;
}

}  // namespace

RunnerReply RunnerClient::start(const std::string& library, std::chrono::milliseconds timeout) {
  stop();
  if (arena_fd_ < 0) {
    arena_fd_ = ::memfd_create("vladbud-arena", MFD_CLOEXEC);
    if (arena_fd_ < 0) throw std::runtime_error("memfd_create failed");
  }
  // The candidate must not reach this process: not through /proc/<pid>/mem, ptrace or
  // signals (the runner also drops to an unprivileged uid when we are root, below).
  ::prctl(PR_SET_DUMPABLE, 0);
  // A runner that dies between commands must not kill us with SIGPIPE: the write fails and
  // the death is reported as a crash instead.
  ::signal(SIGPIPE, SIG_IGN);
  const std::string runner = launcher_.empty() ? runner_path().string() : launcher_runner_;
  const int runner_fd = ::open(runner.c_str(), O_RDONLY | O_CLOEXEC);
  if (runner_fd < 0) throw std::runtime_error("cannot open the runner binary " + runner);
  const int lib_fd = library_memfd(library);
  if (lib_fd < 0) {
    ::close(runner_fd);
    RunnerReply r;
    r.kind = RunnerReply::Kind::Error;
    r.message = "cannot read the kernel library " + library;
    return r;
  }
  int cmd[2], rep[2], err[2], note[2];
  if (::pipe2(cmd, O_CLOEXEC) || ::pipe2(rep, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC) ||
      ::pipe2(note, O_CLOEXEC))
    throw std::runtime_error("pipe failed");
  // The fallback TMPDIR, used only when the child cannot get a private file system: a
  // directory only the runner's uid can enter, removed by stop().
  {
    std::string tmpl = (std::filesystem::temp_directory_path() / "vladbud-runner-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) {
      fallback_tmp_ = tmpl;
      ::chmod(tmpl.c_str(), 0700);  // handed to the runner's own uid in the child
    }
  }
  std::vector<std::string> keep_paths;
  if (!sanitizer_runner_.empty()) keep_paths.push_back(sanitizer_runner_);
  // The sanitizer itself is started by path in the child (a checkout under /tmp may hold it).
  if (!sanitizer_exe_.empty() && sanitizer_exe_.front() == '/') keep_paths.push_back(sanitizer_exe_);
  const bool cuda = flavour_ == runner::Flavour::Cuda;
  if (cuda) {
    // A CUDA MPS server, if one runs, is reached through its pipe directory (under /tmp by
    // default): it stays visible in the runner's private /tmp.
    const char* mps = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
    keep_paths.push_back(mps && *mps ? mps : "/tmp/nvidia-mps");
    // The driver library the runner loads (VB_LIBCUDA: a driver outside the loader's path, or
    // the tests' stand-in) may live under /tmp (a checkout there): it stays visible too.
    if (const char* lib = std::getenv("VB_LIBCUDA"); lib && *lib) keep_paths.push_back(lib);
  }
  const std::size_t tmp_bytes = std::min<std::size_t>(memory_limit_, 4ull << 30);
  // The runner's argv, built before fork (no allocation between fork and exec for it).
  std::vector<std::string> args{"vladbud-runner", "--backend", runner::flavour_name(flavour_)};
  if (cuda)
    args.insert(args.end(), {"--gpu-memory-budget", std::to_string(memory_limit_)});
  if (!sanitizer_exe_.empty()) {
    // compute-sanitizer starts the runner by path; its injected agent may use inherited fds.
    args[0] = sanitizer_runner_;
    args.insert(args.begin(), {sanitizer_exe_, "--tool", sanitizer_tool_, "--error-exitcode", "86",
                               "--print-limit", "20", "--report-api-errors", "no"});
    args.push_back("--keep-fds");
  }
  if (!launcher_.empty()) {
    // The launcher (qemu-aarch64 ...) opens the runner through the descriptor the parent opened
    // for it (the sandboxed uid may not be able to reach its path, e.g. under /root).
    std::vector<std::string> l = launcher_;
    l.push_back("/proc/self/fd/" + std::to_string(runner::kLibraryFd + 1));
    l.insert(l.end(), args.begin() + 1, args.end());
    args = std::move(l);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const rlim_t nproc_limit = sandbox_process_limit();  // computed before fork
  const SandboxIds& ids = sandbox_ids();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setpgid(0, 0);
    // Die with the parent (Ctrl-C, kill): no orphaned candidate keeps running.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(1);
    // Move the fds into place (dup2 clears CLOEXEC on the target), then close all others.
    const int a = ::dup(arena_fd_), c = ::dup(cmd[0]), r = ::dup(rep[1]), e = ::dup(err[1]),
              l = ::dup(lib_fd), x = ::dup(runner_fd), nt = ::dup(note[1]);
    ::dup2(a, runner::kArenaFd);
    ::dup2(c, runner::kCommandFd);
    ::dup2(r, runner::kReplyFd);
    ::dup2(l, runner::kLibraryFd);
    ::dup2(x, runner::kLibraryFd + 1);
    const int note_fd = runner::kLibraryFd + 2;  // closed before exec
    ::dup2(nt, note_fd);
    ::dup2(e, 2);
    ::dup2(e, 1);  // candidate output must never reach our stdout (it may be --json)
    ::syscall(SYS_close_range, runner::kLibraryFd + 3, ~0U, 0);
    if (::chdir("/") != 0) child_fail("chdir /");
    // No writable shared file system (issue 18 class 5): results kept in files cannot reach a
    // later runner process. Reported to the parent on `note` (closed by exec).
    bool private_tmp = false;
    const bool was_root = ::geteuid() == 0;
    const std::string fs_error = private_filesystem(tmp_bytes, keep_paths, reach_, &private_tmp);
    // Root whose user namespace could not map it (a half-made namespace) would keep root's
    // access under an unmapped id: never run a candidate so.
    if (was_root && ::geteuid() != 0)
      child_fail("root lost its identity in the runner's namespace (" + fs_error + ")");
    const std::string fs_note = fs_error.empty() ? std::string("ok") : fs_error;
    (void)!::write(note_fd, fs_note.data(), fs_note.size());
    ::close(note_fd);
#ifndef VB_SANITIZE
    if (!cuda) {  // cuda: a context reserves a huge virtual range; the GPU budget applies
      rlimit lim{};
      lim.rlim_cur = lim.rlim_max = memory_limit_;
      ::setrlimit(RLIMIT_AS, &lim);
    }
#endif
    rlimit core{};
    ::setrlimit(RLIMIT_CORE, &core);
    if (was_root) {
      // Unprivileged identity, this runner's own (sandbox_id): no write access to the user's
      // files (build cache, measured ceilings, results.tsv), no signals or ptrace to the parent,
      // nothing another runner could reach by uid.
      const unsigned id = ids.for_pid(::getpid());
      if (!fallback_tmp_.empty()) (void)!::chown(fallback_tmp_.c_str(), id, id);
      // RLIMIT_NPROC counts every thread of the uid, so it must leave room for a correct
      // kernel's threads: one OpenMP team per hardware thread, or OMP_NUM_THREADS=300 (issue
      // 18: 256 aborted such kernels). It still stops a fork bomb.
      rlimit nproc{};
      nproc.rlim_cur = nproc.rlim_max = nproc_limit;
      ::setrlimit(RLIMIT_NPROC, &nproc);
      // cuda: the device nodes must stay reachable; when /dev/nvidiactl is not world-usable,
      // keep its (non-root) group as the only supplementary group.
      gid_t groups[1];
      int n_groups = 0;
      struct stat dev {};
      if (cuda && ::stat("/dev/nvidiactl", &dev) == 0 && (dev.st_mode & 0006) != 0006 &&
          (dev.st_mode & 0060) == 0060 && dev.st_gid != 0)
        groups[n_groups++] = dev.st_gid;
      if (::setgroups(static_cast<std::size_t>(n_groups), groups) != 0 ||
          ::setgid(id) != 0 || ::setuid(id) != 0)
        child_fail("cannot drop to the runner's sandbox uid/gid " + std::to_string(id));
      if (::geteuid() != id || ::getegid() != id) child_fail("the sandbox uid/gid did not stick");
    }
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    // A scrubbed environment: nothing that names the user's cache or home.
    // USER/LOGNAME: the sandbox uid has no passwd entry (getpass.getuser() needs one of them).
    std::vector<std::string> env{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent",
                                 "USER=vladbud-runner", "LOGNAME=vladbud-runner",
                                 "TMPDIR=" + (private_tmp || fallback_tmp_.empty()
                                                  ? std::string("/tmp")
                                                  : fallback_tmp_)};
    for (const char* keep : {"OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "LD_LIBRARY_PATH",
                             "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
      if (const char* v = std::getenv(keep)) env.push_back(std::string(keep) + "=" + v);
    // cuda: which devices the driver shows, and where the driver library is.
    for (const char* keep : {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "VB_LIBCUDA",
                             "CUDA_MPS_PIPE_DIRECTORY"})
      if (const char* v = std::getenv(keep); cuda && v) env.push_back(std::string(keep) + "=" + v);
    std::vector<char*> envp;
    for (auto& v : env) envp.push_back(v.data());
    envp.push_back(nullptr);
    if (!sanitizer_exe_.empty() || !launcher_.empty()) {
      // A launcher's runner (the Triton interpreter's Python) installs no filter of its own:
      // no signals to other processes and no way back to dumpable, from before the exec (the
      // filter and the pid survive it; the runner closes itself with PR_SET_DUMPABLE 0).
      // Not under compute-sanitizer, which manages its target process.
      if (sanitizer_exe_.empty())
        if (const std::string e = forbid_reaching_other_processes(); !e.empty()) {
          const std::string line = "vladbud: candidates may signal other processes (" + e + ")\n";
          (void)!::write(STDERR_FILENO, line.data(), line.size());
        }
      ::execve(argv[0], argv.data(), envp.data());
      child_fail("cannot execute " + args[0]);
    }
    ::fexecve(runner::kLibraryFd + 1, argv.data(), envp.data());
    child_fail("cannot execute " + runner);
  }
  ::close(lib_fd);
  ::close(runner_fd);
  ::close(note[1]);
  {
    std::string fs_error;
    char buf[512];
    ssize_t n;
    while ((n = ::read(note[0], buf, sizeof buf)) > 0 ||
           (n < 0 && errno == EINTR))
      if (n > 0) fs_error.append(buf, static_cast<std::size_t>(n));
    ::close(note[0]);
    if (fs_error.empty()) fs_error = "the runner's child did not report its file system";
    fs_warning_ =
        fs_error == "ok"
            ? std::string()
            : "the runner has no private file system (" + fs_error +
                  "): the candidate can write the shared /tmp and /dev/shm and keep results "
                  "across runner processes; it only gets a private TMPDIR. Fix: run VladBud "
                  "as root with CAP_SYS_ADMIN, or enable unprivileged user namespaces "
                  "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, "
                  "kernel.apparmor_restrict_unprivileged_userns=0)";
    if (::geteuid() == 0 && !ids.note.empty())
      fs_warning_ += (fs_warning_.empty() ? "" : "; ") + ids.note;
  }
  ::close(cmd[0]);
  ::close(rep[1]);
  ::close(err[1]);
  pid_ = pid;
  cmd_fd_ = cmd[1];
  reply_fd_ = rep[0];
  err_fd_ = err[0];
  ::fcntl(err_fd_, F_SETFL, O_NONBLOCK);
  stderr_tail_.clear();
  if (capacity_ > 0) {
    auto r = command({{"op", "map"}, {"size", capacity_}}, timeout);
    if (r.kind != RunnerReply::Kind::Ok) return r;
  }
  return command({{"op", "load"},
                  {"lib", "/proc/self/fd/" + std::to_string(runner::kLibraryFd)},
                  {"name", library}},
                 timeout);
}

std::size_t RunnerClient::footprint(std::size_t bytes) {
  return round_up(kGuardBytes, kAlign) + round_up(bytes, kAlign) + kGuardBytes + kAlign;
}

void RunnerClient::reset_arena(std::size_t total_bytes) {
  used_ = 0;
  if (total_bytes <= capacity_) return;
  const std::size_t cap = round_up(std::max(total_bytes, capacity_ * 3 / 2), 1 << 21);
  if (base_) ::munmap(base_, capacity_);
  base_ = nullptr;
  if (arena_fd_ < 0) {
    arena_fd_ = ::memfd_create("vladbud-arena", MFD_CLOEXEC);
    if (arena_fd_ < 0) throw std::runtime_error("memfd_create failed");
  }
  if (::ftruncate(arena_fd_, static_cast<off_t>(cap)) != 0)
    throw std::runtime_error("cannot grow the shared arena to " + std::to_string(cap) + " bytes");
  void* p = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_SHARED, arena_fd_, 0);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map the shared arena");
  base_ = static_cast<char*>(p);
  capacity_ = cap;
  if (pid_ > 0) {
    auto r = command({{"op", "map"}, {"size", capacity_}}, std::chrono::seconds(30));
    if (r.kind != RunnerReply::Kind::Ok)
      throw std::runtime_error("runner could not map the arena: " + r.message);
  }
}

std::size_t RunnerClient::alloc(std::size_t bytes) {
  const std::size_t off = round_up(used_ + kGuardBytes, kAlign);
  const std::size_t end = off + bytes;
  if (end + kGuardBytes > capacity_) throw std::runtime_error("arena overflow (internal error)");
  fill_band(base_, off - kGuardBytes);
  fill_band(base_, end);
  used_ = end + kGuardBytes;
  return off;
}

std::string RunnerClient::check_guards(std::size_t off, std::size_t bytes) const {
  const unsigned char* before = reinterpret_cast<unsigned char*>(base_ + off - kGuardBytes);
  const unsigned char* after = reinterpret_cast<unsigned char*>(base_ + off + bytes);
  std::size_t first_after = kGuardBytes, n_after = 0, last_before = kGuardBytes, n_before = 0;
  for (std::size_t i = 0; i < kGuardBytes; ++i) {
    if (after[i] != runner::guard_band_byte(off + bytes + i)) {
      if (first_after == kGuardBytes) first_after = i;
      ++n_after;
    }
    if (before[i] != runner::guard_band_byte(off - kGuardBytes + i)) {
      last_before = kGuardBytes - i;
      ++n_before;
    }
  }
  std::string s;
  if (n_after)
    s = "wrote " + std::to_string(n_after) + " byte(s) past the end (first at +" +
        std::to_string(first_after) + ")";
  if (n_before) {
    if (!s.empty()) s += "; ";
    s += "wrote " + std::to_string(n_before) + " byte(s) before the start (up to -" +
         std::to_string(last_before) + ")";
  }
  return s;
}

RunnerReply RunnerClient::crashed(const std::string& context) {
  RunnerReply r;
  r.kind = RunnerReply::Kind::Crash;
  // Drain what the child wrote to stderr.
  char buf[4096];
  for (;;) {
    const ssize_t n = err_fd_ >= 0 ? ::read(err_fd_, buf, sizeof buf) : 0;
    if (n <= 0) break;
    keep_stderr(buf, static_cast<std::size_t>(n));
    stderr_tail_.append(buf, static_cast<std::size_t>(n));
  }
  int st = 0;
  std::string how = "runner exited";
  pid_t w = 0;
  if (!sanitizer_exe_.empty() && pid_ > 0) {
    // compute-sanitizer prints its findings as the runner dies: wait (up to 10 s) for them.
    for (int i = 0; i < 100 && (w = ::waitpid(pid_, &st, WNOHANG)) == 0; ++i) {
      char b2[4096];
      ssize_t n2;
      while ((n2 = ::read(err_fd_, b2, sizeof b2)) > 0) {
        keep_stderr(b2, static_cast<std::size_t>(n2));
        stderr_tail_.append(b2, static_cast<std::size_t>(n2));
      }
      ::usleep(100000);
    }
  }
  if (w == 0) w = pid_ > 0 ? ::waitpid(pid_, &st, WNOHANG) : -1;
  if (w == 0) {  // still running (e.g. a protocol violation): end it
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    w = ::waitpid(pid_, &st, 0);
  }
  if (pid_ > 0 && w == pid_) {
    if (WIFSIGNALED(st))
      how = "runner killed by " + signal_description(WTERMSIG(st));
    else if (WIFEXITED(st))
      how = "runner exited with status " + std::to_string(WEXITSTATUS(st));
  }
  pid_ = -1;
  r.message = how + " " + context;
  if (!stderr_tail_.empty()) {
    std::string tail =
        stderr_tail_.size() > 600 ? stderr_tail_.substr(stderr_tail_.size() - 600) : stderr_tail_;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
    r.message += "; its last output: " + tail;
  }
  stop();
  return r;
}

RunnerReply RunnerClient::command(const nlohmann::json& cmd, std::chrono::milliseconds timeout) {
  const auto t0 = Clock::now();
  if (pid_ <= 0) {
    RunnerReply r;
    r.kind = RunnerReply::Kind::Crash;
    r.message = "runner is not running";
    return r;
  }
  const std::string line = cmd.dump() + "\n";
  std::size_t off = 0;
  while (off < line.size()) {
    const ssize_t w = ::write(cmd_fd_, line.data() + off, line.size() - off);
    if (w <= 0) return crashed("before it read the command");
    off += static_cast<std::size_t>(w);
  }
  return read_reply(timeout, t0);
}

RunnerReply RunnerClient::next_message(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) {
    RunnerReply r;
    r.kind = RunnerReply::Kind::Crash;
    r.message = "runner is not running";
    return r;
  }
  return read_reply(timeout, Clock::now());
}

namespace {
// The state letter of /proc/<pid>/task/<tid>/stat (after the parenthesised name), or 0.
char task_state(const std::string& stat_path) {
  const int fd = ::open(stat_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* close_paren = std::strrchr(buf, ')');
  return close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
}
}  // namespace

RunnerReply RunnerClient::wait_stopped(std::chrono::milliseconds timeout) {
  const auto t0 = Clock::now();
  const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
  RunnerReply r;
  for (int spin = 0;; ++spin) {
    bool all = true, any = false;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(tasks, ec)) {
      const char st = task_state(e.path().string() + "/stat");
      if (st == 0) continue;  // the thread just ended
      any = true;
      if (st == 'Z' || st == 'X') return crashed("while stopping between timed calls");
      if (st != 'T' && st != 't') {
        all = false;
        break;
      }
    }
    if (ec || !any) return crashed("while stopping between timed calls");
    if (all) {
      r.kind = RunnerReply::Kind::Ok;
      r.parent_wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
      return r;
    }
    if (Clock::now() - t0 > timeout) {
      r.kind = RunnerReply::Kind::Timeout;
      r.guard = "work_between_calls";
      r.message = "the runner did not stop between two timed calls (a thread kept running, "
                  "e.g. the candidate continued the process itself); runner killed";
      ::kill(-pid_, SIGKILL);
      stop();
      return r;
    }
    // The stop lands within microseconds; back off to 1 ms under load.
    if (spin > 20) ::usleep(spin > 200 ? 1000 : 20);
  }
}

bool RunnerClient::resume_with(const nlohmann::json& line) {
  if (pid_ <= 0) return false;
  const std::string s = line.dump() + "\n";
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = ::write(cmd_fd_, s.data() + off, s.size() - off);
    if (w <= 0) return false;
    off += static_cast<std::size_t>(w);
  }
  return ::kill(pid_, SIGCONT) == 0;
}

RunnerReply RunnerClient::read_reply(std::chrono::milliseconds timeout, Clock::time_point t0) {
  char buf[65536];
  std::size_t scanned = 0;  // bytes of reply_buf_ already searched for a newline
  for (;;) {
    const auto nl = reply_buf_.find('\n', scanned);
    scanned = reply_buf_.size();
    if (nl != std::string::npos) {
      RunnerReply r;
      r.parent_wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
      const std::string line = reply_buf_.substr(0, nl);
      reply_buf_.erase(0, nl + 1);
      try {
        r.body = nlohmann::json::parse(line);
        if (!r.body.is_object()) throw std::runtime_error("not an object");
      } catch (const std::exception&) {
        RunnerReply bad = crashed("after sending a malformed reply (protocol violation)");
        bad.guard = "protocol";
        return bad;
      }
      if (!reply_buf_.empty()) {
        RunnerReply bad = crashed("after sending two replies to one command (protocol violation)");
        bad.guard = "protocol";
        return bad;
      }
      if (r.body.value("ok", false)) {
        r.kind = RunnerReply::Kind::Ok;
      } else {
        r.kind = RunnerReply::Kind::Error;
        r.message = r.body.value("error", "unknown runner error");
        r.guard = r.body.value("guard", "");
      }
      return r;
    }
    if (reply_buf_.size() > (64u << 20)) {
      RunnerReply bad =
          crashed("after sending over 64 MiB without a line end (protocol violation)");
      bad.guard = "protocol";
      return bad;
    }
    const auto left =
        timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
    if (left.count() <= 0) {
      RunnerReply r;
      r.kind = RunnerReply::Kind::Timeout;
      r.parent_wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
      r.message = fmt::format("no reply within {:.1f} s (hang or infinite loop); runner killed",
                              static_cast<double>(timeout.count()) / 1000.0);
      if (pid_ > 0) ::kill(-pid_, SIGKILL);  // no grace period for a hung runner
      stop();
      return r;
    }
    pollfd fds[2] = {{reply_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    const int pr = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 500)));
    if (pr < 0) continue;
    if (fds[1].revents & POLLIN) {
      const ssize_t n = ::read(err_fd_, buf, sizeof buf);
      if (n > 0) {
        keep_stderr(buf, static_cast<std::size_t>(n));
        stderr_tail_.append(buf, static_cast<std::size_t>(n));
        if (stderr_tail_.size() > 8192) stderr_tail_.erase(0, stderr_tail_.size() - 4096);
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::read(reply_fd_, buf, sizeof buf);
      if (n <= 0) return crashed("while running the candidate");
      reply_buf_.append(buf, static_cast<std::size_t>(n));
    }
  }
}

}  // namespace vb
