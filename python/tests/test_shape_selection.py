"""Shape selection: a matmul kernel plugged in only at the weight shapes where it beat PyTorch
(verify's per-shape screen, replace.py's `only`)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import TINY_GPT2
from vladbud import BridgeError
from vladbud import kernels as vk
from vladbud import replace as vr
from vladbud.verify import run, shape_selection
from test_verify import _req

V, D = 50257, TINY_GPT2["n_embd"]  # tiny GPT-2: the LM head is [V, D]; c_fc [4D, D]
M = 2 * 16  # the requests' input_shape 2,16

# The tiny GPT-2's nn.Linear groups as profile.json would list them (per forward).
ENTRIES = [{"type": "matmul", "op": "aten::linear", "dims": {"M": M, "N": n, "K": k}, "calls": c}
           for n, k, c in [(V, D, 1.0), (3 * D, D, 2.0), (D, D, 2.0), (4 * D, D, 2.0), (D, 4 * D, 2.0)]]


def _shapes(lm_head, c_fc):
    return [{"folder": "01_matmul", "dims": {"M": M, "N": V, "K": D}, "own_shape_speedup": lm_head},
            {"folder": "02_matmul", "dims": {"M": M, "N": 4 * D, "K": D}, "own_shape_speedup": c_fc}]


def _matmul_req(kernel_lib, shapes, **kw):
    kw.setdefault("reps", 2)
    req = _req("gpt2.py", "GPT2", TINY_GPT2, [("matmul", "matmul")], kernel_lib,
               profile_entries=ENTRIES, **kw)
    req["kernels"][0]["shapes"] = shapes
    return req


def _canned(monkeypatch, ms_by_name):
    """verify.time_variants answering from a table: {variant name: ms per forward} (the
    baseline "eager" 100 ms), the same in every round."""
    import vladbud.verify as Vf

    def fake(variants, x, dev, warmup, reps, progress=None):
        return {v.name: [ms_by_name.get(v.name, 100.0)] * reps for v in variants}, 1

    monkeypatch.setattr(Vf, "time_variants", fake)


LM, FC = f"+matmul@N{V}xK{D}", f"+matmul@N{4 * D}xK{D}"


def test_each_shape_is_decided_alone_in_the_model_and_only_the_faster_ones_go_in(kernel_lib, monkeypatch):
    # The LM head is faster in the model, c_fc slower: matmul goes in at the LM head only,
    # whatever the own-shape figures said (here the reverse).
    _canned(monkeypatch, {LM: 90.0, FC: 110.0, "+matmul": 95.0, "vladbud": 95.0})
    res = run(_matmul_req(kernel_lib, _shapes(0.8, 1.6), reps=6))
    c = res["candidates"][0]
    assert c["only"] == {"matmul": [[V, D]]} and c["decision"] == "in", c
    assert c["calls_per_forward"] == 3 and c["modules_replaced"] == 3  # checked at both shapes
    assert c["intercept"]["ok"] and c["intercept"]["expected"] == 3, c["intercept"]
    assert [r["in"] for r in c["shapes"]] == [True, False]
    assert [round(r["in_model_speedup"], 3) for r in c["shapes"]] == [round(100 / 90, 3), round(100 / 110, 3)]
    assert "faster beyond the noise: N50257xK64" in c["shape_note"]
    assert res["shape_selection"] == {"matmul": [[V, D]]} and res["kernels_in"] == ["matmul"]
    assert c["correct"] and res["verdict"] == "PASS"


def test_no_shape_faster_alone_drops_the_type(kernel_lib, monkeypatch):
    _canned(monkeypatch, {LM: 101.0, FC: 120.0})
    res = run(_matmul_req(kernel_lib, _shapes(1.9, 1.5), reps=6))
    c = res["candidates"][0]
    assert c["decision"] == "dropped" and "no shape faster in the model" in c["reason"], c
    assert "in_model_speedup" not in c and res["kernels_in"] == []


def test_a_selection_not_confirmed_in_new_rounds_is_dropped_saying_what_was_timed_again(kernel_lib, monkeypatch):
    # The LM head wins alone, but the selection timed again together ("+matmul") is no faster:
    # dropped, and the reason says these were new rounds of the shapes that won alone.
    _canned(monkeypatch, {LM: 90.0, FC: 110.0, "+matmul": 100.0, "vladbud": 100.0})
    res = run(_matmul_req(kernel_lib, _shapes(None, None), reps=6))
    c = res["candidates"][0]
    assert "faster beyond the noise: N50257xK64" in c["shape_note"]
    assert c["decision"] == "dropped", c
    assert "the shapes faster alone, N50257xK64, timed again together in new rounds" in c["reason"], c
    assert res["kernels_in"] == []


def test_a_single_shape_dropped_does_not_claim_it_was_timed_alone(kernel_lib, monkeypatch):
    # One extracted shape: nothing is timed per shape, so the reason must not say "faster alone".
    _canned(monkeypatch, {"+matmul": 100.0, "vladbud": 100.0})
    res = run(_matmul_req(kernel_lib, _shapes(None, None)[:1], reps=6))
    c = res["candidates"][0]
    assert c["decision"] == "dropped" and "shape_note" not in c, c
    assert "faster alone" not in c["reason"], c


def test_only_the_extracted_shapes_are_replaced(kernel_lib, monkeypatch):
    # Both extracted shapes faster: both go in, and the model's other linears (c_attn, the
    # attention and MLP projections of the other shapes) stay PyTorch's: 3 of its 9 calls.
    _canned(monkeypatch, {LM: 90.0, FC: 95.0, "+matmul": 92.0, "vladbud": 92.0})
    res = run(_matmul_req(kernel_lib, _shapes(None, None), reps=6))
    c = res["candidates"][0]
    assert c["only"] == {"matmul": [[4 * D, D], [V, D]]} and c["decision"] == "in", c
    assert c["calls_per_forward"] == 3
    assert res["shape_selection"] == {"matmul": [[4 * D, D], [V, D]]}


def test_select_off_plugs_in_every_extracted_shape_untimed(kernel_lib):
    res = run(_matmul_req(kernel_lib, _shapes(0.5, 0.5), select=False))
    c = res["candidates"][0]
    assert c["calls_per_forward"] == 3 and res["kernels_in"] == ["matmul"]
    assert "shape_note" not in c  # nothing timed per shape


def test_the_function_level_linear_honours_the_selection(kernel_lib):
    vk.bind("matmul", kernel_lib("matmul"))
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 8, generator=g)
    w_in, w_out = torch.randn(4, 8, generator=g), torch.randn(6, 8, generator=g)
    with torch.inference_mode(), vr.patched(["matmul"], {"matmul": [(4, 8)]}) as p:
        y_in, y_out = F.linear(x, w_in), F.linear(x, w_out)
    assert p.counts == {"matmul": 1}  # only the (4, 8) weight went to the op
    assert torch.allclose(y_in, x @ w_in.t(), atol=1e-5) and torch.equal(y_out, x @ w_out.t())


@pytest.mark.parametrize("keys", [[(6, 4)], [[6, 4]]])  # tuples, or lists as verify.json has them
def test_module_replacement_honours_the_selection(keys):
    m = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 6))
    repl, counts = vr.with_kernels(m, ["matmul"], {"matmul": keys})
    assert counts == {"matmul": 1}
    assert type(repl[0]) is nn.Linear and type(repl[1]) is vr.VbLinear


def test_expected_calls_under_a_selection_count_only_the_selected_linears():
    mlp = {"type": "fused_mlp", "op": "aten::linear + aten::silu + aten::linear + aten::mul + aten::linear",
           "dims": {"B": 8, "D": 16, "H": 32}, "calls": 2.0}
    lin = {"type": "matmul", "op": "aten::linear", "dims": {"M": 8, "N": 16, "K": 16}, "calls": 4.0}
    [row] = vr.intercept_check([mlp, lin], ["matmul"], {"matmul": 4}, {"matmul": [(32, 16)]})
    # gate and up are [H, D] = (32, 16): two of the pattern's three linears; the (16, 16) group
    # and the down projection [D, H] are left to PyTorch.
    assert row["ok"] and row["expected"] == 2 * 2, row
    assert [n["reason"] for n in row["not_covered"]] == ["left to PyTorch at this shape (shape selection)"]


@pytest.mark.parametrize("bad", [{"dims": {"M": 4}}, {"dims": {"N": 0, "K": 8}}, {"dims": "M4xN4xK4"},
                                 {"dims": {"N": 4, "K": 8}, "own_shape_speedup": -1.0},
                                 {"dims": {"N": 4, "K": 8}, "own_shape_speedup": "fast"}])
def test_a_malformed_shapes_row_is_refused_by_name(bad):
    with pytest.raises(BridgeError, match="shapes row of kernel matmul is malformed.*re-run `vladbud extract`"):
        shape_selection({"type": "matmul", "shapes": [bad]})


def test_types_without_shape_keys_ignore_the_shapes_rows():
    assert shape_selection({"type": "layernorm", "shapes": [{"dims": {"B": 4, "D": 8},
                                                             "own_shape_speedup": 0.5}]}) == ([], {})


# A matmul that writes zeros: wrong at any shape it serves.
ZERO_MATMUL = r"""
#include <cstring>
#include "vb_kernel.h"
extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 2, out, n_out, 1, n_attrs, 0)) return e;
  std::memset(vbk::data_ptr(out[0]), 0, vbk::numel(out[0]) * (out[0].dtype.bits / 8));
  return 0;
}
"""


@pytest.fixture
def zero_lib(kernel_lib, tmp_path):
    src = tmp_path / "matmul_zero.cpp"
    src.write_text(ZERO_MATMUL)
    return kernel_lib(str(src))


def test_a_shape_binding_serves_only_calls_of_its_weight_shape(kernel_lib, zero_lib):
    vk.unbind_all()
    vk.bind("matmul", kernel_lib("matmul"))
    vk.bind_shape("matmul", (6, 4), zero_lib)
    assert vk.bound_shape("matmul", (6, 4)) == zero_lib and vk.bound_shape("matmul", (7, 4)) == ""
    a = torch.randn(5, 4)
    b6, b7 = torch.randn(4, 6), torch.randn(4, 7)
    assert torch.equal(torch.ops.vladbud.matmul(a, b6), torch.zeros(5, 6))  # B [K=4, N=6]: key (6, 4)
    assert torch.allclose(torch.ops.vladbud.matmul(a, b7), a @ b7, atol=1e-5)  # the type's library
    vk.unbind_all()
    assert vk.bound_shape("matmul", (6, 4)) == ""


@pytest.mark.parametrize("call", [lambda lib: vk.bind_shape("softmax", (4, 4), lib),
                                  lambda lib: vk.bind_shape("matmul", (0, 4), lib),
                                  lambda lib: vk.bind_shape("matmul", (4,), lib),
                                  lambda lib: vk.bind_shape("matmul", (4, 4), "/nonexistent/lib.so")])
def test_bad_shape_bindings_are_refused_by_name(zero_lib, call):
    with pytest.raises(RuntimeError, match="bind_shape: only matmul|two positive integers|cannot load"):
        call(zero_lib)


def test_each_shape_runs_its_own_folders_kernel_and_a_wrong_one_is_caught(kernel_lib, zero_lib):
    # The c_fc folder's "best" writes zeros: verify binds it at c_fc's shape, so the model with
    # matmul replaced is wrong, and verify says so (nothing handed over), whatever its own-shape
    # figure claimed.
    for fc_speedup in (1.3, 0.9):
        shapes = _shapes(1.6, fc_speedup)
        shapes[0]["library"] = kernel_lib("matmul")
        shapes[1]["library"] = zero_lib
        res = run(_matmul_req(kernel_lib, shapes))
        c = res["candidates"][0]
        assert c["libraries_by_shape"] == {f"N{V}xK{D}": kernel_lib("matmul"), f"N{4 * D}xK{D}": zero_lib}
        assert not c["correct"] and c["decision"] == "dropped" and "wrong in the model" in c["reason"], c
        assert res["verdict"] == "FAIL" and res["kernels_in"] == []


def test_a_weight_shape_measured_at_two_token_counts_runs_the_kernel_measured_at_the_models():
    rows = [{"dims": {"M": 32, "N": 64, "K": 64}, "own_shape_speedup": 1.8, "library": "/a.so"},
            {"dims": {"M": 1, "N": 64, "K": 64}, "own_shape_speedup": 2.5, "library": "/b.so"}]
    rows.append({"dims": {"M": 32, "N": 128, "K": 64}, "own_shape_speedup": None})  # its build failed
    got, libs = shape_selection({"type": "matmul", "shapes": rows}, 32)
    assert libs == {(64, 64): "/a.so"}  # M = 32 is what the model runs, whatever b measured
    assert [r["serves"] for r in got] == [True, False, False]  # b's and the failed folder's kernels never run
    _, libs = shape_selection({"type": "matmul", "shapes": rows}, 7)
    assert libs == {(64, 64): "/b.so"}  # neither M matches: the fastest


def test_a_folder_whose_kernel_did_not_build_leaves_its_shape_to_pytorch(kernel_lib):
    shapes = _shapes(1.6, 1.3)
    shapes[0]["library"] = kernel_lib("matmul")  # c_fc's row has no library: its build failed
    res = run(_matmul_req(kernel_lib, shapes, select=False))
    c = res["candidates"][0]
    assert c["only"] == {"matmul": [[V, D]]} and c["calls_per_forward"] == 1, c
    assert [r["serves"] for r in c["shapes"]] == [True, False]
