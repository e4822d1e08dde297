"""The Triton interpreter runner: rung 2 of the ladder for Triton kernels without a GPU (DESIGN §4, §6).

A Python twin of vladbud-runner (src/runner/runner_main.cpp) speaking the same protocol
(src/runner/protocol.h): the shared arena on fd 3, JSON-line commands on fd 4, replies on fd 5,
the candidate on fd 6 (here a Triton source, not a shared library). The evaluator starts it
through the runner client exactly as it starts the C++ runner -- same sandbox (private file
system, no privileges, memory limit, scrubbed environment), same arena with guard bands, same
poisoning, output hash and timeout -- so the parent's guards and fp64 oracle apply unchanged.
Kernels run under TRITON_INTERPRET=1: Triton's interpreter executes every program of the grid
on the CPU with numpy, so this checks correctness only; its times are host times of an
emulation and the evaluator does not report them.

It is executed as a script by path (the client passes it as /proc/self/fd/7), so it imports
nothing from the vladbud package.

The candidate module must define vb_kernel_run(inputs, outputs, attrs): lists of contiguous
torch tensors (views of the arena, ABI order) and the attributes as floats.

Gaps of the interpreter (Triton 3.6), reported as {"ok":false, "guard":"inconclusive"}: it
stores bf16 as raw uint16 and computes on those bits, so any arithmetic, comparison, reduction
or tl.dot on bf16 values gives wrong numbers silently (loads, stores and conversions to and
from fp32 are exact). The runner refuses those operations instead of returning wrong values.
A tl.dot on fp32 operands with the default "tf32" input precision is computed with both operands
rounded to TF32 (10-bit mantissa), as the tensor cores would, so a TF32 kernel fails the fp32
threshold here as it does on the GPU.
"""
import os
import sys
import time
import traceback

os.environ["TRITON_INTERPRET"] = "1"
_tmp = os.environ.get("TMPDIR", "/tmp")
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(_tmp, "triton-cache"))
os.environ["HOME"] = _tmp  # the sandbox's HOME does not exist; caches go to the private tmp

ARENA_FD, COMMAND_FD, REPLY_FD, SOURCE_FD = 3, 4, 5, 6
GUARD_BAND_BYTE = 0xA5
POISON = {4: 0x7FBADBAD, 2: {"fp16": 0x7DAD, "bf16": 0x7FAD}}  # protocol.h kPoison*
FNV_OFFSET, FNV_PRIME, MASK64 = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


class InterpreterGap(Exception):
    """An operation Triton's interpreter cannot compute correctly (the case is inconclusive)."""


