"""Putting VladBud kernels into a model: module-level and function-level replacement, and the
intercept check that proves the replacements take the calls the profile saw.

Module level (`replace_modules`, `with_kernels`): nn.Linear -> matmul (W^T kept contiguous once,
bias added by torch), nn.LayerNorm -> layernorm, an RMSNorm module -> rmsnorm (ours: a class named
*RMSNorm with `weight` and `eps`; Hugging Face's: the forward decides, LlamaRMSNorm's
`weight * x/rms` or Gemma's `x/rms * (1 + weight)`, anything else stays), a RotaryEmbedding with
`tables(seq, device)` (models/llama.py) -> rotary_embedding, a SwiGLU MLP (w1/w3/w2 or HF's
gate_proj/up_proj/down_proj, no bias, SiLU; an HF class must have LlamaMLP's forward) -> fused_mlp.

Function level (`patched(types)`, a context manager): while it is active the module attributes
below are swapped for wrappers that call torch.ops.vladbud.<type>; on exit (also on an exception)
the originals are put back. A wrapper calls the original function for any call the op cannot
take, so the model stays correct; a call autograd would record (grad mode on and an input that
requires grad) always goes to the original, since the ops have no backward. Nothing else is
intercepted, so eager forwards pay nothing for the other torch calls (unlike a
TorchFunctionMode; entering costs ~10 us), and torch.compile traces through the wrappers
(Dynamo inlines them; the ops have fake implementations).

  type              attribute(s) swapped                        taken when
  flash_attention   torch.nn.functional.scaled_dot_product_attention   no attn_mask, dropout 0,
                    (+ transformers.masking_utils._ignore_causal_mask_sdpa, see below)
                                                                 q,k,v 4-D of one dtype, one S
                                                                 and one D; K/V with fewer heads
                                                                 (enable_gqa=True, H % H_kv == 0)
                                                                 go to the op as they are, no
                                                                 copy: query head h reads KV head
                                                                 h // (H / H_kv)
  softmax           F.softmax, torch.softmax, torch.Tensor.softmax   over the last dim (a dtype
                                                                 argument casts first)
  cross_entropy     F.cross_entropy                              2-D logits, 1-D int targets,
                                                                 mean, no weight/smoothing
  reduce            torch.sum, torch.Tensor.sum                  over the last dim alone,
                                                                 keepdim false, no dtype change
  matmul            F.linear                                     any float call (nn.Linear
                                                                 modules are replaced at module
                                                                 level and do not call it)
  layernorm         F.layer_norm                                 any float call
  rotary_embedding  apply_rotary_pos_emb of every loaded        q,k [B,H,S,D] (unsqueeze_dim 1),
                    transformers.models.*.modeling_* module      cos/sin [1 or B,S,R] with equal
                    (and transformers_modules.*) whose function  rows and duplicated halves,
                    is HF's NeoX/rotate_half one (llama,         R = D (R <= D for partial
                    mistral, qwen2/3, gemma, olmo, gpt_neox's     rotary)
                    partial one, ...; `hf_rope_functions`)
The rotary wrapper maps HF's cos/sin [1, S, R] (halves duplicated) to the op's [S, R/2] and makes
two op calls, one for q and one for k. Interleaved (Cohere, GLM) and multimodal RoPE keep running
in PyTorch.

Under torch.compile Hugging Face materializes the causal mask (masking_utils returns a mask
instead of None while tracing, a guard for torch.export), so SDPA would get an attn_mask and fall
back. With flash_attention replaced, `_ignore_causal_mask_sdpa` is wrapped to answer "skip the
mask" while compiling (not exporting) when there is no padding mask, no local window and
q_length == kv_length: exactly the case where HF skips it in eager; the compiled graph is
specialized on those shapes, so it is as correct as eager.

Shape selection (`only`, optional in `replace_modules`, `with_kernels`, `patched`,
`expected_calls`, `intercept_check`): {type: set of shape keys} restricts a type's replacement to
the calls whose key is in the set; every other call of that type runs PyTorch's own function.
Only matmul has keys: its calls span several shapes in one transformer (GPT-2: the LM head and
four projection shapes), so a kernel can beat PyTorch at one and lose at another (verify's own-
shape screen decides which). A matmul key is the weight's (N, K) = (out_features, in_features)
(`matmul_key`), which a module and an F.linear call know before any input arrives and which the
profile's dims {M, N, K} carry; M (tokens) is left free, so the selection also holds at another
batch or sequence length. A type absent from `only` (or `only` None) is replaced everywhere.

The intercept check (`intercept_check`) compares, per replaced type, the op calls per forward
(vladbud.kernels.CALLS) with what profile.json attributes to that type, in the same unit
(`expected_calls` states the rules).
"""
import ast
import copy
import inspect
import math
import sys
import textwrap
import weakref

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import kernels  # noqa: F401  (registers torch.ops.vladbud.*)

ops = torch.ops.vladbud

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _rows(x):
    return x.reshape(-1, x.shape[-1])


def _compiling() -> bool:
    """True while Dynamo traces (the wrappers then skip data-dependent checks and counting)."""
    return torch.compiler.is_compiling()


SHAPE_KEYED_TYPES = ("matmul",)
"""The types whose replacement can be restricted to some shapes (see "Shape selection")."""


def matmul_key(dims) -> tuple:
    """The shape key of a matmul: (N, K) from profile/problem dims {"M", "N", "K"} (a dict), i.e.
    the weight's (out_features, in_features). Raises KeyError when N or K is missing."""
    return (int(dims["N"]), int(dims["K"]))


def _allowed(only, t, key) -> bool:
    """Whether a call of type t with shape key `key` goes to the op under the selection `only`."""
    if not only or t not in only or only[t] is None:
        return True
    # Keys may come as JSON lists ([[N, K], ...] in verify.json): compare as tuples.
    return tuple(key) in {tuple(k) for k in only[t]}


