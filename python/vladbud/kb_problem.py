"""KernelBench problems: loading a problem file and mapping its forward to a VladBud kernel type.

A KernelBench problem is one Python file (KernelBench/level{1,2,3,4}/<id>_<name>.py in a checkout
of https://github.com/ScalingIntelligence/KernelBench) defining `class Model(nn.Module)`,
`get_inputs()` (the forward's inputs) and `get_init_inputs()` (the constructor's arguments).

map_problem() traces Model's forward with torch.fx on fake tensors (no memory is allocated for
the problem's inputs, which reach 6 GB in Level 1) and recognizes a forward that is exactly one of
VladBud's kernel types at its shapes, keeping the problem's own semantics; a layout step (a
transpose, or moving the normalized/reduced dim last and flattening) adapts the problem's tensors
to the type's ABI (DESIGN §2) and back. Recognized:

  matmul           torch.matmul / torch.mm / @ of two 2-D inputs, each optionally transposed
                   (.T, .t(), .transpose(0, 1)) -> matmul M,N,K (a transposed operand is made
                   contiguous first: the layout step); fp32 problems get "precision": "tf32"
                   (KernelBench's tolerance admits TF32; only `kernelbench bench` uses it)
  softmax          torch.softmax / F.softmax / Tensor.softmax over any one dim -> softmax R,C
  layernorm        nn.LayerNorm / F.layer_norm over the trailing dims -> layernorm B,D (D the
                   product of the normalized dims; weight/bias the module's, eps its eps)
  rmsnorm          nn.RMSNorm / F.rms_norm over the trailing dims, or the explicit form
                   x / sqrt(mean(x**2, dim=d, keepdim=True) + eps) (also x * rsqrt(...)) over any
                   dim d -> rmsnorm M,N with weight 1 (the problem has none)
  reduce           torch.sum / Tensor.sum over one dim (keepdim or not) -> reduce M,N
  cross_entropy    F.cross_entropy / nn.CrossEntropyLoss, 2-D logits, mean, no class weights,
                   no label smoothing -> cross_entropy B,V (ignore_index kept)
  flash_attention  F.scaled_dot_product_attention of 4-D Q,K,V without mask or dropout, as
                   many keys as queries -> flash_attention B,H,(HKV),S,D (causal and scale kept)

Anything else is "not mapped" with the reason (the compute ops the forward runs), and gets a
ModelNew candidate file for an agent instead.
"""
import importlib.util
import math
import operator
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import BridgeError

_loaded = 0


def load_problem(path):
    """Executes a KernelBench problem file as a fresh module and returns
    (module, Model, get_inputs, get_init_inputs). Raises BridgeError naming the file and the fix
    when it does not exist, does not run (syntax error, failing import) or lacks one of the three
    names."""
    global _loaded
    if not os.path.isfile(path):
        raise BridgeError(f"problem file '{path}' does not exist; pass a file of a KernelBench "
                          f"checkout (KernelBench/level1/1_Square_matrix_multiplication_.py, ...)")
    _loaded += 1
    name = f"vladbud_kb_problem_{_loaded}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise BridgeError(f"problem file '{path}' is not valid Python (line {e.lineno}: {e.msg}); "
                          f"a KernelBench problem defines Model, get_inputs and get_init_inputs") from None
    except Exception as e:  # the problem's own top-level code failed
        raise BridgeError(f"problem file '{path}' failed to load: {type(e).__name__}: {e}") from None
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, n)]
    if missing:
        raise BridgeError(f"problem file '{path}' lacks {', '.join(missing)}: a KernelBench problem "
                          f"defines class Model(nn.Module), get_inputs() and get_init_inputs()")
    if not (isinstance(mod.Model, type) and issubclass(mod.Model, nn.Module)):
        raise BridgeError(f"problem file '{path}': Model must be an nn.Module subclass")
    return mod, mod.Model, mod.get_inputs, mod.get_init_inputs


