"""`vladbud export`: a VladBud kernel as a Hugging Face `kernels` package (issue 19, item 5).

Writes a kernel-builder source tree (https://github.com/huggingface/kernel-builder, build.toml
edition 5) for one kernel of one of the nine types, and builds the local variant of it that the
`kernels` package (PyPI) loads with `get_local_kernel` (or `LOCAL_KERNELS`), offline:

    OUT/
      build.toml                        [general] edition 5, [torch], [kernel.<pkg>_<backend>]
      README.md                         what it is, how to load it, how it was checked
      torch-ext/torch_binding.h         the op's C++ declaration
      torch-ext/torch_binding.cpp       TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops): the op's
                                        schema (that of torch.ops.vladbud.<type>), its CPU or
                                        CUDA implementation (at::Tensor -> DLTensor -> the kernel's
                                        vb_kernel_run on torch's current stream) and a Meta one
      torch-ext/<pkg>/__init__.py       the Python function(s), relative imports only (a
                                        flash_attention package: hf_attention_forward for
                                        transformers' AttentionInterface)
      torch-ext/<pkg>/layers.py         kernelize layers (RMSNorm, LlamaMLP) where the type fits
      <pkg>_<backend>/                  the kernel source, verbatim, plus VladBud's SDK headers
      tests/test_<pkg>.py               checks the package against PyTorch (pytest)
      benchmarks/benchmark_<pkg>.py     times it against PyTorch (device events / wall clock)
      build/torch<MM>-cxx11-<cu<NNN>|cpu>-<arch>-linux/
        metadata.json                   {"id", "name", "version", "license", "backend", ...}
        <pkg>/__init__.py, layers.py, _ops.py, _<pkg>_<backend>_<hash>.abi3.so

`<pkg>` is the Python name (NAME with '-' as '_'); the kernel name in build.toml and
metadata.json is its kebab form (NAME with '_' as '-'), which `kernels` requires. The kernel's
exported C symbols are renamed per package (-Dvb_kernel_run=<pkg>_vb_kernel_run) so that
several exported packages live in one process; the op namespace is `_<pkg>_<backend>_<hash>`
(hash of the sources and flags), so two versions of one package do too.

The variant name follows `kernels`' resolver (kernels/variants.py): torch major+minor, the C++
ABI tag, "cu" + torch.version.cuda without the dot (a CUDA variant must match torch's CUDA, not
nvcc's) or "cpu", the machine, the OS. torch 2.11.0+cu130 gives torch211-cxx11-cu130-x86_64-linux
(CUDA kernel) and torch211-cxx11-cpu-x86_64-linux (CPU kernel).

`python -m vladbud.hf_export REQUEST.json RESULT.json`; REQUEST:
  {"kernel": PATH, "name": NAME, "out": DIR, "type": TYPE|null, "force": bool, "build": bool,
   "cuda_archs": ["9.0a"]|null, "license": "Apache-2.0", "version": 1}
RESULT: {"out", "name", "package", "type", "backend" (kernel-builder's: "cpu", "cuda"), "source",
  "files": [...], "variant", "variant_dir", "op_namespace", "build": {"ok", "seconds", "library"} |
  null, "warnings": [...], "load": the Python call that loads the package
  ('kernels.get_local_kernel(Path("OUT"), backend="cpu")')}.
Bad input (unknown kernel path, unsupported type or backend, a name `kernels` refuses, a
non-empty OUT without force) exits 2 with the fix; ExportBuildError (exit 1) when the build fails.
"""
import hashlib
import json
import keyword
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

from . import BridgeError
from . import backends

HERE = os.path.dirname(os.path.abspath(__file__))
HOME = os.environ.get("VLADBUD_HOME") or os.path.dirname(os.path.dirname(HERE))
SDK_DIR = os.path.join(HOME, "kernels", "include")

@dataclass(frozen=True)
class KbBackend:
    """What a package of one kernel-builder backend needs (build.toml's `backends`, the `kernels`
    package's variant resolver, get_local_kernel(backend=...)); the generators read these fields
    and never compare backend names.

    :param name: kernel-builder's backend name ("cpu", "cuda"): build.toml, metadata.json, the
        kernel folder `<pkg>_<name>/`
    :param torch_device: the PyTorch device the op's tensors live on
    :param dispatch_key: the TORCH_LIBRARY_IMPL key of the op's implementation ("CPU", "CUDA")
    :param runs_on: where the kernel runs, for the binding's comment
    :param load_backend: get_local_kernel's `backend` argument as Python source ("None": `kernels`
        picks it from torch)
    :param gpu_archs: compiled with nvcc per GPU architecture (build.toml's cuda-capabilities, -gencode)
    :param needs: what the package's tests need besides `kernels` (README, test docstring)
    :param host_flags: extra C++ compile and link flags of the kernel sources (OpenMP on the CPU)
    """
    name: str
    torch_device: str
    dispatch_key: str
    runs_on: str
    load_backend: str
    gpu_archs: bool
    needs: str
    host_flags: tuple


# The kernel-builder backend of each PyTorch device a VladBud kernel library can serve. A VladBud
# backend (vladbud.backends) is exported when its build is a compiled op (serves_torch_ops) on one
# of these devices; `kb_backend` in this module is the kernel-builder backend's name, chosen by the
# VladBud backend's torch device (the result's "backend" too), and KB[kb_backend] its profile.
KB_BACKENDS = (
    KbBackend("cpu", "cpu", "CPU", "thread (host memory)", '"cpu"', False, "", ("-fopenmp",)),
    KbBackend("cuda", "cuda", "CUDA", "CUDA stream (no host synchronization)", "None", True,
              " and a CUDA GPU", ()),
)
KB = {b.name: b for b in KB_BACKENDS}
KB_BACKEND_OF_TORCH_DEVICE = {b.torch_device: b.name for b in KB_BACKENDS}


def exportable(be):
    """True when VladBud backend `be` (a vladbud.backends.Backend) can be packaged: a compiled op
    on a device kernel-builder has a backend for."""
    return be.serves_torch_ops and be.torch_device in KB_BACKEND_OF_TORCH_DEVICE


def _exportable_extensions():
    return [b.extension for b in backends.BACKENDS if exportable(b)]