# --------------------------------------------------------------------------------------------
# Module level
# --------------------------------------------------------------------------------------------

class VbLinear(nn.Module):
    """nn.Linear through matmul: y[..., N] = x[..., K] W^T + b; one op call per forward."""

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
    """nn.LayerNorm through layernorm (missing weight/bias as ones/zeros); one op call."""

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
    """An RMSNorm module through rmsnorm (weight cast to x's dtype); one op call per forward.
    plus_one: the module scales by (1 + weight) (Gemma's layout); the op gets 1 + weight."""

    def __init__(self, m, plus_one=False):
        super().__init__()
        w = m.weight.detach()
        self.weight = (1.0 + w.float()).to(w.dtype) if plus_one else w
        self.eps = _rms_eps(m)  # None: torch.nn.RMSNorm's default, finfo(x.dtype).eps

    def forward(self, x):
        w = self.weight.to(x.dtype)
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        return ops.rmsnorm(_rows(x).contiguous(), w, eps).reshape(x.shape)


class VbRotary(nn.Module):
    """models/llama.py's RotaryEmbedding (x[B,H,S,D] -> same) through rotary_embedding."""

    def __init__(self, m):
        super().__init__()
        self.inner = m

    def forward(self, x):
        cos, sin = self.inner.tables(x.shape[-2], x.device)
        return ops.rotary_embedding(x.contiguous(), cos.to(x.dtype).contiguous(),
                                    sin.to(x.dtype).contiguous(), 0.0)


# SwiGLU projections by layout: (gate, up, down) attribute names.
_SWIGLU_NAMES = [("w1", "w3", "w2"),                          # models/llama.py, Meta's LLaMA
                 ("gate_proj", "up_proj", "down_proj")]       # HF LlamaMLP, MistralMLP, Qwen2MLP, ...


def _swiglu_names(m):
    for names in _SWIGLU_NAMES:
        lins = [getattr(m, n, None) for n in names]
        if all(isinstance(l, nn.Linear) and l.bias is None for l in lins):
            act = getattr(m, "act_fn", None)
            if act is None or isinstance(act, nn.SiLU) or type(act).__name__ == "SiLUActivation":
                return names
    return None


class VbFusedMLP(nn.Module):
    """A SwiGLU MLP through fused_mlp; one op call per forward."""

    def __init__(self, m):
        super().__init__()
        g, u, d = _swiglu_names(m)
        self.g, self.u, self.d = (getattr(m, n).weight.detach() for n in (g, u, d))

    def forward(self, x):
        return ops.fused_mlp(_rows(x).contiguous(), self.g, self.u, self.d).reshape(x.shape)


def _body_dump(fn, rename_first_arg=None):
    """(argument names, ast.dump of the body without its docstring) of a function or method, or
    None when its source is not available. `v = expr; return v` is folded into `return expr`,
    and, for a method, the first argument after self is renamed to `rename_first_arg`."""
    try:
        src = textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
        node = ast.parse(src).body[0]
    except (OSError, TypeError, SyntaxError, IndexError, ValueError):
        return None
    if not isinstance(node, ast.FunctionDef):
        return None
    return _fn_dump(node, rename_first_arg)


def _fn_dump(node, rename_first_arg=None):
    args = [a.arg for a in node.args.args]
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if (len(body) >= 2 and isinstance(body[-1], ast.Return) and isinstance(body[-1].value, ast.Name)
            and isinstance(body[-2], ast.Assign) and len(body[-2].targets) == 1
            and isinstance(body[-2].targets[0], ast.Name) and body[-2].targets[0].id == body[-1].value.id):
        body = body[:-2] + [ast.Return(value=body[-2].value)]
    mod = ast.Module(body=body, type_ignores=[])
    if rename_first_arg and len(args) >= 2:
        old = args[1]
        for n in ast.walk(mod):
            if isinstance(n, ast.Name) and n.id == old:
                n.id = rename_first_arg
        args = [args[0], rename_first_arg] + args[2:]
    return tuple(args), ast.dump(mod)


def _ref_dump(src, rename_first_arg=None):
    return _fn_dump(ast.parse(textwrap.dedent(src)).body[0], rename_first_arg)


# Hugging Face forwards that the module-level replacements reproduce (transformers 5.17; the
# same text is generated into every model that copies Llama's).
_HF_RMSNORM_FORWARDS = {_ref_dump(s, "x") for s in ('''
    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)
''', '''
    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return (self.weight * hidden_states).to(input_dtype)
''')}
# Gemma's: x.float() normalized, times (1 + weight), rounded back to x's dtype.
_HF_RMSNORM_PLUS_ONE = ({_ref_dump('''
    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)
''', "x")}, {_ref_dump('''
    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
''', "x")})
_HF_SWIGLU_FORWARDS = {_ref_dump('''
    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
''', "x")}

_FORWARD_CACHE = {}


def _forward_matches(cls, refs, method="forward") -> bool:
    key = (cls, id(refs), method)
    if key not in _FORWARD_CACHE:
        fn = getattr(cls, method, None)
        _FORWARD_CACHE[key] = fn is not None and _body_dump(fn, "x") in refs
    return _FORWARD_CACHE[key]


def _from_transformers(m) -> bool:
    mod = type(m).__module__ or ""
    return mod.startswith("transformers.") or mod.startswith("transformers_modules.")


def _is_swiglu(m):
    if _swiglu_names(m) is None:
        return False
    if type(m).__name__ in ("FeedForward", "SwiGLU"):  # models/llama.py, Meta's layout
        return True
    return _forward_matches(type(m), _HF_SWIGLU_FORWARDS)


