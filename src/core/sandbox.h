// Sandboxing of code VladBud runs but did not write (candidate kernels, their launchers).
#pragma once

#include <string>

namespace vb {

// No processes of its own (issue 18 class 8).
//
// Between timed calls the runner stops itself, which stops every thread of the candidate; a
// process the candidate forked would keep running, see the next set's inputs as the parent
// writes them (it inherits the shared arena) and do the work outside the call. A seccomp filter
// therefore refuses every way to create a process: fork and vfork, clone without CLONE_THREAD
// (EPERM), clone3 (ENOSYS, so that the C library falls back to clone for its threads), and any
// system call of another ABI (x32, i386). Threads stay allowed. Returns "" or why the filter
// could not be installed (e.g. under qemu-user, which refuses seccomp for its guests).
// Used by vladbud-runner before it loads a candidate and by vladbud-launch-record before it
// runs a candidate's host code (the launch record of ladder rung 1).
std::string forbid_new_processes();

// No reach into other processes: one candidate must not reach another, concurrent runner (the
// pool's evaluators overlap). The main barrier is a uid of each runner's own when VladBud runs
// as root (RunnerClient::sandbox_id: the kernel grants prlimit64, setpriority, sched_setaffinity,
// ioprio_set and SIGIO ownership to any process of the same uid); this is the second layer, and
// the only one when the runners share the user's uid (not root).
//
// Call after PR_SET_DUMPABLE 0: a non-dumpable process's /proc/<pid>/{mem,environ,root,fd} and
// ptrace are closed to every other process of its uid. A second seccomp filter (stacked on
// forbid_new_processes's) keeps it that way and closes signals: prctl(PR_SET_DUMPABLE, v) with
// v != 0 is refused (EPERM), so a candidate cannot reopen its own runner to a colluding one
// (v == 0 stays allowed: a runner exec'd after the filter closes itself with it); kill,
// tgkill, rt_sigqueueinfo and rt_tgsigqueueinfo are allowed only with this process as the
// target (raise, abort and pthread_kill keep working; kill(-1) and kill(0) are refused, EPERM);
// tkill and pidfd_send_signal are refused (EPERM), and so is every x32 system call. Returns ""
// or why it could not be installed.
// Used with forbid_new_processes by vladbud-runner and vladbud-launch-record, and alone by the
// runner client before it executes a launcher (the Triton interpreter runner, a Python script):
// a filter survives execve, and the pid it names is the same after it.
std::string forbid_reaching_other_processes();

}  // namespace vb
