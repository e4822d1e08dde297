"""Which of the nine kernel types a unit of profiled time is, with the dimensions of that type.

Two kinds of evidence, in this order:
1. operator identity: the ATen op (aten::linear/addmm/mm/bmm/matmul -> matmul,
   aten::scaled_dot_product_attention -> flash_attention, aten::layer_norm -> layernorm, ...), or a
   sequence of top-level ops that is a hand-written kernel: RMSNorm (pow -> mean -> add ->
   rsqrt -> mul), RoPE (slice/slice -> mul/mul/sub/mul/mul/add -> cat, or HF's
   mul, slice, slice, neg, cat, mul, add), SwiGLU MLP (linear, silu, linear, mul, linear);
2. the device kernels' names, when the op is not known (cuBLAS nvjet_*, sm90_xmma_gemm_*,
   cublasGemv*/split-K reductions -> matmul; flash/fmha -> flash_attention; ...).

Dimensions use the type's names (src/kernels/<type>.cpp): matmul M,N,K; softmax R,C; layernorm
B,D; rmsnorm M,N; flash_attention B,H,S,D (+ HKV, the KV heads, when K/V have fewer heads than
Q: grouped-query attention through SDPA's enable_gqa); fused_mlp B,D,H; cross_entropy B,V;
rotary_embedding B,H,S,D; reduce M,N.
"""
import math
import re

KERNEL_TYPES = ["matmul", "softmax", "layernorm", "rmsnorm", "flash_attention", "fused_mlp",
                "cross_entropy", "rotary_embedding", "reduce"]

_OPS = {
    "aten::linear": "matmul", "aten::addmm": "matmul", "aten::mm": "matmul", "aten::bmm": "matmul",
    "aten::matmul": "matmul", "aten::baddbmm": "matmul",
    "aten::scaled_dot_product_attention": "flash_attention",
    "aten::_scaled_dot_product_flash_attention": "flash_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash_attention",
    "aten::_scaled_dot_product_efficient_attention": "flash_attention",
    "aten::_scaled_dot_product_cudnn_attention": "flash_attention",
    "aten::layer_norm": "layernorm", "aten::native_layer_norm": "layernorm",
    "aten::rms_norm": "rmsnorm", "aten::_fused_rms_norm": "rmsnorm",
    "aten::softmax": "softmax", "aten::_softmax": "softmax",
    "aten::cross_entropy_loss": "cross_entropy",
    "aten::sum": "reduce",
}

# Kernel-name patterns (searched, case-insensitive), first match wins: matmul before reduce so a
# cuBLAS gemv reduction is a matmul.
_KERNELS = [
    ("matmul", r"nvjet_|xmma_gemm|gemm|gemv|cublas|cutlass.*(gemm|conv)|splitkreduce"),
    ("flash_attention", r"flash|fmha|attention|_attn"),
    ("layernorm", r"layer_?norm"),
    ("rmsnorm", r"rms_?norm"),
    ("softmax", r"softmax"),
    ("cross_entropy", r"nll_loss|cross_entropy"),
    ("reduce", r"reduce_kernel|reduction"),
]


def type_of_kernel_name(name: str):
    """Kernel type of a device kernel name, or None."""
    for t, pat in _KERNELS:
        if re.search(pat, name, re.IGNORECASE):
            return t
    return None


def _prod(xs):
    return int(math.prod(xs)) if xs else 1


def _concrete(op, i, default=None):
    c = op.get("concrete") or []
    v = c[i] if i < len(c) else None
    if v in (None, "", "None"):
        return default
    return v


def _float_dtype(op, fallback):
    for d in op.get("dtypes") or []:
        if d in ("fp32", "fp16", "bf16"):
            return d
    return fallback


