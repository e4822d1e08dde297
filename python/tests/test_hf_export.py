"""`vladbud export` (python/vladbud/hf_export.py): the kernel-builder tree, the local variant that
`kernels.get_local_kernel` loads, the kernelize layers, and the refusals of bad input.

The tree tests write sources only (fast). The build tests compile a CPU variant of the CPU
starters (~15 s each on two cores) and load it with the `kernels` package from PyPI; a CUDA
variant is compiled by bench/hf_export_h200.sh on a GPU machine."""
import ast
import json
import os
import re
import tomllib
from pathlib import Path

import pytest
import torch

from vladbud import BridgeError
from vladbud import hf_export as hx

ROOT = Path(__file__).resolve().parents[2]
kernels = pytest.importorskip("kernels", reason="the `kernels` package (scripts/requirements.txt) is not installed")
if not hasattr(kernels, "get_local_kernel"):
    # Run from the repository root without Hugging Face's package, `import kernels` finds the
    # repository's kernels/ folder as a namespace package (seen on the GPU machine, 2026-12-07).
    pytest.skip(f"the `kernels` package (scripts/requirements.txt) is not installed: `import kernels` "
                f"found {list(getattr(kernels, '__path__', []))}, which has no get_local_kernel",
                allow_module_level=True)

# What build.toml edition 5 accepts (kernel-builder's parser, kernels-data: unknown fields are
# errors); general's required fields.
GENERAL_REQUIRED = {"name", "edition", "version", "license", "backends"}
KERNEL_KEYS = {"cuda": {"backend", "depends", "src", "include", "cuda-capabilities", "cuda-flags", "cuda-minver",
                        "cxx-flags"},
               "cpu": {"backend", "depends", "src", "include", "cxx-flags"}}
TORCH_KEYS = {"src", "include", "pyext", "cxx-flags", "minver", "maxver"}
KERNEL_NAME = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")


def tree(tmp_path, kernel, name, **kw):
    req = {"kernel": str(kernel), "name": name, "out": str(tmp_path / name), "build": False, **kw}
    return hx.export(req)


def check_tree(res):
    """Validates an exported source tree: layout, build.toml, relative imports, the binding."""
    out, pkg, t, be = Path(res["out"]), res["package"], res["type"], res["backend"]
    for rel in ["build.toml", "README.md", "torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h",
                f"torch-ext/{pkg}/__init__.py", f"tests/test_{pkg}.py", f"benchmarks/benchmark_{pkg}.py",
                f"{pkg}_{be}/{t}{'.cu' if be == 'cuda' else '.cpp'}"]:
        assert (out / rel).is_file(), rel
    b = tomllib.loads((out / "build.toml").read_text())
    g = b["general"]
    assert GENERAL_REQUIRED <= set(g), set(g)
    assert g["edition"] == 5 and g["backends"] == [be] and KERNEL_NAME.match(g["name"])
    assert g["name"].replace("-", "_") == pkg
    assert set(b["torch"]) <= TORCH_KEYS and "torch-ext/torch_binding.cpp" in b["torch"]["src"]
    (kname, k), = b["kernel"].items()
    assert kname == f"{pkg}_{be}" and k["backend"] == be and set(k) <= KERNEL_KEYS[be], set(k)
    assert k["depends"] == ["torch"]
    for s in k["src"]:
        assert (out / s).is_file(), s
    if be == "cuda":
        assert all(re.fullmatch(r"\d+\.\d+[af]?", a) for a in k["cuda-capabilities"])
    # The kernel's SDK headers come along; DLPack comes from torch (ATen/dlpack.h).
    for s in k["src"]:
        assert "<dlpack/dlpack.h>" not in (out / s).read_text()
    # Python files of the package: only relative imports of the package itself.
    for py in (out / "torch-ext" / pkg).glob("*.py"):
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module.split(".")[0] in {"torch", "typing"}, (py.name, node.module)
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] in {"torch", "typing"} for a in node.names), py.name
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                assert node.module in (None, "_ops", "layers"), node.module
    # The binding defines and implements the op (the schema of torch.ops.vladbud.<type>).
    cpp = (out / "torch-ext" / "torch_binding.cpp").read_text()
    assert f'ops.def("{hx._schema(t)}")' in cpp
    assert f'ops.impl("{t}", c10::DispatchKey::{"CUDA" if be == "cuda" else "CPU"}' in cpp
    assert f'ops.impl("{t}", c10::DispatchKey::Meta' in cpp
    assert "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)" in cpp and "REGISTER_EXTENSION(TORCH_EXTENSION_NAME)" in cpp
    return b


