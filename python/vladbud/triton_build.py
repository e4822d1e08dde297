"""The Triton backend's Python half (src/backends/triton/): source checks and compile-only builds.

Run by the C++ side as a script (python triton_build.py COMMAND ...; it imports nothing from
the vladbud package), one JSON object on stdout, exit 0; a problem with the kernel source is
reported in that JSON ({"ok": false, "diagnostics": ...}); exit 2 for bad usage.

  check SRC      static check of a kernel source, running none of its code (the candidate runs
                 only in the sandboxed runner): it parses, defines vb_kernel_run(inputs, outputs,
                 attrs) at module level and at least one @triton.jit function.
                 -> {"ok", "diagnostics", "triton_version"}
  compile SRC PROBLEM TARGET
                 compile-only build for an absent GPU (ladder rungs 0 and 1). PROBLEM is a JSON
                 file {"inputs": [{"dtype", "shape"}], "outputs": [...], "attrs": [...]}; TARGET
                 is backend:arch:warp_size ("hip:gfx942:64", "cuda:90:32"). The source's
                 vb_kernel_run is called on empty CPU tensors of the problem with the Triton
                 launches captured instead of run (this imports the candidate in this process:
                 run it as an unprivileged tool, it is not the sandboxed runner); each captured
                 launch is compiled with triton.compile for TARGET.
                 -> {"ok", "diagnostics", "kernels": [{"name", "grid", "num_warps",
                 "num_stages", "signature", "constexprs", "seconds", ...the target's numbers}]}
                 hip: vgpr, agpr, sgpr, vgpr_spill, sgpr_spill, lds_bytes, scratch_bytes,
                 occupancy (waves per SIMD, the compiler's "; Occupancy:" line), instructions,
                 mfma, wmma (counts of v_mfma* / v_wmma* lines of the amdgcn); cuda: arch (the sm
                 name Triton compiles for, e.g. sm_90a), entry (the PTX entry name), the cubin/ptx
                 (written next to PROBLEM as NN_<name>.cubin / .ptx), ptxas_report (`ptxas -v` of
                 that PTX with Triton's own ptxas and flags), ptxas_command, ptxas_version; an
                 architecture Triton's ptxas does not know gives {"ok": false, "arch_unsupported":
                 true} before any compile. shared_bytes is the launch's dynamic shared memory
                 (LDS on hip), metadata "shared". Signatures are specialized as Triton's JIT does.
  aot SRC PROBLEMS OUTDIR TARGET
                 ahead-of-time build for the GPU path (src/backends/triton/aot.h): PROBLEMS is a
                 JSON file {"problems": [PROBLEM...]} (each as for compile); for each problem the
                 source's vb_kernel_run is called twice on empty CPU tensors with Triton's
                 launches captured, every argument of every launch is bound to an input or
                 output (plus an element offset), to a scratch buffer (a temporary it made with
                 torch.empty/zeros: allocated per call by the launcher, zero-filled for zeros)
                 or to a scalar constant, and each distinct
                 specialized kernel is compiled once for TARGET (cuda only) into
                 OUTDIR/kNN_<name>.cubin. Refused ({"ok": false, "diagnostics"}): a capture that
                 raises or launches nothing, two captures that differ (the source keeps state),
                 an input or output written by PyTorch code instead of a launch, a tensor
                 argument that is no input, output or torch.empty/zeros temporary, host-side TMA descriptors or tuple arguments, a kernel needing
                 Triton's global scratch memory, thread-block clusters (num_ctas > 1), a
                 cooperative grid or programmatic dependent launch.
                 -> {"ok", "diagnostics", "triton_version", "arch", "kernels": [{"name",
                 "entry", "cubin", "num_warps", "num_ctas", "shared_bytes",
                 "launch_cooperative_grid", "launch_pdl", "params": [{"name", "type"}]}],
                 "problems": [{"inputs", "outputs", "attrs", "launches": [{"kernel", "grid",
                 "args": [{"kind": "input"|"output", "index", "offset_elems", "aligned16"} |
                 {"kind": "scratch", "index", "offset_bytes", "aligned16"} |
                 {"kind": "scalar", "type", "bytes", "bits"}]}], "scratch":
                 [{"bytes", "zero"}]}]}
  version        -> {"triton_version", "torch": bool, "reach": [dirs]}: Triton is importable
                 (and torch is installed, which the interpreter runner needs); reach lists the
                 directories of the installation the sandboxed runner must read.
"""
import ast
import json
import sys