# The nine types' ops: the schemas of torch.ops.vladbud.<type> (python/vladbud/csrc/
# vladbud_ops.cpp), the ABI order of the tensors and float attributes (DESIGN §2-3), the output's
# allocation (SymInt-aware, shared by the real and the Meta kernel), and the Python wrapper.
# "rows": the wrapper flattens leading dims of the first input to 2-D [rows, last dim].
OPS = {
    "matmul": dict(tensors=["a", "b"], attrs=[], out="at::empty_symint({a.sym_size(0), b.sym_size(1)}, a.options())",
                   py="matmul", py_sig="a, b", py_call="a, b", rows=False),
    "softmax": dict(tensors=["x"], attrs=[], out="at::empty_symint(x.sym_sizes(), x.options())",
                    py="softmax", py_sig="x", py_call="x", rows=True),
    "layernorm": dict(tensors=["x", "weight", "bias"], attrs=["eps"],
                      out="at::empty_symint(x.sym_sizes(), x.options())",
                      py="layer_norm", py_sig="x, weight, bias, eps=1e-5", py_call="x, weight, bias, float(eps)",
                      rows=True),
    "rmsnorm": dict(tensors=["x", "weight"], attrs=["eps"], out="at::empty_symint(x.sym_sizes(), x.options())",
                    py="rms_norm", py_sig="x, weight, eps=1e-6", py_call="x, weight, float(eps)", rows=True),
    "flash_attention": dict(tensors=["q", "k", "v"], attrs=["causal", "sm_scale"],
                            out="at::empty_symint(q.sym_sizes(), q.options())",
                            py="flash_attention", py_sig="q, k, v, causal=True, sm_scale=None",
                            py_call="q, k, v, 1.0 if causal else 0.0, "
                                    "float(sm_scale) if sm_scale is not None else q.shape[-1] ** -0.5",
                            rows=False),
    "fused_mlp": dict(tensors=["x", "w_gate", "w_up", "w_down"], attrs=[],
                      out="at::empty_symint({x.sym_size(0), w_down.sym_size(0)}, x.options())",
                      py="swiglu_mlp", py_sig="x, w_gate, w_up, w_down", py_call="x, w_gate, w_up, w_down",
                      rows=True),
    "cross_entropy": dict(tensors=["logits", "targets"], attrs=["ignore_index"],
                          out="at::empty({}, logits.options().dtype(at::kFloat))",
                          py="cross_entropy", py_sig="logits, targets, ignore_index=-100",
                          py_call="logits, targets, float(ignore_index)", rows=False),
    "rotary_embedding": dict(tensors=["x", "cos", "sin"], attrs=["interleaved"],
                             out="at::empty_symint(x.sym_sizes(), x.options())",
                             py="rotary_embedding", py_sig="x, cos, sin, interleaved=False",
                             py_call="x, cos, sin, 1.0 if interleaved else 0.0", rows=False),
    "reduce": dict(tensors=["x"], attrs=[], out="at::empty_symint({x.sym_size(0)}, x.options())",
                   py="sum_last_dim", py_sig="x", py_call="x", rows=True),
}

# kernelize layers (kernels' use_kernel_forward_from_hub): layer name -> the type it needs.
LAYERS = {"rmsnorm": ["RMSNorm"], "fused_mlp": ["LlamaMLP"]}

_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]*[a-z0-9]$")


class ExportBuildError(RuntimeError):
    """The local variant could not be built (compiler error, no nvcc, no ninja); the message has
    the compiler's output and the fix."""


# ---- input --------------------------------------------------------------------------------------

def check_name(name):
    """(kernel name, python name) for NAME, e.g. "vb_rmsnorm" -> ("vb-rmsnorm", "vb_rmsnorm").
    Raises BridgeError when NAME is not lowercase letters, digits, '_' or '-' starting with a
    letter and ending with a letter or digit (what `kernels` accepts as a kernel name, with '_'
    for '-'), or its Python name is a keyword."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or "--" in name or "__" in name:
        raise BridgeError(f"--name '{name}' is not a valid package name: use lowercase letters, digits and "
                          f"single '_' or '-', starting with a letter and ending with a letter or digit "
                          f"(e.g. vb_rmsnorm); it must be a Python identifier once '-' becomes '_'")
    py = name.replace("-", "_")
    if keyword.iskeyword(py) or not py.isidentifier():
        raise BridgeError(f"--name '{name}' gives the Python package name '{py}', which is a Python keyword; "
                          f"choose another name (e.g. vb_{py})")
    return name.replace("_", "-"), py


def resolve_kernel(path, type_=None):
    """The kernel to export from PATH: {"type", "backend", "source", "problem"}.

    PATH is (1) a VladBud kernel folder (problem.json with "kernel" and "backend": the
    optimizer's best/<type><ext> when it kept one, else the folder's "source"), (2) a folder of
    starters such as kernels/cuda (needs `type_`: <type>.cu or <type>.cpp in it), or (3) a kernel
    source file (<type>.cu / <type>.cpp; the type from the file name unless `type_` is given).
    Raises BridgeError naming the fix for a missing path, an unknown type, a Triton or other
    source that is not compiled, or a folder without the kernel."""
    if not path or not os.path.exists(path):
        raise BridgeError(f"--kernel {path}: no such file or folder (give a kernel folder with problem.json, "
                          f"a folder of starters such as kernels/cuda with --type, or a .cu/.cpp kernel source)")
    if type_ is not None and type_ not in OPS:
        raise BridgeError(f"--type {type_}: unknown kernel type (one of {', '.join(OPS)})")
    problem = None
    if os.path.isdir(path):
        pj = os.path.join(path, "problem.json")
        if os.path.isfile(pj):
            try:
                with open(pj) as f:
                    problem = json.load(f)
            except (OSError, ValueError) as e:
                raise BridgeError(f"{pj} is not valid JSON ({e}); re-run `vladbud extract` or "
                                  f"`vladbud kernelbench setup`") from e
            if problem.get("mapped") is False:
                raise BridgeError(f"{path} is a KernelBench problem that maps to no VladBud kernel type "
                                  f"({problem.get('reason', 'not mapped')}): there is no kernel to export")
            t = problem.get("kernel")
            if t not in OPS:
                raise BridgeError(f"{pj}: field 'kernel' is {t!r}, not one of the nine kernel types")
            if type_ is not None and type_ != t:
                raise BridgeError(f"--type {type_} contradicts {pj} (kernel {t}); drop --type")
            be = backends.by_name(problem.get("backend", backends.BACKENDS[0].name))
            if be is None or not exportable(be):
                raise _backend_error(problem.get("backend"), pj)
            ext = be.extension
            src = os.path.join(path, "best", t + ext)
            if not os.path.isfile(src):
                src = os.path.join(path, problem.get("source", t + ext))
            if not os.path.isfile(src):
                raise BridgeError(f"{path}: neither best/{t}{ext} nor {problem.get('source', t + ext)} exists; "
                                  f"re-run `vladbud extract` to restore the starter")
            return {"type": t, "backend": KB_BACKEND_OF_TORCH_DEVICE[be.torch_device],
                    "source": os.path.abspath(src), "problem": problem}
        if type_ is None:
            raise BridgeError(f"{path} has no problem.json; give --type (one of {', '.join(OPS)}) to export "
                              f"<type>.cu or <type>.cpp from it")
        found = [os.path.join(path, type_ + e) for e in _exportable_extensions()
                 if os.path.isfile(os.path.join(path, type_ + e))]
        if not found:
            others = [f for f in os.listdir(path) if f.startswith(type_ + ".")]
            if others:
                raise _backend_error(os.path.splitext(others[0])[1], os.path.join(path, others[0]))
            raise BridgeError(f"{path} has no {type_}.cu or {type_}.cpp")
        if len(found) > 1:
            raise BridgeError(f"{path} has both {type_}.cu and {type_}.cpp; pass the file itself as --kernel")
        path = found[0]
    stem, ext = os.path.splitext(os.path.basename(path))
    be = backends.by_extension(ext)
    if be is None or not exportable(be):
        raise _backend_error(ext, path)
    t = type_ or stem
    if t not in OPS:
        raise BridgeError(f"{path}: the file name does not name a kernel type ({', '.join(OPS)}); give --type")
    return {"type": t, "backend": KB_BACKEND_OF_TORCH_DEVICE[be.torch_device], "source": os.path.abspath(path),
            "problem": problem}


def _backend_error(what, where):
    ok = backends.BACKENDS
    supported = ", ".join(f"{b.extension} (backend {b.name})" for b in ok if exportable(b))
    other = backends.names(lambda b: not exportable(b))
    return BridgeError(f"{where}: backend/source '{what}' cannot be exported: a kernel-builder package ships "
                       f"compiled kernels, and export supports {supported} kernels"
                       + (f"; {other} kernels are not compiled into such a library (use them as they are)"
                          if other else ""))


def _local_sdk_headers(source_text, seen=None):
    """The VladBud SDK headers (kernels/include) that `source_text` includes, transitively."""
    seen = set() if seen is None else seen
    for inc in re.findall(r'#\s*include\s+"([^"]+)"', source_text):
        p = os.path.join(SDK_DIR, inc)
        if inc not in seen and os.path.isfile(p):
            seen.add(inc)
            with open(p) as f:
                _local_sdk_headers(f.read(), seen)
    return seen


def _portable(text):
    """DLPack from torch's own copy (ATen/dlpack.h), so the package builds where only torch is."""
    return re.sub(r"#\s*include\s*<dlpack/dlpack\.h>", "#include <ATen/dlpack.h>  // DLPack, as torch ships it",
                  text)


