"""The profile re-measures on a contended machine and says so (issue 14 item 6)."""
import pytest

from conftest import TINY_GPT2, model_path
from vladbud import profile as P


def _req(**kw):
    r = {"model": model_path("gpt2.py"), "class_name": "GPT2", "model_args": TINY_GPT2,
         "input_shape": "1,8", "dtype": "fp32", "device": "cpu", "warmup": 1, "iters": 1,
         "remeasure_pause_s": 0.0}
    r.update(kw)
    return r


def test_contended_machine_is_remeasured_and_flagged(monkeypatch):
    loads = iter([50.0, 50.0, 40.0, 40.0, 45.0, 45.0])
    monkeypatch.setattr(P, "load_average", lambda: next(loads))
    res = P.run(_req(remeasure=2))
    assert res["profile_attempts"] == 3
    assert res["load_average"] == 40.0  # the least loaded attempt is kept
    assert any("contended" in w for w in res["warnings"]), res["warnings"]


def test_idle_machine_is_measured_once(monkeypatch):
    monkeypatch.setattr(P, "load_average", lambda: 0.0)
    res = P.run(_req())
    assert res["profile_attempts"] == 1
    assert not any("contended" in w for w in res["warnings"])


@pytest.mark.parametrize("load,cores,expected", [(3.5, 2, True), (2.9, 2, False), (17.5, 16, True)])
def test_contended_rule(load, cores, expected):
    assert P.contended(load, cores) is expected