def check(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        return {"ok": False, "diagnostics": f"{path}: error: cannot read the source: {e}"}
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        return {"ok": False,
                "diagnostics": f"{path}:{e.lineno}:{e.offset}: error: {e.msg}\n{(e.text or '').rstrip()}"}
    run = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "vb_kernel_run"]
    if not run:
        return {"ok": False, "diagnostics": f"{path}:1: error: no module-level def vb_kernel_run(inputs, outputs, attrs) "
                                            "(the Triton backend's form of the kernel ABI, DESIGN §3)"}
    args = run[0].args
    if len(args.args) != 3 or args.vararg or args.kwonlyargs:
        return {"ok": False, "diagnostics": f"{path}:{run[0].lineno}: error: vb_kernel_run must take exactly "
                                            "(inputs, outputs, attrs)"}

    def is_jit(dec):
        d = dec.func if isinstance(dec, ast.Call) else dec
        return (isinstance(d, ast.Attribute) and d.attr == "jit") or (isinstance(d, ast.Name) and d.id == "jit")

    jitted = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and any(is_jit(d) for d in n.decorator_list)]
    if not jitted:
        return {"ok": False, "diagnostics": f"{path}:1: error: no @triton.jit kernel in the source"}
    return {"ok": True, "diagnostics": "", "kernels": jitted}


TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
                "int64": "int64"}
TRITON_TYPES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
                "int64": "i64", "int32": "i32"}


_CAPTURED = []


# Temporaries vb_kernel_run made during the current capture: storage address -> True when
# made zero-filled (torch.zeros*), False when uninitialized (torch.empty*).
_TEMPORARIES = {}


