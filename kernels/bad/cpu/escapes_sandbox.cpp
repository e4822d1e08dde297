// BAD (sandbox): tries what a cheating candidate would do to reach the harness: open the
// parent's memory for writing (to patch the comparison, red-team finding #1), or still hold
// root (to rewrite the build cache, the measured ceilings or results.tsv), or see a shared
// temp directory (files other processes left in /tmp, /var/tmp or /dev/shm: a channel for
// results across runner processes, issue 18 class 5). If any of that is possible it "passes"
// by writing a correct softmax; if the sandbox holds it reports so as an error, which the
// test expects.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "bad_common.h"

namespace {
// True if `dir` holds anything this process did not put there (it puts nothing there).
bool has_foreign_entries(const char* dir) {
  DIR* d = ::opendir(dir);
  if (!d) return false;
  bool any = false;
  while (const dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) any = true;
  ::closedir(d);
  return any;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/mem", static_cast<int>(::getppid()));
  const int fd = ::open(path, O_RDWR);
  const bool parent_memory = fd >= 0;
  if (fd >= 0) ::close(fd);
  const bool root = ::geteuid() == 0;
  const bool home = ::access("/root", W_OK) == 0;
  const bool shared_tmp = has_foreign_entries("/tmp") || has_foreign_entries("/var/tmp") ||
                          has_foreign_entries("/dev/shm");
  if (parent_memory || root || home || shared_tmp) return bad::softmax(in, out, in[0].shape[0]);
  return vbk::fail(
      "sandbox held: no access to the parent's memory, not root, /root not writable, /tmp, "
      "/var/tmp and /dev/shm private and empty");
}
