"""Profiler events -> a flat, JSON-serialisable trace in which each unit of time is counted once.

A trace is a list of records (the same format is used for recorded fixtures in tests/fixtures):
  {"id": int, "name": str, "kind": "op" | "kernel", "parent": id | None,
   "start_us": float, "cpu_us": float (total, ops), "device_us": float (kernels),
   "shapes": [[...], ...], "dtypes": [str, ...], "concrete": [...]}
`parent` of an op is the enclosing op (None for a top-level op); `parent` of a kernel is the op
that launched it (None when the profiler could not link it).

Counting rule (entries()): the unit is the top-level op. Its time is the sum of the device
kernels launched anywhere below it when the run is on a GPU, else its total CPU time. Its own
kernels are part of it, never a second entry; a kernel with no op to belong to is its own
entry. So the sum over entries is the profiled time, with nothing in it twice.
"""
from collections import defaultdict

_DT = {"float": "fp32", "c10::Half": "fp16", "c10::BFloat16": "bf16", "double": "fp64",
       "long int": "int64", "int": "int32", "bool": "bool", "c10::complex<float>": "complex64"}


def dtype_name(profiler_dtype: str) -> str:
    """Profiler dtype string ('c10::Half') -> VladBud name ('fp16'); unknown ones unchanged."""
    return _DT.get(profiler_dtype, profiler_dtype)


def from_profiler(prof) -> list:
    """Records from a finished torch.profiler.profile (record_shapes=True)."""
    kr = prof.profiler.kineto_results
    t0 = kr.trace_start_ns()
    dtypes = {}
    for ke in kr.events():
        dtypes[(ke.name(), (ke.start_ns() - t0) / 1000.0)] = [dtype_name(d) for d in ke.dtypes()]
    out = []
    kid = 10 ** 9
    # Our own ids, one per FunctionEvent object: torch's `id` fields are not unique on CUDA
    # traces (several threads), and a collision made an event its own ancestor.
    evs = [e for e in prof.events() if e.device_type.name == "CPU"]
    own = {id(e): i for i, e in enumerate(evs)}
    for e in evs:
        start = e.time_range.start
        par = own.get(id(e.cpu_parent)) if e.cpu_parent is not None else None
        out.append({"id": own[id(e)], "name": e.name, "kind": "op", "parent": par,
                    "start_us": start, "cpu_us": e.cpu_time_total, "device_us": 0.0,
                    "shapes": [list(s) for s in e.input_shapes],
                    "dtypes": dtypes.get((e.name, start), []),
                    "concrete": _jsonable(getattr(e, "concrete_inputs", []) or [])})
        for k in e.kernels:
            kid += 1
            out.append({"id": kid, "name": k.name, "kind": "kernel", "parent": own[id(e)],
                        "start_us": start, "cpu_us": 0.0, "device_us": float(k.duration),
                        "shapes": [], "dtypes": [], "concrete": []})
    return out


def _jsonable(v):
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


def from_chrome_trace(doc: dict) -> list:
    """Records from a Chrome trace written by torch.profiler (export_chrome_trace): cpu_op events
    nest by time on their thread; kernels link to the op that launched them through the
    'External id' shared with the cpu_op (and the runtime launch's correlation id)."""
    evs = doc.get("traceEvents", doc if isinstance(doc, list) else [])
    ops = [e for e in evs if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    kernels = [e for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X"]
    out, by_ext = [], {}
    by_tid = defaultdict(list)
    for i, e in enumerate(ops):
        by_tid[e.get("tid")].append((float(e["ts"]), -float(e["dur"]), i, e))
    for tid, lst in by_tid.items():
        lst.sort()
        stack = []  # (end, id)
        for ts, neg_dur, i, e in lst:
            end = ts - neg_dur
            while stack and stack[-1][0] <= ts:  # the enclosing candidate ended before us
                stack.pop()
            parent = stack[-1][1] if stack else None
            a = e.get("args", {})
            rec = {"id": i, "name": e["name"], "kind": "op", "parent": parent, "start_us": ts,
                   "cpu_us": -neg_dur, "device_us": 0.0,
                   "shapes": [s if isinstance(s, list) else [] for s in a.get("Input Dims", [])],
                   "dtypes": [dtype_name(t) for t in a.get("Input type", [])],
                   "concrete": a.get("Concrete Inputs", [])}
            out.append(rec)
            ext = a.get("External id")
            if ext is not None:
                by_ext.setdefault(ext, rec["id"])
            stack.append((end, i))
    # The innermost op with the External id launches the kernel; External ids are per top op
    # chain in torch's exporter, so we keep the first (outermost) and let entries() walk up.
    for j, k in enumerate(kernels):
        a = k.get("args", {})
        out.append({"id": 10 ** 9 + j, "name": k["name"], "kind": "kernel",
                    "parent": by_ext.get(a.get("External id")), "start_us": float(k["ts"]),
                    "cpu_us": 0.0, "device_us": float(k["dur"]), "shapes": [], "dtypes": [],
                    "concrete": []})
    return out


def entries(records: list, on_device: bool) -> list:
    """Top-level units of time, in start order: [{"op": record or None, "kernels": [names],
    "us": float, "records": [op records below it, depth first]}]. See the module doc for the
    counting rule. Raises nothing on an empty list (returns [])."""
    by_id = {r["id"]: r for r in records}
    children = defaultdict(list)
    for r in records:
        if r["parent"] is not None and r["parent"] in by_id:
            children[r["parent"]].append(r)

    def top_of(r):
        seen = set()
        while r["parent"] is not None and r["parent"] in by_id and r["id"] not in seen:
            seen.add(r["id"])
            r = by_id[r["parent"]]
        return r

    units = {}
    order = []
    for r in records:
        if r["kind"] != "op":
            continue
        if r["parent"] is None or r["parent"] not in by_id:
            units[r["id"]] = {"op": r, "kernels": [], "us": 0.0 if on_device else float(r["cpu_us"])}
            order.append(r["id"])
    orphans = []
    for r in records:
        if r["kind"] != "kernel":
            continue
        if r["parent"] is None or r["parent"] not in by_id:
            orphans.append({"op": None, "kernels": [r["name"]], "us": float(r["device_us"]),
                            "start_us": r["start_us"]})
            continue
        u = units.get(top_of(by_id[r["parent"]])["id"])
        if u is None:
            continue
        u["kernels"].append(r["name"])
        if on_device:
            u["us"] += float(r["device_us"])
    res = [units[i] for i in order]
    res.sort(key=lambda u: u["op"]["start_us"])
    for u in res:
        u["start_us"] = u["op"]["start_us"]
        u["children"] = _ops_below(u["op"], children)
    res += orphans
    res.sort(key=lambda u: u["start_us"])
    return res


def _ops_below(r, children):
    """The op records below `r`, depth first; iterative, and each record once, so that a deep
    nesting or a parent cycle in a trace cannot exhaust the recursion limit."""
    out, seen = [], {r["id"]}
    stack = [c for c in reversed(children.get(r["id"], [])) if c["kind"] == "op"]
    while stack:
        c = stack.pop()
        if c["id"] in seen:
            continue
        seen.add(c["id"])
        out.append(c)
        stack.extend(x for x in reversed(children.get(c["id"], [])) if x["kind"] == "op")
    return out
