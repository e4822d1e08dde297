#!/usr/bin/env python3
"""VladBud's CPU starters against PyTorch, interleaved: the ratio that one slow phase cannot decide.

Usage: bench/cpu_interleaved.py [--pairs N] [--kernels a,b,...] [--out FILE.md]

`bench/cpu_starters.sh` times VladBud, then PyTorch, once per kernel; on a shared VM a slow phase
(memory bandwidth read 36-60 GB/s within minutes here) lands on one side. This script alternates
the two N times per kernel at its CPU benchmark size (fp32), in rotated order (V P, P V, ...):
  V: `vladbud bench --kernel K --timing-only --json --no-pytorch` (the evaluator's timing protocol:
     rotating input sets over more than 2x the LLC, median of the timed calls);
  P: `python -m vladbud.baseline REQ RES` on the same problem (PyTorch's op, the same rotation
     rule and the evaluator's default counts), the call `vladbud bench` makes for its PyTorch column.
and reports the median of the N pair ratios P/V with their range, plus, for the memory-bound
types, VladBud's achieved bandwidth against the bandwidth probed within each pair (the probe of
`vladbud targets --calibrate`, its bandwidth part alone: read for reduce and cross_entropy, the
better of the memmove copy and the non-temporal copy for the others; median over pairs). Correctness is not re-checked here: `bench/cpu_starters.sh` (or
`vladbud bench`) runs the five stages. Writes FILE.md and FILE.json (default
bench/results/cpu-interleaved.md). Needs build/vladbud and the .venv (scripts/setup.sh).
"""
import argparse
import datetime
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VB = os.path.join(HERE, "build", "vladbud")
PY = os.path.join(HERE, ".venv", "bin", "python")

# The CPU benchmark size of each type (src/kernels/<type>.cpp benchmark_size(Host)), by dimension.
SIZES = {
    "matmul": {"M": 1024, "N": 1024, "K": 1024},
    "softmax": {"R": 4096, "C": 4096},
    "layernorm": {"B": 4096, "D": 4096},
    "rmsnorm": {"M": 4096, "N": 4096},
    "reduce": {"M": 4096, "N": 4096},
    "cross_entropy": {"B": 32, "V": 128256},
    "flash_attention": {"B": 1, "H": 8, "S": 1024, "D": 64},
    "fused_mlp": {"B": 64, "D": 1024, "H": 2816},
    "rotary_embedding": {"B": 1, "H": 32, "S": 512, "D": 128},
}
MEMORY_BOUND = {"softmax", "layernorm", "rmsnorm", "reduce", "cross_entropy", "rotary_embedding"}
# Memory-bound types that read much more than they write (reduce: [M,N] -> [M]; cross_entropy:
# logits [B,V] -> [B]) are held against the probe's read bandwidth, the others (one row in, one
# row out) against the better of its two copies (memmove, and the copy with non-temporal stores
# in every call: memmove uses them only above a size threshold, and rmsnorm's streaming stores
# measured 116 % of the memmove copy).
READ_BOUND = {"reduce", "cross_entropy"}


def llc_bytes():
    """The largest cache level's size from sysfs (the evaluator's rotation rule); 32 MiB if unknown."""
    best = 0
    for p in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        t = open(p).read().strip()
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(t[-1], 1)
        best = max(best, int(t.rstrip("KMG")) * mult)
    return best or 32 * 2**20


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout


def build_probe(tmp):
    """Builds the ceiling probe (src/targets/probes/cpu_ceilings.cpp) with the CPU kernel flags."""
    exe = os.path.join(tmp, "cpu_ceilings")
    run(["g++", "-std=c++20", "-O3", "-march=native", "-fopenmp",
         os.path.join(HERE, "src", "targets", "probes", "cpu_ceilings.cpp"), "-o", exe])
    return exe


def probe_gbs(exe):
    """Memory bandwidth now: {"read", "copy", "triad", "copy_nt" (x86), "copy_best"} GB/s from the
    probe's bandwidth part alone (--bandwidth-only --quick: arrays of 4x the LLC, about 0.5 s), so
    it can sit inside a pair; copy_best = max(copy, copy_nt)."""
    out = run([exe, "--bandwidth-only", "--quick", "--threads", str(os.cpu_count() or 1)])
    bw = json.loads(out)["bw_gbs"]
    bw["copy_best"] = max(bw["copy"], bw.get("copy_nt", 0.0))
    return bw


def vladbud_us(kernel, tmp):
    out = run([VB, "bench", "--kernel", kernel, "--timing-only", "--json", "--no-pytorch",
               "--results", os.path.join(tmp, "results.tsv")], cwd=tmp)
    j = json.loads(out)
    return float(j["latency_us"]), j