def _rmsnorm_kind(m):
    """None (not an RMSNorm the op reproduces), "plain" (x / rms * weight) or "plus_one"
    (Gemma's x / rms * (1 + weight))."""
    if type(m) is getattr(nn, "RMSNorm", None):  # torch's own (aten::rms_norm), eps may be None
        return "plain" if isinstance(m.weight, torch.Tensor) and m.weight.dim() == 1 else None
    if not (type(m).__name__.endswith("RMSNorm") and isinstance(getattr(m, "weight", None), torch.Tensor)
            and m.weight.dim() == 1 and _rms_eps(m) is not None):
        return None
    if not _from_transformers(m):
        return "plain"
    # Hugging Face: the forward decides (Gemma's 1 + weight, OLMo's, grouped ones differ)
    cls = type(m)
    if _forward_matches(cls, _HF_RMSNORM_FORWARDS):
        return "plain"
    fwd, norm = _HF_RMSNORM_PLUS_ONE
    if _forward_matches(cls, fwd) and _forward_matches(cls, norm, "_norm"):
        return "plus_one"
    return None


def replace_modules(model: nn.Module, types, only=None) -> dict:
    """Replaces submodules of `model` in place for the kernel types in `types` (iterable of type
    names); returns {type: modules replaced}. fused_mlp takes precedence over matmul inside a
    SwiGLU block. `only` restricts matmul to the nn.Linear modules whose (out_features,
    in_features) it lists (see "Shape selection"). Raises nothing; a module that does not fit is
    left as it is."""
    counts = {}
    only = {t: {tuple(k) for k in keys} for t, keys in only.items() if keys is not None} if only else None

    def swap(parent, name, new, t):
        setattr(parent, name, new)
        counts[t] = counts.get(t, 0) + 1

    def walk(mod):
        for name, child in list(mod.named_children()):
            cls = type(child).__name__
            if "fused_mlp" in types and _is_swiglu(child):
                swap(mod, name, VbFusedMLP(child), "fused_mlp")
            elif ("matmul" in types and type(child) is nn.Linear
                  and _allowed(only, "matmul", (child.out_features, child.in_features))):
                swap(mod, name, VbLinear(child), "matmul")
            elif "layernorm" in types and type(child) is nn.LayerNorm:
                swap(mod, name, VbLayerNorm(child), "layernorm")
            elif "rmsnorm" in types and _rmsnorm_kind(child) is not None:
                swap(mod, name, VbRMSNorm(child, _rmsnorm_kind(child) == "plus_one"), "rmsnorm")
            elif "rotary_embedding" in types and cls == "RotaryEmbedding" and hasattr(child, "tables"):
                swap(mod, name, VbRotary(child), "rotary_embedding")
            else:
                walk(child)

    walk(model)
    return counts


def with_kernels(model: nn.Module, types, only=None):
    """(copy, module_counts): a deep copy of `model` with the module-level replacements for
    `types` (restricted by `only`, see "Shape selection"), and {type: modules replaced}. Run the
    copy inside `patched(types, only)` for the function-level ones."""
    m = copy.deepcopy(model)
    counts = replace_modules(m, types, only)
    return m, counts


# --------------------------------------------------------------------------------------------
# Function level
# --------------------------------------------------------------------------------------------

def _arg(args, kwargs, i, name, default=None):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _extra(kwargs, known):
    return any(k not in known for k in kwargs)


def _float(*ts):
    t0 = ts[0]
    return all(isinstance(t, torch.Tensor) and t.dtype == t0.dtype and t.device == t0.device for t in ts) \
        and t0.dtype in _FLOATS


def _last_dim(dim, ndim):
    if isinstance(dim, (list, tuple)):
        if len(dim) != 1:
            return False
        dim = dim[0]
    return isinstance(dim, int) and not isinstance(dim, bool) and dim in (-1, ndim - 1)


# Hugging Face's half-split RoPE (apply_rotary_pos_emb with rotate_half), transformers 5.17.
_HF_ROPE_BODIES = {_ref_dump(s)[1] for s in ('''
def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed
''', '''
def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    q_type, k_type = q.dtype, k.dtype
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed.to(q_type), k_embed.to(k_type)
''')}
# GPT-NeoX's partial rotary (the first cos.shape[-1] features rotated, the rest passed through).
_HF_ROPE_PARTIAL = _ref_dump('''
def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]
    q_embed = (q_rot * cos) + (rotate_half(q_rot) * sin)
    k_embed = (k_rot * cos) + (rotate_half(k_rot) * sin)
    q_embed = torch.cat([q_embed, q_pass], dim=-1)
    k_embed = torch.cat([k_embed, k_pass], dim=-1)
    return q_embed, k_embed
''')[1]
_HF_ROTATE_HALF = _ref_dump('''
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
''')
_ROPE_CACHE = {}  # id(function) -> (function, _rope_signature's answer)


def _rope_signature(fn):
    """(unsqueeze_dim position, its default, partial) when `fn` is HF's half-split
    apply_rotary_pos_emb: arguments (q, k, cos, sin[, position_ids], unsqueeze_dim), the body of
    Llama's (or OLMo's, which casts back to q's dtype; or GPT-NeoX's partial rotary: partial
    True), and the rotate_half it calls (from its own module's globals) the half-split one;
    else None."""
    key = id(fn)
    hit = _ROPE_CACHE.get(key)
    if hit is not None and hit[0] is fn:
        return hit[1]
    res = None
    d = _body_dump(fn)
    rh = getattr(inspect.unwrap(fn), "__globals__", {}).get("rotate_half")
    partial = d is not None and d[1] == _HF_ROPE_PARTIAL
    if d is not None and (d[1] in _HF_ROPE_BODIES or partial) and callable(rh) and \
            _body_dump(rh) == _HF_ROTATE_HALF:
        args = d[0]
        if args[:4] == ("q", "k", "cos", "sin") and set(args[4:]) <= {"position_ids", "unsqueeze_dim"} \
                and "unsqueeze_dim" in args:
            p = inspect.signature(inspect.unwrap(fn)).parameters["unsqueeze_dim"]
            res = (args.index("unsqueeze_dim"), 1 if p.default is inspect.Parameter.empty else p.default,
                   partial)
    _ROPE_CACHE[key] = (fn, res)
    return res


