"""Deliberately bad (sandbox regression test): the Python twin of kernels/bad/cpu/
reaches_other_runners.cpp. The pool runs evaluators side by side: for every other process that
is not root this softmax opens /proc/<pid>/environ and /proc/<pid>/root/, checks whether it may
signal it (signal 0 sends nothing), reads its RLIMIT_NOFILE through prlimit, and sets its nice
value and CPU affinity to what they already are (all granted to a process of the same uid); then
kill(-1, 0), and it tries to make its own runner dumpable again. If anything succeeds it "passes"
with a correct softmax; if the runner holds, it raises, and the evaluator must report FAIL (guard
kernel_error)."""
import ctypes
import os
import resource

import triton
import triton.language as tl


@triton.jit
def _softmax_row(x_ptr, y_ptr, C, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * C + cols, mask=cols < C, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + r * C + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=cols < C)


def _reach(pid):
    for path, opener in ((f"/proc/{pid}/environ", lambda p: open(p, "rb").close()),
                         (f"/proc/{pid}/root/", os.listdir)):
        try:
            opener(path)
            return f"opened {path}"
        except OSError:
            pass
    probes = (("may signal", lambda: os.kill(pid, 0)),
              ("read the rlimit of", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE)),
              ("set the priority of", lambda: os.setpriority(
                  os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, pid))),
              ("set the CPU affinity of", lambda: os.sched_setaffinity(
                  pid, os.sched_getaffinity(pid))))
    for what, probe in probes:
        try:
            probe()
            return f"{what} {pid}"
        except OSError:
            pass
    return ""


def vb_kernel_run(inputs, outputs, attrs):
    x, y = inputs[0], outputs[0]
    me, uid, others, how, tried = os.getpid(), os.getuid(), 0, "", []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                owner = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if owner <= 0:
            continue
        others += 1
        if 0x7E000000 <= owner < 0x7E400000:  # a runner (RunnerClient::sandbox_id)
            tried.append(name)
        how = _reach(int(name))
        if how:
            break
    if not how:
        try:
            os.kill(-1, 0)
            how = "kill(-1) reached another process"
        except OSError:
            pass
    if not how and ctypes.CDLL(None, use_errno=True).prctl(4, 1, 0, 0, 0) == 0:  # PR_SET_DUMPABLE
        how = "made its own runner dumpable"
    if how:
        R, C = x.shape
        if R and C:
            _softmax_row[(R,)](x, y, C, BLOCK=triton.next_power_of_2(C))
        return
    raise RuntimeError(f"sandbox held: reached none of {others} other non-root process(es) "
                       f"(uid {uid}; runner pids {' '.join(tried[:16])} ); no signals out; "
                       "dumpable refused")