def pytorch_us(req_path, tmp):
    res = os.path.join(tmp, "res.json")
    run([PY, "-m", "vladbud.baseline", req_path, res], cwd=os.path.join(HERE, "python"))
    with open(res) as f:
        r = json.load(f)
    return float(r["median_us"]), r["op"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--kernels", default=",".join(SIZES))
    ap.add_argument("--out", default=os.path.join(HERE, "bench", "results", "cpu-interleaved.md"))
    a = ap.parse_args()
    # The output folder first: a typo in --out must not cost the whole run at its end.
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    kernels = [k for k in a.kernels.split(",") if k]
    bad = [k for k in kernels if k not in SIZES]
    if bad or a.pairs < 1:
        sys.exit(f"cpu_interleaved.py: unknown kernel(s) {bad} (known: {', '.join(SIZES)}) "
                 f"or --pairs < 1")
    if not os.access(VB, os.X_OK) or not os.access(PY, os.X_OK):
        sys.exit("cpu_interleaved.py: build/vladbud or .venv missing: run scripts/setup.sh")
    commit = run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"]).strip()
    dirty = run(["git", "-C", HERE, "status", "--porcelain", "--untracked-files=no"]).strip()
    started = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        probe = build_probe(tmp)
        for k in kernels:
            abi = json.loads(run([VB, "bench", "--kernel", k, "--abi", "--json"], cwd=tmp))
            req = {"kernel": k, "dims": SIZES[k], "attrs": abi.get("attrs", {}), "dtype": "fp32",
                   "device": "cpu", "rotation_sets": 2,
                   "rotation_bytes": 2 * llc_bytes() + 1, "min_reps": 10, "min_time_s": 0.5,
                   "max_time_s": 4.0, "warmup": 3, "seed": 42}
            req_path = os.path.join(tmp, "req.json")
            with open(req_path, "w") as f:
                json.dump(req, f)
            kind = "read" if k in READ_BOUND else "copy_best"
            pairs, op, gbs, probes, pcts = [], "", [], [], []
            for i in range(a.pairs):
                # V P (B), P V (B), ...: B, the bandwidth probe, only for memory-bound types, so
                # that each pair's % of bandwidth is against the bandwidth of the same minute.
                order = ("V", "P") if i % 2 == 0 else ("P", "V")
                if k in MEMORY_BOUND:
                    order = order + ("B",) if i % 3 != 2 else ("B",) + order
                got = {}
                for side in order:
                    if side == "V":
                        got["V"], j = vladbud_us(k, tmp)
                        got["gbs"] = float(j.get("bandwidth_gb_s", 0) or 0)
                    elif side == "P":
                        got["P"], op = pytorch_us(req_path, tmp)
                    else:
                        got["B"] = probe_gbs(probe)
                pairs.append((got["V"], got["P"]))
                if k in MEMORY_BOUND:
                    gbs.append(got["gbs"])
                    probes.append(got["B"])
                    if got["gbs"] > 0 and got["B"].get(kind, 0) > 0:
                        pcts.append(100 * got["gbs"] / got["B"][kind])
                print(f"{k} pair {i + 1}/{a.pairs}: vladbud {got['V']:.1f} us, pytorch "
                      f"{got['P']:.1f} us" + (f", {got['gbs']:.1f} GB/s vs {kind} probe "
                                              f"{got['B'][kind]:.1f} GB/s" if "B" in got else ""),
                      file=sys.stderr)
            ratios = [p / v for v, p in pairs]
            row = {"kernel": k, "size": "x".join(str(v) for v in SIZES[k].values()), "dtype": "fp32",
                   "op": op, "pairs": [{"vladbud_us": v, "pytorch_us": p} for v, p in pairs],
                   "latency_us": statistics.median(v for v, _ in pairs),
                   "pytorch_us": statistics.median(p for _, p in pairs),
                   "speedup": statistics.median(ratios), "speedup_min": min(ratios),
                   "speedup_max": max(ratios), "load_average": os.getloadavg()[0]}
            if pcts:
                row["achieved_gbs"] = statistics.median(gbs)
                row["probe_kind"] = kind
                row["probe_gbs"] = [p[kind] for p in probes]
                row["pct_probe_pairs"] = pcts
                row["pct_probe"] = statistics.median(pcts)
            rows.append(row)
    head = {"date": started.strftime("%Y-%m-%d %H:%M UTC"), "commit": commit + ("-dirty" if dirty else ""),
            "machine": f"{platform.machine()}, {os.cpu_count()} logical cores",
            "command": "bench/cpu_interleaved.py " + " ".join(sys.argv[1:]), "pairs": a.pairs}
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump({**head, "rows": rows}, f, indent=1)
    md = [f"# CPU starters vs PyTorch, interleaved ({a.pairs} pairs per kernel, fp32)", "",
          f"- date: {head['date']}; commit {head['commit']}; {head['machine']}",
          f"- command: `{head['command']}`",
          "- protocol: per kernel, VladBud (`vladbud bench --timing-only`) and PyTorch "
          "(`python -m vladbud.baseline`, the op `vladbud bench` compares with) alternate in "
          "rotated order; speedup = the median of the pair ratios PyTorch/VladBud (range in "
          "brackets). For the memory-bound types each pair also runs the bandwidth probe "
          "(`cpu_ceilings --bandwidth-only --quick`: STREAM read and copy, and the copy with "
          "non-temporal stores, over arrays of 4x the "
          "LLC, in the rotation with the pair), and % of bandwidth is the median over pairs of "
          "VladBud's achieved GB/s / that pair's probe: the read bandwidth for reduce and "
          "cross_entropy (they read much more than they write), the better of the two copies "
          "(copy_best) for the others. Correctness: not re-run here (`bench/cpu_starters.sh` runs the five stages).", "",
          "| kernel | size | latency_us | pytorch_us (op) | speedup [min-max] | GB/s | probe GB/s per pair | % of probe (median [min-max]) | load |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pc = r.get("pct_probe_pairs") or []
        md.append(f"| {r['kernel']} | {r['size']} | {r['latency_us']:.1f} | {r['pytorch_us']:.1f} ({r['op']}) | "
                  f"**{r['speedup']:.2f}x** [{r['speedup_min']:.2f}-{r['speedup_max']:.2f}] | "
                  f"{r.get('achieved_gbs', float('nan')):.1f} | "
                  + (f"{r['probe_kind']}: " + ", ".join(f"{g:.1f}" for g in r["probe_gbs"]) if pc else "—")
                  + " | "
                  + (f"**{r['pct_probe']:.1f}%** [{min(pc):.0f}-{max(pc):.0f}]" if pc else "—")
                  + f" | {r['load_average']:.2f} |")
    with open(a.out, "w") as f:
        f.write("\n".join(md) + "\n")
    print(a.out)


if __name__ == "__main__":
    main()