_HF_SCAN = [-1, ()]  # [len(sys.modules) at the last scan, names of the modeling modules]


def _hf_modules():
    """(name, module) of the loaded transformers.models.*.modeling_* and transformers_modules.*
    (remote code) modules. The names are rescanned only when sys.modules changed size, so that
    entering `patched` per forward costs microseconds, not a walk over thousands of modules."""
    if _HF_SCAN[0] != len(sys.modules):
        _HF_SCAN[1] = tuple(n for n in list(sys.modules)
                            if (n.startswith("transformers.models.") and ".modeling_" in n)
                            or n.startswith("transformers_modules."))
        _HF_SCAN[0] = len(sys.modules)
    for name in _HF_SCAN[1]:
        mod = sys.modules.get(name)
        if mod is not None:
            yield name, mod


def _hub_wrapped(fn):
    """The function under a Hugging Face `kernels` hub wrapper, else `fn`. With `kernels` installed,
    transformers' @use_kernel_forward_from_hub("rotary_pos_emb") turns apply_rotary_pos_emb into an
    nn.Module instance whose forward calls the function (kernels 0.16: _create_func_module's Func,
    the function in forward's closure); its body and signature are the function's."""
    fwd = getattr(type(fn), "forward", None)
    if isinstance(fn, torch.nn.Module) and type(fn).__qualname__.endswith("_create_func_module.<locals>.Func") \
            and getattr(fwd, "__closure__", None):
        for cell in fwd.__closure__:
            if inspect.isfunction(cell.cell_contents):
                return cell.cell_contents
    return fn


def hf_rope_functions() -> list:
    """[(module name, function)] of the loaded Hugging Face modeling modules whose
    apply_rotary_pos_emb is the half-split (NeoX/rotate_half) one that `patched` replaces
    (Llama's, OLMo's, or GPT-NeoX's partial rotary). Interleaved (Cohere, GLM) and multimodal
    RoPE are not in it: they keep running in PyTorch."""
    out = []
    for name, mod in _hf_modules():
        fn = _hub_wrapped(mod.__dict__.get("apply_rotary_pos_emb"))
        if callable(fn) and not hasattr(fn, "__wrapped_vladbud__") and _rope_signature(fn) is not None:
            out.append((name, fn))
    return out


def _version(t):
    """t's version counter (bumped by every in-place change), or None for an inference tensor,
    which has none (torch.inference_mode): such a tensor is matched by identity alone, so an
    in-place change of it between two calls is not seen (verify's in-model check of the output
    would catch the wrong result)."""
    return None if t.is_inference() else t._version


_ROPE_LAST = [None]
"""The last eager answer of _rope_tables: (weakref(cos), weakref(sin), _version(cos),
_version(sin), q.dtype, partial, tables). A model computes its cos/sin once per forward and passes
the same two tensors to every layer; the checks of their contents (torch.equal, which waits for the
GPU) and the table copies then run once per forward, not once per layer."""


def _rope_tables(cos, sin, q, k, unsqueeze_dim, partial):
    """cos/sin [S, R/2] in q's dtype from HF's [1 or B, S, R] (R = D, or R <= D for a partial
    rotary function), or None when the op cannot take the call (the original runs).
    In eager mode the answer for the same cos and sin tensor objects, unchanged since (their version
    counters), is reused (`_ROPE_LAST`); the shape checks against q and k still run on every call."""
    if not (_float(q, k) and isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor)):
        return None
    if unsqueeze_dim not in (1, -3) or q.dim() != 4 or k.dim() != 4 or cos.dim() != 3 or sin.dim() != 3:
        return None
    B, _, S, D = q.shape
    R = cos.shape[-1]
    if R % 2 or R == 0 or S == 0 or k.shape[0] != B or k.shape[2] != S or k.shape[3] != D:
        return None
    if cos.shape != sin.shape or cos.shape[1] != S or cos.shape[0] not in (1, B) or \
            not (R == D or (partial and R < D)):
        return None
    if cos.device != q.device or sin.device != q.device:
        return None
    if cos.dtype != q.dtype or sin.dtype != q.dtype or k.dtype != q.dtype:
        # HF computes q * cos in the promoted dtype (e.g. fp32 tables with bf16 q give fp32);
        # the op returns q's dtype, so such a call keeps HF's own function.
        return None
    h = R // 2
    if not _compiling():
        last = _ROPE_LAST[0]
        vc, vs = _version(cos), _version(sin)
        if (last is not None and last[0]() is cos and last[1]() is sin and last[2] == vc
                and last[3] == vs and last[4] == q.dtype and last[5] == partial):
            return last[6]
        # Eager: the tables must be the same for every batch row and have duplicated halves
        # (HF's cat((freqs, freqs))). Under torch.compile these data checks are not made: one
        # row is required and HF builds the halves duplicated by construction.
        tables = None
        if not (cos.shape[0] > 1 and not (torch.equal(cos, cos[:1].expand_as(cos)) and
                                          torch.equal(sin, sin[:1].expand_as(sin)))):
            if torch.equal(cos[..., :h], cos[..., h:]) and torch.equal(sin[..., :h], sin[..., h:]):
                tables = (cos[0, :, :h].to(q.dtype).contiguous(),
                          sin[0, :, :h].to(q.dtype).contiguous())
        try:
            _ROPE_LAST[0] = (weakref.ref(cos), weakref.ref(sin), vc, vs, q.dtype, partial, tables)
        except TypeError:  # a tensor subclass without weak references: no reuse
            _ROPE_LAST[0] = None
        return tables
    if cos.shape[0] != 1:
        return None
    return (cos[0, :, :h].to(q.dtype).contiguous(), sin[0, :, :h].to(q.dtype).contiguous())