# ---- variant ------------------------------------------------------------------------------------

def variant_name(kb_backend):
    """The build variant `kernels` resolves for this torch and `kb_backend` ("cuda" or "cpu"), e.g.
    torch211-cxx11-cu130-x86_64-linux. Raises BridgeError for a CUDA kernel under a torch
    without CUDA."""
    import torch
    v = torch.__version__.split("+")[0].split(".")
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    if KB[kb_backend].gpu_archs:
        if torch.version.cuda is None:
            raise BridgeError(f"a CUDA kernel needs a CUDA build of torch to build against; this torch "
                              f"({torch.__version__}) has none (install torch's CUDA wheel, or pass --no-build)")
        dev = "cu" + torch.version.cuda.replace(".", "")
    else:
        dev = "cpu"
    return f"torch{v[0]}{v[1]}-{abi}-{dev}-{platform.machine()}-{platform.system().lower()}"


def default_cuda_archs():
    """["<major>.<minor>[a]"] of the local GPU (9.0 -> "9.0a": the wgmma kernels need sm_90a, as the
    CUDA backend builds them), else ["9.0a"] (the H200)."""
    try:
        import torch
        if torch.cuda.is_available():
            ma, mi = torch.cuda.get_device_capability()
            return [f"{ma}.{mi}{'a' if (ma, mi) == (9, 0) else ''}"]
    except Exception:
        pass
    return ["9.0a"]


def _gencode(arch):
    m = re.fullmatch(r"(\d+)\.(\d+)([af]?)", arch)
    if not m:
        raise BridgeError(f"--cuda-arch {arch}: not a compute capability such as 9.0, 9.0a or 10.0")
    cc = m.group(1) + m.group(2) + m.group(3)
    return ["-gencode", f"arch=compute_{cc},code=sm_{cc}"]


# ---- the files ------------------------------------------------------------------------------------

def _toml_list(xs):
    """A TOML array of strings."""
    return "[" + ", ".join(json.dumps(x) for x in xs) + "]"


def build_toml(kname, pkg, kb_backend, kernel_files, archs, license_, version):
    """build.toml (kernel-builder edition 5) for one kernel."""
    lines = [
        "# Written by `vladbud export` (VladBud); build with kernel-builder (`kernel-builder build`,",
        "# or `nix run .#build-and-copy`) for every supported torch/CUDA, or use build/ as it is.",
        "[general]",
        f'name = "{kname}"',
        "edition = 5",
        f"version = {int(version)}",
        f"license = {json.dumps(license_)}",
        f'backends = ["{kb_backend}"]',
        "",
        "[torch]",
        'src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]',
        f"cxx-flags = {_toml_list(_rename_flags(pkg))}",
        "",
        f"[kernel.{pkg}_{kb_backend}]",
        f'backend = "{kb_backend}"',
        'depends = ["torch"]',
        f"src = {_toml_list(kernel_files)}",
        f'include = ["{pkg}_{kb_backend}"]',
    ]
    if KB[kb_backend].gpu_archs:
        lines += [f"cuda-capabilities = {_toml_list(archs)}",
                  f"cuda-flags = {_toml_list(['-O3', '-std=c++17'] + _rename_flags(pkg))}"]
    else:
        lines += [f"cxx-flags = {_toml_list(['-O3', '-std=c++20', *KB[kb_backend].host_flags] + _rename_flags(pkg))}"]
    return "\n".join(lines) + "\n"


def _rename_flags(pkg):
    """-D flags giving the kernel's C entry points per-package names (several packages, one process)."""
    return [f"-Dvb_kernel_run={pkg}_vb_kernel_run", f"-Dvb_kernel_last_error={pkg}_vb_kernel_last_error"]


def binding_h(type_):
    """torch-ext/torch_binding.h: the op's declaration."""
    spec = OPS[type_]
    return ("// Written by `vladbud export`: the op of this package (schema in torch_binding.cpp).\n"
            "#pragma once\n\n#include <ATen/core/Tensor.h>\n\n"
            f"at::Tensor {type_}({_cxx_params(spec)});\n"
            f"at::Tensor {type_}_meta({_cxx_params(spec)});\n")


