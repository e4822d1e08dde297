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

}  // namespace vb