def _wants_grad(args, kwargs) -> bool:
    """True when autograd would record this call: grad mode on and a tensor argument (or one in a
    list/tuple argument) requires grad. The ops have no backward, so such calls stay PyTorch's."""
    if not torch.is_grad_enabled():
        return False
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            if a.requires_grad:
                return True
        elif isinstance(a, (list, tuple)):
            if any(isinstance(t, torch.Tensor) and t.requires_grad for t in a):
                return True
    return False


def _grad_guard(orig, new):
    """`new` (a wrapper that may call a torch.ops.vladbud op) for calls autograd does not record,
    `orig` for the others: VladBud's ops are forward-only (no derivative is registered), so a
    training forward under `patched(...)` runs PyTorch's own functions and backward works.
    verify and profile run under inference_mode, where every call takes `new`. Attributes of
    `new` (e.g. __wrapped_vladbud__) are kept."""
    def guarded(*args, **kwargs):
        if _wants_grad(args, kwargs):
            return orig(*args, **kwargs)
        return new(*args, **kwargs)

    guarded.__dict__.update(getattr(new, "__dict__", {}))
    guarded.__name__ = getattr(new, "__name__", "guarded")
    guarded.__doc__ = getattr(new, "__doc__", None)
    return guarded


class Patched:
    """`with patched(types):` routes the supported torch / Hugging Face functions to
    torch.ops.vladbud.<type> for the kernel types in `types` (see the module doc for what is
    swapped and when a call is taken), and restores every swapped attribute on exit, also when
    the body raises. Re-entrant in LIFO order (an inner context's originals are the outer
    wrappers). `counts` holds the calls the wrappers sent to the ops in eager mode (not while
    Dynamo traces; torch.ops' own counters, vladbud.kernels.CALLS, count compiled runs too)."""

    def __init__(self, types, only=None):
        self.types = set(types)
        self.only = {t: set(map(tuple, keys)) for t, keys in (only or {}).items() if keys is not None}
        self.counts = {}
        self._saved = []

    def _hit(self, t):
        if not _compiling():
            self.counts[t] = self.counts.get(t, 0) + 1

    def _swap(self, owner, name, new):
        had = name in vars(owner)
        self._saved.append((owner, name, had, vars(owner).get(name) if had else None))
        setattr(owner, name, _grad_guard(getattr(owner, name), new))

    def restore(self):
        """Puts every swapped attribute back (idempotent)."""
        while self._saved:
            owner, name, had, old = self._saved.pop()
            if had:
                setattr(owner, name, old)
            else:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass

    def __enter__(self):
        try:
            self._install()
        except BaseException:
            self.restore()
            raise
        return self

    def __exit__(self, *exc):
        self.restore()
        return False

    # -- the wrappers --------------------------------------------------------------------------

    def _install(self):
        t = self.types
        if "flash_attention" in t:
            self._swap(F, "scaled_dot_product_attention", self._sdpa(F.scaled_dot_product_attention))
            mu = sys.modules.get("transformers.masking_utils")
            if mu is not None and callable(getattr(mu, "_ignore_causal_mask_sdpa", None)):
                self._swap(mu, "_ignore_causal_mask_sdpa", _skip_mask_when_compiling(mu._ignore_causal_mask_sdpa))
        if "softmax" in t:
            orig_t = torch.softmax
            self._swap(F, "softmax", self._softmax_f(F.softmax))
            self._swap(torch, "softmax", self._softmax_torch(orig_t))
            self._swap(torch.Tensor, "softmax", self._softmax_method(orig_t))
        if "cross_entropy" in t:
            self._swap(F, "cross_entropy", self._cross_entropy(F.cross_entropy))
        if "reduce" in t:
            orig_s = torch.sum
            self._swap(torch, "sum", self._sum(orig_s, method=False))
            self._swap(torch.Tensor, "sum", self._sum(orig_s, method=True))
        if "matmul" in t:
            self._swap(F, "linear", self._linear(F.linear))
        if "layernorm" in t:
            self._swap(F, "layer_norm", self._layer_norm(F.layer_norm))
        if "rotary_embedding" in t:
            done = {}
            for name, mod in _hf_modules():
                fn = _hub_wrapped(mod.__dict__.get("apply_rotary_pos_emb"))  # under kernels' hub wrapper
                if not callable(fn) or hasattr(fn, "__wrapped_vladbud__"):  # an outer context's
                    continue
                sig = _rope_signature(fn)
                if sig is None:
                    continue
                if id(fn) not in done:
                    done[id(fn)] = self._rope(fn, *sig)
                self._swap(mod, "apply_rotary_pos_emb", done[id(fn)])

    def _sdpa(self, orig):
        known = {"query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"}

        def scaled_dot_product_attention(*args, **kwargs):
            q, k, v = (_arg(args, kwargs, i, n) for i, n in enumerate(("query", "key", "value")))
            mask = _arg(args, kwargs, 3, "attn_mask")
            drop = _arg(args, kwargs, 4, "dropout_p", 0.0)
            causal = _arg(args, kwargs, 5, "is_causal", False)
            scale = _arg(args, kwargs, 6, "scale")
            gqa = _arg(args, kwargs, 7, "enable_gqa", False)
            # SDPA's signature: query, key, value, attn_mask, dropout_p, is_causal positional;
            # scale and enable_gqa keyword-only, enable_gqa a bool. Any other call goes to SDPA,
            # which raises what it raises.
            if (mask is None and drop == 0.0 and len(args) <= 6 and not _extra(kwargs, known)
                    and isinstance(gqa, bool) and isinstance(causal, bool)
                    and _float(q, k, v) and q.dim() == 4 and k.dim() == 4 and v.dim() == 4):
                B, H, S, D = q.shape
                Hkv = k.shape[1]
                if (k.shape == v.shape and k.shape[0] == B and k.shape[2] == S and k.shape[3] == D
                        and S > 0 and D > 0 and H > 0 and Hkv > 0 and H % Hkv == 0
                        and (Hkv == H or gqa)):
                    # GQA (Hkv < H): K/V [B,Hkv,S,D] go to the op unexpanded; the kernel maps
                    # query head h to KV head h // (H / Hkv), as SDPA with enable_gqa does.
                    s = float(scale) if scale is not None else 1.0 / math.sqrt(D)
                    self._hit("flash_attention")
                    return ops.flash_attention(q.contiguous(), k.contiguous(), v.contiguous(),
                                               1.0 if causal else 0.0, s)
            return orig(*args, **kwargs)

        return scaled_dot_product_attention

    def _softmax_try(self, x, dim, dtype):
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or not _last_dim(dim, x.dim()):
            return None
        if dtype is not None:
            if dtype not in _FLOATS:
                return None
            x = x.to(dtype)
        if x.dtype not in _FLOATS or x.numel() == 0:
            return None
        self._hit("softmax")
        return ops.softmax(_rows(x).contiguous()).reshape(x.shape)

    def _softmax_f(self, orig):
        known = {"input", "dim", "_stacklevel", "dtype"}

        def softmax(*args, **kwargs):
            if not _extra(kwargs, known) and len(args) <= 4:
                y = self._softmax_try(_arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "dim"),
                                      _arg(args, kwargs, 3, "dtype"))
                if y is not None:
                    return y
            return orig(*args, **kwargs)

        return softmax

    def _softmax_torch(self, orig):
        known = {"input", "dim", "dtype"}

        def softmax(*args, **kwargs):
            if not _extra(kwargs, known) and len(args) <= 3:
                y = self._softmax_try(_arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "dim"),
                                      _arg(args, kwargs, 2, "dtype"))
                if y is not None:
                    return y
            return orig(*args, **kwargs)

        return softmax

    def _softmax_method(self, orig_fn):
        known = {"dim", "dtype"}

        def softmax(self_, *args, **kwargs):
            if not _extra(kwargs, known) and len(args) <= 2:
                y = self._softmax_try(self_, _arg(args, kwargs, 0, "dim"), _arg(args, kwargs, 1, "dtype"))
                if y is not None:
                    return y
            # The functional form: Dynamo cannot trace an unbound TensorBase method.
            return orig_fn(self_, *args, **kwargs)

        return softmax

    def _cross_entropy(self, orig):
        known = {"input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                 "label_smoothing"}

        def cross_entropy(*args, **kwargs):
            x, y = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "target")
            if (not _extra(kwargs, known) and len(args) <= 8 and isinstance(x, torch.Tensor)
                    and isinstance(y, torch.Tensor) and x.dim() == 2 and y.dim() == 1
                    and x.dtype in _FLOATS and y.dtype in (torch.int64, torch.int32)
                    and x.shape[0] == y.shape[0] and x.numel() > 0
                    and _arg(args, kwargs, 2, "weight") is None and _arg(args, kwargs, 3, "size_average") is None
                    and _arg(args, kwargs, 5, "reduce") is None
                    and _arg(args, kwargs, 6, "reduction", "mean") == "mean"
                    and _arg(args, kwargs, 7, "label_smoothing", 0.0) == 0.0):
                ii = _arg(args, kwargs, 4, "ignore_index", -100)
                self._hit("cross_entropy")
                return ops.cross_entropy(x.contiguous(), y.long().contiguous(), float(ii)).to(x.dtype)
            return orig(*args, **kwargs)

        return cross_entropy

    def _sum(self, orig_fn, method):
        known = {"input", "dim", "keepdim", "dtype"}

        def _try(x, args, kwargs):
            if _extra(kwargs, known) or len(args) > 3:
                return None
            dim, keepdim, dtype = (_arg(args, kwargs, 1, "dim"), _arg(args, kwargs, 2, "keepdim", False),
                                   kwargs.get("dtype"))
            if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.dtype not in _FLOATS or x.numel() == 0:
                return None
            if keepdim or (dtype is not None and dtype != x.dtype) or not _last_dim(dim, x.dim()):
                return None
            self._hit("reduce")
            return ops.reduce(_rows(x).contiguous()).reshape(x.shape[:-1])

        if method:
            def sum(self_, *args, **kwargs):  # noqa: A001 - the method's own name
                y = _try(self_, (self_,) + args, kwargs)
                return y if y is not None else orig_fn(self_, *args, **kwargs)
        else:
            def sum(*args, **kwargs):  # noqa: A001
                y = _try(_arg(args, kwargs, 0, "input"), args, kwargs) if args or "input" in kwargs else None
                return y if y is not None else orig_fn(*args, **kwargs)
        return sum

    def _linear(self, orig):
        def linear(*args, **kwargs):
            x, w = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "weight")
            b = _arg(args, kwargs, 2, "bias")
            if (not _extra(kwargs, {"input", "weight", "bias"}) and len(args) <= 3 and _float(x, w)
                    and w.dim() == 2 and x.dim() >= 1 and x.shape[-1] == w.shape[1] and x.numel() > 0
                    and w.shape[0] > 0 and (b is None or (_float(x, b) and b.shape == (w.shape[0],)))
                    and _allowed(self.only, "matmul", (w.shape[0], w.shape[1]))):
                self._hit("matmul")
                y = ops.matmul(_rows(x).contiguous(), w.t().contiguous())
                if b is not None:
                    y = y + b
                return y.reshape(*x.shape[:-1], w.shape[0])
            return orig(*args, **kwargs)

        return linear

    def _layer_norm(self, orig):
        known = {"input", "normalized_shape", "weight", "bias", "eps"}

        def layer_norm(*args, **kwargs):
            x, ns = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "normalized_shape")
            w, b = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")
            eps = _arg(args, kwargs, 4, "eps", 1e-5)
            if isinstance(ns, int):
                ns = (ns,)
            if (not _extra(kwargs, known) and len(args) <= 5 and isinstance(x, torch.Tensor)
                    and x.dtype in _FLOATS and isinstance(ns, (list, tuple, torch.Size)) and len(ns) >= 1
                    and x.dim() >= len(ns) and tuple(x.shape[x.dim() - len(ns):]) == tuple(ns) and x.numel() > 0):
                d = int(math.prod(ns))
                if (w is None or (isinstance(w, torch.Tensor) and w.numel() == d)) and \
                        (b is None or (isinstance(b, torch.Tensor) and b.numel() == d)):
                    w = torch.ones(d, dtype=x.dtype, device=x.device) if w is None else w.reshape(d).to(x.dtype)
                    b = torch.zeros(d, dtype=x.dtype, device=x.device) if b is None else b.reshape(d).to(x.dtype)
                    self._hit("layernorm")
                    return ops.layernorm(x.reshape(-1, d).contiguous(), w.contiguous(), b.contiguous(),
                                         float(eps)).reshape(x.shape)
            return orig(*args, **kwargs)

        return layer_norm

    def _rope(self, orig, u_pos, u_default, partial):
        def apply_rotary_pos_emb(*args, **kwargs):
            if len(args) >= 4 and set(kwargs) <= {"unsqueeze_dim", "position_ids"}:
                q, k, cos, sin = args[:4]
                u = args[u_pos] if len(args) > u_pos else kwargs.get("unsqueeze_dim", u_default)
                tables = _rope_tables(cos, sin, q, k, u, partial)
                if tables is not None:
                    c, s = tables
                    R = 2 * c.shape[-1]
                    out = []
                    for x in (q, k):  # two op calls: one per rotated tensor
                        self._hit("rotary_embedding")
                        if R == x.shape[-1]:
                            out.append(ops.rotary_embedding(x.contiguous(), c, s, 0.0))
                        else:  # partial rotary: the features past R pass through
                            y = ops.rotary_embedding(x[..., :R].contiguous(), c, s, 0.0)
                            out.append(torch.cat([y, x[..., R:]], dim=-1))
                    return out[0], out[1]
            return orig(*args, **kwargs)

        apply_rotary_pos_emb.__wrapped_vladbud__ = orig
        return apply_rotary_pos_emb


