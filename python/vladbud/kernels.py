"""VladBud kernel libraries as torch custom ops, called through DLPack.

A kernel library (built by a backend from one source, DESIGN §3) exports
    int vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs, int n_outputs,
                      const double* attrs, int n_attrs, void* stream);
    const char* vb_kernel_last_error(void);
taking ARRAYS of DLTensor structs in the type's ABI order (`vladbud bench --kernel T --abi`).
Each torch tensor is exported with torch.utils.dlpack.to_dlpack; the capsule's DLManagedTensor
(or DLManagedTensorVersioned) holds the DLTensor that is copied into the array; the capsules
stay alive for the call, so shape/stride pointers stay valid. The kernel never allocates: the
op allocates the outputs with torch.empty.

The custom ops are `torch.ops.vladbud.<type>` (torch.library.custom_op), one per kernel type;
`bind(type, path)` says which library serves a type. Each call is counted in CALLS.
"""
import ctypes
from collections import Counter

import torch
from torch import Tensor
from torch.utils.dlpack import to_dlpack


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
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


class KernelError(RuntimeError):
    """The kernel returned nonzero; the message is vb_kernel_last_error()."""


class KernelLibrary:
    """A loaded kernel library (one kernel type)."""

    def __init__(self, path: str, kernel_type: str, device: str = "cpu"):
        """device: where the kernel reads its tensors ("cpu" for the CPU backend, "cuda")."""
        self.path, self.kernel_type, self.device = path, kernel_type, device
        self.lib = ctypes.CDLL(path)
        self.fn = self.lib.vb_kernel_run
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.POINTER(DLTensor), ctypes.c_int, ctypes.POINTER(DLTensor),
                            ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.c_void_p]
        self.err = self.lib.vb_kernel_last_error
        self.err.restype = ctypes.c_char_p

    def run(self, inputs, outputs, attrs):
        """Calls the kernel on contiguous tensors (ABI order) with float attributes."""
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


LIBS = {}
CALLS = Counter()


def bind(kernel_type: str, path: str, device: str = "cpu"):
    """Serve torch.ops.vladbud.<kernel_type> with the library at path, whose kernel reads
    tensors on `device` ("cpu" or "cuda")."""
    LIBS[kernel_type] = KernelLibrary(path, kernel_type, device)


def unbind_all():
    LIBS.clear()


def _run(t, inputs, outputs, attrs):
    lib = LIBS.get(t)
    if lib is None:
        raise RuntimeError(f"no kernel library bound for {t} (vladbud.kernels.bind)")
    CALLS[t] += 1
    home = outputs[0].device
    if lib.device == "cpu" and home.type != "cpu":
        # A CPU-backend kernel inside a GPU model: staged through host memory (correct, and the
        # copies are part of the measured latency).
        host_out = [torch.empty_like(o, device="cpu") for o in outputs]
        lib.run([x.detach().to("cpu").contiguous() for x in inputs], host_out, attrs)
        for o, h in zip(outputs, host_out):
            o.copy_(h)
        return outputs[0]
    lib.run([x.contiguous() for x in inputs], outputs, attrs)
    return outputs[0]


@torch.library.custom_op("vladbud::matmul", mutates_args=())
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """C[M,N] = A[M,K] B[K,N]."""
    return _run("matmul", [a, b], [a.new_empty(a.shape[0], b.shape[1])], [])


@torch.library.custom_op("vladbud::softmax", mutates_args=())
def softmax(x: Tensor) -> Tensor:
    """Softmax over the last dim of x[R,C]."""
    return _run("softmax", [x], [torch.empty_like(x, memory_format=torch.contiguous_format)], [])


@torch.library.custom_op("vladbud::layernorm", mutates_args=())
def layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """LayerNorm over the last dim of x[B,D]."""
    return _run("layernorm", [x, weight, bias], [torch.empty_like(x, memory_format=torch.contiguous_format)], [eps])


@torch.library.custom_op("vladbud::rmsnorm", mutates_args=())
def rmsnorm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """x[M,N] / sqrt(mean(x^2) + eps) * weight[N]."""
    return _run("rmsnorm", [x, weight], [torch.empty_like(x, memory_format=torch.contiguous_format)], [eps])


@torch.library.custom_op("vladbud::flash_attention", mutates_args=())
def flash_attention(q: Tensor, k: Tensor, v: Tensor, causal: float, sm_scale: float) -> Tensor:
    """softmax(q k^T sm_scale + mask) v over q,k,v[B,H,S,D]."""
    return _run("flash_attention", [q, k, v], [q.new_empty(q.shape)], [causal, sm_scale])


@torch.library.custom_op("vladbud::fused_mlp", mutates_args=())
def fused_mlp(x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor) -> Tensor:
    """(silu(x w_gate^T) * (x w_up^T)) w_down^T, x[B,D], w_gate/w_up[H,D], w_down[D,H]."""
    return _run("fused_mlp", [x, w_gate, w_up, w_down], [x.new_empty(x.shape[0], w_down.shape[0])], [])


@torch.library.custom_op("vladbud::cross_entropy", mutates_args=())
def cross_entropy(logits: Tensor, targets: Tensor, ignore_index: float) -> Tensor:
    """Mean NLL of logits[B,V] at int64 targets[B] (0-d fp32)."""
    return _run("cross_entropy", [logits, targets],
                [torch.empty((), dtype=torch.float32, device=logits.device)], [ignore_index])


@torch.library.custom_op("vladbud::rotary_embedding", mutates_args=())
def rotary_embedding(x: Tensor, cos: Tensor, sin: Tensor, interleaved: float) -> Tensor:
    """RoPE of x[B,H,S,D] with cos/sin[S,D/2] (x's dtype)."""
    return _run("rotary_embedding", [x, cos, sin], [x.new_empty(x.shape)], [interleaved])


@torch.library.custom_op("vladbud::reduce", mutates_args=())
def reduce(x: Tensor) -> Tensor:
    """Sum over the last dim of x[M,N] -> y[M]."""
    return _run("reduce", [x], [x.new_empty(x.shape[0])], [])


@matmul.register_fake
def _(a, b):
    return a.new_empty(a.shape[0], b.shape[1])


for _op in (softmax, rotary_embedding):
    _op.register_fake(lambda x, *rest: torch.empty_like(x))
layernorm.register_fake(lambda x, w, b, eps: torch.empty_like(x))
rmsnorm.register_fake(lambda x, w, eps: torch.empty_like(x))
flash_attention.register_fake(lambda q, k, v, c, s: torch.empty_like(q))
fused_mlp.register_fake(lambda x, g, u, d: x.new_empty(x.shape[0], d.shape[0]))
cross_entropy.register_fake(lambda lg, t, ii: torch.empty((), dtype=torch.float32, device=lg.device))
reduce.register_fake(lambda x: x.new_empty(x.shape[0]))
