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
                 mfma, wmma (counts of v_mfma* / v_wmma* lines of the amdgcn); cuda: shared_bytes
                 and the cubin/ptx (written next to PROBLEM as <name>.cubin / <name>.ptx).
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


def _launches(path, problem):
    """Runs the source's vb_kernel_run on empty CPU tensors of `problem`, capturing launches."""
    import importlib.util
    import torch
    from triton.runtime import jit
    captured = []

    def run(self, *args, grid, warmup, **kwargs):
        captured.append((self, args, dict(kwargs), grid))

    jit.JITFunction.run = run
    spec = importlib.util.spec_from_file_location("vb_triton_kernel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def tensor(d):
        return torch.empty([int(x) for x in d["shape"]], dtype=getattr(torch, TORCH_DTYPES[d["dtype"]]))

    ins = [tensor(d) for d in problem["inputs"]]
    outs = [tensor(d) for d in problem["outputs"]]
    mod.vb_kernel_run(ins, outs, [float(a) for a in problem.get("attrs", [])])
    return captured


def _signature(fn, args, kwargs):
    """(signature, constexprs, attrs, options) of one captured launch, as Triton's JIT builds them
    (pointers and integers divisible by 16 get tt.divisibility 16)."""
    import torch
    names = fn.arg_names
    values = dict(zip(names, args))
    options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages", "num_ctas") if k in kwargs}
    values.update({k: v for k, v in kwargs.items() if k in names})
    sig, constexprs, attrs = {}, {}, {}
    for i, (name, param) in enumerate(zip(names, fn.params)):
        v = values.get(name, param.default)
        if param.is_constexpr:
            sig[name] = "constexpr"
            constexprs[name] = v
        elif isinstance(v, torch.Tensor):
            sig[name] = "*" + TRITON_TYPES[str(v.dtype).replace("torch.", "")]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, bool):
            sig[name] = "i1"
        elif isinstance(v, int):
            sig[name] = "i32" if -2**31 <= v < 2**31 else "i64"
            if v % 16 == 0 and v != 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, float):
            sig[name] = "fp32"
        else:
            raise ValueError(f"argument {name} of {fn.__name__}: unsupported value {type(v).__name__}")
    return sig, constexprs, attrs, options


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
    from triton.compiler import ASTSource
    try:
        backend, arch, warp = target.split(":")
        gpu = GPUTarget(backend, int(arch) if backend == "cuda" else arch, int(warp))
    except ValueError:
        raise SystemExit(f"bad target '{target}' (backend:arch:warp_size, e.g. hip:gfx942:64)")
    with open(problem_path, encoding="utf-8") as f:
        problem = json.load(f)
    try:
        launches = _launches(path, problem)
    except Exception as e:  # noqa: BLE001 -- the source's own error is the build's diagnostics
        return {"ok": False, "diagnostics": f"{path}: error: vb_kernel_run failed while capturing launches: {type(e).__name__}: {e}"}
    if not launches:
        return {"ok": False, "diagnostics": f"{path}: error: vb_kernel_run launched no Triton kernel for this problem"}
    out = []
    for n, (fn, args, kwargs, grid) in enumerate(launches):
        sig, constexprs, attrs, options = _signature(fn, args, kwargs)
        t0 = time.time()
        try:
            k = triton.compile(ASTSource(fn, sig, constexprs, attrs), target=gpu, options=options)
        except Exception as e:  # noqa: BLE001 -- a compile error rejects the kernel at rung 0
            msg = str(e).strip().splitlines()
            return {"ok": False, "diagnostics": f"{path}: error: triton.compile of {fn.__name__} for {target} failed: "
                                                + " | ".join(msg[-6:])}
        rec = {"name": fn.__name__, "grid": list(grid) if isinstance(grid, (tuple, list)) else str(grid),
               "num_warps": options.get("num_warps", 4), "num_stages": options.get("num_stages", 3),
               "signature": sig, "constexprs": {k: (v if isinstance(v, (int, float, bool)) else str(v)) for k, v in constexprs.items()},
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
        out.append(rec)
    return {"ok": True, "diagnostics": "", "triton_version": triton.__version__, "kernels": out}


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
    elif cmd == "version" and not rest:
        out = version()
    else:
        print(f"triton_build.py: unknown command or arguments: {' '.join(argv)}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
