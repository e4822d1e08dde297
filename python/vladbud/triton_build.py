"""The Triton backend's Python half (src/backends/triton/): source checks and compile-only builds.

Run by the C++ side as a script (python triton_build.py COMMAND ...; it imports nothing from
the vladbud package), one JSON object on stdout, exit 0; a problem with the kernel source is
reported in that JSON ({"ok": false, "diagnostics": ...}); exit 2 for bad usage.

  check SRC      static check of a kernel source, running none of its code (the candidate runs
                 only in the sandboxed runner): it parses, defines vb_kernel_run(inputs, outputs,
                 attrs) at module level and at least one @triton.jit function.
                 -> {"ok", "diagnostics", "triton_version"}
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
    elif cmd == "version" and not rest:
        out = version()
    else:
        print(f"triton_build.py: unknown command or arguments: {' '.join(argv)}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