def fake_inputs(get_inputs, get_init_inputs):
    """(inputs, init_inputs) of a problem made under FakeTensorMode: shapes and dtypes without
    memory. Raises BridgeError when get_inputs() fails or returns no list."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        try:
            inputs = list(get_inputs())
            init = list(get_init_inputs())
        except Exception as e:
            raise BridgeError(f"get_inputs()/get_init_inputs() failed: {type(e).__name__}: {e}") from None
    return inputs, init


# fx nodes that only change the view of a placeholder (resolved by _operand).
_TRANSPOSES = {"t", "T", "mT"}
# Calls that do no arithmetic: views, copies, allocation (for the "compute ops" list).
_LAYOUT_FUNCS = {"contiguous", "view", "reshape", "permute", "transpose", "t", "T", "mT",
                 "unsqueeze", "squeeze", "flatten", "clone", "detach", "to", "float", "size",
                 "getattr", "getitem", "dim", "expand"}


def _fname(node):
    """A short name of an fx node's callee ('matmul', 'softmax', 'add', 'ln:LayerNorm', ...)."""
    if node.op == "call_method":
        return node.target
    if node.op == "call_function":
        if node.target is getattr:
            return "getattr"
        return getattr(node.target, "__name__", str(node.target)).lstrip("_")
    if node.op == "call_module":
        return "module"
    return node.op


def _compute_nodes(gm):
    out = []
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        if n.op == "call_function" and n.target is getattr and n.args[1] in _TRANSPOSES:
            continue
        if _fname(n) in _LAYOUT_FUNCS:
            continue
        out.append(n)
    return out


def _describe(gm, n):
    if n.op == "call_module":
        return type(gm.get_submodule(n.target)).__name__
    return _fname(n)


def _operand(node, placeholders):
    """(input index, transposed) when `node` is a placeholder or a 2-D transpose of one."""
    if node.op == "placeholder":
        return placeholders.index(node), False
    if node.op == "call_function" and node.target is getattr and node.args[1] in ("T", "mT"):
        i, tr = _operand(node.args[0], placeholders)
        return i, not tr
    if node.op == "call_method" and node.target == "t":
        i, tr = _operand(node.args[0], placeholders)
        return i, not tr
    if node.op in ("call_method", "call_function") and _fname(node) == "transpose":
        dims = sorted(int(d) % 2 for d in node.args[1:3]) if len(node.args) >= 3 else []
        if dims == [0, 1]:
            i, tr = _operand(node.args[0], placeholders)
            return i, not tr
    raise _NoMap("an operand is computed, not an input (or its transpose)")


class _NoMap(Exception):
    pass


def _arg(node, pos, name, default=None):
    if len(node.args) > pos:
        return node.args[pos]
    return node.kwargs.get(name, default)


def _const(v, what):
    if isinstance(v, torch.fx.Node):
        raise _NoMap(f"{what} is computed at run time")
    return v


def _input_of(node, placeholders, what="the input"):
    if not isinstance(node, torch.fx.Node) or node.op != "placeholder":
        raise _NoMap(f"{what} is computed, not a forward input")
    return placeholders.index(node)


def _single_dim(d, ndim):
    if isinstance(d, (list, tuple)):
        if len(d) != 1:
            raise _NoMap(f"reduces over {len(d)} dims (one is mapped)")
        d = d[0]
    if not isinstance(d, int):
        raise _NoMap("the dim is not a constant integer")
    return d % ndim


def _map_matmul(node, ph, shapes):
    a, b = node.args[0], node.args[1]
    ia, ta = _operand(a, ph)
    ib, tb = _operand(b, ph)
    sa, sb = shapes[ia], shapes[ib]
    if len(sa) != 2 or len(sb) != 2:
        raise _NoMap("matmul of non-2-D operands (batched matmul is not mapped)")
    M, K = (sa[1], sa[0]) if ta else (sa[0], sa[1])
    K2, N = (sb[1], sb[0]) if tb else (sb[0], sb[1])
    if K != K2:
        raise _NoMap(f"inner dims differ ({K} vs {K2})")
    layout = []
    if ta:
        layout.append(f"A is stored [K,M] = [{sa[0]},{sa[1]}]: transposed to [M,K] (contiguous copy)")
    if tb:
        layout.append(f"B is stored [N,K] = [{sb[0]},{sb[1]}]: transposed to [K,N] (contiguous copy)")
    return {"type": "matmul", "dims": {"M": M, "N": N, "K": K}, "attrs": {},
            "layout": {"a": ia, "b": ib, "trans_a": ta, "trans_b": tb}, "layout_steps": layout}