def _cxx_params(spec):
    return ", ".join([f"const at::Tensor& {t}" for t in spec["tensors"]] + [f"double {a}" for a in spec["attrs"]])


def _schema(type_):
    spec = OPS[type_]
    return f"{type_}(" + ", ".join([f"Tensor {t}" for t in spec["tensors"]] +
                                   [f"float {a}" for a in spec["attrs"]]) + ") -> Tensor"


def binding_cpp(type_, pkg, kb_backend):
    """torch-ext/torch_binding.cpp: the op's schema, its CPU or CUDA implementation calling the
    kernel through DLPack (inputs made contiguous, the output allocated here, torch's current
    stream), and its Meta implementation (shapes only: fake tensors, torch.compile)."""
    spec = OPS[type_]
    n = len(spec["tensors"])
    ins = ", ".join(f"&{t}" for t in spec["tensors"])
    attrs = ("const double attrs[] = {" + ", ".join(spec["attrs"]) + "};") if spec["attrs"] else \
        "const double* attrs = nullptr;"
    key = KB[kb_backend].dispatch_key
    return f"""// Written by `vladbud export` from VladBud's {type_} kernel (DESIGN §3: the kernel ABI).
//
// The op `{_schema(type_)}` of this package: the inputs are made
// contiguous, the output is allocated here (the kernel never allocates), DLTensor views of the
// at::Tensors are passed to the kernel's C entry point (renamed {pkg}_vb_kernel_run by the
// -D flags in build.toml so that several packages share a process), with torch's current
// {KB[kb_backend].runs_on}. A kernel error
// (bad dtype or shape) is raised as a RuntimeError with the kernel's message.
#include <ATen/core/Tensor.h>
#include <ATen/dlpack.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

extern "C" int {pkg}_vb_kernel_run(const DLTensor* inputs, int n_inputs, DLTensor* outputs,
                                   int n_outputs, const double* attrs, int n_attrs, void* stream);
extern "C" const char* {pkg}_vb_kernel_last_error(void);

namespace {{

DLDataType dl_dtype(const at::Tensor& t) {{
  switch (t.scalar_type()) {{
    case at::kFloat: return {{kDLFloat, 32, 1}};
    case at::kHalf: return {{kDLFloat, 16, 1}};
    case at::kBFloat16: return {{kDLBfloat, 16, 1}};
    case at::kDouble: return {{kDLFloat, 64, 1}};
    case at::kLong: return {{kDLInt, 64, 1}};
    case at::kInt: return {{kDLInt, 32, 1}};
    default: TORCH_CHECK(false, "{pkg}.{type_}: dtype ", t.scalar_type(), " is not supported");
  }}
}}

DLTensor dl_of(const at::Tensor& t, void* data) {{
  DLTensor d;
  d.data = data;
  d.device.device_type = t.is_cuda() ? kDLCUDA : kDLCPU;
  d.device.device_id = t.is_cuda() ? t.get_device() : 0;
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = dl_dtype(t);
  d.shape = const_cast<int64_t*>(t.sizes().data());
  d.strides = const_cast<int64_t*>(t.strides().data());
  d.byte_offset = 0;
  return d;
}}

// Calls the kernel on `ins` (ABI order) writing `out`.
void run_kernel(const at::Tensor* const* ins, int n_in, at::Tensor& out, const double* attrs, int n_attrs) {{
  at::Tensor owned[{n}];
  DLTensor din[{n}];
  for (int i = 0; i < n_in; ++i) {{
    TORCH_CHECK(ins[i]->device() == out.device(), "{pkg}.{type_}: input ", i, " is on ", ins[i]->device(),
                " but the output is on ", out.device(), "; move every input to one device");
    const at::Tensor* t = ins[i];
    if (!t->is_contiguous()) {{
      owned[i] = t->contiguous();
      t = &owned[i];
    }}
    din[i] = dl_of(*t, const_cast<void*>(t->const_data_ptr()));
  }}
  DLTensor dout = dl_of(out, out.mutable_data_ptr());
  void* stream = nullptr;
  if (out.is_cuda()) {{
    const c10::DeviceGuard guard(out.device());
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    stream = impl->getStreamNativeHandle(impl->getStream(out.device()));
  }}
  const int rc = {pkg}_vb_kernel_run(din, n_in, &dout, 1, attrs, n_attrs, stream);
  if (rc != 0) {{
    const char* msg = {pkg}_vb_kernel_last_error();
    TORCH_CHECK(false, "{pkg}.{type_} failed (rc ", rc, "): ", msg && *msg ? msg : "no message");
  }}
}}

}}  // namespace

at::Tensor {type_}_meta({_cxx_params(spec)}) {{ return {spec['out']}; }}

at::Tensor {type_}({_cxx_params(spec)}) {{
  at::Tensor out = {spec['out']};
  const at::Tensor* ins[] = {{{ins}}};
  {attrs}
  run_kernel(ins, {n}, out, attrs, {len(spec['attrs'])});
  return out;
}}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {{
  ops.def("{_schema(type_)}");
  ops.impl("{type_}", c10::DispatchKey::{key}, TORCH_FN({type_}));
  ops.impl("{type_}", c10::DispatchKey::Meta, TORCH_FN({type_}_meta));
}}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
"""


def registration_h():
    """registration.h for the local build (kernel-builder supplies its own when it builds):
    TORCH_LIBRARY_EXPAND (TORCH_LIBRARY with a macro name) and REGISTER_EXTENSION (an empty
    Python module PyInit_<name>, so that `from . import <name>` loads the library)."""
    return """// Local stand-in for kernel-builder's registration.h (written by `vladbud export`).
#pragma once
#include <Python.h>
#define VB_CONCAT_(A, B) A##B
#define VB_CONCAT(A, B) VB_CONCAT_(A, B)
#define VB_STRINGIFY_(A) #A
#define VB_STRINGIFY(A) VB_STRINGIFY_(A)
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define REGISTER_EXTENSION(NAME)                                                               \\
  PyMODINIT_FUNC VB_CONCAT(PyInit_, NAME)(void) {                                             \\
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, VB_STRINGIFY(NAME), nullptr, 0, \\
                                        nullptr};                                             \\
    return PyModule_Create(&module);                                                          \\
  }
"""