def _load_capturing(path):
    """Imports the kernel source with Triton's launches captured (JITFunction.run records
    (fn, args, kwargs, grid) in _CAPTURED instead of compiling and launching) and torch's
    empty/zeros constructors recording the temporaries they make (_TEMPORARIES)."""
    import importlib.util
    import torch
    from triton.runtime import jit

    def run(self, *args, grid, warmup, **kwargs):
        _CAPTURED.append((self, args, dict(kwargs), grid))

    jit.JITFunction.run = run

    def recording(make, zero):
        def wrapper(*a, **k):
            t = make(*a, **k)
            if isinstance(t, torch.Tensor):
                _TEMPORARIES[t.untyped_storage().data_ptr()] = zero
            return t
        return wrapper

    for name, zero in (("empty", False), ("empty_like", False), ("zeros", True), ("zeros_like", True)):
        setattr(torch, name, recording(getattr(torch, name), zero))
    for name, zero in (("new_empty", False), ("new_zeros", True)):
        setattr(torch.Tensor, name, recording(getattr(torch.Tensor, name), zero))
    spec = importlib.util.spec_from_file_location("vb_triton_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _capture(mod, problem, check_writes=False):
    """Calls mod.vb_kernel_run on fresh empty CPU tensors of `problem`. With `check_writes`, an
    input or output that PyTorch code (not a captured launch) changed raises AotRefused.
    -> (captured launches, input tensors, output tensors, {storage address of a temporary it
    made: zero-filled})."""
    import torch

    def tensor(d):
        return torch.empty([int(x) for x in d["shape"]], dtype=getattr(torch, TORCH_DTYPES[d["dtype"]]))

    ins = [tensor(d) for d in problem["inputs"]]
    outs = [tensor(d) for d in problem["outputs"]]
    # Patterns (inputs 3, outputs 5): any change after the call was made by PyTorch code, not by
    # a (captured) launch -- a copy of an input into an output included.
    for t in ins:
        t.fill_(3)
    for t in outs:
        t.fill_(5)
    del _CAPTURED[:]
    _TEMPORARIES.clear()
    mod.vb_kernel_run(ins, outs, [float(a) for a in problem.get("attrs", [])])
    for kind, ts, pattern in (("input", ins, 3), ("output", outs, 5)) if check_writes else ():
        for i, t in enumerate(ts):
            if t.numel() and not bool((t == pattern).all()):
                raise AotRefused(f"vb_kernel_run writes {kind} {i} with PyTorch code, outside its Triton "
                                 "launches, which the AOT path (C++ launches only) cannot reproduce; fix: do "
                                 "that work in a Triton kernel")
    return list(_CAPTURED), ins, outs, dict(_TEMPORARIES)


def _launches(path, problem):
    """Runs the source's vb_kernel_run on empty CPU tensors of `problem`, capturing launches."""
    return _capture(_load_capturing(path), problem)[0]


def _specialize(fn, args, kwargs, backend, with_bound=False):
    """(signature, constexprs, attrs, options) of one captured launch, specialized exactly as
    Triton's JIT does it for `backend` (runtime/jit.py: create_function_from_signature then
    JITFunction._pack_args): pointers and integers divisible by 16 get tt.divisibility 16, an
    integer equal to 1 becomes a constant (a unit stride), do_not_specialize is honoured. With
    `with_bound`, the bound arguments {name: value} (defaults applied) come fifth."""
    from triton import knobs
    from triton.runtime.jit import create_function_from_signature
    kwargs = dict(kwargs)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    if with_bound:
        return signature, constexprs, attrs, options, bound
    return signature, constexprs, attrs, options


def _constexpr_names(fn, constexprs):
    """{argument name: value} of the constants of a launch (Triton keys them by argument path)."""
    names = fn.arg_names
    out = {}
    for path, v in constexprs.items():
        name = ".".join([names[path[0]]] + [str(i) for i in path[1:]]) if path and path[0] < len(names) else str(path)
        out[name] = v if isinstance(v, (int, float, bool)) or v is None else str(v)
    return out


def _grid(grid, fn, args, kwargs):
    """The launch grid as 1-3 integers (a callable grid is called with the bound arguments, as
    Triton's JITFunction.run does)."""
    if callable(grid):
        bound = dict(zip(fn.arg_names, args))
        bound.update(kwargs)
        grid = grid(bound)
    return [int(g) for g in grid]


def _cuda_arch(capability):
    """(sm name Triton compiles for, ptxas path, ptxas release, the sm names that ptxas knows):
    Triton picks the arch name (sm_90a for 90 and later, backends/nvidia/compiler.py
    sm_arch_from_capability) and its bundled ptxas (ptxas-blackwell for 100 and later)."""
    import re
    import subprocess
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability
    tool = get_ptxas(capability)
    help_text = subprocess.run([tool.path, "--help"], capture_output=True, text=True, timeout=60).stdout
    part = help_text[help_text.find("--gpu-name"):]
    part = part[:part.find("\n--", 1)] if "\n--" in part[1:] else part
    known = sorted(set(re.findall(r"'(sm_\d+[a-z]?)'", part)), key=lambda x: (int(re.sub(r"\D", "", x)), x))
    return sm_arch_from_capability(capability), tool.path, tool.version, known


def _ptxas_report(ptxas, arch, ptx_path, fp_fusion):
    """The `ptxas -v` resource report of the PTX Triton produced, assembled again with Triton's
    own ptxas and flags (compiler.py make_cubin: -lineinfo, -v, --gpu-name; Triton discards
    that report), into a scratch cubin that is removed. -> (command, report text)."""
    import os
    import subprocess
    out = ptx_path + ".ptxas-v.cubin"
    cmd = [ptxas, "-lineinfo", "-v"] + ([] if fp_fusion else ["--fmad=false"]) + [f"--gpu-name={arch}", ptx_path, "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if os.path.exists(out):
        os.remove(out)
    return " ".join(cmd), r.stderr + r.stdout


def _amdgcn_numbers(text):
    import re

    def field(key, default=0):
        m = re.search(r"^\s*" + re.escape(key) + r"\s*(-?\d+)", text, re.M)
        return int(m.group(1)) if m else default

    body = [l.strip() for l in text.splitlines()]
    instr = [l for l in body if l and l[0].isalpha() and not l.endswith(":") and l.startswith(("v_", "s_", "ds_", "global_", "buffer_", "flat_", "scratch_"))]
    return {"vgpr": field(".vgpr_count:"), "agpr": field(".agpr_count:"), "sgpr": field(".sgpr_count:"),
            "vgpr_spill": field(".vgpr_spill_count:"), "sgpr_spill": field(".sgpr_spill_count:"),
            "lds_bytes": field(".group_segment_fixed_size:"),
            "scratch_bytes": field(".private_segment_fixed_size:"),
            "occupancy": field("; Occupancy:"),
            "instructions": len(instr),
            "mfma": sum(1 for l in instr if l.startswith("v_mfma")),
            "wmma": sum(1 for l in instr if l.startswith("v_wmma")),
            "global_loads": sum(1 for l in instr if l.startswith(("global_load", "buffer_load"))),
            "global_stores": sum(1 for l in instr if l.startswith(("global_store", "buffer_store")))}


def compile_for(path, problem_path, target):
    import os
    import time
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    try:
        backend, arch, warp = target.split(":")
        gpu = GPUTarget(backend, int(arch) if backend == "cuda" else arch, int(warp))
    except ValueError:
        raise SystemExit(f"bad target '{target}' (backend:arch:warp_size, e.g. hip:gfx942:64)")
    with open(problem_path, encoding="utf-8") as f:
        problem = json.load(f)
    cuda = None
    if backend == "cuda":
        # Triton cannot compile for an architecture its bundled ptxas does not know (its LLVM
        # then aborts the process): say so before compiling anything.
        sm, ptxas, ptxas_version, known = _cuda_arch(gpu.arch)
        if sm not in known:
            return {"ok": False, "arch_unsupported": True, "triton_version": triton.__version__,
                    "diagnostics": f"Triton {triton.__version__} cannot compile for {sm}: its bundled ptxas "
                                   f"({ptxas}, release {ptxas_version}) knows {', '.join(known)}; "
                                   f"fix: a Triton release whose ptxas knows {sm} "
                                   f"(pip install -U triton in the project's .venv), or a target of those architectures"}
        cuda = (sm, ptxas, ptxas_version)
    try:
        launches = _launches(path, problem)
    except Exception as e:  # noqa: BLE001 -- the source's own error is the build's diagnostics
        return {"ok": False, "diagnostics": f"{path}: error: vb_kernel_run failed while capturing launches: {type(e).__name__}: {e}"}
    if not launches:
        return {"ok": False, "diagnostics": f"{path}: error: vb_kernel_run launched no Triton kernel for this problem"}
    be = make_backend(gpu)
    out = []
    for n, (fn, args, kwargs, grid) in enumerate(launches):
        t0 = time.time()
        try:
            sig, constexprs, attrs, options = _specialize(fn, args, kwargs, be)
            k = triton.compile(ASTSource(fn, sig, constexprs, attrs), target=gpu, options=options.__dict__)
        except Exception as e:  # noqa: BLE001 -- a compile error rejects the kernel at rung 0
            msg = str(e).strip().splitlines()
            return {"ok": False, "triton_version": triton.__version__,
                    "diagnostics": f"{path}: error: triton.compile of {fn.__name__} for {target} failed: "
                                   + " | ".join(msg[-6:])}
        rec = {"name": fn.__name__, "grid": _grid(grid, fn, args, kwargs),
               "num_warps": options.num_warps, "num_stages": options.num_stages,
               "signature": sig, "constexprs": _constexpr_names(fn, constexprs),
               "seconds": round(time.time() - t0, 3), "shared_bytes": int(getattr(k.metadata, "shared", 0) or 0)}
        if backend == "hip":
            rec.update(_amdgcn_numbers(k.asm["amdgcn"]))
            # Triton passes its LDS as the launch's dynamic size (metadata "shared"), which the
            # descriptor's static .group_segment_fixed_size does not include.
            rec["lds_bytes"] = max(rec["lds_bytes"], rec["shared_bytes"])
        else:
            stem = os.path.join(os.path.dirname(os.path.abspath(problem_path)), f"{n:02d}_{fn.__name__}")
            for ext in ("ptx", "cubin"):
                data = k.asm[ext]
                with open(f"{stem}.{ext}", "wb" if isinstance(data, bytes) else "w") as f:
                    f.write(data)
                rec[ext] = f"{stem}.{ext}"
            sm, ptxas, ptxas_version = cuda
            rec["arch"] = sm
            rec["entry"] = k.metadata.name
            rec["ptxas_version"] = ptxas_version
            rec["ptxas_command"], rec["ptxas_report"] = _ptxas_report(ptxas, sm, rec["ptx"], options.enable_fp_fusion)
        out.append(rec)
    return {"ok": True, "diagnostics": "", "triton_version": triton.__version__, "kernels": out}


# Scalar argument types of a Triton signature -> (bytes in the kernel's parameter buffer, how
# the value is packed): Triton 3.6's CUDA launcher (backends/nvidia/driver.py ty_to_cpp,
# FLOAT_STORAGE_TYPE, pack_fp16/bf16/fp32) passes integers as their C type and floats as the bits
# of the parameter's own width.
_SCALAR_BYTES = {"i1": 1, "i8": 1, "u1": 1, "u8": 1, "i16": 2, "u16": 2, "i32": 4, "u32": 4,
                 "i64": 8, "u64": 8, "fp16": 2, "bf16": 2, "fp32": 4, "f32": 4, "fp64": 8}


def _scalar_bits(ty, v):
    """The little-endian parameter bits of scalar `v` passed as Triton type `ty` (as an int)."""
    import struct
    import torch
    if ty in ("fp32", "f32"):
        return struct.unpack("<I", struct.pack("<f", float(v)))[0]
    if ty == "fp64":
        return struct.unpack("<Q", struct.pack("<d", float(v)))[0]
    if ty in ("fp16", "bf16"):
        t = torch.tensor([float(v)], dtype=torch.float16 if ty == "fp16" else torch.bfloat16)
        return int(t.view(torch.int16).item()) & 0xFFFF
    return int(v) & ((1 << (8 * _SCALAR_BYTES[ty])) - 1)


class AotRefused(Exception):
    """The source cannot be built ahead of time (the message names why and the fix)."""


def _bind(path, fn, sig, bound, ins, outs, temporaries, scratch):
    """Binds every kernel parameter (the non-constexpr entries of `sig`, in order) to where its
    value comes from at run time: an input/output tensor plus an element offset, a scratch buffer
    (a temporary vb_kernel_run made with torch.empty/zeros: `scratch` lists them per problem,
    {"bytes", "zero"}, indexed by first use) plus an element offset, or a constant."""
    def storage_of(t):
        p, n = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
        return p, p + n

    tensors = [("input", i, t) for i, t in enumerate(ins)] + [("output", i, t) for i, t in enumerate(outs)]
    args = []
    for name, ty in sig.items():
        v = bound[name]
        if ty == "constexpr":
            continue
        if isinstance(ty, tuple) or isinstance(v, (tuple, list)):
            raise AotRefused(f"{path}: error: {fn.__name__}: argument {name} is a tuple; the AOT path "
                             "binds only tensors and scalars (fix: pass its members as separate arguments)")
        if ty.startswith("tensordesc") or ty == "nvTmaDesc":
            raise AotRefused(f"{path}: error: {fn.__name__}: argument {name} is a host-side TMA descriptor "
                             f"({ty}); the Triton AOT path does not encode tensor maps yet (fix: use "
                             "tl.make_block_ptr or a device-side tl.make_tensor_descriptor)")
        if ty.startswith("*"):
            ptr = v.data_ptr()
            for kind, idx, t in tensors:
                lo, hi = storage_of(t)
                if lo <= ptr < hi or (ptr == lo and hi == lo):
                    esz = t.element_size()
                    if (ptr - lo) % esz:
                        raise AotRefused(f"{path}: error: {fn.__name__}: argument {name} points into {kind} {idx} "
                                         "at a byte offset that is no whole element")
                    args.append({"kind": kind, "index": idx, "offset_elems": (ptr - lo) // esz,
                                 "aligned16": ptr % 16 == 0, "name": name})
                    break
            else:
                base, hi = storage_of(v)
                if base not in temporaries:
                    shape = tuple(getattr(v, "shape", ()))
                    raise AotRefused(f"{path}: error: {fn.__name__}: argument {name} (a tensor of shape {shape}) is "
                                     "neither an input nor an output nor a temporary made by torch.empty/zeros "
                                     "during the call (e.g. a tensor kept between calls, or made by another torch "
                                     "function), which the Triton AOT path cannot reproduce; fix: allocate "
                                     "temporaries with torch.empty or torch.zeros inside vb_kernel_run")
                keys = [s_["base"] for s_ in scratch]
                if base not in keys:
                    scratch.append({"base": base, "bytes": hi - base, "zero": temporaries[base]})
                    keys.append(base)
                args.append({"kind": "scratch", "index": keys.index(base), "offset_bytes": ptr - base,
                             "aligned16": ptr % 16 == 0, "name": name})
        else:
            if ty not in _SCALAR_BYTES:
                raise AotRefused(f"{path}: error: {fn.__name__}: argument {name} has type {ty}, which the "
                                 "Triton AOT path cannot pass")
            args.append({"kind": "scalar", "type": ty, "bytes": _SCALAR_BYTES[ty],
                         "bits": hex(_scalar_bits(ty, v)), "name": name})
    return args


def _grid3(grid, fn, args, kwargs):
    g = _grid(grid, fn, args, kwargs)
    return (g + [1, 1, 1])[:3]


def aot(path, problems_path, outdir, target):
    """The `aot` command (see the module docstring)."""
    import os
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    try:
        backend, arch, warp = target.split(":")
        gpu = GPUTarget(backend, int(arch), int(warp))
    except ValueError:
        raise SystemExit(f"bad target '{target}' (cuda:arch:warp_size, e.g. cuda:90:32)")
    if backend != "cuda":
        raise SystemExit(f"aot: target {target}: only cuda targets have an ahead-of-time path")
    with open(problems_path, encoding="utf-8") as f:
        problems = json.load(f)["problems"]
    sm, ptxas, ptxas_version, known = _cuda_arch(gpu.arch)
    if sm not in known:
        return {"ok": False, "diagnostics": f"Triton {triton.__version__} cannot compile for {sm}: its "
                                            f"bundled ptxas ({ptxas_version}) knows {', '.join(known)}"}
    be = make_backend(gpu)
    try:
        mod = _load_capturing(path)
    except Exception as e:  # noqa: BLE001 -- the source's own error is the build's diagnostics
        return {"ok": False, "diagnostics": f"{path}: error: importing the source failed: {type(e).__name__}: {e}"}
    kernels, keys, out_problems = [], {}, []
    for prob in problems:
        label = " ".join(f"{d['dtype']}{list(d['shape'])}" for d in prob["inputs"])
        try:
            first, ins, outs, temps = _capture(mod, prob, check_writes=True)
            again, ins2, outs2, temps2 = _capture(mod, prob, check_writes=True)
        except AotRefused as e:
            return {"ok": False, "diagnostics": f"{path}: error: {label}: {e}"}
        except Exception as e:  # noqa: BLE001
            return {"ok": False, "diagnostics": f"{path}: error: vb_kernel_run failed while capturing the launches "
                                                f"of {label} attrs {prob.get('attrs', [])}: {type(e).__name__}: {e}"}
        launches = []
        try:
            recs, scratches = [], []
            for (launch_list, (ti, to, tt)) in ((first, (ins, outs, temps)), (again, (ins2, outs2, temps2))):
                rec, scratch = [], []
                scratches.append(scratch)
                for fn, args, kwargs, grid in launch_list:
                    sig, constexprs, attrs, options, bound = _specialize(fn, args, kwargs, be, with_bound=True)
                    rec.append((fn, sig, constexprs, attrs, options, _grid3(grid, fn, args, kwargs),
                                _bind(path, fn, sig, bound, ti, to, tt, scratch)))
                recs.append(rec)
        except AotRefused as e:
            return {"ok": False, "diagnostics": str(e)}
        except Exception as e:  # noqa: BLE001
            return {"ok": False, "diagnostics": f"{path}: error: specializing the launches of {label} failed: "
                                                f"{type(e).__name__}: {e}"}

        def summary(rec):
            return [(r[0].__name__, repr(r[1]), repr(r[2]), repr(r[3]), repr(sorted(r[4].__dict__.items())),
                     r[5], json.dumps(r[6], sort_keys=True)) for r in rec]
        if not recs[0]:
            return {"ok": False, "diagnostics": f"{path}: error: vb_kernel_run launched no Triton kernel for {label}"}
        def sizes(sc):
            return [(x["bytes"], x["zero"]) for x in sc]
        if summary(recs[0]) != summary(recs[1]) or sizes(scratches[0]) != sizes(scratches[1]):
            return {"ok": False, "diagnostics": f"{path}: error: two calls of vb_kernel_run for {label} launched "
                                                "different kernels or arguments: the source keeps state between "
                                                "calls (DESIGN §3 forbids it), which a launch table cannot "
                                                "reproduce; fix: derive every launch from the shapes and attributes"}
        for fn, sig, constexprs, attrs, options, grid, bound_args in recs[0]:
            key = (fn.__module__, fn.__qualname__, repr(sig), repr(constexprs), repr(attrs),
                   repr(sorted(options.__dict__.items())))
            if key not in keys:
                try:
                    k = triton.compile(ASTSource(fn, sig, constexprs, attrs), target=gpu, options=options.__dict__)
                except Exception as e:  # noqa: BLE001
                    msg = str(e).strip().splitlines()
                    return {"ok": False, "diagnostics": f"{path}: error: triton.compile of {fn.__name__} for "
                                                        f"{target} failed: " + " | ".join(msg[-6:])}
                md = k.metadata
                if int(getattr(md, "global_scratch_size", 0) or 0) > 0:
                    return {"ok": False, "diagnostics": f"{path}: error: {fn.__name__} needs "
                                                        f"{md.global_scratch_size} bytes of Triton global scratch "
                                                        "memory per program, which the AOT path does not allocate "
                                                        "yet (fix: avoid device-side tensor descriptors)"}
                if int(getattr(md, "num_ctas", 1)) != 1 or getattr(md, "launch_cooperative_grid", False) \
                        or getattr(md, "launch_pdl", False):
                    return {"ok": False, "diagnostics": f"{path}: error: {fn.__name__} asks for thread-block "
                                                        "clusters (num_ctas > 1), a cooperative grid or "
                                                        "programmatic dependent launch, which the AOT launcher "
                                                        "does not set up yet (fix: num_ctas=1, no "
                                                        "launch_cooperative_grid / launch_pdl)"}
                n = len(kernels)
                cubin = os.path.join(outdir, f"k{n:02d}_{fn.__name__}.cubin")
                with open(cubin, "wb") as f:
                    f.write(k.asm["cubin"])
                kernels.append({"name": fn.__name__, "entry": md.name, "cubin": cubin,
                                "num_warps": int(md.num_warps), "num_ctas": int(getattr(md, "num_ctas", 1)),
                                "shared_bytes": int(getattr(md, "shared", 0) or 0),
                                "launch_cooperative_grid": bool(getattr(md, "launch_cooperative_grid", False)),
                                "launch_pdl": bool(getattr(md, "launch_pdl", False)),
                                "constexprs": _constexpr_names(fn, constexprs),
                                "params": [{"name": a, "type": t} for a, t in sig.items() if t != "constexpr"]})
                keys[key] = n
            launches.append({"kernel": keys[key], "grid": grid, "args": bound_args})
        out_problems.append({"inputs": prob["inputs"], "outputs": prob["outputs"],
                             "attrs": prob.get("attrs", []), "launches": launches,
                             "scratch": [{"bytes": x["bytes"], "zero": x["zero"]} for x in scratches[0]]})
    return {"ok": True, "diagnostics": "", "triton_version": triton.__version__, "arch": sm,
            "kernels": kernels, "problems": out_problems}


def version():
    import importlib.util
    import os
    import triton
    torch = importlib.util.find_spec("torch")
    # Directories the sandboxed runner must read: the interpreter's installation, the virtual
    # environment and the packages' site directories (real paths).
    reach = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix),
             os.path.dirname(os.path.realpath(os.path.dirname(triton.__file__)))}
    if torch is not None and torch.origin:
        reach.add(os.path.dirname(os.path.realpath(os.path.dirname(torch.origin))))
    return {"triton_version": triton.__version__, "torch": torch is not None, "reach": sorted(reach)}


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "check" and len(rest) == 1:
        out = check(rest[0])
    elif cmd == "compile" and len(rest) == 3:
        out = compile_for(*rest)
    elif cmd == "aot" and len(rest) == 4:
        out = aot(*rest)
    elif cmd == "version" and not rest:
        out = version()
    else:
        print(f"triton_build.py: unknown command or arguments: {' '.join(argv)}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