def _rows_layout(shape, d):
    """(rows, cols, steps) of moving dim d of `shape` last and flattening the rest."""
    cols = shape[d]
    rows = math.prod(shape) // cols if cols else 0
    steps = [] if d == len(shape) - 1 and len(shape) == 2 else [
        f"x{list(shape)}: dim {d} moved last and the rest flattened -> [{rows},{cols}]"
        + ("" if d == len(shape) - 1 else " (contiguous copy)")]
    return rows, cols, steps


def _map_softmax(node, ph, shapes):
    i = _input_of(node.args[0], ph)
    shape = shapes[i]
    d = _single_dim(_const(_arg(node, 1, "dim"), "the softmax dim"), len(shape))
    if _arg(node, 2, "dtype") is not None:
        raise _NoMap("softmax with a dtype argument")
    R, C, steps = _rows_layout(shape, d)
    return {"type": "softmax", "dims": {"R": R, "C": C}, "attrs": {},
            "layout": {"x": i, "dim": d}, "layout_steps": steps}


def _map_reduce(node, ph, shapes):
    i = _input_of(node.args[0], ph)
    shape = shapes[i]
    d = _arg(node, 1, "dim")
    if d is None:
        raise _NoMap("a sum over all elements (one dim is mapped)")
    d = _single_dim(_const(d, "the sum dim"), len(shape))
    keep = bool(_const(_arg(node, 2, "keepdim", False), "keepdim"))
    if _arg(node, 3, "dtype") is not None:
        raise _NoMap("sum with a dtype argument")
    M, N, steps = _rows_layout(shape, d)
    out = list(shape)
    if keep:
        out[d] = 1
    else:
        out.pop(d)
    steps = steps + [f"y[{M}] reshaped to {out}"]
    return {"type": "reduce", "dims": {"M": M, "N": N}, "attrs": {},
            "layout": {"x": i, "dim": d, "keepdim": keep}, "layout_steps": steps}


def _map_layernorm(gm, node, ph, shapes):
    if node.op == "call_module":
        m = gm.get_submodule(node.target)
        norm_shape, eps = tuple(m.normalized_shape), float(m.eps)
        affine, has_bias = m.elementwise_affine, m.bias is not None
        x = node.args[0]
        weights = {"module": node.target}
    else:
        x = node.args[0]
        norm_shape = tuple(_const(_arg(node, 1, "normalized_shape"), "normalized_shape"))
        w, b = _arg(node, 2, "weight"), _arg(node, 3, "bias")
        if w is not None or b is not None:
            raise _NoMap("F.layer_norm with weight/bias tensors (nn.LayerNorm is mapped)")
        eps = float(_const(_arg(node, 4, "eps", 1e-5), "eps"))
        affine, has_bias, weights = False, False, {}
    i = _input_of(x, ph)
    shape = shapes[i]
    k = len(norm_shape)
    if tuple(shape[len(shape) - k:]) != norm_shape:
        raise _NoMap(f"normalized_shape {list(norm_shape)} is not the trailing dims of {list(shape)}")
    D = math.prod(norm_shape)
    B = math.prod(shape) // D
    steps = [] if len(shape) == 2 and k == 1 else [f"x{list(shape)} flattened to [{B},{D}] (a view)"]
    if affine:
        steps.append(f"weight/bias{list(norm_shape)} flattened to [{D}] (views of the module's parameters)")
    return {"type": "layernorm", "dims": {"B": B, "D": D}, "attrs": {"eps": eps},
            "layout": {"x": i, "norm_shape": list(norm_shape), "affine": affine, "bias": has_bias, **weights},
            "layout_steps": steps}