_HF_ATTENTION = '''

def hf_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                         **kwargs):
    """An attention function for transformers' AttentionInterface (query [B,H,S,D], key/value
    [B,H_kv,S_kv,D]; returns ([B,S,H,D], None)). Register it, with a mask function that gives None
    when nothing is padded (transformers' flash-attention one):

        AttentionInterface.register("vladbud", k.hf_attention_forward)
        AttentionMaskInterface.register("vladbud", ALL_MASK_ATTENTION_FUNCTIONS["flash_attention_2"])
        model.set_attn_implementation("vladbud")

    The kernel runs when there is no padding mask, no dropout and queries and keys have one length
    (prefill; the kernel's causal mask is top-left aligned, as SDPA's); otherwise PyTorch's SDPA runs
    with the padding mask and a bottom-right causal mask (decode steps with a cache)."""
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    scale = float(scaling) if scaling is not None else query.shape[-1] ** -0.5
    S, Skv = query.shape[2], key.shape[2]
    if attention_mask is None and (dropout == 0.0 or not module.training) and S == Skv:
        out = ops.flash_attention(query, key, value, 1.0 if causal else 0.0, scale)
    else:
        allowed = None
        if attention_mask is not None:
            allowed = attention_mask.bool()
            allowed = allowed[:, None, None, :] if allowed.dim() == 2 else allowed
        if causal and S > 1:
            tri = torch.ones(S, Skv, dtype=torch.bool, device=query.device).tril(Skv - S)
            allowed = tri if allowed is None else allowed & tri
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=allowed, dropout_p=dropout if module.training else 0.0, scale=scale,
            enable_gqa=key.shape[1] != query.shape[1])
    return out.transpose(1, 2).contiguous(), None
'''


def init_py(type_, pkg, kb_backend, source_label):
    """torch-ext/<pkg>/__init__.py: the op as a Python function (relative imports only); a
    flash_attention package also gets hf_attention_forward (transformers' AttentionInterface)."""
    spec = OPS[type_]
    first = spec["py_sig"].split(",")[0]
    body = (f"    shape = {first}.shape\n"
            f"    {first} = {first}.reshape(-1, shape[-1])\n"
            f"    y = ops.{type_}({spec['py_call']})\n"
            + ("    return y.reshape(shape[:-1])\n" if type_ == "reduce" else
               "    return y.reshape(*shape[:-1], y.shape[-1])\n")) if spec["rows"] else \
        f"    return ops.{type_}({spec['py_call']})\n"
    layers = LAYERS.get(type_, [])
    return f'''"""{pkg}: VladBud's {type_} kernel ({kb_backend}) as a Hugging Face `kernels` package.

Exported by `vladbud export` from {source_label}. Load it with
`kernels.get_local_kernel(Path("<this repo>"))` (or `get_kernel` once on the Hub), then call
`{spec["py"]}({spec["py_sig"]})`; `ops.{type_}` is the raw op (schema: {_schema(type_)}).
{"Layers for `kernels.kernelize`: " + ", ".join(layers) + " (module `layers`)." if layers else ""}
Semantics: VladBud's `{type_}` kernel type (DESIGN §2 of VladBud), checked against a float64 oracle.
"""
import torch

from ._ops import ops
{"from . import layers" if layers else ""}


def {spec["py"]}({spec["py_sig"]}) -> torch.Tensor:
    """VladBud's {type_}: {_DOCS[type_]}"""
{body}{_HF_ATTENTION if type_ == "flash_attention" else ""}

__all__ = ["{spec["py"]}", "ops"{', "layers"' if layers else ""}{', "hf_attention_forward"' if type_ == "flash_attention" else ""}]
'''


_DOCS = {
    "matmul": "a[M,K] @ b[K,N] with fp32 accumulation (true fp32 for fp32 inputs, no TF32).",
    "softmax": "softmax over the last dim (max-subtracted); leading dims are flattened.",
    "layernorm": "layer norm over the last dim (biased variance), then * weight + bias.",
    "rmsnorm": "x / sqrt(mean(x**2, -1) + eps) * weight, statistics in fp32, rounded once.",
    "flash_attention": "softmax(q k^T * sm_scale + causal mask) v; q [B,H,S,D], k/v [B,H_kv,S,D].",
    "fused_mlp": "SwiGLU MLP (silu(x w_gate^T) * (x w_up^T)) w_down^T; w_gate/w_up [H,D], w_down [D,H].",
    "cross_entropy": "mean NLL of logits[B,V] at targets[B] (int64), rows == ignore_index skipped; fp32 0-d.",
    "rotary_embedding": "rotary embedding of x [B,H,S,D] with cos/sin [S,D/2] (half-split, or interleaved).",
    "reduce": "sum over the last dim, fp32 accumulation, output in the input dtype.",
}


def layers_py(type_, pkg):
    """torch-ext/<pkg>/layers.py: kernelize layers (no __init__, no extra members: the forward
    replaces that of the model's class, reading its attributes)."""
    if type_ == "rmsnorm":
        return f'''"""kernelize layers of {pkg}: `RMSNorm` replaces the forward of transformers' `LlamaRMSNorm`
(hub layer name "RMSNorm"), reading its `weight` and `variance_epsilon`."""
import torch
from torch import nn

from ._ops import ops


def _reference(x, weight, eps):
    # LlamaRMSNorm's own formula: used for what the kernel does not take (weight in another dtype).
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


class RMSNorm(nn.Module):
    """LlamaRMSNorm's forward on the kernel: y = x / sqrt(mean(x**2) + eps) * weight."""

    can_torch_compile = True
    has_backward = False

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        if self.weight.dtype != hidden_states.dtype:
            return _reference(hidden_states, self.weight, self.variance_epsilon)
        shape = hidden_states.shape
        y = ops.rmsnorm(hidden_states.reshape(-1, shape[-1]), self.weight, float(self.variance_epsilon))
        return y.reshape(shape)
'''
    if type_ == "fused_mlp":
        return f'''"""kernelize layers of {pkg}: `LlamaMLP` replaces the forward of transformers' `LlamaMLP`
(register it with `kernels.replace_kernel_forward_from_hub(LlamaMLP, "LlamaMLP")`), reading
`gate_proj`, `up_proj`, `down_proj` and `act_fn`."""
import torch
from torch import nn

from ._ops import ops


class LlamaMLP(nn.Module):
    """LlamaMLP's forward on the fused SwiGLU kernel: down(silu(gate(x)) * up(x)). Projections with
    a bias, an activation other than SiLU (config.hidden_act "silu"/"swish", or nn.SiLU) or weights in
another dtype than x run LlamaMLP's own formula."""

    can_torch_compile = True
    has_backward = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g, u, d = self.gate_proj, self.up_proj, self.down_proj
        silu = isinstance(self.act_fn, nn.SiLU) or getattr(self.config, "hidden_act", None) in ("silu", "swish")
        if (g.bias is not None or u.bias is not None or d.bias is not None or not silu
                or g.weight.dtype != x.dtype):
            return d(self.act_fn(g(x)) * u(x))
        shape = x.shape
        y = ops.fused_mlp(x.reshape(-1, shape[-1]), g.weight, u.weight, d.weight)
        return y.reshape(*shape[:-1], y.shape[-1])
'''
    return None