def fnv1a64(buf, h=FNV_OFFSET):
    """FNV-1a 64 of `buf` 8 bytes at a time, then byte by byte (runner::fnv1a64, protocol.cpp)."""
    import numpy as np
    n = len(buf)
    words = np.frombuffer(buf, dtype="<u8", count=n // 8).tolist()
    for w in words:
        h = ((h ^ w) * FNV_PRIME) & MASK64
    for b in bytes(buf[(n // 8) * 8:]):
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h


def patch_interpreter():
    """Makes the interpreter refuse bf16 arithmetic (InterpreterGap) and emulate TF32 dots."""
    import numpy as np
    import triton.language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter as it

    builder = it.InterpreterBuilder
    if getattr(builder, "_vb_patched", False):
        return

    def bf16(*handles):
        return any(getattr(getattr(h, "dtype", None), "scalar", None) == tl.bfloat16 for h in handles)

    def refuse(what):
        raise InterpreterGap(f"the Triton interpreter cannot compute {what} on bf16 values (it "
                             "computes on their raw bits); the case needs a GPU")

    binary, unary, ternary, fma, dot = (builder.binary_op, builder.unary_op, builder.ternary_op,
                                        builder.create_fma, builder.create_dot)

    def binary_op(self, lhs, rhs, op):
        if bf16(lhs, rhs):
            refuse(f"{getattr(op, '__name__', 'a binary operation')}")
        return binary(self, lhs, rhs, op)

    def unary_op(self, arg, op):
        if bf16(arg):
            refuse(f"{getattr(op, '__name__', 'a unary operation')}")
        return unary(self, arg, op)

    def ternary_op(self, a, b, c, op):
        if op is not np.where and bf16(a, b, c):
            refuse(f"{getattr(op, '__name__', 'a ternary operation')}")
        return ternary(self, a, b, c, op)

    def create_fma(self, x, y, z):
        if bf16(x, y, z):
            refuse("fma")
        return fma(self, x, y, z)

    def to_tf32(a):
        bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
        finite = (bits & 0x7F800000) != 0x7F800000
        rounded = ((bits.astype(np.uint64) + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
        return np.where(finite, rounded, bits).view(np.float32)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if bf16(a, b):
            refuse("tl.dot")
        if (input_precision == ir.INPUT_PRECISION.TF32 and a.dtype.scalar == tl.float32
                and b.dtype.scalar == tl.float32):
            a = it.TensorHandle(to_tf32(a.data), a.dtype.scalar)
            b = it.TensorHandle(to_tf32(b.data), b.dtype.scalar)
        return dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.binary_op, builder.unary_op, builder.ternary_op = binary_op, unary_op, ternary_op
    builder.create_fma, builder.create_dot = create_fma, create_dot
    if not hasattr(builder, "get_bf16"):
        # A Python scalar in a bf16 expression (x * 2): the interpreter has no bf16 constants.
        def get_bf16(self, value):
            refuse("a scalar constant")
        builder.get_bf16 = get_bf16
    reduce_apply = it.ReduceOps.apply_impl

    def apply_impl(self, input):
        if bf16(*[getattr(x, "handle", x) for x in input]):
            refuse("a reduction")
        return reduce_apply(self, input)

    it.ReduceOps.apply_impl = apply_impl
    builder._vb_patched = True


TORCH_DTYPES = {}


def torch_dtype(name):
    import torch
    if not TORCH_DTYPES:
        TORCH_DTYPES.update({"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
                             "fp64": torch.float64, "int64": torch.int64})
    if name not in TORCH_DTYPES:
        raise ValueError(f"unknown dtype {name}")
    return TORCH_DTYPES[name]


ELEM_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "int64": 8}


class Runner:
    def __init__(self):
        self.mm = None
        self.size = 0
        self.run = None
        self.serial = 0

    # ---- commands --------------------------------------------------------------------------

    def load(self, cmd):
        import importlib.util
        os.lseek(SOURCE_FD, 0, os.SEEK_SET)
        chunks = []
        while True:
            b = os.read(SOURCE_FD, 1 << 16)
            if not b:
                break
            chunks.append(b)
        # Triton's JIT reads the kernel's source through inspect: the module needs a real file,
        # written into the runner's private temporary directory.
        self.serial += 1
        d = os.path.join(_tmp, f"vb-kernel-{os.getpid()}-{self.serial}")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "kernel.py")
        with open(path, "wb") as f:
            f.write(b"".join(chunks))
        try:
            spec = importlib.util.spec_from_file_location("vb_triton_kernel", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        except Exception as e:  # noqa: BLE001 -- any error of the candidate is its own
            return {"ok": False, "error": f"importing the kernel failed: {type(e).__name__}: {e}"}
        run = getattr(mod, "vb_kernel_run", None)
        if not callable(run):
            return {"ok": False, "error": "the kernel module does not define vb_kernel_run(inputs, outputs, attrs)"}
        self.run = run
        return {"ok": True}

    def map(self, cmd):
        import mmap
        size = int(cmd["size"])
        if self.mm is not None:
            self.mm = None  # released when the last tensor view is gone
        self.mm = mmap.mmap(ARENA_FD, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.size = size
        return {"ok": True}

    def tensor(self, desc):
        import torch
        off = int(desc["off"])
        dt = desc["dtype"]
        shape = [int(s) for s in desc["shape"]]
        n = 1
        for s in shape:
            n *= s
        nbytes = n * ELEM_BYTES[dt]
        if off + nbytes > self.size:
            raise ValueError("tensor outside the arena")
        if n == 0:
            return torch.empty(shape, dtype=torch_dtype(dt)), off, 0, dt
        t = torch.frombuffer(self.mm, dtype=torch_dtype(dt), count=n, offset=off).view(shape)
        return t, off, nbytes, dt

    def poison(self, outs):
        import torch
        for t, _, nbytes, dt in outs:
            if nbytes == 0:
                continue
            eb = ELEM_BYTES[dt]
            if eb == 4:
                t.view(torch.int32).fill_(POISON[4])
            elif eb == 2:
                t.view(torch.int16).fill_(POISON[2][dt])
            else:
                t.view(torch.uint8).fill_(0xFF)

    def call(self, cmd):
        if self.run is None:
            return {"ok": False, "error": "no kernel loaded"}
        if self.mm is None:
            return {"ok": False, "error": "arena not mapped"}
        sets = []
        for s in cmd["sets"]:
            sets.append(([self.tensor(d) for d in s["in"]], [self.tensor(d) for d in s["out"]]))
        if not sets:
            return {"ok": False, "error": "call without tensor sets"}
        attrs = [float(a) for a in cmd.get("attrs", [])]
        warmup = int(cmd.get("warmup", 0))
        warmup_set = int(cmd.get("warmup_set", 0))
        order = [int(i) for i in cmd.get("order", [0])]
        verify = bool(cmd.get("verify", False))
        if any(i < 0 or i >= len(sets) for i in order):
            return {"ok": False, "error": "set index out of range"}
        if warmup_set < 0 or warmup_set >= len(sets):
            return {"ok": False, "error": "warm-up set out of range"}

        def one(i):
            ins, outs = sets[i]
            t0 = time.perf_counter_ns()
            self.run([t for t, *_ in ins], [t for t, *_ in outs], list(attrs))
            return max(1, time.perf_counter_ns() - t0)

        loop0 = time.perf_counter_ns()
        for _ in range(warmup):
            one(warmup_set)
        timed0 = time.perf_counter_ns()
        times = [one(i) for i in order]
        timed_ns = time.perf_counter_ns() - timed0
        last = order[-1] if order else warmup_set
        if verify:
            self.poison(sets[last][1])
            one(last)
        h0 = time.perf_counter_ns()
        h = FNV_OFFSET
        for _, off, nbytes, _ in sets[last][1]:
            h = fnv1a64(memoryview(self.mm)[off:off + nbytes], h)
        staging = time.perf_counter_ns() - h0
        return {"ok": True, "times_ns": times, "busy_ns": sum(times), "timed_ns": timed_ns,
                "loop_ns": time.perf_counter_ns() - loop0, "staging_ns": staging,
                "verify_set": last, "verify_hash": f"{h:016x}"}

    def handle(self, cmd):
        op = cmd.get("op")
        if op == "load":
            return self.load(cmd)
        if op == "map":
            return self.map(cmd)
        if op == "call":
            try:
                return self.call(cmd)
            except Exception as e:  # noqa: BLE001 -- the candidate's error is a verdict
                # The interpreter wraps errors raised inside a kernel (InterpreterError).
                gap = e
                while gap is not None and not isinstance(gap, InterpreterGap):
                    gap = gap.__cause__ or gap.__context__
                if gap is not None:
                    return {"ok": False, "guard": "inconclusive", "error": str(gap)}
                if isinstance(e, MemoryError):
                    return {"ok": False, "guard": "memory", "error": "out of memory in the kernel"}
                where = traceback.extract_tb(e.__traceback__)
                at = f" (kernel.py:{where[-1].lineno})" if where and where[-1].filename.endswith("kernel.py") else ""
                return {"ok": False, "guard": "kernel_error",
                        "error": f"kernel raised {type(e).__name__}: {e}{at}"[:2000]}
        if op == "ping":
            return {"ok": True, "pong": cmd.get("nonce", 0)}
        return {"ok": False, "error": f"unknown op {op}"}


def close_to_other_processes():
    """prctl(PR_SET_DUMPABLE, 0), as vladbud-runner does after its exec: a dumpable runner's
    /proc/<pid>/{mem,environ,root} and ptrace are open to every process of its uid (under root
    each runner has a uid of its own; without root they share the user's). The runner client's
    seccomp filter (core/sandbox.h forbid_reaching_other_processes) refuses the way back and any
    signal out. Best effort: without libc's prctl it stays open."""
    try:
        import ctypes
        if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
            print(f"vladbud triton runner: prctl(PR_SET_DUMPABLE, 0) failed (errno "
                  f"{ctypes.get_errno()}): other processes of this uid may open this one",
                  file=sys.stderr)
    except (OSError, AttributeError) as e:
        print(f"vladbud triton runner: cannot close itself to other processes ({e})", file=sys.stderr)


def main(argv):
    import json
    flavour = "cpu"
    for i, a in enumerate(argv):
        if a == "--backend" and i + 1 < len(argv):
            flavour = argv[i + 1]
    if flavour != "cpu":
        print(f"vladbud triton runner: the interpreter runs kernels on host memory only "
              f"(--backend cpu), not '{flavour}'", file=sys.stderr)
        return 2
    os.closerange(SOURCE_FD + 1, 1 << 16)
    close_to_other_processes()
    try:
        cmds = os.fdopen(COMMAND_FD, "r", encoding="utf-8", errors="replace")
    except OSError:
        print("vladbud triton runner: must be started by the evaluator (no command pipe)",
              file=sys.stderr)
        return 2
    import torch  # noqa: F401 -- the interpreter's tensors; imported before the first command
    patch_interpreter()
    runner = Runner()
    for line in cmds:
        try:
            cmd = json.loads(line)
            if cmd.get("op") == "exit":
                break
            reply = runner.handle(cmd)
        except Exception as e:  # noqa: BLE001
            reply = {"ok": False, "error": f"runner: {type(e).__name__}: {e}"}
        data = (json.dumps(reply) + "\n").encode("utf-8", "replace")
        while data:
            n = os.write(REPLY_FD, data)
            if n <= 0:
                return 3
            data = data[n:]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
