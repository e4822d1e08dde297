"""VladBud's backends as the Python side sees them (DESIGN §1): the one Python module that names
them, mirroring the C++ registry (src/backends/registry.cpp, the one C++ place).

A backend is a source language (its file extension) whose kernels run on a device; the Python
bridge needs three facts of each: the extension that selects it for a source file, the PyTorch
device string its kernels read tensors on (Device::torch_device), and whether its build is a
shared library exporting vb_kernel_run that PyTorch can call (Backend::serves_torch_ops: a
compiled op, a kernel-builder package). Other modules ask this one (``by_name``,
``by_extension``) and never compare backend names themselves. The C++ test
BackendPythonMirror.MatchesTheRegistry (tests/test_backend_python_mirror.cpp) fails when this
table and the C++ registry disagree, so a new backend is added to both in one change.
"""
import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Backend:
    """One registered backend.

    :param name: the registry name (--backend, problem.json's "backend", kernels/<name>/)
    :param extension: its source file extension (".cpp")
    :param torch_device: the PyTorch device string its kernels read tensors on ("cpu", "cuda")
    :param serves_torch_ops: its build is a shared library exporting vb_kernel_run (bound as
        torch.ops.vladbud.<type>, packaged by `vladbud export`)
    """
    name: str
    extension: str
    torch_device: str
    serves_torch_ops: bool


# In the C++ registry's order.
BACKENDS = (
    Backend("cpu", ".cpp", "cpu", True),
    Backend("cuda", ".cu", "cuda", True),
    Backend("triton", ".py", "cpu", False),
)


def by_name(name):
    """The backend called `name`, or None."""
    return next((b for b in BACKENDS if b.name == name), None)


def by_extension(ext):
    """The first backend whose source extension is `ext` (".cu"), or None."""
    return next((b for b in BACKENDS if b.extension == ext), None)


def names(which=None):
    """The registered names, comma-separated (for messages); with `which`, only those it accepts."""
    return ", ".join(b.name for b in BACKENDS if which is None or which(b))


def to_json():
    """The table as a JSON list of objects (the mirror test compares it with the C++ registry)."""
    return json.dumps([asdict(b) for b in BACKENDS])