_REF = {
    "matmul": ("a, b", "torch.matmul(a.double(), b.double()).to(a.dtype)",
               "a = torch.randn(M, K, dtype=dt, device=dev); b = torch.randn(K, N, dtype=dt, device=dev)",
               "M, K, N = 64, 96, 80", "(a, b)"),
    "softmax": ("x", "torch.softmax(x.double(), -1).to(x.dtype)",
                "x = torch.randn(R, C, dtype=dt, device=dev)", "R, C = 33, 1000", "(x,)"),
    "layernorm": ("x, weight, bias", "torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), weight.double(), "
                  "bias.double(), 1e-5).to(x.dtype)",
                  "x = torch.randn(R, C, dtype=dt, device=dev); weight = torch.randn(C, dtype=dt, device=dev); "
                  "bias = torch.randn(C, dtype=dt, device=dev)", "R, C = 33, 1000", "(x, weight, bias)"),
    "rmsnorm": ("x, weight", "(x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) "
                "* weight.double()).to(x.dtype)",
                "x = torch.randn(R, C, dtype=dt, device=dev); weight = torch.randn(C, dtype=dt, device=dev)",
                "R, C = 33, 1000", "(x, weight)"),
    "flash_attention": ("q, k, v", "torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), "
                        "v.double(), is_causal=True, enable_gqa=True).to(q.dtype)",
                        "q = torch.randn(B, H, S, D, dtype=dt, device=dev); k = torch.randn(B, H, S, D, dtype=dt, "
                        "device=dev); v = torch.randn(B, H, S, D, dtype=dt, device=dev)",
                        "B, H, S, D = 2, 4, 130, 64", "(q, k, v)"),
    "fused_mlp": ("x, w_gate, w_up, w_down", "((torch.nn.functional.silu(x.double() @ w_gate.double().T) * "
                  "(x.double() @ w_up.double().T)) @ w_down.double().T).to(x.dtype)",
                  "x = torch.randn(R, D, dtype=dt, device=dev); w_gate = torch.randn(H, D, dtype=dt, device=dev) / D ** 0.5; "
                  "w_up = torch.randn(H, D, dtype=dt, device=dev) / D ** 0.5; "
                  "w_down = torch.randn(D, H, dtype=dt, device=dev) / H ** 0.5",
                  "R, D, H = 33, 256, 688", "(x, w_gate, w_up, w_down)"),
    "cross_entropy": ("logits, targets", "torch.nn.functional.cross_entropy(logits.double(), targets).float()",
                      "logits = torch.randn(R, C, dtype=dt, device=dev); "
                      "targets = torch.randint(0, C, (R,), device=dev)", "R, C = 33, 1000", "(logits, targets)"),
    "rotary_embedding": ("x, cos, sin", "_rope_ref(x, cos, sin)",
                         "x = torch.randn(B, H, S, D, dtype=dt, device=dev); ang = torch.arange(S, device=dev)[:, None] "
                         "* 10000 ** (-torch.arange(D // 2, device=dev) / (D // 2)); cos = ang.cos().to(dt); "
                         "sin = ang.sin().to(dt)", "B, H, S, D = 2, 4, 33, 64", "(x, cos, sin)"),
    "reduce": ("x", "x.double().sum(-1).to(x.dtype)", "x = torch.randn(R, C, dtype=dt, device=dev)",
               "R, C = 33, 1000", "(x,)"),
}

_ROPE_REF = '''

def _rope_ref(x, cos, sin):
    d = x.shape[-1] // 2
    x1, x2 = x.double()[..., :d], x.double()[..., d:]
    c, s = cos.double(), sin.double()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).to(x.dtype)
'''


def test_py(type_, pkg, kb_backend):
    """tests/test_<pkg>.py: loads the package with get_local_kernel and checks the op against a
    float64 PyTorch reference (relative Frobenius error), per dtype."""
    spec = OPS[type_]
    args, ref, make, sizes, call = _REF[type_]
    dev = KB[kb_backend].torch_device
    return f'''"""Checks {pkg} ({type_}, {kb_backend}) against a float64 PyTorch reference. Run from the package's
root: `python -m pytest tests/` (needs the `kernels` package{KB[kb_backend].needs})."""
import pathlib

import pytest
import torch
from kernels import get_local_kernel

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEVICE = "{dev}"
ON_GPU = {KB[kb_backend].gpu_archs}  # the package's kernels run on a GPU (a second device to mix)
BOUND = {{torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}}
{_ROPE_REF if type_ == "rotary_embedding" else ""}

@pytest.fixture(scope="module")
def kernel():
    if ON_GPU and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return get_local_kernel(ROOT, backend={KB[kb_backend].load_backend})


@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
def test_matches_reference(kernel, dt):
    torch.manual_seed(0)
    dev = DEVICE
    {sizes}
    {make}
    y = kernel.ops.{type_}({", ".join(spec["tensors"])}{"".join(", " + _attr_default(type_, a) for a in spec["attrs"])})
    r = (lambda {args}: {ref})(*{call})
    assert y.shape == r.shape and y.dtype == r.dtype
    err = ((y.double() - r.double()).norm() / r.double().norm()).item()
    assert err <= BOUND[dt], f"relative error {{err:.3e}} above {{BOUND[dt]:.1e}} ({{dt}})"


def test_rejects_other_device(kernel):
    if not ON_GPU:
        pytest.skip("only a GPU package has a second device to mix")
    dev = DEVICE
    dt = torch.float32
    {sizes}
    {make}
    {spec["tensors"][0]} = {spec["tensors"][0]}.cpu()
    with pytest.raises(Exception):
        kernel.ops.{type_}({", ".join(spec["tensors"])}{"".join(", " + _attr_default(type_, a) for a in spec["attrs"])})
'''


_ATTR_DEFAULTS = {"eps": "1e-6", "causal": "1.0", "sm_scale": "q.shape[-1] ** -0.5", "ignore_index": "-100.0",
                  "interleaved": "0.0"}


def _attr_default(type_, a):
    """The attribute value the generated test and benchmark pass (the type's default, DESIGN §2)."""
    return "1e-5" if (type_, a) == ("layernorm", "eps") else _ATTR_DEFAULTS[a]