@pytest.mark.parametrize("t", sorted(hx.OPS))
def test_tree_of_every_cuda_starter(tmp_path, t):
    res = tree(tmp_path, ROOT / "kernels" / "cuda" / f"{t}.cu", f"vb-{t.replace('_', '-')}", cuda_archs=["9.0a"])
    assert (res["type"], res["backend"], res["cuda_archs"]) == (t, "cuda", ["9.0a"])
    # `kernels` picks a CUDA package's backend from torch: the load call names none.
    assert res["load"] == f'kernels.get_local_kernel(Path("{res["out"]}"))'
    b = check_tree(res)
    assert b["kernel"][f"vb_{t}_cuda"]["cuda-capabilities"] == ["9.0a"]
    # The SDK headers the source includes (transitively) are in the kernel's folder.
    src = (Path(res["out"]) / f"vb_{t}_cuda" / f"{t}.cu").read_text()
    for inc in re.findall(r'#include "([^"]+)"', src):
        assert (Path(res["out"]) / f"vb_{t}_cuda" / inc).is_file(), inc


def test_tree_from_a_workspace_folder_takes_best(tmp_path):
    d = tmp_path / "ws" / "01_rmsnorm"
    (d / "best").mkdir(parents=True)
    starter = (ROOT / "kernels" / "cpu" / "rmsnorm.cpp").read_text()
    (d / "rmsnorm.cpp").write_text(starter)
    (d / "best" / "rmsnorm.cpp").write_text(starter.replace("#define LANES 64", "#define LANES 32"))
    (d / "problem.json").write_text(json.dumps({"kernel": "rmsnorm", "backend": "cpu", "source": "rmsnorm.cpp",
                                                "dims": {"M": 8, "N": 64}, "dtype": "fp32"}))
    res = tree(tmp_path, d, "ws_rmsnorm")
    assert res["source"] == str(d / "best" / "rmsnorm.cpp")
    assert res["backend"] == "cpu"
    assert res["load"] == f'kernels.get_local_kernel(Path("{res["out"]}"), backend="cpu")'
    check_tree(res)
    assert "#define LANES 32" in (Path(res["out"]) / "ws_rmsnorm_cpu" / "rmsnorm.cpp").read_text()
    assert (Path(res["out"]) / "torch-ext" / "ws_rmsnorm" / "layers.py").is_file()


def test_tree_from_a_starters_folder_with_type(tmp_path):
    res = tree(tmp_path, ROOT / "kernels" / "cuda", "vb_mlp", type="fused_mlp")
    assert res["type"] == "fused_mlp" and res["layers"] == ["LlamaMLP"]
    check_tree(res)


@pytest.mark.parametrize("name, why", [
    ("VbRms", "not a valid package name"), ("1rms", "not a valid package name"), ("rms_", "not a valid package name"),
    ("vb__rms", "not a valid package name"), ("vb.rms", "not a valid package name"), ("class", "Python keyword"),
])
def test_refuses_bad_names(tmp_path, name, why):
    with pytest.raises(BridgeError, match=why):
        tree(tmp_path, ROOT / "kernels" / "cpu" / "rmsnorm.cpp", name)


