"""Putting VladBud kernels into a model: module-level and operator-level replacement.

Module level (`replace_modules`): nn.Linear -> matmul (W^T kept contiguous once, bias added by
torch), nn.LayerNorm -> layernorm, a module class named *RMSNorm with `weight` and `eps` (or HF's
`variance_epsilon`) -> rmsnorm, a RotaryEmbedding with `tables(seq, device)` (models/llama.py)
-> rotary_embedding, a SwiGLU MLP with w1/w3/w2 or HF's gate_proj/up_proj/down_proj (no bias,
SiLU) -> fused_mlp. HF's RoPE is a free function (apply_rotary_pos_emb), not replaced.
Operator level (`OperatorMode`, a TorchFunctionMode): F.scaled_dot_product_attention (no mask,
no dropout) -> flash_attention, softmax over the last dim -> softmax, F.cross_entropy (mean, no
weights/smoothing) -> cross_entropy, torch.sum over the last dim -> reduce, and F.linear /
F.layer_norm calls that did not come from replaced modules -> matmul / layernorm.
Everything else runs in PyTorch. Only the types given are replaced.
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from . import kernels  # noqa: F401  (registers torch.ops.vladbud.*)

ops = torch.ops.vladbud


def _rows(x):
    return x.reshape(-1, x.shape[-1])


class VbLinear(nn.Module):
    def __init__(self, lin: nn.Linear):
        super().__init__()
        self.out_features = lin.out_features
        self.register_buffer("wt", lin.weight.detach().t().contiguous())  # B[K,N]
        self.bias = None if lin.bias is None else lin.bias.detach()

    def forward(self, x):
        y = ops.matmul(_rows(x).contiguous(), self.wt)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


class VbLayerNorm(nn.Module):
    def __init__(self, ln: nn.LayerNorm):
        super().__init__()
        d = int(math.prod(ln.normalized_shape))
        p = next(iter(ln.parameters()), None)
        dev = p.device if p is not None else "cpu"
        dt = p.dtype if p is not None else torch.float32
        self.weight = ln.weight.detach() if ln.weight is not None else torch.ones(d, device=dev, dtype=dt)
        b = getattr(ln, "bias", None)
        self.bias = b.detach() if b is not None else torch.zeros(d, device=dev, dtype=dt)
        self.eps, self.d = float(ln.eps), d

    def forward(self, x):
        return ops.layernorm(x.reshape(-1, self.d).contiguous(), self.weight, self.bias, self.eps).reshape(x.shape)


def _rms_eps(m):
    """eps of an RMSNorm module (ours: eps; HF LlamaRMSNorm: variance_epsilon), or None."""
    for name in ("eps", "variance_epsilon"):
        v = getattr(m, name, None)
        if isinstance(v, (int, float)):
            return float(v)
    return None


class VbRMSNorm(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.weight, self.eps = m.weight.detach(), _rms_eps(m)

    def forward(self, x):
        w = self.weight.to(x.dtype)
        return ops.rmsnorm(_rows(x).contiguous(), w, self.eps).reshape(x.shape)


class VbRotary(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.inner = m

    def forward(self, x):
        cos, sin = self.inner.tables(x.shape[-2], x.device)
        return ops.rotary_embedding(x.contiguous(), cos.to(x.dtype).contiguous(),
                                    sin.to(x.dtype).contiguous(), 0.0)


# SwiGLU projections by layout: (gate, up, down) attribute names.
_SWIGLU_NAMES = [("w1", "w3", "w2"),                          # models/llama.py, Meta's LLaMA
                 ("gate_proj", "up_proj", "down_proj")]       # HF LlamaMLP / MistralMLP


def _swiglu_names(m):
    for names in _SWIGLU_NAMES:
        lins = [getattr(m, n, None) for n in names]
        if all(isinstance(l, nn.Linear) and l.bias is None for l in lins):
            act = getattr(m, "act_fn", None)
            if act is None or isinstance(act, nn.SiLU) or type(act).__name__ == "SiLUActivation":
                return names
    return None


class VbFusedMLP(nn.Module):
    def __init__(self, m):
        super().__init__()
        g, u, d = _swiglu_names(m)
        self.g, self.u, self.d = (getattr(m, n).weight.detach() for n in (g, u, d))

    def forward(self, x):
        return ops.fused_mlp(_rows(x).contiguous(), self.g, self.u, self.d).reshape(x.shape)


def _is_swiglu(m):
    return _swiglu_names(m) is not None and type(m).__name__ in ("FeedForward", "LlamaMLP", "MistralMLP", "SwiGLU")


def replace_modules(model: nn.Module, types) -> dict:
    """Replaces submodules in place for the kernel types in `types`; returns counts per type.
    fused_mlp takes precedence over matmul inside a SwiGLU block."""
    counts = {}

    def swap(parent, name, new, t):
        setattr(parent, name, new)
        counts[t] = counts.get(t, 0) + 1

    def walk(mod):
        for name, child in list(mod.named_children()):
            cls = type(child).__name__
            if "fused_mlp" in types and _is_swiglu(child):
                swap(mod, name, VbFusedMLP(child), "fused_mlp")
            elif "matmul" in types and type(child) is nn.Linear:
                swap(mod, name, VbLinear(child), "matmul")
            elif "layernorm" in types and type(child) is nn.LayerNorm:
                swap(mod, name, VbLayerNorm(child), "layernorm")
            elif "rmsnorm" in types and cls.endswith("RMSNorm") and hasattr(child, "weight") and \
                    _rms_eps(child) is not None:
                swap(mod, name, VbRMSNorm(child), "rmsnorm")
            elif "rotary_embedding" in types and cls == "RotaryEmbedding" and hasattr(child, "tables"):
                swap(mod, name, VbRotary(child), "rotary_embedding")
            else:
                walk(child)

    walk(model)
    return counts


class OperatorMode(TorchFunctionMode):
    """Routes the supported PyTorch functions to VladBud ops for the given types."""

    def __init__(self, types):
        super().__init__()
        self.types = set(types)
        self.counts = {}

    def _hit(self, t):
        self.counts[t] = self.counts.get(t, 0) + 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        t = self.types
        if func is F.scaled_dot_product_attention and "flash_attention" in t:
            q, k, v = args[:3]
            mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            drop = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
            causal = kwargs.get("is_causal", args[5] if len(args) > 5 else False)
            scale = kwargs.get("scale", args[6] if len(args) > 6 else None)
            if mask is None and drop == 0.0 and q.dim() == 4 and q.shape == k.shape == v.shape:
                self._hit("flash_attention")
                s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
                return ops.flash_attention(q.contiguous(), k.contiguous(), v.contiguous(),
                                           1.0 if causal else 0.0, float(s))
        if func in (F.softmax, torch.softmax, torch.Tensor.softmax) and "softmax" in t:
            x = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if dim in (-1, x.dim() - 1) and kwargs.get("dtype") is None:
                self._hit("softmax")
                return ops.softmax(_rows(x).contiguous()).reshape(x.shape)
        if func is F.cross_entropy and "cross_entropy" in t:
            x, y = args[:2]
            if x.dim() == 2 and kwargs.get("weight") is None and kwargs.get("reduction", "mean") == "mean" \
                    and kwargs.get("label_smoothing", 0.0) == 0.0:
                self._hit("cross_entropy")
                return ops.cross_entropy(x.contiguous(), y.long().contiguous(),
                                         float(kwargs.get("ignore_index", -100))).to(x.dtype)
        if func in (torch.sum, torch.Tensor.sum) and "reduce" in t:
            x = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            if dim in (-1, x.dim() - 1, (-1,), [-1]) and not kwargs.get("keepdim", False) and x.dim() >= 2 \
                    and x.is_floating_point():
                self._hit("reduce")
                return ops.reduce(_rows(x).contiguous()).reshape(x.shape[:-1])
        if func is F.linear and "matmul" in t:
            x, w = args[:2]
            b = kwargs.get("bias", args[2] if len(args) > 2 else None)
            self._hit("matmul")
            y = ops.matmul(_rows(x).contiguous(), w.t().contiguous())
            if b is not None:
                y = y + b
            return y.reshape(*x.shape[:-1], w.shape[0])
        return func(*args, **kwargs)


def with_kernels(model: nn.Module, types):
    """A deep copy of model with module-level replacements; pair it with OperatorMode(types)."""
    m = copy.deepcopy(model)
    counts = replace_modules(m, types)
    return m, counts