def benchmark_py(type_, pkg, kb_backend):
    """benchmarks/benchmark_<pkg>.py: the op against PyTorch's own, one timing protocol for both
    (CUDA events per call with the L2 flushed on a GPU; perf_counter on the CPU); prints JSON."""
    spec = OPS[type_]
    args, _, make, sizes, call = _REF[type_]
    torch_ops = {
        "matmul": "torch.matmul(a, b)", "softmax": "torch.softmax(x, -1)",
        "layernorm": "torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, 1e-5)",
        "rmsnorm": "torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, 1e-6)",
        "flash_attention": "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)",
        "fused_mlp": "(torch.nn.functional.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T",
        "cross_entropy": "torch.nn.functional.cross_entropy(logits.float(), targets)",
        "rotary_embedding": "_rope_ref(x, cos, sin)", "reduce": "x.sum(-1)",
    }
    dev = KB[kb_backend].torch_device
    return f'''"""Times {pkg}.ops.{type_} against PyTorch on the same inputs and protocol; prints JSON.
`python benchmarks/benchmark_{pkg}.py [--dtype bf16] [--reps 50]` from the package's root."""
import argparse
import json
import pathlib
import statistics
import time

import torch
from kernels import get_local_kernel

ROOT = pathlib.Path(__file__).resolve().parents[1]
{_ROPE_REF if type_ == "rotary_embedding" else ""}

ON_GPU = {KB[kb_backend].gpu_archs}  # CUDA events and an L2 flush; else perf_counter


def timed(fn, reps, dev):
    """Median and p10/p90 of `reps` calls (us); CUDA events around each call with the L2 flushed
    before it on a GPU, perf_counter on the CPU."""
    for _ in range(3):
        fn()
    ts = []
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev) if ON_GPU else None
    for _ in range(reps):
        if ON_GPU:
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e6)
    ts.sort()
    return {{"median_us": statistics.median(ts), "p10_us": ts[len(ts) // 10], "p90_us": ts[(9 * len(ts)) // 10]}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    dt = {{"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}}[a.dtype]
    dev = "{dev}"
    kernel = get_local_kernel(ROOT, backend={KB[kb_backend].load_backend})
    torch.manual_seed(0)
    {sizes.replace("33", "4096")}
    {make}
    with torch.no_grad():
        k = timed(lambda: kernel.ops.{type_}({", ".join(spec["tensors"])}{"".join(", " + _attr_default(type_, x) for x in spec["attrs"])}), a.reps, dev)
        t = timed(lambda: {torch_ops[type_]}, a.reps, dev)
    print(json.dumps({{"op": "{type_}", "dtype": a.dtype, "device": dev, "kernel": k, "torch": t,
                      "speedup": t["median_us"] / k["median_us"]}}, indent=1))


if __name__ == "__main__":
    main()
'''


def _load_backend_arg(kb_backend):
    """The backend argument get_local_kernel needs for a package of kernel-builder backend
    `kb_backend`: "" where `kernels` picks it from torch (a CUDA build), ', backend="cpu"' for a
    CPU package."""
    lb = KB[kb_backend].load_backend
    return "" if lb == "None" else f", backend={lb}"


def readme_md(kname, pkg, type_, kb_backend, source_label, variant, layers):
    """README.md of the package: what it is, where it came from, how to load, test and time it."""
    return f"""# {kname}

VladBud's `{type_}` kernel ({kb_backend}) as a Hugging Face `kernels` package, exported by
`vladbud export` from `{source_label}`.

- Source tree for kernel-builder: `build.toml` (edition 5), `torch-ext/`, `{pkg}_{kb_backend}/`.
- A local build: `build/{variant}/` (loads with `kernels.get_local_kernel`, offline).

```python
from pathlib import Path
from kernels import get_local_kernel
k = get_local_kernel(Path("{kname}"){_load_backend_arg(kb_backend)})
y = k.{OPS[type_]["py"]}({OPS[type_]["py_sig"]})
```
{"" if not layers else f'''
Layers for `kernels.kernelize`: {", ".join(f"`{x}`" for x in layers)} (module `layers`); map them with
`kernels.LocalLayerRepository(repo_path=Path("{kname}"), layer_name=...)`.
'''}
Check: `python -m pytest tests/`; time: `python benchmarks/benchmark_{pkg}.py`.
"""


# ---- export --------------------------------------------------------------------------------------

