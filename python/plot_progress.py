#!/usr/bin/env python3
"""Draws workspace/progress.png for `vladbud report`.

Usage: plot_progress.py PROGRESS_JSON OUT_PNG
PROGRESS_JSON: {kernel_dir: {"baseline_us": float, "baseline_contended": bool (optional),
"points": [{"experiment", "speedup", "best_speedup", "kind": "kept"|"reverted"|"failed"}, ...]},
...}
One panel per kernel: experiment number vs speedup over the starter (log scale; each point's
ratio is measured against the best of its time, chained over the kept versions); the line is
the best so far, kept, reverted and failed points are drawn differently. A starter timed while
other work competed for the cores ("baseline_contended") is marked "*" in its panel's title.
Exit 3 when matplotlib is missing.
"""
import json
import sys


def panel_title(kdir, entry):
    """The title of kernel folder `kdir`'s panel: "01_softmax (starter 1534.3 us)", with the
    starter's figure marked "*" and said to be untrustworthy when `entry`'s "baseline_contended"
    is true (report.md marks the same figure)."""
    if entry.get("baseline_contended") is True:
        return (f"{kdir} (starter {entry['baseline_us']:.1f} us*)\n"
                "* timed while other work competed for the cores: not trustworthy")
    return f"{kdir} (starter {entry['baseline_us']:.1f} us)"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter
    except ImportError:
        print("matplotlib is not installed", file=sys.stderr)
        return 3
    with open(sys.argv[1]) as f:
        data = json.load(f)
    kernels = sorted(data)
    n = max(1, len(kernels))
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.8 * n), squeeze=False)
    for ax, k in zip(axes[:, 0], kernels):
        pts = data[k]["points"]
        xs = [p["experiment"] for p in pts]
        ax.step(xs, [p["best_speedup"] for p in pts], where="post", color="tab:blue",
                label="best so far")
        for kind, style in (("reverted", dict(c="0.6", marker=".", s=12)),
                            ("kept", dict(c="tab:green", marker="o", s=40)),
                            ("failed", dict(c="tab:red", marker="x", s=16))):
            sel = [p for p in pts if p["kind"] == kind and p["speedup"] > 0]
            ax.scatter([p["experiment"] for p in sel], [p["speedup"] for p in sel],
                       label=kind, **style)
        ax.axhline(1.0, color="k", lw=0.5)
        ax.set_yscale("log")
        times = FuncFormatter(lambda v, _: f"{v:.2f}x")  # "1.20x", not the log axis' 1.2x10^0
        ax.yaxis.set_major_formatter(times)
        lo, hi = ax.get_ylim()
        # Within a decade the log axis has no major tick to label: its minor ticks get the labels.
        ax.yaxis.set_minor_formatter(times if hi / max(lo, 1e-12) < 10 else NullFormatter())
        ax.set_title(panel_title(k, data[k]), fontsize=10)
        ax.set_xlabel("experiment")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # experiments are whole numbers
        ax.set_ylabel("speedup vs starter")
        ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