def _map_rms_explicit(nodes, ph, shapes):
    """x / sqrt(mean(x**2, dim=d, keepdim=True) + eps) or x * rsqrt(...): rmsnorm over dim d."""
    names = [_fname(n) for n in nodes]
    mean = next((n for n in nodes if _fname(n) == "mean"), None)
    if mean is None:
        raise _NoMap("no mean")
    sq = mean.args[0]
    if not isinstance(sq, torch.fx.Node):
        raise _NoMap("mean of a constant")
    sqn = _fname(sq)
    if sqn == "pow" and sq.args[1] == 2:
        x = sq.args[0]
    elif sqn == "mul" and sq.args[0] is sq.args[1]:
        x = sq.args[0]
    elif sqn == "square":
        x = sq.args[0]
    else:
        raise _NoMap("the mean is not of x**2")
    i = _input_of(x, ph)
    shape = shapes[i]
    d = _single_dim(_const(_arg(mean, 1, "dim"), "the mean dim"), len(shape))
    if not _const(_arg(mean, 2, "keepdim", False), "keepdim"):
        raise _NoMap("mean without keepdim")
    add = next((n for n in nodes if _fname(n) == "add" and mean in n.args), None)
    if add is None:
        raise _NoMap("no + eps after the mean")
    eps = next((a for a in add.args if not isinstance(a, torch.fx.Node)), None)
    if not isinstance(eps, (int, float)):
        raise _NoMap("eps is not a constant")
    if "rsqrt" in names:
        r = next(n for n in nodes if _fname(n) == "rsqrt")
        last = next((n for n in nodes if _fname(n) == "mul" and r in n.args and x in n.args), None)
        expected = {"pow", "mul", "square", "mean", "add", "rsqrt"}
    else:
        r = next((n for n in nodes if _fname(n) == "sqrt" and n.args[0] is add), None)
        last = next((n for n in nodes if _fname(n) in ("truediv", "div") and n.args[0] is x
                     and n.args[1] is r), None)
        expected = {"pow", "mul", "square", "mean", "add", "sqrt", "truediv", "div"}
    if r is None or last is None or len(nodes) != len({sq, mean, add, r, last}) or not set(names) <= expected:
        raise _NoMap("not exactly x / sqrt(mean(x**2) + eps)")
    M, N, steps = _rows_layout(shape, d)
    if steps:
        steps.append(f"y moved back to {list(shape)}")
    steps.append(f"weight = ones[{N}] (the problem has none)")
    return {"type": "rmsnorm", "dims": {"M": M, "N": N}, "attrs": {"eps": float(eps)},
            "layout": {"x": i, "dim": d, "weight": "ones"}, "layout_steps": steps}


def _map_rms_module(gm, node, ph, shapes):
    if node.op == "call_module":
        m = gm.get_submodule(node.target)
        norm_shape, eps = tuple(m.normalized_shape), m.eps
        if eps is None:
            raise _NoMap("nn.RMSNorm with eps=None (the dtype's epsilon)")
        weight = "module" if m.weight is not None else "ones"
        extra = {"module": node.target}
    else:
        norm_shape = tuple(_const(_arg(node, 1, "normalized_shape"), "normalized_shape"))
        if _arg(node, 2, "weight") is not None:
            raise _NoMap("F.rms_norm with a weight tensor")
        eps = _const(_arg(node, 3, "eps"), "eps")
        if eps is None:
            raise _NoMap("F.rms_norm with eps=None")
        weight, extra = "ones", {}
    i = _input_of(node.args[0], ph)
    shape = shapes[i]
    k = len(norm_shape)
    if tuple(shape[len(shape) - k:]) != norm_shape:
        raise _NoMap("normalized_shape is not the trailing dims")
    N = math.prod(norm_shape)
    M = math.prod(shape) // N
    steps = [] if len(shape) == 2 and k == 1 else [f"x{list(shape)} flattened to [{M},{N}] (a view)"]
    return {"type": "rmsnorm", "dims": {"M": M, "N": N}, "attrs": {"eps": float(eps)},
            "layout": {"x": i, "dim": len(shape) - 1, "trailing": list(norm_shape), "weight": weight, **extra},
            "layout_steps": steps}


def _map_cross_entropy(gm, node, ph, shapes, dtypes):
    if node.op == "call_module":
        m = gm.get_submodule(node.target)
        weight, ii, red, ls = m.weight, m.ignore_index, m.reduction, m.label_smoothing
    else:
        weight = node.kwargs.get("weight", node.args[2] if len(node.args) > 2 else None)
        ii = _const(node.kwargs.get("ignore_index", -100), "ignore_index")
        red = _const(node.kwargs.get("reduction", "mean"), "reduction")
        ls = _const(node.kwargs.get("label_smoothing", 0.0), "label_smoothing")
        if len(node.args) > 3:
            raise _NoMap("cross_entropy with positional options")
    if weight is not None or red != "mean" or ls != 0.0:
        raise _NoMap("cross_entropy with class weights, label smoothing or a reduction other than mean")
    il, it = _input_of(node.args[0], ph, "the logits"), _input_of(node.args[1], ph, "the targets")
    if len(shapes[il]) != 2 or len(shapes[it]) != 1 or dtypes[it] != torch.int64:
        raise _NoMap("cross_entropy needs logits[B,V] and int64 class indices targets[B]")
    B, V = shapes[il]
    return {"type": "cross_entropy", "dims": {"B": B, "V": V}, "attrs": {"ignore_index": float(ii)},
            "layout": {"logits": il, "targets": it}, "layout_steps": []}


