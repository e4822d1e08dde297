"""VladBud kernel libraries as compiled torch ops: torch.ops.vladbud.<type>.

A kernel library (built by a backend from one source, DESIGN §3) exports
    int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs, int n_outputs,
                      const double* attrs, int n_attrs, void* stream);
    const char* vb_kernel_last_error(void);
taking ARRAYS of DLTensor structs in the type's ABI order (`vladbud bench --kernel T --abi`).

The ops are defined in C++ (python/vladbud/csrc/vladbud_ops.cpp, built once and loaded by
vladbud.ext on import of this module): CPU and CUDA kernels that fill the DLTensors straight
from the tensors and call the bound library once, on torch's current CUDA stream; Meta kernels
for fake tensors, torch.compile and CUDA graphs. No Python runs per call. The schemas:

    matmul(Tensor a, Tensor b) -> Tensor                       C[M,N] = A[M,K] B[K,N]
    softmax(Tensor x) -> Tensor                                 over the last dim of x[R,C]
    layernorm(Tensor x, Tensor weight, Tensor bias, float eps)  over the last dim of x[B,D]
    rmsnorm(Tensor x, Tensor weight, float eps)                 x[M,N] / rms * weight[N]
    flash_attention(Tensor q, Tensor k, Tensor v, float causal, float sm_scale)   q[B,H,S,D],
                                                                k,v[B,H_kv,S,D] with H % H_kv == 0
                                                                (GQA: query head h reads KV head
                                                                h // (H/H_kv)) -> [B,H,S,D]
    fused_mlp(Tensor x, Tensor w_gate, Tensor w_up, Tensor w_down)  x[B,D], w_gate/w_up[H,D],
                                                                w_down[D,H] -> [B,D]
    cross_entropy(Tensor logits, Tensor targets, float ignore_index) -> 0-d fp32
                                                                logits[B,V], int64 targets[B]
    rotary_embedding(Tensor x, Tensor cos, Tensor sin, float interleaved)  x[B,H,S,D],
                                                                cos/sin[S,D/2]
    reduce(Tensor x) -> Tensor                                  y[M] = sum_j x[M,j]

Outputs have the first input's dtype and device (cross_entropy: fp32) and are contiguous.
flash_attention checks its shapes (also in its Meta kernel) and raises RuntimeError naming the
rule: 4-D q/k/v of one dtype, k and v of one shape, B/S/D as q's, H_kv >= 1 dividing H.
`bind(type, path, device)` says which library serves a type, `bind_shape("matmul", (N, K), path,
device)` which one serves matmul's calls at one weight shape; each call is counted in CALLS.
A failing kernel raises KernelError (RuntimeError) naming the type, the library and
vb_kernel_last_error(); an unbound type raises RuntimeError naming vladbud.kernels.bind.

KernelLibrary (ctypes + DLPack capsules) calls a library directly from Python; it is kept for
scripts (bench/ce_kernel_breakdown.py) and as the reference for bench/op_overhead.py.
"""
import ctypes
import os
from collections.abc import Mapping

import torch
from torch.utils.dlpack import to_dlpack

from . import ext