def _skip_mask_when_compiling(orig):
    """transformers.masking_utils._ignore_causal_mask_sdpa that also skips the mask while
    torch.compile traces (not torch.export) when nothing but causality is in it (see the module
    doc); otherwise the original's answer."""
    def _ignore_causal_mask_sdpa(padding_mask, q_length, kv_length, q_offset, kv_offset,
                                 local_attention_size=None):
        # torch.compiler.is_exporting() reads as True inside Dynamo (torch 2.11); the flag it
        # returns is False under torch.compile and True under torch.export. Unknown: exporting.
        exporting = getattr(torch.compiler, "_is_exporting_flag", True)
        if (_compiling() and not exporting and padding_mask is None and local_attention_size is None
                and isinstance(q_length, int) and q_length == kv_length):
            return True
        return orig(padding_mask, q_length, kv_length, q_offset, kv_offset, local_attention_size)

    return _ignore_causal_mask_sdpa


def patched(types, only=None) -> Patched:
    """The function-level replacements for `types` as a context manager (see Patched), matmul
    restricted to the weight shapes of `only` when it names matmul ("Shape selection")."""
    return Patched(types, only)


# The old name: a TorchFunctionMode until issue 14; now the attribute-swapping context.
OperatorMode = Patched


# --------------------------------------------------------------------------------------------
# Intercept check
# --------------------------------------------------------------------------------------------

