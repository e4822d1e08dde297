"""Counting time once and naming it: recorded-schema fixtures (no GPU) and real CPU profiles."""
import json
import os

import pytest

from conftest import TINY_GPT2, TINY_LLAMA, model_path
from vladbud.classify import classify, dims_of, fuse_patterns, type_of_kernel_name
from vladbud.profile import run
from vladbud.trace import entries, from_chrome_trace

FIX = os.path.join(os.path.dirname(__file__), "fixtures")


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return from_chrome_trace(json.load(f))


def test_op_and_its_kernel_are_one_entry():
    recs = load("cuda_double_count.json")
    units = entries(recs, on_device=True)
    assert len(units) == 2  # aten::linear (with addmm and the GEMM) and SDPA (with flash)
    assert sum(u["us"] for u in units) == pytest.approx(160.0)
    # what a naive sum would give: op device totals (120 + 40) plus the kernels again
    naive = sum(r["device_us"] for r in recs if r["kind"] == "kernel") * 2
    assert naive == pytest.approx(320.0)
    cls = [classify(u, "bf16") for u in units]
    mm = next(e for e in cls if e["type"] == "matmul")
    assert mm["us"] == pytest.approx(120.0)
    assert mm["dims"] == {"M": 128, "N": 2304, "K": 768} and mm["dtype"] == "bf16"
    fa = next(e for e in cls if e["type"] == "flash_attention")
    assert fa["us"] == pytest.approx(40.0)
    assert fa["dims"] == {"B": 1, "H": 12, "S": 128, "D": 64} and fa["attrs"]["causal"] == 1.0


def test_sdpa_with_fewer_kv_heads_gives_hkv():
    """GQA (enable_gqa=True): k/v [B,H_kv,S,D] give dims with HKV; equal heads give no HKV (the
    type's default, so MHA profiles keep their sizes); H_kv not dividing H does not fit the type."""
    def op(k_heads):
        return {"name": "aten::scaled_dot_product_attention",
                "shapes": [[1, 8, 64, 16], [1, k_heads, 64, 16], [1, k_heads, 64, 16], [], [], [], [], []],
                "concrete": [None, None, None, None, 0.0, True, None, True]}
    dims, attrs, note = dims_of("flash_attention", op(2))
    assert dims == {"B": 1, "H": 8, "HKV": 2, "S": 64, "D": 16} and attrs["causal"] == 1.0 and not note
    assert dims_of("flash_attention", op(8))[0] == {"B": 1, "H": 8, "S": 64, "D": 16}
    dims, _, note = dims_of("flash_attention", op(3))
    assert dims is None and "3 KV heads do not divide 8 query heads" in note


@pytest.mark.parametrize("name", ["nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT",
                                  "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n",
                                  "void cublasGemvTensorStridedBatched<float, float, float, 128, 4, 16, false, false, true>"])
def test_cublas_kernel_names_are_matmul(name):
    assert type_of_kernel_name(name) == "matmul"


def test_kernel_names_classify_ops_the_table_does_not_know():
    units = entries(load("cuda_gemm_kernel_names.json"), on_device=True)
    cls = [classify(u, "fp16") for u in units]
    assert [e["type"] for e in cls] == ["matmul", "matmul", "matmul"]
    assert cls[0]["evidence"].startswith("kernel name nvjet_")
    assert sum(e["us"] for e in cls) == pytest.approx(55 + 70 + 12)


def test_other_kernel_names():
    assert type_of_kernel_name("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>") == "softmax"
    assert type_of_kernel_name("void at::native::vectorized_layer_norm_kernel<float, float>") == "layernorm"
    assert type_of_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>") is None


def test_empty_trace_gives_no_entries():
    assert entries([], on_device=False) == []
    assert fuse_patterns([], "fp32") == []


