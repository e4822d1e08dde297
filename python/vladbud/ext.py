"""Builds (once) and loads the compiled torch ops: python/vladbud/csrc/vladbud_ops.cpp.

The extension defines torch.ops.vladbud.<type> for the nine kernel types (CPU, CUDA and Meta
kernels in C++) and the binding registry torch.ops.vladbud_registry.* that
python/vladbud/kernels.py wraps. It is built with torch.utils.cpp_extension.load (ninja, the host
C++ compiler; no CUDA toolkit needed) into

    $VB_CACHE_DIR/torch-ext/<torch version>-<hash>/     when VB_CACHE_DIR is set,
    ~/.cache/vladbud/torch-ext/<torch version>-<hash>/  otherwise,

where <hash> covers the source, the compiler and its flags. A later import finds the library there
and loads it directly (no compiler, no ninja: well under a second). A build takes about a minute
on two cores and says so on stderr.

The compiler is $VB_TORCH_CXX when set, else `c++` (or `g++`) on PATH, else $CXX: the extension
must use the same, shared libstdc++ as torch, and some images set CXX to a toolchain that links
its own libstdc++ statically (two copies in one process crash on the first formatted number).
A build that carries its own libstdc++ is refused with an error naming VB_TORCH_CXX.

Errors: ExtensionBuildError (a RuntimeError) when ninja or the C++ compiler is missing or the
compilation fails; the message names the fix (`bash scripts/setup.sh`).
"""
import hashlib
import os
import shutil
import subprocess
import sys

import torch

NAME = "vladbud_ops"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "csrc", "vladbud_ops.cpp")
CFLAGS = ["-O2"]
_FIX = "run `bash scripts/setup.sh` from the repository root (it installs g++ and ninja into .venv)"

_loaded = None


class ExtensionBuildError(RuntimeError):
    """The torch ops extension could not be built or loaded (missing ninja/compiler, a compile
    error); the message says what is missing and how to fix it."""


def compiler() -> str:
    """The C++ compiler the extension is built with: $VB_TORCH_CXX, else c++ or g++ found on
    PATH, else $CXX, else "c++" (a name or a path; not checked for existence here)."""
    if os.environ.get("VB_TORCH_CXX"):
        return os.environ["VB_TORCH_CXX"]
    for c in ("c++", "g++"):
        p = shutil.which(c)
        if p:
            return p
    return os.environ.get("CXX") or "c++"


def cache_dir() -> str:
    """Folder of the build for this torch version, source, compiler and flags: str."""
    with open(SOURCE, "rb") as f:
        h = hashlib.sha256(f.read())
    h.update(repr((CFLAGS, NAME, compiler())).encode())
    root = os.environ.get("VB_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "vladbud")
    return os.path.join(root, "torch-ext", f"{torch.__version__}-{h.hexdigest()[:16]}")


def _ninja_on_path():
    """Puts the `ninja` of the pip package (or of this Python's bin/) on PATH; True when found."""
    dirs = []
    try:
        import ninja  # the PyPI package ships the binary
        dirs.append(ninja.BIN_DIR)
    except Exception:
        pass
    dirs.append(os.path.dirname(sys.executable))
    for d in dirs:
        if d and os.path.isfile(os.path.join(d, "ninja")):
            path = os.environ.get("PATH", "")
            if d not in path.split(os.pathsep):
                os.environ["PATH"] = d + os.pathsep + path
            break
    return shutil.which("ninja") is not None


def load() -> str:
    """Loads the extension (building it first when the cache has no build for this source and
    torch version); returns the path of the loaded library. Idempotent within a process.
    Raises ExtensionBuildError when it cannot be built."""
    global _loaded
    if _loaded:
        return _loaded
    build_dir = cache_dir()
    so = os.path.join(build_dir, NAME + ".so")
    if os.path.isfile(so):
        try:
            torch.ops.load_library(so)
            _loaded = so
            return so
        except OSError:
            pass  # a truncated or foreign file: rebuild below
    if not _ninja_on_path():
        raise ExtensionBuildError(f"vladbud: building the torch ops extension needs ninja, which is "
                                  f"not installed: {_FIX}")
    cxx = compiler()
    if shutil.which(cxx) is None:
        raise ExtensionBuildError(f"vladbud: building the torch ops extension needs a C++ compiler "
                                  f"('{cxx}' not found; set VB_TORCH_CXX or {_FIX})")
    os.makedirs(build_dir, exist_ok=True)
    print("vladbud: building the torch ops extension (once, ~1 min)", file=sys.stderr, flush=True)
    from torch.utils import cpp_extension
    old_cxx = os.environ.get("CXX")
    os.environ["CXX"] = cxx  # what cpp_extension compiles and links with
    try:
        path = cpp_extension.load(name=NAME, sources=[SOURCE], extra_cflags=CFLAGS,
                                  build_directory=build_dir, with_cuda=False,
                                  is_python_module=False, verbose=False)
    except Exception as e:  # compile errors come as RuntimeError/CalledProcessError
        raise ExtensionBuildError(f"vladbud: building the torch ops extension in {build_dir} failed "
                                  f"({e}); if a tool is missing, {_FIX}") from e
    finally:
        if old_cxx is None:
            os.environ.pop("CXX", None)
        else:
            os.environ["CXX"] = old_cxx
    path = path if isinstance(path, str) else so
    if _has_own_libstdcxx(path):
        os.remove(path)  # the next import rebuilds (with VB_TORCH_CXX set, say)
        raise ExtensionBuildError(
            f"vladbud: {cxx} linked its own copy of libstdc++ into the torch ops extension, which "
            f"crashes next to torch's; set VB_TORCH_CXX to the system compiler (e.g. /usr/bin/g++) "
            f"and import again")
    _loaded = path
    return _loaded


def _has_own_libstdcxx(path) -> bool:
    """True when the library defines libstdc++'s std::ostream::_M_insert<long> itself (a static
    libstdc++); False when it imports it, or when nm is not available."""
    nm = shutil.which("nm")
    if nm is None:
        return False
    r = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True)
    return r.returncode == 0 and "_ZNSo9_M_insertIlEERSoT_" in r.stdout