def test_refuses_bad_kernels(tmp_path):
    with pytest.raises(BridgeError, match="no such file or folder"):
        tree(tmp_path, tmp_path / "missing", "vb_x")
    with pytest.raises(BridgeError, match="triton kernels are not compiled into such a library"):
        tree(tmp_path, ROOT / "kernels" / "triton" / "rmsnorm.py", "vb_x")
    with pytest.raises(BridgeError, match="triton kernels are not compiled into such a library"):
        tree(tmp_path, ROOT / "kernels" / "triton", "vb_x", type="rmsnorm")
    tri = tmp_path / "ws" / "01_softmax"
    tri.mkdir(parents=True)
    (tri / "problem.json").write_text(json.dumps({"kernel": "softmax", "backend": "triton", "source": "softmax.py"}))
    with pytest.raises(BridgeError, match="backend/source 'triton' cannot be exported"):
        tree(tmp_path, tri, "vb_x")
    (tri / "problem.json").write_text(json.dumps({"kernel": "softmax", "backend": "no-such", "source": "x"}))
    with pytest.raises(BridgeError, match="backend/source 'no-such' cannot be exported.*backend cpu"):
        tree(tmp_path, tri, "vb_x")
    with pytest.raises(BridgeError, match="no problem.json; give --type"):
        tree(tmp_path, ROOT / "kernels" / "cuda", "vb_x")
    with pytest.raises(BridgeError, match="unknown kernel type"):
        tree(tmp_path, ROOT / "kernels" / "cuda", "vb_x", type="conv2d")
    with pytest.raises(BridgeError, match="does not name a kernel type"):
        tree(tmp_path, _copy(tmp_path, "kernels/cpu/rmsnorm.cpp", "mykernel.cpp"), "vb_x")
    d = tmp_path / "kb"
    d.mkdir()
    (d / "problem.json").write_text(json.dumps({"mapped": False, "reason": "conv2d is not a kernel type"}))
    with pytest.raises(BridgeError, match="maps to no VladBud kernel type"):
        tree(tmp_path, d, "vb_x")
    (d / "problem.json").write_text("{not json")
    with pytest.raises(BridgeError, match="not valid JSON"):
        tree(tmp_path, d, "vb_x")
    with pytest.raises(BridgeError, match="not a compute capability"):
        tree(tmp_path, ROOT / "kernels" / "cuda" / "rmsnorm.cu", "vb_x", cuda_archs=["sm_90"])


def _copy(tmp_path, rel, name):
    p = tmp_path / name
    p.write_text((ROOT / rel).read_text())
    return p


def test_refuses_a_non_empty_out_without_force(tmp_path):
    out = tmp_path / "vb_rms"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(BridgeError, match="exists and is not empty; pass --force"):
        tree(tmp_path, ROOT / "kernels" / "cpu" / "rmsnorm.cpp", "vb_rms")
    assert (out / "keep.txt").read_text() == "mine"
    res = tree(tmp_path, ROOT / "kernels" / "cpu" / "rmsnorm.cpp", "vb_rms", force=True)
    assert not (out / "keep.txt").exists()
    check_tree(res)


def test_variant_names_follow_kernels_resolver():
    from kernels.variants import parse_variant, resolve_variant
    for be, dev in (("cpu", "cpu"), ("cuda", "cu" + (torch.version.cuda or "").replace(".", ""))):
        if be == "cuda" and torch.version.cuda is None:
            continue
        name = hx.variant_name(be)
        v = parse_variant(name)
        assert v.variant_str == name and f"-{dev}-" in name
        picked, trace = resolve_variant([v], be if be == "cpu" else None)
        assert picked == v, trace


# ---- built variants, loaded by `kernels` (CPU) ---------------------------------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The CPU starters of rmsnorm and fused_mlp exported and built (CPU variant), once."""
    out = tmp_path_factory.mktemp("hf")
    return {t: hx.export({"kernel": str(ROOT / "kernels" / "cpu" / f"{t}.cpp"), "name": f"vb_{t}",
                          "out": str(out / f"vb_{t}")}) for t in ("rmsnorm", "fused_mlp")}


def test_built_variant_layout(built):
    for t, res in built.items():
        v = Path(res["variant_dir"])
        assert v.name == hx.variant_name("cpu") and v.parent.name == "build"
        meta = kernels.Metadata.read_from_file(v / "metadata.json")  # kernels' own parser
        assert str(meta.name) == res["name"].replace("_", "-") if hasattr(meta.name, "__str__") else True
        assert meta.id == res["op_namespace"] and meta.name.python_name == res["package"]
        files = {p.name for p in (v / res["package"]).iterdir()}
        assert {"__init__.py", "_ops.py", res["op_namespace"] + ".abi3.so"} <= files
        assert not (Path(res["out"]) / "build" / ".scratch").exists()