def test_gpt2_cpu_profile_types_and_no_double_count():
    res = run({"model": model_path("gpt2.py"), "class_name": "GPT2", "model_args": TINY_GPT2,
               "input_shape": "2,32", "dtype": "fp32", "device": "cpu", "warmup": 1, "iters": 2})
    types = {e["type"] for e in res["entries"]}
    assert {"matmul", "layernorm", "flash_attention"} <= types
    mm = [e for e in res["entries"] if e["type"] == "matmul"]
    assert {"M": 64, "N": 192, "K": 64} in [e["dims"] for e in mm]      # c_attn
    assert {"M": 64, "N": 50257, "K": 64} in [e["dims"] for e in mm]    # tied lm_head
    fa = next(e for e in res["entries"] if e["type"] == "flash_attention")
    assert fa["dims"] == {"B": 2, "H": 4, "S": 32, "D": 16} and fa["attrs"]["causal"] == 1.0
    # calls per forward: 2 layers x (c_attn, c_proj, c_fc, mlp c_proj) + lm_head = 9 linears
    assert sum(e["calls"] for e in mm) == pytest.approx(9)
    assert sum(e["calls"] for e in res["entries"] if e["type"] == "layernorm") == pytest.approx(5)
    assert res["profiled_us"] == pytest.approx(sum(e["us"] for e in res["entries"]))


def test_llama_hand_written_kernels_are_recognised():
    res = run({"model": model_path("llama.py"), "class_name": "Llama", "model_args": TINY_LLAMA,
               "input_shape": "1,32", "dtype": "fp32", "device": "cpu", "warmup": 1, "iters": 1})
    by = {}
    for e in res["entries"]:
        by.setdefault(e["type"], []).append(e)
    assert by["rmsnorm"][0]["dims"] == {"M": 32, "N": 64}
    assert sum(e["calls"] for e in by["rmsnorm"]) == 5          # 2 per block + final
    assert sum(e["calls"] for e in by["rotary_embedding"]) == 4  # q and k per block
    assert by["fused_mlp"][0]["dims"] == {"B": 32, "D": 64, "H": 128}
    assert by["flash_attention"][0]["dims"] == {"B": 1, "H": 4, "S": 32, "D": 16}
    assert {"M": 32, "N": 512, "K": 64} in [e["dims"] for e in by["matmul"]]


def test_softmax_cross_entropy_sum_are_typed_with_their_shapes(tmp_path):
    from test_verify import OPS_MODEL
    f = tmp_path / "ops_model.py"
    f.write_text(OPS_MODEL)
    res = run({"model": str(f), "class_name": "OpsModel", "input_shape": "2,16", "dtype": "fp32",
               "device": "cpu", "warmup": 1, "iters": 1})
    by = {e["type"]: e for e in res["entries"] if e["type"]}
    assert by["softmax"]["dims"] == {"R": 32, "C": 32}
    assert by["cross_entropy"]["dims"] == {"B": 32, "V": 300}
    assert by["cross_entropy"]["attrs"] == {"ignore_index": -100.0}
    assert by["reduce"]["dims"] == {"M": 32, "N": 300}


def _op(i, parent, start):
    return {"id": i, "name": f"aten::op{i}", "kind": "op", "parent": parent, "start_us": start,
            "cpu_us": 1.0, "device_us": 0.0, "shapes": [], "dtypes": [], "concrete": []}


def test_deep_nesting_and_a_parent_cycle_do_not_exhaust_the_recursion_limit():
    # A CUDA trace of LLaMA on the H200 once gave an op that was its own ancestor (torch's event
    # ids collide across threads); deep chains must not recurse either.
    deep = [_op(0, None, 0.0)] + [_op(i, i - 1, float(i)) for i in range(1, 5000)]
    units = entries(deep, on_device=False)
    assert len(units) == 1 and len(units[0]["children"]) == 4999
    cyc = [_op(0, None, 0.0), _op(1, 0, 1.0), _op(2, 1, 2.0), _op(3, 2, 3.0)]
    cyc.append(_op(4, 4, 4.0))  # its own parent
    units = entries(cyc, on_device=False)
    assert [u["op"]["id"] for u in units] == [0]
    assert [c["id"] for c in units[0]["children"]] == [1, 2, 3]
