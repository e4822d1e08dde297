// BAD (sandbox): tries to reach another process of its own uid -- every runner on the host
// shares the sandbox uid, and the pool runs evaluators side by side -- as a cheat would to
// read a concurrent runner's inputs or outputs, write into its private /tmp, or stop the
// runner of the kernel it is compared against: for every other process of its uid it opens
// /proc/<pid>/environ and /proc/<pid>/root/, and checks whether it may signal it (kill with
// signal 0 sends nothing); then kill(-1, 0) and kill(0, 0). It also tries to make its own
// runner dumpable again (to open it to a colluding candidate). If anything succeeds it "passes"
// by writing a correct softmax; if the runner holds, it reports so as an error, which the
// test expects.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

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

// What this process could do to another of its uid; "" when nothing.
const char* reach(long pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  if (opens(path, O_RDONLY)) return "opened another process's environ";
  std::snprintf(path, sizeof path, "/proc/%ld/root/", pid);
  if (opens(path, O_RDONLY | O_DIRECTORY)) return "opened another process's root directory";
  if (::kill(static_cast<pid_t>(pid), 0) == 0) return "may signal another process";
  return "";
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const long self = ::getpid();
  const long uid = static_cast<long>(::getuid());
  int others = 0;
  const char* how = "";
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 0 || *end != '\0' || pid == self || uid_of(pid) != uid) continue;
      ++others;
      if (*(how = reach(pid))) break;
    }
    ::closedir(d);
  }
  if (!*how && ::kill(-1, 0) == 0) how = "kill(-1) reached another process";
  if (!*how && ::kill(0, 0) == 0) how = "kill(0) reached the process group";
  if (!*how && ::prctl(PR_SET_DUMPABLE, 1) == 0) how = "made its own runner dumpable";
  if (*how) return bad::softmax(in, out, in[0].shape[0]);
  return vbk::fail(
      "sandbox held: %d other process(es) of uid %ld, none reachable; no signals out; "
      "dumpable refused",
      others, uid);
}