class DLDevice(ctypes.Structure):
    """DLPack's DLDevice (device_type: 1 CPU, 2 CUDA; device_id)."""

    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """DLPack's DLDataType (code: 0 int, 1 uint, 2 float, 4 bfloat; bits; lanes)."""

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """DLPack's DLTensor (shape/strides in elements; byte_offset in bytes)."""

    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    """DLPack's legacy managed tensor (capsule name 'dltensor')."""

    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    """DLPack's version pair of DLManagedTensorVersioned."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    """DLPack >= 1.0 managed tensor (capsule name 'dltensor_versioned')."""

    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_get_ptr.restype = ctypes.c_void_p
_get_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


def dltensor_of(capsule) -> DLTensor:
    """The DLTensor inside a DLPack capsule (legacy 'dltensor' or 'dltensor_versioned')."""
    name = _get_name(capsule)
    ptr = _get_ptr(capsule, name)
    if name == b"dltensor_versioned":
        return DLManagedTensorVersioned.from_address(ptr).dl_tensor
    if name == b"dltensor":
        return DLManagedTensor.from_address(ptr).dl_tensor
    raise ValueError(f"not a DLPack capsule: {name!r}")


# What a failing kernel raises. The compiled ops report C++ errors, which torch turns into
# RuntimeError, so KernelError is RuntimeError itself: `except KernelError` catches a kernel's
# failure (message: "vladbud <type> kernel <library> failed (rc N): <vb_kernel_last_error()>"),
# and also any other RuntimeError of the call (an unbound type, a bad shape in a Meta kernel).
KernelError = RuntimeError


class KernelLibrary:
    """A kernel library (one kernel type) loaded with ctypes and called from Python through
    DLPack capsules (torch.utils.dlpack.to_dlpack). Not what torch.ops.vladbud uses; kept for
    scripts that call a library directly and as the reference of bench/op_overhead.py."""

    def __init__(self, path: str, kernel_type: str, device: str = "cpu"):
        """path: the .so; device: where the kernel reads its tensors ("cpu" for the CPU backend,
        "cuda"). Raises OSError when the library cannot be loaded, AttributeError when it lacks
        vb_kernel_run or vb_kernel_last_error."""
        self.path, self.kernel_type, self.device = path, kernel_type, device
        self.lib = ctypes.CDLL(path)
        self.fn = self.lib.vb_kernel_run
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.POINTER(DLTensor), ctypes.c_int, ctypes.POINTER(DLTensor),
                            ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.c_void_p]
        self.err = self.lib.vb_kernel_last_error
        self.err.restype = ctypes.c_char_p

    def run(self, inputs, outputs, attrs):
        """Calls the kernel once on contiguous tensors (inputs then outputs, ABI order, on the
        library's device) with float attributes, on torch's current stream for CUDA tensors.
        Raises KernelError with vb_kernel_last_error() on a nonzero return."""
        caps = [to_dlpack(t) for t in list(inputs) + list(outputs)]
        arr_in = (DLTensor * max(1, len(inputs)))()
        arr_out = (DLTensor * max(1, len(outputs)))()
        for i in range(len(inputs)):
            arr_in[i] = dltensor_of(caps[i])
        for i in range(len(outputs)):
            arr_out[i] = dltensor_of(caps[len(inputs) + i])
        a = (ctypes.c_double * max(1, len(attrs)))(*attrs)
        stream = None
        dev = (list(inputs) + list(outputs))[0].device
        if dev.type == "cuda":
            stream = ctypes.c_void_p(torch.cuda.current_stream(dev).cuda_stream)
        rc = self.fn(arr_in, len(inputs), arr_out, len(outputs), a, len(attrs), stream)
        del caps
        if rc != 0:
            msg = self.err()
            raise KernelError(f"{self.kernel_type} kernel {self.path} failed: "
                              f"{msg.decode(errors='replace') if msg else 'no message'}")


TYPES = ("matmul", "softmax", "layernorm", "rmsnorm", "flash_attention", "fused_mlp",
         "cross_entropy", "rotary_embedding", "reduce")
"""The kernel types, in the order of the extension's counters."""

ext.load()  # defines torch.ops.vladbud.* and torch.ops.vladbud_registry.*
_reg = torch.ops.vladbud_registry

LIBS = {}
"""kernel type (or (type, shape key)) -> (library path, device) of the bindings made through
bind() and bind_shape() (informational)."""


class _Calls(Mapping):
    """Calls of torch.ops.vladbud.<type> since the last clear(), per type, read from the
    extension's atomic counters (one increment per op call that found a bound library).
    Behaves like a read-only collections.Counter: CALLS[t] (0 when never called), CALLS.get(t, 0),
    dict(CALLS) (the nonzero counts), CALLS.clear() (resets every counter)."""

    def _counts(self):
        return dict(zip(TYPES, _reg._calls(False)))

    def __getitem__(self, t):
        return self._counts().get(t, 0)

    def get(self, t, default=0):
        """The count of type t, `default` for an unknown type or a zero count."""
        return self._counts().get(t) or default

    def __iter__(self):
        return iter({t: n for t, n in self._counts().items() if n})

    def __len__(self):
        return sum(1 for n in self._counts().values() if n)

    def __contains__(self, t):
        return bool(self._counts().get(t))

    def clear(self):
        """Resets every counter to 0."""
        _reg._calls(True)

    def reset(self):
        """Returns the counts (nonzero ones, as a dict) and resets them, atomically per type."""
        return {t: n for t, n in zip(TYPES, _reg._calls(True)) if n}

    def __repr__(self):
        return f"CALLS({dict(self)})"


CALLS = _Calls()


def bind(kernel_type: str, path: str, device: str = "cpu"):
    """Serve torch.ops.vladbud.<kernel_type> with the library at `path` (a .so exporting
    vb_kernel_run and vb_kernel_last_error), whose kernel reads tensors on `device`: "cpu" (CUDA
    tensors are then staged through host memory) or "cuda" (called on torch's current stream).
    Replaces an earlier binding of the type (dlopen RTLD_LOCAL; the old library is closed once no
    call uses it). Raises RuntimeError for an unknown type or device, or when the library cannot
    be loaded (the type is then unbound)."""
    LIBS.pop(kernel_type, None)
    _reg._bind(kernel_type, os.fspath(path), device)
    LIBS[kernel_type] = (os.fspath(path), device)


def bind_shape(kernel_type: str, key, path: str, device: str = "cpu"):
    """Serve the calls of torch.ops.vladbud.<kernel_type> at one shape with the library at
    `path`; the type's bind() library serves the others. Only matmul has per-shape bindings:
    key = (N, K), the calls whose B operand is [K, N] (an nn.Linear with weight [N, K]). verify
    binds each extracted folder's best kernel at its own shape this way. Replaces an earlier
    binding of the key. Raises RuntimeError for another type, a key that is not two positive
    integers, a bad device, or a library that cannot be loaded."""
    _reg._bind_shape(kernel_type, [int(x) for x in key], os.fspath(path), device)
    LIBS[(kernel_type, tuple(int(x) for x in key))] = (os.fspath(path), device)


def bound_shape(kernel_type: str, key) -> str:
    """Path of the library serving kernel_type at shape `key` ("" when none: bind()'s serves)."""
    return _reg._bound_shape(kernel_type, [int(x) for x in key])


def unbind_all():
    """Drops every binding; calls of the ops then raise until bind() is called again."""
    LIBS.clear()
    _reg._unbind_all()


def bound(kernel_type: str) -> str:
    """Path of the library serving kernel_type ("" when none)."""
    return _reg._bound(kernel_type)
