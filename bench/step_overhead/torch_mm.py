"""Step-overhead probe, PyTorch's side (issue 16): torch.mm at M x N x K over 16 rotating sets,
back-to-back (mode 0) or with the process stopped (SIGSTOP) before each call and continued by a
forked parent (mode 1), as `python -m vladbud.baseline` now times PyTorch.
Usage: torch_mm.py M N K CALLS MODE THREADS. Prints "torch mode K MxNxK thr T: p10 p50 p90"."""
import os
import signal
import sys
import time

import torch

M, N, K, calls, mode, thr = map(int, sys.argv[1:7])
torch.set_num_threads(thr)
r, w = os.pipe()
pid = os.fork() if mode == 1 else 0  # before any parallel torch work (fork-safe)
if pid > 0:
    os.close(w)
    while True:
        _, st = os.waitpid(pid, os.WUNTRACED)
        if not os.WIFSTOPPED(st):
            break
        os.kill(pid, signal.SIGCONT)
    print(os.read(r, 1000).decode().strip())
    sys.exit(0)
sets = [(torch.randn(M, K), torch.randn(K, N), torch.empty(M, N)) for _ in range(16)]
us = []
for c in range(calls + 3):
    a, b, o = sets[c % 16]
    if mode == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    t0 = time.perf_counter()
    torch.mm(a, b, out=o)
    t1 = time.perf_counter()
    if c >= 3:
        us.append((t1 - t0) * 1e6)
us.sort()
msg = (f"torch mode {mode} {M}x{N}x{K} thr {thr}: p10 {us[len(us) // 10]:.1f} "
       f"p50 {us[len(us) // 2]:.1f} p90 {us[len(us) * 9 // 10]:.1f}")
if mode == 1:
    os.write(w, msg.encode())
    os._exit(0)
print(msg)
