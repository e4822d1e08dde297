"""Shared fixtures: the repository root, small model configurations, CPU kernel libraries."""
import os
import subprocess
import sys

import pytest

# As the CLI's bridge does (src/bridge/bridge.cpp run_bridge): OpenMP threads sleep between
# parallel regions instead of spinning, so that torch's and the kernels' runtimes do not starve
# each other on a 2-core machine (read once, when libgomp loads: before torch is imported).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

# Small configurations: the same classes as the bundled models, a few layers, so the suite stays
# fast on two cores. The vocabularies are the real ones (they are what the tests are about).
TINY_GPT2 = {"n_layer": 2, "n_embd": 64, "n_head": 4}
TINY_LLAMA = {"n_layers": 2, "dim": 64, "n_heads": 4, "ffn_hidden": 128, "vocab_size": 512}


def model_path(name):
    return os.path.join(ROOT, "models", name)


@pytest.fixture(scope="session")
def kernel_lib(tmp_path_factory):
    """build(type or path) -> path of a shared library built from kernels/cpu/<type>.cpp (or the
    given source) with the CPU backend's flags; cached for the session."""
    out = tmp_path_factory.mktemp("kernels")
    cache = {}

    def build(src):
        path = src if os.path.isfile(str(src)) else os.path.join(ROOT, "kernels", "cpu", f"{src}.cpp")
        if path in cache:
            return cache[path]
        so = str(out / (os.path.basename(path).replace(".cpp", "") + f"_{len(cache)}.so"))
        cxx = os.environ.get("VB_CPU_CXX", "g++")
        subprocess.run([cxx, "-std=c++20", "-O2", "-march=native", "-fopenmp", "-fPIC", "-shared",
                        "-I", os.path.join(ROOT, "kernels", "include"), path, "-o", so], check=True)
        cache[path] = so
        return so

    return build