# Op calls per profile instance, by the type the profile gave the group. An instance is one
# entry "call": one top-level ATen op, or one run of ops fused into a pattern (classify.py).
#  * matmul: only aten::linear groups (nn.Linear modules, F.linear) are replaced; torch.matmul /
#    @ / mm / bmm / addmm / baddbmm (batched attention products of eager attention, the RoPE
#    frequency product of HF's rotary module) are not patched: reported, not expected.
#  * fused_mlp (pattern linear, silu, linear, mul, linear): one fused_mlp call per instance; when
#    fused_mlp is not replaced but matmul is, the pattern's three linears are three matmul calls.
#  * rotary_embedding (pattern, one per rotated tensor: HF's apply_rotary_pos_emb gives two
#    instances, q and k, and the wrapper makes two op calls): one call per instance.
#  * flash_attention: one call per SDPA call. GQA through enable_gqa is one instance (dims with
#    HKV) and one call (K/V go to the op with their H_kv heads, no copy); HF's repeat_kv (taken
#    when a mask is materialized) is untyped expand/reshape, and SDPA with an explicit mask has
#    dims None.
#  * rmsnorm, layernorm, softmax, cross_entropy, reduce: one call per instance.
#  * an entry with dims None does not fit its type (the profile's note says why): not expected.
_MATMUL_REPLACED_OPS = {"aten::linear"}
_PATTERN_LINEARS = {"fused_mlp": 3}


def _group_name(e):
    dims = e.get("dims")
    d = ",".join(f"{k}={v}" for k, v in dims.items()) if isinstance(dims, dict) else "?"
    return f"{e.get('type')} [{e.get('op', '?')}] ({d})"


