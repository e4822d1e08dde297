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


def _specialize(fn, args, kwargs, backend):
    """(signature, constexprs, attrs, options) of one captured launch, specialized exactly as
    Triton's JIT does it for `backend` (runtime/jit.py: create_function_from_signature then
    JITFunction._pack_args): pointers and integers divisible by 16 get tt.divisibility 16, an
    integer equal to 1 becomes a constant (a unit stride), do_not_specialize is honoured."""
    from triton import knobs
    from triton.runtime.jit import create_function_from_signature
    kwargs = dict(kwargs)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
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