def _map_sdpa(node, ph, shapes):
    q, k, v = (_input_of(node.args[j], ph, n) for j, n in enumerate(("Q", "K", "V")))
    opts = dict(zip(("attn_mask", "dropout_p", "is_causal"), node.args[3:]))
    opts.update(node.kwargs)
    if opts.get("attn_mask") is not None or float(_const(opts.get("dropout_p", 0.0), "dropout_p")) != 0.0:
        raise _NoMap("attention with a mask or dropout")
    causal = bool(_const(opts.get("is_causal", False), "is_causal"))
    scale = _const(opts.get("scale"), "scale")
    sq, sk, sv = shapes[q], shapes[k], shapes[v]
    if len(sq) != 4 or sk != sv or len(sk) != 4:
        raise _NoMap("attention needs 4-D Q[B,H,S,D] and K, V of one shape")
    B, H, S, D = sq
    if sk[0] != B or sk[2] != S or sk[3] != D:
        raise _NoMap("K/V differ from Q in batch, sequence length or head dim (one S is mapped)")
    hkv = sk[1]
    if hkv != H and not (H % hkv == 0 and bool(opts.get("enable_gqa", False))):
        raise _NoMap("K/V heads do not match Q's")
    dims = {"B": B, "H": H, "S": S, "D": D}
    if hkv != H:
        dims["HKV"] = hkv
    attrs = {"causal": 1.0 if causal else 0.0, "sm_scale": float(scale) if scale is not None else 1.0 / math.sqrt(D)}
    return {"type": "flash_attention", "dims": dims, "attrs": attrs,
            "layout": {"q": q, "k": k, "v": v}, "layout_steps": []}


def _classify(gm, nodes, ph, shapes, dtypes):
    if len(nodes) == 1:
        n = nodes[0]
        name = _fname(n)
        if n.op == "call_module":
            m = gm.get_submodule(n.target)
            if isinstance(m, nn.LayerNorm):
                return _map_layernorm(gm, n, ph, shapes)
            if hasattr(nn, "RMSNorm") and isinstance(m, nn.RMSNorm):
                return _map_rms_module(gm, n, ph, shapes)
            if isinstance(m, nn.CrossEntropyLoss):
                return _map_cross_entropy(gm, n, ph, shapes, dtypes)
            if isinstance(m, nn.Softmax):
                raise _NoMap("nn.Softmax module (torch.softmax is mapped)")
            raise _NoMap(f"one module call, {type(m).__name__}")
        if n.op == "call_function" and n.target in (torch.matmul, torch.mm, operator.matmul):
            return _map_matmul(n, ph, shapes)
        if n.op == "call_method" and name in ("matmul", "mm"):
            return _map_matmul(n, ph, shapes)
        if (n.op == "call_function" and n.target in (torch.softmax, F.softmax)) or \
                (n.op == "call_method" and name == "softmax"):
            return _map_softmax(n, ph, shapes)
        if (n.op == "call_function" and n.target is torch.sum) or (n.op == "call_method" and name == "sum"):
            return _map_reduce(n, ph, shapes)
        if n.op == "call_function" and n.target is F.layer_norm:
            return _map_layernorm(gm, n, ph, shapes)
        if n.op == "call_function" and getattr(F, "rms_norm", None) is n.target:
            return _map_rms_module(gm, n, ph, shapes)
        if n.op == "call_function" and n.target is F.cross_entropy:
            return _map_cross_entropy(gm, n, ph, shapes, dtypes)
        if n.op == "call_function" and n.target is F.scaled_dot_product_attention:
            return _map_sdpa(n, ph, shapes)
        raise _NoMap(f"its one op, {name}, is none of the nine types")
    if any(_fname(n) == "mean" for n in nodes):
        return _map_rms_explicit(nodes, ph, shapes)
    raise _NoMap(f"{len(nodes)} compute ops, not one kernel type")