def expected_calls(profile_entries, types, only=None) -> dict:
    """{type: {"expected": op calls per forward, "groups": [{"group", "calls", "op_calls"}],
    "not_covered": [{"group", "calls", "reason"}]}} for each type in `types`, from profile.json's
    entries (profile.group_entries: "type", "op", "dims", "calls" per forward). The rules are in
    the comment above _MATMUL_REPLACED_OPS; they were measured on models/gpt2.py, llama.py,
    bert.py and Hugging Face's LlamaForCausalLM (transformers 5.17) with vladbud.kernels.CALLS.
    Under a shape selection `only`, a matmul group whose (N, K) it does not list goes to
    not_covered ("left to PyTorch at this shape"), and of a SwiGLU pattern's three linears
    (gate and up [H, D], down [D, H]) only the selected ones count."""
    types = set(types)
    sel = {t: set(map(tuple, k)) for t, k in (only or {}).items() if k is not None}
    out = {t: {"expected": 0.0, "groups": [], "not_covered": []} for t in types}
    for e in profile_entries or []:
        t, calls = e.get("type"), float(e.get("calls") or 0.0)
        if t is None or calls == 0:
            continue
        name = _group_name(e)
        if t in _PATTERN_LINEARS and t not in types and "matmul" in types and e.get("dims") is not None:
            n = _PATTERN_LINEARS[t]
            row = out["matmul"]
            d = e["dims"]
            if "matmul" in sel and all(k in d for k in ("D", "H")):
                keys = [(int(d["H"]), int(d["D"]))] * 2 + [(int(d["D"]), int(d["H"]))]
                n = sum(1 for k in keys if k in sel["matmul"])
                if n == 0:
                    row["not_covered"].append({"group": name, "calls": calls,
                                               "reason": "left to PyTorch at these shapes (shape selection)"})
                    continue
            row["expected"] += n * calls
            row["groups"].append({"group": name, "calls": calls, "op_calls": n * calls,
                                  "rule": f"{t} not replaced: {n} of its linears are matmul calls"})
            continue
        if t not in types:
            continue
        row = out[t]
        if e.get("dims") is None:
            row["not_covered"].append({"group": name, "calls": calls,
                                       "reason": e.get("note") or "the call does not fit the type"})
            continue
        if t == "matmul" and e.get("op") not in _MATMUL_REPLACED_OPS:
            row["not_covered"].append({"group": name, "calls": calls,
                                       "reason": f"{e.get('op')} (torch.matmul, @, mm, bmm, addmm) is not "
                                                 f"replaced; only nn.Linear and F.linear are"})
            continue
        if t in sel and t == "matmul" and matmul_key(e["dims"]) not in sel[t]:
            row["not_covered"].append({"group": name, "calls": calls,
                                       "reason": "left to PyTorch at this shape (shape selection)"})
            continue
        row["expected"] += calls
        row["groups"].append({"group": name, "calls": calls, "op_calls": calls, "rule": "one call per instance"})
    return out


def intercept_check(profile_entries, types, calls_per_forward, only=None) -> list:
    """Proves that each replaced type intercepts the calls the profile attributed to it.

    profile_entries: profile.json's "entries" (profile.group_entries) of the same model, dtype
    and input shape; types: the replaced kernel types; calls_per_forward: {type: op calls per
    forward} (vladbud.kernels.CALLS over n forwards / n; a float); only: the shape selection the
    replacement ran under (expected_calls). Returns one row per type, in
    the order of `types`: {"type", "expected" (op calls per forward, expected_calls),
    "intercepted", "ok" (equal within 1e-6), "message", "groups", "not_covered"}. A mismatch's
    message names the type's profiled groups, both counts, the group whose calls equal the
    difference when there is one, and what to do. Raises nothing."""
    exp = expected_calls(profile_entries, types, only)
    rows = []
    for t in dict.fromkeys(types):
        e = exp[t]
        want = e["expected"]
        got = float(calls_per_forward.get(t, 0) or 0)
        ok = math.isclose(want, got, rel_tol=1e-6, abs_tol=1e-6)
        groups = "; ".join(f"{g['group']} x{g['calls']:g}" + (f" -> {g['op_calls']:g} calls ({g['rule']})"
                                                              if g["op_calls"] != g["calls"] else "")
                           for g in e["groups"]) or "none"
        if ok:
            msg = f"{t}: {got:g} op calls per forward intercepted = {want:g} profiled ({groups})"
        else:
            diff = want - got
            culprit = [g["group"] for g in e["groups"] if math.isclose(g["op_calls"], abs(diff), rel_tol=1e-6)]
            which = f" (the difference, {abs(diff):g}, is the calls of group {culprit[0]})" if culprit else ""
            if got < want:
                what = (f"the replacement missed {diff:g} call(s) per forward{which}: the model reaches them "
                        f"through a module class or function that python/vladbud/replace.py does not "
                        f"recognise (e.g. a RoPE function that is not HF's apply_rotary_pos_emb); add it "
                        f"there, or leave {t} out of the kernels")
            else:
                what = (f"the replacement took {-diff:g} call(s) per forward more than the profile "
                        f"attributed to {t}{which}: the profile is of another model, dtype or input "
                        f"shape, or a patch takes calls the profile typed otherwise; re-run `vladbud "
                        f"profile` on this model and input")
            msg = (f"intercept check failed for {t}: the profile attributes {want:g} op call(s) per forward "
                   f"to group(s) {groups}, but the replaced model made {got:g}; {what}")
        rows.append({"type": t, "expected": want, "intercepted": got, "ok": ok, "message": msg,
                     "groups": e["groups"], "not_covered": e["not_covered"]})
    return rows