def dims_of(t: str, op: dict):
    """(dims, attrs, note) of a single op classified as type t; dims None when the call does not
    fit the type (note says why)."""
    sh = op.get("shapes") or []
    name = op["name"]
    try:
        if t == "matmul":
            if name == "aten::linear":
                x, w = sh[0], sh[1]
                return {"M": _prod(x[:-1]), "N": w[0], "K": w[1]}, {}, ""
            if name == "aten::addmm":
                a, b = sh[1], sh[2]
                return {"M": a[0], "N": b[1], "K": a[1]}, {}, ""
            if name == "aten::mm":
                return {"M": sh[0][0], "N": sh[1][1], "K": sh[0][1]}, {}, ""
            if name in ("aten::bmm", "aten::baddbmm", "aten::matmul"):
                a, b = (sh[0], sh[1]) if name != "aten::baddbmm" else (sh[1], sh[2])
                if len(b) == 2:
                    return {"M": _prod(a[:-1]), "N": b[1], "K": a[-1]}, {}, ""
                return ({"M": a[-2], "N": b[-1], "K": a[-1]}, {"batch": _prod(a[:-2])},
                        "batched: the kernel type is one 2-D product, timed once per batch element")
        if t == "flash_attention":
            q, k = sh[0], sh[1]
            if len(q) != 4 or len(k) != 4 or q[2] != k[2]:
                return None, {}, "cross-attention or non-4-D q/k (the type has one S)"
            if k[1] < 1 or q[1] % k[1] != 0:
                return None, {}, f"{k[1]} KV heads do not divide {q[1]} query heads (the type needs H % HKV == 0)"
            if name == "aten::scaled_dot_product_attention" and len(sh) > 3 and sh[3]:
                return None, {}, "explicit attn_mask tensor (the type has causal or no mask)"
            causal = _concrete(op, 5, True) if name == "aten::scaled_dot_product_attention" else _concrete(op, 4, True)
            scale = _concrete(op, 6) if name == "aten::scaled_dot_product_attention" else None
            attrs = {"causal": 1.0 if causal in (True, "True", 1) else 0.0}
            if scale is not None:
                attrs["sm_scale"] = float(scale)
            dims = {"B": q[0], "H": q[1], "S": q[2], "D": q[3]}
            if k[1] != q[1]:  # GQA: k/v [B,HKV,S,D] (HKV absent means HKV = H)
                dims["HKV"] = k[1]
            return dims, attrs, ""
        if t == "layernorm":
            x = sh[0]
            ns = _concrete(op, 1) or [x[-1]]
            d = _prod(ns)
            eps = _concrete(op, 4, 1e-5)
            return {"B": _prod(x) // d, "D": d}, {"eps": float(eps)}, ""
        if t == "rmsnorm":
            x = sh[0]
            eps = _concrete(op, 2)
            return {"M": _prod(x[:-1]), "N": x[-1]}, ({"eps": float(eps)} if eps is not None else {}), ""
        if t == "softmax":
            x = sh[0]
            dim = _concrete(op, 1, -1)
            if dim not in (-1, len(x) - 1):
                return None, {}, f"softmax over dim {dim}, not the last"
            return {"R": _prod(x[:-1]), "C": x[-1]}, {}, ""
        if t == "cross_entropy":
            x = sh[0]
            if len(x) != 2 or _concrete(op, 3, 1) != 1 or (len(sh) > 2 and sh[2]) or _concrete(op, 5, 0.0):
                return None, {}, "not mean-reduced 2-D cross entropy without weights/smoothing"
            return {"B": x[0], "V": x[1]}, {"ignore_index": float(_concrete(op, 4, -100))}, ""
        if t == "reduce":
            x = sh[0]
            dim = _concrete(op, 1)
            if not x or dim not in ([-1], [len(x) - 1]) or _concrete(op, 2, False):
                return None, {}, "sum not over the last dim alone"
            return {"M": _prod(x[:-1]), "N": x[-1]}, {}, ""
    except (IndexError, TypeError, ValueError):
        return None, {}, "shapes not recorded as expected"
    return None, {}, "no dimension rule"


# Hand-written kernels as sequences of top-level op names. `core` must appear contiguously;
# leading/trailing dtype casts (aten::to/_to_copy) around it are absorbed.
_CASTS = {"aten::to", "aten::_to_copy", "aten::type_as"}
_PATTERNS = [
    ("rmsnorm", ["aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul"], ["aten::mul"]),
    ("rotary_embedding", ["aten::slice", "aten::slice", "aten::mul", "aten::mul", "aten::sub",
                          "aten::mul", "aten::mul", "aten::add", "aten::cat"], []),
    ("rotary_embedding", ["aten::mul", "aten::slice", "aten::slice", "aten::neg", "aten::cat",
                          "aten::mul", "aten::add"], []),
    ("fused_mlp", ["aten::linear", "aten::silu", "aten::linear", "aten::mul", "aten::linear"], []),
]


def _pattern_dims(t, ops, model_dtype):
    sh0 = ops[0].get("shapes") or [[]]
    x = sh0[0]
    if t == "rmsnorm":
        return {"M": _prod(x[:-1]), "N": x[-1]}, {}
    if t == "rotary_embedding":
        if len(x) != 4:
            return None, {}
        return {"B": x[0], "H": x[1], "S": x[2], "D": x[3]}, {"interleaved": 0.0}
    if t == "fused_mlp":
        w1 = sh0[1]
        w2 = ops[4]["shapes"][1]
        if w2 != [w1[1], w1[0]]:
            return None, {}
        return {"B": _prod(x[:-1]), "D": w1[1], "H": w1[0]}, {}
    return None, {}


def fuse_patterns(units, model_dtype):
    """Replaces runs of units matching a hand-written kernel pattern by one unit with
    'pattern' set (its time is the sum of theirs). Units without an op (orphan kernels) break
    a run."""
    out, i = [], 0
    names = [u["op"]["name"] if u["op"] else None for u in units]
    while i < len(units):
        hit = None
        for t, core, tail in _PATTERNS:
            j = i
            while j < len(units) and names[j] in _CASTS:
                j += 1
            if names[j:j + len(core)] != core:
                continue
            k = j + len(core)
            for tn in tail:
                while k < len(units) and names[k] in _CASTS:
                    k += 1
                if k < len(units) and names[k] == tn:
                    k += 1
            while k < len(units) and names[k] in _CASTS and t != "fused_mlp":
                k += 1
            ops = [u["op"] for u in units[j:j + len(core)]]
            dims, attrs = _pattern_dims(t, ops, model_dtype)
            if dims is None:
                continue
            hit = (t, i, k, dims, attrs, ops)
            break
        if hit is None:
            out.append(units[i])
            i += 1
            continue
        t, a, b, dims, attrs, ops = hit
        group = units[a:b]
        # dtype: the activation entering the pattern (the op before a leading cast, if any)
        first = group[0]["op"]
        out.append({"op": None, "pattern": t, "ops": [u["op"]["name"] for u in group],
                    "kernels": [k for u in group for k in u["kernels"]],
                    "us": sum(u["us"] for u in group), "start_us": group[0]["start_us"],
                    "dims": dims, "attrs": attrs, "dtype": _float_dtype(first, model_dtype)})
        i = b
    return out


def classify(unit, model_dtype: str) -> dict:
    """One entry: {"type" (or None), "op", "dims", "attrs", "dtype", "shapes", "kernels", "us",
    "evidence", "note"}."""
    if unit.get("pattern"):
        return {"type": unit["pattern"], "op": " + ".join(unit["ops"]), "dims": unit["dims"],
                "attrs": unit["attrs"], "dtype": unit["dtype"], "shapes": [],
                "kernels": sorted(set(unit["kernels"])), "us": unit["us"],
                "evidence": "op pattern (hand-written " + unit["pattern"] + ")", "note": ""}
    op = unit["op"]
    kernels = sorted(set(unit["kernels"]))
    e = {"type": None, "op": op["name"] if op else (kernels[0] if kernels else "?"), "dims": None,
         "attrs": {}, "dtype": _float_dtype(op, model_dtype) if op else model_dtype,
         "shapes": op.get("shapes", []) if op else [], "kernels": kernels, "us": unit["us"],
         "evidence": "", "note": ""}
    t = _OPS.get(op["name"]) if op else None
    if t:
        e["evidence"] = "operator " + op["name"]
    else:
        for k in kernels:
            t = type_of_kernel_name(k)
            if t:
                e["evidence"] = "kernel name " + k
                break
    if t is None:
        return e
    e["type"] = t
    if op is not None and op["name"] in _OPS:
        dims, attrs, note = dims_of(t, op)
        e["dims"], e["attrs"], e["note"] = dims, attrs, note
    else:
        e["note"] = "identified by kernel name; shapes of the launching op unknown"
    return e