def map_problem(path):
    """The mapping of the problem file at `path` to a VladBud kernel type:
    {"mapped": true, "type", "dims", "attrs", "dtype", "layout", "layout_steps", "ops",
     "inputs": [{"shape", "dtype"}], "init_inputs"} or {"mapped": false, "reason", "ops", "inputs"}.
    The dtype is the inputs' floating dtype (KernelBench runs fp32 unless told otherwise).
    Raises BridgeError when the file is malformed (load_problem, fake_inputs)."""
    mod, Model, get_inputs, get_init_inputs = load_problem(path)
    inputs, init = fake_inputs(get_inputs, get_init_inputs)
    shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in inputs]
    dtypes = [t.dtype if isinstance(t, torch.Tensor) else None for t in inputs]
    info = {"inputs": [{"shape": list(s) if s is not None else None,
                        "dtype": str(d).replace("torch.", "") if d is not None else type(x).__name__}
                       for s, d, x in zip(shapes, dtypes, inputs)],
            "init_inputs": [repr(x) for x in init]}
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            model = Model(*init)
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:
        return {"mapped": False, "reason": f"the forward is not traceable by torch.fx ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''})", "ops": [], **info}
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    nodes = _compute_nodes(gm)
    ops = [_describe(gm, n) for n in nodes]
    if len(ph) != len(inputs):
        return {"mapped": False, "reason": f"forward takes {len(ph)} inputs, get_inputs() gives {len(inputs)}",
                "ops": ops, **info}
    try:
        m = _classify(gm, nodes, ph, shapes, dtypes)
    except _NoMap as e:
        return {"mapped": False, "reason": f"not one of the nine kernel types: {e} (ops: {', '.join(ops) or 'none'})",
                "ops": ops, **info}
    fdt = [d for d in dtypes if d is not None and d.is_floating_point]
    dt = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}.get(fdt[0] if fdt else None)
    if dt is None:
        return {"mapped": False, "reason": f"input dtype {fdt[0] if fdt else 'none'} (fp32, fp16, bf16 are mapped)",
                "ops": ops, **info}
    if m["type"] == "matmul" and dt == "fp32":
        # KernelBench's allclose(atol = rtol = 1e-2) admits TF32 products (what eager PyTorch does
        # with torch.backends.cuda.matmul.allow_tf32); VladBud's own fp32 contract does not
        # (DESIGN §2). The flag lets `kernelbench bench` build the kernel's TF32 path; VladBud's
        # evaluator refuses it outside KernelBench mode.
        m["precision"] = "tf32"
    return {"mapped": True, "dtype": dt, "ops": ops, **m, **info}


def _body(m):
    """Forward body lines of a ModelNew that calls torch.ops.vladbud.<type> with the layout step."""
    t, lay, d = m["type"], m["layout"], m["dims"]
    op = f"torch.ops.vladbud.{t}"
    if t == "matmul":
        a = f"inputs[{lay['a']}]" + (".t()" if lay["trans_a"] else "")
        b = f"inputs[{lay['b']}]" + (".t()" if lay["trans_b"] else "")
        return [f"return {op}({a}.contiguous(), {b}.contiguous())"]
    if t in ("softmax", "reduce") or (t == "rmsnorm" and "trailing" not in lay):
        dim = lay["dim"]
        call = {"softmax": f"{op}(rows)", "reduce": f"{op}(rows)",
                "rmsnorm": f"{op}(rows, self.weight, {m['attrs'].get('eps')!r})"}[t]
        lines = [f"x = inputs[{lay['x']}].movedim({dim}, -1)  # the type works on the last dim",
                 "rows = x.reshape(-1, x.shape[-1]).contiguous()",
                 f"y = {call}"]
        if t == "reduce":
            lines.append("y = y.reshape(x.shape[:-1])")
            if lay["keepdim"]:
                lines.append(f"y = y.unsqueeze({dim})")
            lines.append("return y")
        else:
            # The moved-back view, not a contiguous copy: same shape and values as the problem's
            # output (KernelBench compares values), one full copy fewer.
            lines.append(f"return y.reshape(x.shape).movedim(-1, {dim})")
        return lines
    if t == "rmsnorm":
        return [f"x = inputs[{lay['x']}]",
                f"y = {op}(x.reshape(-1, {d['N']}).contiguous(), self.weight.reshape(-1), {m['attrs']['eps']!r})",
                "return y.reshape(x.shape)"]
    if t == "layernorm":
        return [f"x = inputs[{lay['x']}]",
                f"y = {op}(x.reshape(-1, {d['D']}).contiguous(), self.weight.reshape(-1), "
                f"self.bias.reshape(-1), {m['attrs']['eps']!r})",
                "return y.reshape(x.shape)"]
    if t == "cross_entropy":
        return [f"return {op}(inputs[{lay['logits']}].contiguous(), inputs[{lay['targets']}].contiguous(), "
                f"{m['attrs']['ignore_index']!r})"]
    if t == "flash_attention":
        return [f"q, k, v = inputs[{lay['q']}], inputs[{lay['k']}], inputs[{lay['v']}]",
                f"return {op}(q.contiguous(), k.contiguous(), v.contiguous(), "
                f"{m['attrs']['causal']!r}, {m['attrs']['sm_scale']!r})"]
    raise BridgeError(f"no ModelNew template for kernel type {t}")


