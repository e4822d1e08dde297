"""`python -m vladbud.in_use REQUEST.json RESULT.json`: one call of a kernel library the way a
user's model calls it (issue 18 class 6).

`vladbud bench` evaluates a candidate in a sandboxed runner whose environment differs from a
user's program (scrubbed environment variables, an unprivileged uid, a private /tmp, no
processes). A kernel that detects that and behaves differently under evaluation would get a
verdict that does not hold in use. So after the evaluator's verdict, bench runs the same library
once more through the path a model uses -- torch.ops.vladbud.<type> in this ordinary Python
process, with the user's own environment, working directory and uid -- on inputs the parent
generated, and compares the output with its fp64 oracle.

REQUEST: {"kernel": one of the nine types, "library": the built .so, "device": "cpu"|"cuda",
"inputs": [{"file", "dtype", "shape"}...] (raw little-endian bytes, ABI order), "attrs": [float
...] (ABI order), "outputs": [{"file", "dtype", "shape"}...] (where to write the outputs)}.
The op is called as torch.ops.vladbud.<type>(*inputs, *attrs) (the schemas of
vladbud.kernels). RESULT: {"ok": true, "torch": version}. A kernel that fails raises, and the
message reaches bench as the reason.
"""
import json

import torch

_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
           "fp64": torch.float64, "int64": torch.int64}


def _load(desc, device):
    dt = _DTYPES[desc["dtype"]]
    with open(desc["file"], "rb") as f:
        raw = bytearray(f.read())
    t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
    return t.reshape(desc["shape"]).clone().to(device)


def run(req):
    """Calls the library once through torch.ops.vladbud and writes its outputs; returns RESULT."""
    from . import kernels
    device = req.get("device", "cpu")
    kernels.bind(req["kernel"], req["library"], device)
    try:
        ins = [_load(d, device) for d in req["inputs"]]
        op = getattr(torch.ops.vladbud, req["kernel"])
        out = op(*ins, *[float(a) for a in req.get("attrs", [])])
        if device == "cuda":
            torch.cuda.synchronize()
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(req["outputs"]):
            raise RuntimeError(f"the op returned {len(outs)} outputs, expected "
                               f"{len(req['outputs'])}")
        for t, d in zip(outs, req["outputs"]):
            want = _DTYPES[d["dtype"]]
            if t.dtype != want or list(t.shape) != list(d["shape"]):
                raise RuntimeError(f"the op returned {t.dtype} {list(t.shape)}, expected "
                                   f"{want} {d['shape']}")
            with open(d["file"], "wb") as f:
                f.write(t.detach().reshape(-1).cpu().view(torch.uint8).numpy().tobytes())
    finally:
        kernels.unbind_all()
    return {"ok": True, "torch": torch.__version__}


def main(argv):
    if len(argv) != 2:
        from . import BridgeError
        raise BridgeError("usage: python -m vladbud.in_use REQUEST.json RESULT.json")
    with open(argv[0]) as f:
        res = run(json.load(f))
    with open(argv[1], "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    from .loader import main_wrapper
    main_wrapper(main)
