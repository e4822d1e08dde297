"""python/plot_progress.py (workspace/progress.png of `vladbud report`): the panel titles."""
import json
import subprocess
import sys

import plot_progress
from conftest import ROOT


def test_a_starter_timed_under_contention_is_marked_in_its_panel_title():
    # report.md marks a starter figure timed while other work competed for the cores; the plot
    # quoted the same figure ("starter 1534.3 us") without the mark.
    busy = {"baseline_us": 1534.26, "baseline_contended": True, "points": []}
    title = plot_progress.panel_title("01_fused_mlp", busy)
    assert title.startswith("01_fused_mlp (starter 1534.3 us*)"), title
    assert "competed for the cores" in title
    quiet = {"baseline_us": 1534.26, "baseline_contended": False, "points": []}
    assert plot_progress.panel_title("01_fused_mlp", quiet) == "01_fused_mlp (starter 1534.3 us)"
    # progress.json written before the flag existed: no mark.
    old = {"baseline_us": 52.0, "points": []}
    assert plot_progress.panel_title("02_layernorm", old) == "02_layernorm (starter 52.0 us)"


def test_the_plot_is_drawn_with_a_contended_starter(tmp_path):
    data = {"01_fused_mlp": {"baseline_us": 1534.26, "baseline_contended": True, "points": [
        {"experiment": 1, "latency_us": 1400.0, "speedup": 1.1, "best_speedup": 1.1,
         "kind": "kept"}]}}
    src = tmp_path / "progress.json"
    src.write_text(json.dumps(data))
    out = tmp_path / "progress.png"
    r = subprocess.run([sys.executable, f"{ROOT}/python/plot_progress.py", str(src), str(out)],
                       capture_output=True, text=True)
    if r.returncode == 3:  # matplotlib missing
        return
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
