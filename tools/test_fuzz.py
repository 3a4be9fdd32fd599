"""tools/dev/fuzz.py: a few seeds of each mode pass on CPU, and a wrong attention is caught."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dev"))


@pytest.mark.parametrize("mode,seeds", [("variants", "0:2"), ("jax_nn", "0:3"),
                                        ("sharded", "0:2")])
def test_fuzz_modes_pass(mode, seeds, capsys):
    import fuzz

    assert fuzz.main([mode, "--seeds", seeds]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert " 0 failed" in summary and " 0 passed" not in summary, summary


def test_fuzz_catches_a_wrong_attention(monkeypatch, capsys):
    """An output 1% off on every row fails each case, with the seed to rerun it."""
    import fuzz

    import kvax.ops

    right = kvax.ops.flash_attention

    def off_by_one_percent(*args, **kwargs):
        result = right(*args, **kwargs)
        return (result[0] * 1.01, result[1]) if isinstance(result, tuple) else result * 1.01

    monkeypatch.setattr(kvax.ops, "flash_attention", off_by_one_percent)
    assert fuzz.main(["variants", "--seeds", "3:5"]) == 1
    out = capsys.readouterr().out
    assert "FAIL variants seed 3" in out and "FAIL variants seed 4" in out and " 2 failed" in out


def test_fuzz_jobs_share_the_seeds_between_processes(capsys):
    """--jobs 2: each seed runs once, in one of two child processes, and the summary counts
    them all."""
    import fuzz

    assert fuzz.main(["jax_nn", "--seeds", "0:3", "--jobs", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[3] for line in out if line.startswith("ok ")) == ["0", "1", "2"]
    assert "in 2 processes, 3 passed, 0 failed" in out[-1], out[-1]


def test_fuzz_time_limit_stops_before_a_new_case(monkeypatch, capsys):
    """--time-limit: no case starts after the limit, and the summary counts the cases that ran,
    not the seeds asked for (here the clock jumps 10 s at each reading: two cases start before
    45 s)."""
    import fuzz

    clock = iter(range(0, 10_000, 10))
    monkeypatch.setattr(fuzz.time, "time", lambda: float(next(clock)))
    monkeypatch.setitem(fuzz.CASES, "jax_nn", lambda seed: None)
    assert fuzz.main(["jax_nn", "--seeds", "0:50", "--time-limit", "45"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[3] for line in out if line.startswith("ok ")] == ["0", "1"]
    assert out[-2].startswith("stop jax_nn: --time-limit 45 s reached before seed 2")
    assert "seeds 0:50, 2 passed, 0 failed" in out[-1], out[-1]