def test_get_local_kernel_matches_pytorch(built):
    from kernels import get_local_kernel
    torch.manual_seed(0)
    rms = get_local_kernel(Path(built["rmsnorm"]["out"]), backend="cpu")
    x, w = torch.randn(3, 5, 256), torch.randn(256)
    y = rms.rms_norm(x, w, 1e-6)
    r = torch.nn.functional.rms_norm(x.double(), (256,), w.double(), 1e-6)
    assert y.shape == x.shape and ((y.double() - r).norm() / r.norm()).item() < 1e-6
    xb, wb = x.bfloat16(), w.bfloat16()
    yb = rms.rms_norm(xb, wb)
    rb = torch.nn.functional.rms_norm(xb.double(), (256,), wb.double(), 1e-6)
    assert yb.dtype == torch.bfloat16 and ((yb.double() - rb).norm() / rb.norm()).item() < 1e-2
    mlp = get_local_kernel(Path(built["fused_mlp"]["out"]), backend="cpu")
    D, H = 128, 344
    x = torch.randn(2, 7, D)
    wg, wu, wd = torch.randn(H, D) / D ** 0.5, torch.randn(H, D) / D ** 0.5, torch.randn(D, H) / H ** 0.5
    y = mlp.swiglu_mlp(x, wg, wu, wd)
    xd = x.double()
    r = (torch.nn.functional.silu(xd @ wg.double().T) * (xd @ wu.double().T)) @ wd.double().T
    assert y.shape == (2, 7, D) and ((y.double() - r).norm() / r.norm()).item() < 1e-5
    # The op has a Meta kernel: torch.compile traces it without a graph break.
    f = torch.compile(lambda a, b: rms.rms_norm(a, b) * 2, fullgraph=True, backend="eager")
    assert torch.allclose(f(x[..., :128].contiguous(), w[:128]), 2 * rms.rms_norm(x[..., :128].contiguous(), w[:128]))


def test_op_refuses_bad_input(built):
    from kernels import get_local_kernel
    rms = get_local_kernel(Path(built["rmsnorm"]["out"]), backend="cpu")
    with pytest.raises(RuntimeError, match="vb_rmsnorm.rmsnorm failed"):
        rms.ops.rmsnorm(torch.randn(4, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64), 1e-6)
    with pytest.raises(RuntimeError, match="vb_rmsnorm.rmsnorm failed"):
        rms.ops.rmsnorm(torch.randn(4, 8), torch.randn(9), 1e-6)


def test_generated_package_tests_pass(built):
    import subprocess
    import sys
    for res in built.values():
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/"],
                           cwd=res["out"], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert re.search(r"\b3 passed", r.stdout), r.stdout[-500:]


def test_kernelize_llama_uses_the_kernels(built):
    """A LlamaForCausalLM from a config, kernelized with the exported RMSNorm and LlamaMLP layers
    (no VladBud import at run time): same logits, and the exported ops ran."""
    transformers = pytest.importorskip("transformers")
    from kernels import LocalLayerRepository, Mode, kernelize, replace_kernel_forward_from_hub, use_kernel_mapping
    from transformers.models.llama import modeling_llama as ml
    replace_kernel_forward_from_hub(ml.LlamaMLP, "LlamaMLP")
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 512, (2, 16))
    with torch.no_grad():
        ref = model(ids).logits
    mapping = {layer: {"cpu": LocalLayerRepository(repo_path=Path(built[t]["variant_dir"]), layer_name=layer)}
               for t, layer in (("rmsnorm", "RMSNorm"), ("fused_mlp", "LlamaMLP"))}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(model, mode=Mode.INFERENCE, device="cpu")
    assert type(model.model.norm.forward.__self__) is ml.LlamaRMSNorm
    assert model.model.norm.forward.__func__.__qualname__ == "RMSNorm.forward"
    assert model.model.layers[0].mlp.forward.__func__.__qualname__ == "LlamaMLP.forward"
    assert model.model.layers[0].mlp.forward.__func__ is not ml.LlamaMLP.forward
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = model(ids).logits
    names = {e.name for e in prof.events()}
    assert f"{built['rmsnorm']['op_namespace']}::rmsnorm" in names, sorted(n for n in names if "::" in n)[:20]
    assert f"{built['fused_mlp']['op_namespace']}::fused_mlp" in names
    assert ((out - ref).norm() / ref.norm()).item() < 1e-5


def test_a_kernel_that_does_not_compile_is_a_build_error_with_the_diagnostics(tmp_path):
    bad = tmp_path / "rmsnorm.cpp"
    bad.write_text((ROOT / "kernels" / "cpu" / "rmsnorm.cpp").read_text() + "\nint broken( {\n")
    with pytest.raises(hx.ExportBuildError, match=r"(?s)building torch\d+-cxx11-cpu-.* failed.*rmsnorm\.cpp"):
        hx.export({"kernel": str(bad), "name": "vb_broken", "out": str(tmp_path / "out")})
    assert not (tmp_path / "out" / "build" / hx.variant_name("cpu")).exists()