def _init(m):
    """__init__ lines creating the parameters the reference module holds (same initial values:
    nn.LayerNorm and nn.RMSNorm start at ones/zeros) or the implicit weight of ones."""
    t, lay = m["type"], m["layout"]
    if t == "layernorm":
        shape = tuple(lay["norm_shape"])
        if lay["affine"]:
            lines = [f"self.weight = nn.Parameter(torch.ones({shape}))"]
            lines.append(f"self.bias = nn.Parameter(torch.zeros({shape}))" if lay["bias"]
                         else f"self.register_buffer('bias', torch.zeros({shape}))")
            return lines
        return [f"self.register_buffer('weight', torch.ones({shape}))",
                f"self.register_buffer('bias', torch.zeros({shape}))"]
    if t == "rmsnorm":
        if lay.get("weight") == "module":
            return [f"self.weight = nn.Parameter(torch.ones({tuple(lay['trailing'])}))"]
        return [f"self.register_buffer('weight', torch.ones({m['dims']['N']}))  # the problem has no weight"]
    return []


def model_new_source(m, problem_label):
    """Python source of a ModelNew for mapping `m` (map_problem's result): for a mapped problem,
    ModelNew calls torch.ops.vladbud.<type> (the kernel of its workspace folder, which
    `vladbud kernelbench bench` builds and binds before loading the file) through the layout
    step; for an unmapped one, a starting point for an agent (Model's forward must be rewritten:
    as written it calls the reference's torch ops and bench rejects it as "no kernel")."""
    if not m.get("mapped"):
        raise BridgeError("model_new_source needs a mapped problem (see agent_model_new_source)")
    steps = "\n".join(f"  - {s}" for s in m["layout_steps"]) or "  - none: the problem's tensors are the type's"
    init = "".join(f"        {l}\n" for l in _init(m))
    body = "".join(f"        {l}\n" for l in _body(m))
    dims = ", ".join(f"{k}={v}" for k, v in m["dims"].items())
    return f'''"""ModelNew for KernelBench {problem_label}: VladBud's {m["type"]} kernel ({dims}, {m["dtype"]}).

Written by `vladbud kernelbench setup`. The kernel is this folder's source (best/ once the
optimizer keeps a version); `vladbud kernelbench bench` builds it and binds it to
torch.ops.vladbud.{m["type"]} before loading this file. Layout step (the problem is unchanged):
{steps}
"""
import torch
import torch.nn as nn

import vladbud.kernels  # noqa: F401  (defines torch.ops.vladbud.*)


class ModelNew(nn.Module):
    def __init__(self, *init_inputs):
        super().__init__()
{init}
    def forward(self, *inputs):
{body}'''


def agent_model_new_source(path, problem_label, reason):
    """A ModelNew starting point for an unmapped problem: the problem's own Model source renamed
    (it runs the reference's torch ops, which bench rejects as "no kernel" until an agent replaces
    the forward with its kernels)."""
    with open(path) as f:
        src = f.read()
    header = (f'"""ModelNew candidate for KernelBench {problem_label} (written by `vladbud kernelbench setup`).\n\n'
              f"Not mapped to a VladBud kernel type: {reason}.\n"
              "Replace the forward with your own kernels (see program_kb.md); as written it runs the\n"
              'reference\'s torch ops and `vladbud kernelbench bench` rejects it as "no kernel".\n"""\n')
    import re
    src = re.sub(r"\bclass\s+Model\s*\(", "class ModelNew(", src, count=1)
    src = re.sub(r"super\(\s*Model\s*,", "super(ModelNew,", src)
    return header + src
