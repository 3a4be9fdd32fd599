"""tools/dev/fuzz.py: a few seeds of each mode pass on CPU, and a wrong attention is caught."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dev"))


@pytest.mark.parametrize("mode,seeds", [("variants", "0:2"), ("mosaic", "0:2"),
                                        ("jax_nn", "0:3"), ("sharded", "0:2"),
                                        ("sharded_mosaic", "5:6")])
def test_fuzz_modes_pass(mode, seeds, capsys):
    import fuzz

    assert fuzz.main([mode, "--seeds", seeds]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert " 0 failed" in summary and " 0 passed" not in summary, summary


def _one_percent_off(monkeypatch):
    """kvax.ops.flash_attention made to return its output 1% off on every row (what the fuzz's
    cases call, imported at each call)."""
    import kvax.ops

    right = kvax.ops.flash_attention

    def off_by_one_percent(*args, **kwargs):
        result = right(*args, **kwargs)
        return (result[0] * 1.01, result[1]) if isinstance(result, tuple) else result * 1.01

    monkeypatch.setattr(kvax.ops, "flash_attention", off_by_one_percent)


def test_fuzz_catches_a_wrong_attention(monkeypatch, capsys):
    """An output 1% off on every row fails each case, with the seed to rerun it."""
    import fuzz

    _one_percent_off(monkeypatch)
    assert fuzz.main(["variants", "--seeds", "3:5"]) == 1
    out = capsys.readouterr().out
    assert "FAIL variants seed 3" in out and "FAIL variants seed 4" in out and " 2 failed" in out


def test_sharded_mosaic_catches_a_wrong_attention(monkeypatch, capsys):
    """The sharded Hopper cases go through the float64 reference's check too: an output 1%
    off fails."""
    import fuzz

    _one_percent_off(monkeypatch)
    assert fuzz.main(["sharded_mosaic", "--seeds", "4:5"]) == 1
    assert "FAIL sharded_mosaic seed 4" in capsys.readouterr().out


@pytest.mark.parametrize("mode,seed", [("mosaic", 25), ("sharded_mosaic", 5)])
def test_a_case_that_raises_says_what_it_was(mode, seed, monkeypatch, capsys):
    """A case whose attention raises (as 8 mosaic cases did on an H200 in session 60, with
    shared memory over the limit) fails with its error and the case's description."""
    import fuzz
    import kvax.ops

    def too_big(*args, **kwargs):
        raise RuntimeError("Shared memory requested exceeds device resources")

    monkeypatch.setattr(kvax.ops, "flash_attention", too_big)
    assert fuzz.main([mode, "--seeds", f"{seed}:{seed + 1}"]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {mode} seed {seed}: RuntimeError: Shared memory requested" in out, out
    assert "\n  case: " in out and "H128 " in out and "cap=" in out, out


def test_fuzz_catches_an_ulp_on_rows_that_see_one_key(monkeypatch, capsys):
    """An output one ulp off only on rows that see one key (what the capped 16-bit forwards did
    before session 54) passes the tensor-wide bound on seed 4 (float16, a window with
    left 4, right 29, bidirectional, some rows alone in their window), but not the one-key
    rows' check."""
    import fuzz
    import jax
    import jax.numpy as jnp

    import kvax.ops
    from kvax_testing import mask_terms, reference_mask

    right = kvax.ops.flash_attention

    def one_ulp_off(q, k, v, qp, qs, kp, ks, **kwargs):
        result = right(q, k, v, qp, qs, kp, ks, **kwargs)
        out = result[0] if isinstance(result, tuple) else result
        terms = mask_terms(kwargs.get("is_causal", True), kwargs.get("local_window_size"))
        alone = reference_mask(qp, qs, kp, ks, mask_terms=terms).sum(axis=2) == 1
        held = jax.lax.stop_gradient(out)
        ulp = jnp.nextafter(held, jnp.asarray(jnp.inf, held.dtype)) - held
        out = jnp.where(alone[:, :, None, None], out + ulp, out)
        return (out, result[1]) if isinstance(result, tuple) else out

    monkeypatch.setattr(kvax.ops, "flash_attention", one_ulp_off)
    assert fuzz.main(["variants", "--seeds", "4:5"]) == 1
    out = capsys.readouterr().out
    assert "FAIL variants seed 4" in out and "FAIL  1-key" in out, out
    assert "FAIL    out" not in out, out  # the tensor-wide bound alone would have passed it


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


def test_fuzz_interrupted_still_prints_its_summary():
    """Stopped as `timeout` stops it (its signal to fuzz.py, then the same to fuzz.py's process
    group, so the parent of --jobs 2 gets it twice), fuzz.py stops its children and still prints
    the summary: the finished cases passed, the running ones cut short, exit status 0."""
    import signal
    import subprocess
    import time

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dev", "fuzz.py")
    run = subprocess.Popen([sys.executable, script, "jax_nn", "--seeds", "0:40", "--jobs", "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    lines = []
    for line in run.stdout:  # the first finished case, then the signals
        lines.append(line.rstrip("\n"))
        if line.startswith("ok "):
            run.send_signal(signal.SIGTERM)
            time.sleep(0.3)  # the second while the parent stops its children (it died there)
            os.killpg(run.pid, signal.SIGTERM)
            break
    rest, _ = run.communicate(timeout=120)
    lines += rest.splitlines()
    oks = sum(line.startswith("ok ") for line in lines)
    cuts = sum(line.startswith("cut jax_nn seed ") for line in lines)
    assert run.returncode == 0, lines
    assert f"in 2 processes, {oks} passed, 0 failed" in lines[-1], lines
    assert f"interrupted: {cuts} case{'s' * (cuts != 1)} cut short" in lines[-1], lines
    assert oks < 40, lines


# Stand-in children for in_processes: the first reports its cut case and its summary when
# stopped, then lingers (as JAX's teardown can) until killed; the second never answers (as in a
# compile) and is killed with nothing said.
_CHILD = """
import signal, sys, time
first = int(sys.argv[sys.argv.index("--seeds") + 1].split(":")[0])
def stopped(*_):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"cut jax_nn seed {first + 1}: interrupted", flush=True)
    print(f"jax_nn: seeds {first}:{first + 2}, 1 passed, 0 failed, 0 skipped (sharded: fewer "
          "than 2 devices), interrupted: 1 case cut short, 1 s", flush=True)
signal.signal(signal.SIGINT, stopped if first == 0 else signal.SIG_IGN)
print(f"ok   jax_nn seed {first} (0.1 s)", flush=True)  # (the handler set before the signal)
while True:
    time.sleep(0.1)
"""

_PARENT = """
import subprocess, sys
sys.path.insert(0, sys.argv[1])
import fuzz
real = subprocess.Popen
fuzz.subprocess.Popen = lambda cmd, **kw: real([cmd[0], "-c", sys.argv[2]] + cmd[2:], **kw)
sys.exit(fuzz.main(["jax_nn", "--seeds", "0:4", "--jobs", "2"]))
"""


def test_fuzz_counts_each_cut_case_once():
    """A child killed after its own summary (which counted its cut case) adds nothing more to the
    cases cut short; one killed before it adds its running case. (Session 65's GPU fuzz read 3
    for 2: a child took longer than the 5 s grace to exit after its summary.)"""
    import signal
    import subprocess

    dev = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dev")
    run = subprocess.Popen([sys.executable, "-c", _PARENT, dev, _CHILD], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    lines, oks = [], 0
    for line in run.stdout:  # both children's first case, then the signal
        lines.append(line.rstrip("\n"))
        oks += line.startswith("ok ")
        if oks == 2:
            run.send_signal(signal.SIGINT)
            break
    rest, _ = run.communicate(timeout=60)
    lines += rest.splitlines()
    assert run.returncode == 0, lines
    assert "in 2 processes, 2 passed, 0 failed" in lines[-1], lines
    assert "interrupted: 2 cases cut short" in lines[-1], lines


def test_gpu_fuzz_reports_the_fuzz_exit_status(tmp_path):
    """gpu_env.sh's gpu_fuzz: fuzz.py's own status (not grep's), its ok lines counted, XLA's log
    lines dropped from the log. A stand-in fuzz.py prints a pass, a failure and a log line."""
    import subprocess

    env_sh = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_env.sh")
    text = open(env_sh).read()
    function = text[text.index("gpu_fuzz() {"):text.index("\n}\n", text.index("gpu_fuzz() {")) + 3]
    (tmp_path / "tools" / "dev").mkdir(parents=True)
    (tmp_path / "tools" / "dev" / "fuzz.py").write_text(
        "import sys\nprint('ok   variants seed 1 (1.0 s)')\nprint('W0000 00:00 an XLA line')\n"
        "print('FAIL variants seed 2: out 1e-2 off')\nsys.exit(1)\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(sys.executable)
    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    run = subprocess.run(["bash", "-c", function + "gpu_fuzz $PWD/f.txt 60 variants --seeds 1:3"],
                         cwd=tmp_path, env={**os.environ, "PATH": path}, capture_output=True,
                         text=True, timeout=60)
    assert run.stdout.splitlines()[0] == "fuzz variants --seeds 1:3 -> f.txt: rc 1, 1 ok", run
    assert "FAIL variants seed 2" in run.stdout
    assert "W0000" not in (tmp_path / "f.txt").read_text()


def test_kernels_counts_the_custom_calls_of_forward_and_backward():
    """fuzz._kernels names the GPU kernels a case lowers to, by their custom calls: here a
    stand-in forward calls "mosaic_gpu_v2" and its backward "triton_kernel_call" (lowered on
    CPU, never run)."""
    import fuzz
    import jax

    from kvax_testing import packed_batch

    def kernel(name, x):
        return jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    @jax.custom_vjp
    def stand_in(q):
        return kernel("mosaic_gpu_v2", q)

    def forward(q):
        out = stand_in(q)
        return out, out  # the backward reads the forward's output, as attention's does

    stand_in.defvjp(forward, lambda out, g: (kernel("triton_kernel_call", g * out),))

    def attention(q, k, v, *layout, sinks=None):
        return stand_in(q) + 0 * (k.sum() + v.sum())

    batch = packed_batch(0, batch=1, kv_len=20, num_heads=2, num_kv_heads=2, head_dim=8)
    assert fuzz._kernels(attention, batch, None) == "[mosaic 1, triton 1]"
    assert fuzz._kernels(lambda q, k, v, *a: q + 0 * (k.sum() + v.sum()), batch, None) == "[]"