def test_local_kernels_override_serves_get_kernel_offline(built, monkeypatch):
    """LOCAL_KERNELS=<repo id>=<path> makes kernels.get_kernel load the export without the Hub (the
    variant folder itself: on this CPU-only machine torch's CUDA build would pick a cu variant)."""
    from kernels import get_kernel
    res = built["rmsnorm"]
    monkeypatch.setenv("LOCAL_KERNELS", f"vladbud/vb-rmsnorm={res['variant_dir']}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    k = get_kernel("vladbud/vb-rmsnorm", version=1)
    x, w = torch.randn(4, 64), torch.randn(64)
    assert torch.allclose(k.rms_norm(x, w), torch.nn.functional.rms_norm(x, (64,), w, 1e-6), atol=1e-5, rtol=1e-5)


def test_hf_attention_forward_runs_the_kernel_in_a_llama(tmp_path):
    """The flash_attention package's hf_attention_forward, registered with transformers'
    AttentionInterface: prefill on the kernel (logits as SDPA's), a padded batch and cached decode
    steps on SDPA's path (same logits, same greedy tokens)."""
    transformers = pytest.importorskip("transformers")
    from kernels import get_local_kernel
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    res = hx.export({"kernel": str(ROOT / "kernels" / "cpu" / "flash_attention.cpp"), "name": "vb_attn",
                     "out": str(tmp_path / "vb_attn")})
    k = get_local_kernel(Path(res["out"]), backend="cpu")
    AttentionInterface.register("vb_attn_test", k.hf_attention_forward)
    AttentionMaskInterface.register("vb_attn_test", ALL_MASK_ATTENTION_FUNCTIONS["flash_attention_2"])
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 512, (2, 16))
    pad = torch.ones(2, 16, dtype=torch.long)
    pad[1, :5] = 0
    with torch.no_grad():
        ref, ref_pad = model(ids).logits, model(ids, attention_mask=pad).logits
    g_ref = model.generate(ids[:1], max_new_tokens=4, do_sample=False)
    model.set_attn_implementation("vb_attn_test")
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        out = model(ids).logits
    assert f"{res['op_namespace']}::flash_attention" in {e.name for e in prof.events()}
    assert ((out - ref).norm() / ref.norm()).item() < 1e-5
    with torch.no_grad():
        out_pad = model(ids, attention_mask=pad).logits
    assert ((out_pad[1, 5:] - ref_pad[1, 5:]).norm() / ref_pad[1, 5:].norm()).item() < 1e-5
    assert torch.equal(model.generate(ids[:1], max_new_tokens=4, do_sample=False), g_ref)


@pytest.mark.skipif(__import__("shutil").which("nvcc") is None and not os.path.isdir("/usr/local/cuda/bin"),
                    reason="needs nvcc (the CUDA toolkit) to build a CUDA variant")
def test_cuda_variant_builds_and_loads_without_a_gpu(tmp_path, monkeypatch):
    """The CUDA starter's cu<NNN> variant: built with nvcc, loaded by get_local_kernel (the backend
    torch's CUDA build selects), the op registered for CUDA and Meta (no GPU is needed for either),
    and CPU tensors refused by the dispatcher. Running it needs a GPU: bench/hf_export_h200.sh."""
    if torch.version.cuda is None:
        pytest.skip("torch here has no CUDA build")
    monkeypatch.setenv("PATH", os.environ.get("PATH", "") + os.pathsep + "/usr/local/cuda/bin")
    from kernels import get_local_kernel
    res = hx.export({"kernel": str(ROOT / "kernels" / "cuda" / "rmsnorm.cu"), "name": "vb_rms_cuda",
                     "out": str(tmp_path / "vb_rms_cuda"), "cuda_archs": ["9.0a"]})
    assert res["variant"] == hx.variant_name("cuda") and "-cu" in res["variant"]
    meta = json.loads((Path(res["variant_dir"]) / "metadata.json").read_text())
    assert meta["backend"] == {"type": "cuda", "archs": ["9.0a"]}
    k = get_local_kernel(Path(res["out"]))
    y = k.ops.rmsnorm(torch.empty(8, 64, device="meta"), torch.empty(64, device="meta"), 1e-6)
    assert y.shape == (8, 64) and y.device.type == "meta"
    with pytest.raises(NotImplementedError, match="CPU"):
        k.ops.rmsnorm(torch.randn(8, 64), torch.randn(64), 1e-6)
    assert k.layers.RMSNorm.can_torch_compile
