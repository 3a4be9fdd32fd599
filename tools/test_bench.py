"""The benchmark's CPU paths run and check what they print (timings are never asserted)."""

import re

import jax
import pytest

import bench


def test_cpu_main_job_checks_against_reference(tmp_path, capsys):
    ok = bench.run_cpu(bench.parse_args(["mha_bwd", "--seq-lens", "192", "--num-segments", "3",
                                         "--num-pad-tokens", "20", "--out", str(tmp_path)]))
    out = capsys.readouterr().out
    assert ok
    assert "fwd mask, batch row 0" in out and "██" in out
    for name in ("out", "dq", "dk", "dv"):
        assert re.search(rf"^ok\s+{name}: error", out, re.M), name
    assert "need a CUDA GPU: skipped" in out


def test_context_parallel_mode_on_fake_devices(tmp_path, capsys):
    args = bench.parse_args(["mha_cp_bwd", "--seq-lens", "256", "--doc-len", "100",
                             "--num-pad-tokens", "16", "--heads", "4", "--kv-heads", "2",
                             "--head-dim", "16", "--dtype", "float32", "--repeats", "1",
                             "--cp-sizes", "1", "4", "--out", str(tmp_path)])
    (res,) = bench.run_cp(args, devices=jax.devices("cpu")[:4])
    one, four = res["cp"]
    assert one["devices"] == 1 and four["devices"] == 4 and four["permuted"] == "true"
    assert one["workload"]["num_segments"] == 3  # 256 / 100, rounded
    assert len(four["shard_fwd_ms"]) == 4 and len(four["shard_fwdbwd_ms"]) == 4
    assert four["rel_err_vs_one_device"] < 1e-5  # the sharded result is one device's
    for key in ("fwd_ms", "fwdbwd_ms", "allgather_ms", "allgather_reducescatter_ms",
                "shard_fwdbwd_slowest_over_fastest", "collectives_share_fwdbwd",
                "fwdbwd_vs_one_device_first_length"):
        assert four[key] > 0, key
    assert (tmp_path / "cp_results.jsonl").read_text().count("\n") == 2
    assert "cp=4" in capsys.readouterr().out


def test_context_parallel_striped_matches_one_device(tmp_path):
    args = bench.parse_args([
        "mha_cp", "--seq-lens", "256", "--doc-len", "60", "--num-pad-tokens", "9",
        "--heads", "4", "--kv-heads", "2", "--head-dim", "16", "--dtype", "float32",
        "--repeats", "1", "--cp-sizes", "1", "2", "--out", str(tmp_path),
        "--permute-tokens-for-load-balance", "striped"])
    (res,) = bench.run_cp(args, devices=jax.devices("cpu")[:2])
    assert res["cp"][1]["permuted"] == "striped"
    assert res["cp"][1]["rel_err_vs_one_device"] < 1e-5


def test_workload_flops_count_allowed_pairs():
    from workloads import Workload

    w = Workload(10, num_segments=1, num_pad_tokens=2, num_heads=1, num_kv_heads=1, head_dim=1)
    assert w.allowed_pairs() == 8 * 9 // 2
    assert w.flops(False) == 4 * 36 and w.flops(True) == 3.5 * 4 * 36


def test_memory_sweep_stops_at_out_of_memory(capsys):
    def fits_up_to(limit):
        def run_once(length):
            if length > limit:
                raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        return run_once

    def broken(length):
        raise ValueError("kernel failed")

    found = bench.memory_sweep({"a": fits_up_to(4096), "b": broken}, start=1024, stop=65536)
    assert found["a"][0] == 4096 and found["a"][1].startswith("out of memory at 8192")
    assert found["b"] == (None, "error at 1024: kernel failed")
    assert "longest fwd+bwd" in capsys.readouterr().out


def test_peer_process_gets_a_triton_cache_dir(monkeypatch, tmp_path):
    """jax_triton blanks TRITON_CACHE_DIR when imported; torch.compile in the peer's process then
    fails with "Could not create or locate cache dir" unless the peer gets a real one."""
    seen = {}

    def fake_run(cmd, env, **kw):
        seen.update(env)
        with open(cmd[-1], "w") as f:
            f.write('{"fwd_ms": 1.0, "fwdbwd_ms": 2.0, "peak_bytes": 0, "out": [[0.0]]}')
        return type("Proc", (), {"stderr": ""})()

    monkeypatch.setenv("TRITON_CACHE_DIR", "")  # as after `import jax_triton`
    monkeypatch.setattr(bench, "PEER_ENV", {"TRITON_CACHE_DIR": ""})
    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    args = bench.parse_args(["mha_bwd", "--out", str(tmp_path)])
    row, _ = bench.bench_subprocess("flex", "FlexAttention (torch)", bench.Workload(64), args)
    assert seen["TRITON_CACHE_DIR"]
    assert row.fwd_ms == 1.0 and row.fwdbwd_ms == 2.0


def test_memory_sweep_plot(tmp_path):
    results = [dict(memory_sweep={"kvax (ours)": dict(longest=1 << 20, stopped="x"),
                                  "cudnn": dict(longest=None, stopped="error at 16384")})]
    bench.plot_memory_sweep(results, str(tmp_path))
    assert (tmp_path / "memory.png").stat().st_size > 0
