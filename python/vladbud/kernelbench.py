"""`python -m vladbud.kernelbench REQUEST.json RESULT.json`: the PyTorch half of
`vladbud kernelbench` (the C++ CLI finds the problems, writes the workspace and scores).

REQUEST {"action": "map", "problems": [{"problem": FILE, "label": "level1/23_Softmax"}]} ->
  {"results": [...]}, one per problem: map_problem's result plus "model_new" (the ModelNew source: a VladBud kernel call through the layout step when
  mapped, else the problem's Model renamed, as a starting point) and "program_kb" (the agent's
  instructions, Markdown).
REQUEST {"action": "bench", ...} -> kb_eval.evaluate (its docstring lists the fields).
Bad input (a malformed problem or candidate file) exits 2 with "error: <message>".
"""
import json

from . import BridgeError
from .kb_eval import evaluate
from .kb_problem import agent_model_new_source, map_problem, model_new_source
from .loader import read_request

_PROGRAM = """# {label}: write a faster `ModelNew`

Problem file: `{problem}` (KernelBench format: `Model`, `get_inputs()`, `get_init_inputs()`).
Inputs: {inputs}. Init inputs: {init}. Ops in its forward: {ops}.
{mapping}
## What to do

Edit `model_new.py` in this folder: `class ModelNew(nn.Module)` with the same constructor
arguments and forward signature as `Model`, returning the same values (shape and dtype) with your
own kernels (CUDA through `torch.utils.cpp_extension.load_inline`, Triton, or C++ on the CPU).
Evaluate it with:

    vladbud kernelbench bench --kb-root KB_ROOT --level {level} --problem {pid}

## How it is judged (and what is rejected)

KernelBench's protocol: the same seeded weights for `Model` and `ModelNew`, 5 correctness trials
on `get_inputs()`, `allclose(atol=rtol=1e-2)`; timing with device events (GPU) or wall clock
(CPU), speedup = `Model`'s median time over yours. VladBud rejects, naming the guard:
`no_kernel` (your forward runs the reference's own torch ops), `try_except_fallback` (a
try/except that does not re-raise), `constant_output` (all outputs equal, e.g. zeros),
`stale_output` (results cached per input buffer: inputs get new values in the same buffers),
`input_mutation`, `side_stream` (work on a stream the timing does not see), `torch_patched`
(changing torch or the reference at import). It also reports the error against a float64 run
of `Model` (TF32-like error is noted; `--strict` enforces it).
"""


def program_kb(m, problem, label):
    """The agent's instructions for a problem (Markdown) from its mapping `m`."""
    level, _, stem = label.partition("/")
    if m.get("mapped"):
        mapping = (f"\nIt maps to VladBud's **{m['type']}** kernel ({', '.join(f'{k}={v}' for k, v in m['dims'].items())}, "
                   f"{m['dtype']}): the kernel source in this folder is the editable one (`vladbud optimize --kernel "
                   f"THIS_FOLDER` tunes it; `vladbud bench` in this folder runs VladBud's five stages on it), and "
                   f"`model_new.py` calls it. Layout step: {'; '.join(m['layout_steps']) or 'none'}.\n")
    else:
        mapping = f"\nIt does not map to one of VladBud's nine kernel types: {m['reason']}.\n"
    return _PROGRAM.format(label=label, problem=problem, inputs=m.get("inputs"), init=m.get("init_inputs"),
                           ops=", ".join(m.get("ops") or []) or "none", mapping=mapping,
                           level=level.replace("level", ""), pid=stem.split("_")[0])


def _map_one(problem, label):
    m = map_problem(problem)
    m["model_new"] = (model_new_source(m, label) if m["mapped"]
                      else agent_model_new_source(problem, label, m["reason"]))
    m["program_kb"] = program_kb(m, problem, label)
    return m


def run(req):
    """Dispatches on req["action"] ("map" or "bench"); BridgeError for any other."""
    action = req.get("action")
    if action == "map":
        return {"results": [_map_one(p["problem"], p.get("label", p["problem"])) for p in req["problems"]]}
    if action == "bench":
        return evaluate(req)
    raise BridgeError(f"unknown action '{action}' (map, bench)")


def main(argv):
    if len(argv) != 2:
        raise BridgeError("usage: python -m vladbud.kernelbench REQUEST.json RESULT.json")
    res = run(read_request(argv[0]))
    with open(argv[1], "w") as f:
        json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    from .loader import main_wrapper
    main_wrapper(main)