def write_tree(req):
    """Writes the source tree (no build); returns (result dict, context for build_variant)."""
    kname, pkg = check_name(req.get("name"))
    k = resolve_kernel(req.get("kernel"), req.get("type"))
    out = os.path.abspath(req.get("out") or kname)
    if os.path.exists(out) and not os.path.isdir(out):
        raise BridgeError(f"--out {out} is a file; give a folder")
    if os.path.isdir(out) and os.listdir(out):
        if not req.get("force"):
            raise BridgeError(f"--out {out} exists and is not empty; pass --force to replace it, or choose "
                              f"another --out")
        shutil.rmtree(out)
    type_, kb_backend = k["type"], k["backend"]
    archs = list(req.get("cuda_archs") or default_cuda_archs()) if KB[kb_backend].gpu_archs else []
    for a in archs:
        _gencode(a)  # validates
    with open(k["source"]) as f:
        src_text = f.read()
    headers = sorted(_local_sdk_headers(src_text))
    kdir = f"{pkg}_{kb_backend}"
    files = {}
    src_name = os.path.basename(k["source"])
    if os.path.splitext(src_name)[0] != type_:
        src_name = type_ + os.path.splitext(src_name)[1]
    files[f"{kdir}/{src_name}"] = _portable(src_text)
    for h in headers:
        with open(os.path.join(SDK_DIR, h)) as f:
            files[f"{kdir}/{h}"] = _portable(f.read())
    kernel_files = [f"{kdir}/{src_name}"] + [f"{kdir}/{h}" for h in headers]
    layers = LAYERS.get(type_, [])
    label = os.path.relpath(k["source"], HOME) if k["source"].startswith(HOME + os.sep) else k["source"]
    variant = variant_name(kb_backend) if req.get("build", True) else _variant_or_none(kb_backend)
    files["build.toml"] = build_toml(kname, pkg, kb_backend, kernel_files, archs, req.get("license", "Apache-2.0"),
                                     req.get("version", 1))
    files["torch-ext/torch_binding.h"] = binding_h(type_)
    files["torch-ext/torch_binding.cpp"] = binding_cpp(type_, pkg, kb_backend)
    files[f"torch-ext/{pkg}/__init__.py"] = init_py(type_, pkg, kb_backend, label)
    if layers:
        files[f"torch-ext/{pkg}/layers.py"] = layers_py(type_, pkg)
    files[f"tests/test_{pkg}.py"] = test_py(type_, pkg, kb_backend)
    files[f"benchmarks/benchmark_{pkg}.py"] = benchmark_py(type_, pkg, kb_backend)
    files["README.md"] = readme_md(kname, pkg, type_, kb_backend, label, variant or "<variant>", layers)
    for rel, text in files.items():
        p = os.path.join(out, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    digest = hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()[:10]
    op_ns = f"_{pkg}_{kb_backend}_{digest}"
    res = {"out": out, "name": kname, "package": pkg, "type": type_, "backend": kb_backend, "source": k["source"],
           "files": sorted(files), "variant": variant, "variant_dir": None, "op_namespace": op_ns,
           "cuda_archs": archs, "layers": layers, "build": None, "warnings": [],
           "load": f"kernels.get_local_kernel(Path({json.dumps(out)}){_load_backend_arg(kb_backend)})"}
    if "hwy/" in src_text:
        res["warnings"].append("the kernel includes Highway (hwy/highway.h), which kernel-builder does not provide: "
                               "the local variant builds with this machine's headers, a kernel-builder build "
                               "needs Highway added")
    ctx = {"out": out, "pkg": pkg, "kname": kname, "type": type_, "backend": kb_backend, "archs": archs,
           "kernel_files": kernel_files, "op_ns": op_ns, "license": req.get("license", "Apache-2.0"),
           "version": req.get("version", 1)}
    return res, ctx


def _variant_or_none(kb_backend):
    try:
        return variant_name(kb_backend)
    except BridgeError:
        return None


def build_variant(ctx, res):
    """Builds build/<variant>/ with torch.utils.cpp_extension (ninja; nvcc for a CUDA kernel):
    the library `<op_ns>.abi3.so` (Python's limited API: the module is empty, the ops register
    on import), _ops.py, the Python files and metadata.json. Raises ExportBuildError with the
    compiler's output when the build fails."""
    from . import ext
    out, pkg, kb_backend = ctx["out"], ctx["pkg"], ctx["backend"]
    variant = variant_name(kb_backend)
    if not ext._ninja_on_path():
        raise ExportBuildError("building the local variant needs ninja: run `bash scripts/setup.sh`")
    cxx = ext.compiler()
    if shutil.which(cxx) is None:
        raise ExportBuildError(f"building the local variant needs a C++ compiler ('{cxx}' not found; set VB_TORCH_CXX)")
    if KB[kb_backend].gpu_archs and shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        raise ExportBuildError("building a CUDA variant needs nvcc: put the CUDA toolkit's bin/ on PATH or set CUDA_HOME")
    scratch = os.path.join(out, "build", ".scratch")
    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, "registration.h"), "w") as f:
        f.write(registration_h())
    kdir = os.path.join(out, f"{pkg}_{kb_backend}")
    sources = [os.path.join(out, "torch-ext", "torch_binding.cpp"), os.path.join(out, ctx["kernel_files"][0])]
    cflags = ["-O3", "-std=c++20", "-DPy_LIMITED_API=0x03090000"] + _rename_flags(pkg)
    cflags += KB[kb_backend].host_flags
    cuda_flags = ["-O3", "-std=c++17"] + _rename_flags(pkg)
    for a in ctx["archs"]:
        cuda_flags += _gencode(a)
    t0 = time.time()
    log = os.path.join(scratch, "build.log")
    # In a child process: cpp_extension.load also loads the library, and a later load of the
    # variant's copy (get_local_kernel) in this process would register the namespace twice.
    job = {"name": ctx["op_ns"], "sources": sources, "extra_cflags": cflags, "extra_cuda_cflags": cuda_flags,
           "extra_include_paths": [scratch, kdir], "extra_ldflags": list(KB[kb_backend].host_flags),
           "build_directory": scratch, "with_cuda": KB[kb_backend].gpu_archs}
    code = ("import json, sys\nfrom torch.utils import cpp_extension\n"
            "cpp_extension.load(**json.loads(sys.argv[1]), is_python_module=False, verbose=False)\n")
    env = dict(os.environ, CXX=cxx)
    r = subprocess.run([sys.executable, "-c", code, json.dumps(job)], capture_output=True, text=True, env=env)
    with open(log, "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise ExportBuildError(f"building {variant} of {pkg} failed (log: {log}):\n{(r.stdout + r.stderr)[-4000:]}")
    so = os.path.join(scratch, ctx["op_ns"] + ".so")
    if ext._has_own_libstdcxx(so):
        raise ExportBuildError(f"{cxx} linked its own libstdc++ into {so}; set VB_TORCH_CXX to the system "
                               f"compiler (e.g. /usr/bin/g++)")
    vdir = os.path.join(out, "build", variant)
    pdir = os.path.join(vdir, pkg)
    os.makedirs(pdir, exist_ok=True)
    shutil.copy2(so, os.path.join(pdir, ctx["op_ns"] + ".abi3.so"))
    for f in os.listdir(os.path.join(out, "torch-ext", pkg)):
        if f.endswith(".py"):
            shutil.copy2(os.path.join(out, "torch-ext", pkg, f), os.path.join(pdir, f))
    with open(os.path.join(pdir, "_ops.py"), "w") as f:
        f.write(ops_py(ctx["op_ns"]))
    meta = {"id": ctx["op_ns"], "name": ctx["kname"], "version": int(ctx["version"]), "license": ctx["license"],
            "python-depends": [],
            "backend": {"type": kb_backend, **({"archs": ctx["archs"]} if KB[kb_backend].gpu_archs else {})}}
    with open(os.path.join(vdir, "metadata.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    shutil.rmtree(scratch, ignore_errors=True)  # objects and the log of a successful build
    res["variant"] = variant
    res["variant_dir"] = vdir
    res["build"] = {"ok": True, "seconds": round(time.time() - t0, 1),
                    "library": os.path.join(pdir, ctx["op_ns"] + ".abi3.so")}
    return res


def ops_py(op_ns):
    """_ops.py of a variant (kernel-builder writes the same): loads the library, names its ops."""
    return f'''import torch

from . import {op_ns}

ops = torch.ops.{op_ns}


def add_op_namespace_prefix(op_name: str) -> str:
    """The op's qualified name in this build's namespace."""
    return f"{op_ns}::{{op_name}}"
'''


def export(req):
    """Writes the tree and (unless req["build"] is false) builds the local variant; returns the
    result document (module docstring)."""
    res, ctx = write_tree(req)
    if req.get("build", True):
        build_variant(ctx, res)
    return res


def main(argv):
    """The bridge's entry point: exit 2 with "error: ..." for bad input (BridgeError), 1 for a
    failed build. torch is imported only where needed (a refused name costs no torch import)."""
    try:
        if len(argv) != 2:
            raise BridgeError("usage: python -m vladbud.hf_export REQUEST.json RESULT.json")
        with open(argv[0]) as f:
            res = export(json.load(f))
    except BridgeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except ExportBuildError as e:
        print(f"vladbud export: {e}", file=sys.stderr)
        sys.exit(1)
    with open(argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
