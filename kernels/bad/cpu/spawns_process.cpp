// BAD (sandbox, issue 18 class 8): tries to create a process of its own -- fork, vfork-like
// clone without CLONE_THREAD, clone3 -- as a cheat would to keep working between timed calls:
// the runner stops every thread of its own process between calls, but not another process,
// which inherits the shared arena and could compute the next set's outputs while the parent
// writes its inputs. If any attempt succeeds (the child exits at once) it "passes" by writing
// a correct softmax; if the runner refuses them all it reports so as an error, which the test
// expects.
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bad_common.h"

namespace {
bool made(long pid) {
  if (pid == 0) ::_exit(0);  // the child: nothing to do
  if (pid < 0) return false;
  int st = 0;
  ::waitpid(static_cast<pid_t>(pid), &st, 0);
  return true;
}
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const bool any = made(::fork()) || made(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
  if (!any) return vbk::fail("could not create a process: fork and clone were refused");
  return bad::softmax(in, out, in[0].shape[0]);
}
