// BAD (sandbox): tries to reach another process of the host -- above all another runner: the
// pool runs evaluators side by side -- as a cheat would to read a concurrent runner's inputs or
// outputs, write into its private /tmp, slow down or stop the runner of the kernel it is compared
// against. For every other process that is not root it opens /proc/<pid>/environ and
// /proc/<pid>/root/, checks whether it may signal it (kill with signal 0 sends nothing), reads its
// RLIMIT_NOFILE through prlimit64, and sets its nice value and CPU affinity to what they already
// are (the kernel grants all of these to a process of the same uid); then kill(-1, 0), kill(0,
// 0), and it tries to make its own runner dumpable again (to open it to a colluding candidate).
// If anything succeeds it "passes" by writing a correct softmax; if the runner holds, it reports
// so as an error naming how many processes it tried, which the test expects.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bad_common.h"

namespace {
// The real uid of process `pid` (from /proc/<pid>/status), or -1.
long uid_of(long pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/status", pid);
  std::FILE* f = std::fopen(path, "r");
  if (!f) return -1;
  char line[256];
  long uid = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "Uid:", 4) == 0) uid = std::strtol(line + 4, nullptr, 10);
  std::fclose(f);
  return uid;
}

bool opens(const char* path, int flags) {
  const int fd = ::open(path, flags);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// What this process could do to process `pid`; "" when nothing.
const char* reach(long pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  if (opens(path, O_RDONLY)) return "opened another process's environ";
  std::snprintf(path, sizeof path, "/proc/%ld/root/", pid);
  if (opens(path, O_RDONLY | O_DIRECTORY)) return "opened another process's root directory";
  const auto p = static_cast<pid_t>(pid);
  if (::kill(p, 0) == 0) return "may signal another process";
  rlimit old{};
  if (::prlimit(p, RLIMIT_NOFILE, nullptr, &old) == 0) return "read another process's rlimit";
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(pid));
  if (errno == 0 && ::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), nice) == 0)
    return "set another process's priority";
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (::sched_getaffinity(p, sizeof cpus, &cpus) == 0 &&
      ::sched_setaffinity(p, sizeof cpus, &cpus) == 0)
    return "set another process's CPU affinity";
  return "";
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const long self = ::getpid();
  int others = 0;
  const char* how = "";
  // The runners among the processes tried (uids 0x7E000000 + [0, 2^22): RunnerClient::
  // sandbox_id), for the test to find its victim among them.
  char tried[256] = "";
  std::size_t used = 0;
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      const long uid = pid > 0 && *end == '\0' && pid != self ? uid_of(pid) : -1;
      if (uid <= 0) continue;
      ++others;
      if (uid >= 0x7E000000L && uid < 0x7E400000L && used + 16 < sizeof tried)
        used += static_cast<std::size_t>(std::snprintf(tried + used, sizeof tried - used, " %ld", pid));
      if (*(how = reach(pid))) break;
    }
    ::closedir(d);
  }
  if (!*how && ::kill(-1, 0) == 0) how = "kill(-1) reached another process";
  if (!*how && ::kill(0, 0) == 0) how = "kill(0) reached the process group";
  if (!*how && ::prctl(PR_SET_DUMPABLE, 1) == 0) how = "made its own runner dumpable";
  if (*how) return bad::softmax(in, out, in[0].shape[0]);
  return vbk::fail(
      "sandbox held: reached none of %d other non-root process(es) (uid %ld; runner pids%s ); no "
      "signals out; dumpable refused",
      others, static_cast<long>(::getuid()), tried);
}
