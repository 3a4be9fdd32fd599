"""The benchmark's CPU paths run and check what they print (timings are never asserted)."""

import json
import re
import sys

import jax
import numpy as np
import pytest

import bench
from workloads import Workload


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
            return length / 1024
        return run_once

    def broken(length):
        raise ValueError("kernel failed")

    found = bench.memory_sweep({"a": fits_up_to(4096), "b": broken}, start=1024, stop=65536)
    assert found["a"][0] == 4096 and found["a"][1].startswith("out of memory at 8192")
    assert found["a"][2] == 4.0  # the memory reported at the longest length
    assert found["b"] == (None, "error at 1024: kernel failed", None)
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
    row, _, timers = bench.bench_subprocess("flex", "FlexAttention (torch)", bench.Workload(64),
                                            args)
    assert seen["TRITON_CACHE_DIR"]
    assert row.fwd_ms == 1.0 and row.fwdbwd_ms == 2.0 and timers is None  # not in --rounds


def test_layers_reach_the_peer_process(monkeypatch, tmp_path):
    """--layers 4: the peer's process is asked for 4 chained calls, and reads the flag (its times
    come back per call, the row says so)."""
    import peer_process

    commands = []

    def fake_run(cmd, env, **kw):
        commands.append(cmd)
        with open(cmd[4], "w") as f:
            f.write('{"fwd_ms": 1.0, "fwdbwd_ms": 2.0, "peak_bytes": 0, "out": [[0.0]]}')
        return type("Proc", (), {"stderr": ""})()

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    args = bench.parse_args(["mha_bwd", "--out", str(tmp_path), "--layers", "4"])
    row, _, _ = bench.bench_subprocess("flex", "FlexAttention (torch)", bench.Workload(64), args)
    assert commands[0][5:] == ["--layers", "4"] and row.layers == 4

    seen = []
    monkeypatch.setattr(peer_process, "run_flex", lambda w, once, layers: seen.append(
        (once, layers)) or {"fwd_ms": 1.0})
    for flags, expected in (([], (False, 1)), (["--layers", "4"], (False, 4)),
                            (["--once"], (True, 1))):
        monkeypatch.setattr(sys, "argv", ["peer_process.py", "flex", '{"seq_len": 64}',
                                          str(tmp_path / "out.json")] + flags)
        peer_process.main()
        assert seen[-1] == expected


def test_stuck_peer_process_is_killed_and_reported(monkeypatch, tmp_path):
    """A peer's process that outlives --peer-timeout becomes a skipped row with the reason, not a
    run that hangs until the caller's own limit."""
    def fake_run(cmd, timeout, **kw):
        raise bench.subprocess.TimeoutExpired(cmd, timeout, stderr=b"compiling block mask")

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    args = bench.parse_args(["mha_bwd", "--out", str(tmp_path), "--peer-timeout", "7"])
    with pytest.raises(RuntimeError, match=r"no result within 7 s.*\n.*compiling block mask"):
        bench.bench_subprocess("flex", "FlexAttention (torch)", bench.Workload(64), args)


def test_memory_sweep_plot(tmp_path):
    results = [dict(memory_sweep={"kvax (ours)": dict(longest=1 << 20, stopped="x"),
                                  "cudnn": dict(longest=None, stopped="error at 16384")})]
    bench.plot_memory_sweep(results, str(tmp_path))
    assert (tmp_path / "memory.png").stat().st_size > 0


def test_gpu_table_on_cpu_saves_every_length_and_reports_failed_peers(tmp_path, capsys):
    """run_gpu's own machinery on CPU: ours through the CPU path, peers that cannot run here
    reported as skipped with their reason, results.json rewritten after each implementation
    (a run cut short keeps what it measured) with a line printed for each."""
    args = bench.parse_args(["mha_bwd", "--seq-lens", "128", "96", "--doc-len", "40",
                             "--num-pad-tokens", "7", "--heads", "4", "--kv-heads", "2",
                             "--head-dim", "16", "--dtype", "float32", "--repeats", "1",
                             "--peers", "cudnn,nonsense", "--out", str(tmp_path)])
    saved = bench.ResultsFile(str(tmp_path), {"command": "test"})
    lengths_on_disk = []

    def save(result, replace=False):
        saved.save(result, replace)
        on_disk = json.loads((tmp_path / "results.json").read_text())["results"]
        lengths_on_disk.append([r["workload"]["seq_len"] for r in on_disk])

    bench.run_gpu(args, save)
    assert lengths_on_disk == [[128]] * 3 + [[128, 96]] * 3  # ours, cudnn, nonsense
    first = saved.results[0]
    assert first["workload"]["num_segments"] == 3  # 128 / 40, rounded
    ours, cudnn, nonsense = first["rows"]
    assert ours["fwd_ms"] > 0 and ours["fwdbwd_ms"] > 0 and ours["skipped"] is None
    assert ours["fwd_tflops"] > 0 and ours["wall_s"] > 0
    assert cudnn["impl"] == "cuDNN (jax.nn)" and cudnn["skipped"]
    assert "unknown peer 'nonsense'" in nonsense["skipped"]
    assert first["allowed_pairs"] == bench.for_args(args, 128).allowed_pairs()
    out = capsys.readouterr().out
    assert "skipped: " in out and "kvax (ours)" in out
    assert re.search(r"^  B1-S96-\S+ kvax \(ours\): fwd [\d.]+ ms, f\+b [\d.]+ ms", out, re.M)


def test_each_length_first_says_what_runs(tmp_path, capsys, monkeypatch):
    """Before anything is timed, a line names what each length runs and which peers compile in
    their own processes (FlexAttention's first compile took 216 s on an H200, silent)."""
    def no_peer(key, w, args):
        raise RuntimeError("not here")

    monkeypatch.setattr(bench, "bench_peer", no_peer)
    args = bench.parse_args(["mha_bwd", "--seq-lens", "64", "--doc-len", "20",
                             "--num-pad-tokens", "5", "--heads", "2", "--kv-heads", "1",
                             "--head-dim", "16", "--dtype", "float32", "--repeats", "1",
                             "--peers", "flex,fa3,kvax010", "--peer-timeout", "90",
                             "--out", str(tmp_path)])
    bench.run_gpu(args, lambda result, replace=False: None)
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert first.startswith("B1-S64-") and first.endswith(
        ": ours, then flex, fa3, kvax010; a line as each ends, its time including its compiles; "
        "FlexAttention (torch) and kvax 0.1.0 (original) compile in their own processes, up to "
        "--peer-timeout 90 s each")
    assert "kvax (ours): fwd" in second


def test_rounds_time_every_in_process_row_in_turn(tmp_path, capsys):
    """--rounds: ours (both rows) timed again in turn; each row reads the median of its rounds
    and keeps them; rows of peers that failed have none."""
    args = bench.parse_args(["mha_bwd", "--seq-lens", "96", "--doc-len", "40",
                             "--num-pad-tokens", "7", "--heads", "2", "--kv-heads", "1",
                             "--head-dim", "16", "--dtype", "float32",
                             "--repeats", "1", "--rounds", "3", "--also-backends", "xla",
                             "--peers", "cudnn", "--out", str(tmp_path)])
    saved = bench.ResultsFile(str(tmp_path), {"command": "test"})
    bench.run_gpu(args, saved.save)
    ours, xla, cudnn = saved.results[0]["rows"]
    for row in (ours, xla):
        assert [len(row["rounds"][k]) for k in ("fwd", "fwdbwd")] == [3, 3]
        assert row["fwd_ms"] == float(np.median(row["rounds"]["fwd"]))
        assert row["fwdbwd_ms"] == float(np.median(row["rounds"]["fwdbwd"]))
        assert row["fwd_tflops"] == pytest.approx(
            bench.for_args(args, 96).flops(False) / row["fwd_ms"] / 1e9)
    assert cudnn["skipped"] and cudnn["rounds"] is None
    out = capsys.readouterr().out
    assert "the median of 3 rounds" in out
    assert out.startswith("B1-S96-") and ": ours, then cudnn; a line as each ends" in out
    assert "own processes" not in out  # cudnn runs in this one


def test_layers_chain_the_calls_and_report_each_calls_time(tmp_path, capsys, monkeypatch):
    """--layers 3: each timed function makes 3 attention calls, each output the next call's
    query, and every time recorded (the first measurement and each round's) is per call: the
    timed function's over 3 (here every timing reads 6 ms)."""
    import measure
    import kvax.ops

    calls, real = [], kvax.ops.flash_attention

    def counted(q, *args, **kwargs):
        calls.append(q.shape)
        return real(q, *args, **kwargs)

    def six_ms(fn, repeats, wait=None):
        jax.block_until_ready(fn())
        return 6.0

    monkeypatch.setattr(kvax.ops, "flash_attention", counted)
    monkeypatch.setattr(bench, "median_ms", six_ms)
    monkeypatch.setattr(measure, "median_ms", six_ms)
    args = bench.parse_args(["mha_bwd", "--seq-lens", "96", "--doc-len", "40",
                             "--num-pad-tokens", "7", "--heads", "2", "--kv-heads", "1",
                             "--head-dim", "16", "--dtype", "float32", "--repeats", "1",
                             "--rounds", "2", "--layers", "3", "--peers", "", "--out",
                             str(tmp_path)])
    saved = bench.ResultsFile(str(tmp_path), {"command": "test"})
    bench.run_gpu(args, saved.save)
    (ours,) = saved.results[0]["rows"]
    assert ours["layers"] == 3 and ours["fwd_ms"] == ours["fwdbwd_ms"] == 2.0
    assert ours["rounds"] == {"fwd": [2.0, 2.0], "fwdbwd": [2.0, 2.0]}
    # traced once for the single call (whose output the peers are checked against), and 3
    # times for the chain (its vjp reuses that trace)
    assert len(calls) == 4
    assert "timed as 3 calls chained" in capsys.readouterr().out

    seen = []
    chain = measure.layered(lambda q, k, v, extra: (seen.append(q), q + k)[1], 3)
    assert chain(1, 10, None, None) == 31 and seen == [1, 11, 21]


def test_memory_sweep_runs_ours_on_cpu(tmp_path, capsys):
    args = bench.parse_args(["mha_bwd", "--memory-sweep", "--seq-lens", "64", "--max-seq-len",
                             "256", "--doc-len", "50", "--num-pad-tokens", "5", "--heads", "2",
                             "--kv-heads", "1", "--head-dim", "16", "--dtype", "float32",
                             "--peers", "cudnn", "--out", str(tmp_path)])
    saved = bench.ResultsFile(str(tmp_path), {})
    bench.run_memory_sweep(args, saved.save)
    (result,) = json.loads((tmp_path / "results.json").read_text())["results"]
    sweep = result["memory_sweep"]
    assert sweep["kvax (ours)"]["longest"] == 256
    assert sweep["kvax (ours)"]["stopped"] == "reached --max-seq-len 256"
    assert sweep["cuDNN (jax.nn)"]["longest"] is None  # no cuDNN on CPU: an error, not OOM
    assert sweep["cuDNN (jax.nn)"]["stopped"].startswith("error at 64")


def test_one_step_of_ours_runs_deterministic_or_not_for_a_profiler():
    """ncu_step.py's steps: "ours" and "ours-nondet" are our call (deterministic=False for the
    second), not peers' names."""
    w = Workload(96, 2, 7, num_heads=2, num_kv_heads=1, head_dim=16, dtype="float32")
    assert all(bench.jax_step_once(which, w) > 0 for which in ("ours", "ours-nondet"))
    with pytest.raises(ValueError, match="unknown peer 'ours-det'"):
        bench.jax_step_once("ours-det", w)


def test_memory_sweep_log_reads_back_and_saves_every_step(capsys):
    saved = []

    def fits_up_to(limit):
        def run_once(length):
            if length > limit:
                raise RuntimeError("CUDA out of memory. Tried to allocate 16.00 GiB")
            return 1.5
        return run_once

    found = bench.memory_sweep({"kvax (ours)": fits_up_to(2048), "Flex (torch)": fits_up_to(0)},
                               start=1024, stop=8192, save=lambda n, f: saved.append((n, f)))
    assert saved[0] == ("kvax (ours)", (1024, "cut short while running 2048", 1.5))
    assert saved[-1] == ("Flex (torch)", found["Flex (torch)"])
    parsed = bench.sweep_from_log(capsys.readouterr().out)
    assert parsed["kvax (ours)"] == dict(longest=2048, stopped=found["kvax (ours)"][1],
                                         gib_at_longest=1.5)
    assert parsed["Flex (torch)"]["longest"] is None
    # a log cut during a step: what ran is kept, and the step it was running is named
    cut = bench.sweep_from_log("  Flex (torch) 1024: ran (3 s)\n  Flex (torch) 2048: ran (9 s)\n")
    assert cut["Flex (torch)"] == dict(longest=2048, stopped="cut short while running 4096",
                                       gib_at_longest=None)


def test_plot_results_merges_runs(tmp_path):
    import plot_results

    def run(path, rows_by_length):
        results = [dict(workload=dict(seq_len=n), rows=rows) for n, rows in rows_by_length.items()]
        path.write_text(json.dumps(dict(meta={}, results=results)))
        return str(path)

    first = run(tmp_path / "a.json", {
        8: [dict(impl="ours", fwd_tflops=1.0), dict(impl="flex", fwd_tflops=2.0)],
        16: [dict(impl="ours", fwd_tflops=3.0), dict(impl="flex", fwd_tflops=4.0)]})
    second = run(tmp_path / "b.json", {
        16: [dict(impl="ours", fwd_tflops=5.0), dict(impl="flex", skipped="OOM")]})
    log = tmp_path / "sweep.log"
    log.write_text("  flex 1024: ran (3 s)\n")
    timing, sweep = plot_results.merge([first, second, str(log)])
    by = {(r["impl"], t["workload"]["seq_len"]): r for t in timing for r in t["rows"]}
    assert by["ours", 16]["fwd_tflops"] == 5.0  # the later run wins
    assert by["flex", 16]["fwd_tflops"] == 4.0  # a measurement beats a later skip
    assert by["ours", 8]["fwd_tflops"] == 1.0
    assert sweep["flex"]["longest"] == 1024


def test_plot_results_reads_printed_tables_not_their_rounds():
    import plot_results

    text = """B1-S64-docs2-pad8: 1,234 allowed pairs; useful fwd 1.0 TFLOP
implementation             fwd ms  fwd TF/s   f+b ms  f+b TF/s  mask ms  mem GiB
kvax (ours)                  3.24     420.2    13.61     349.8     0.98     4.02-
kvax (ours, auto:nondeterministic)     3.29     413.1    13.27     358.8     0.88     4.01
FlashAttention-3 (jax)       3.07     443.5    11.77     404.4     0.08     2.54
(ms above: the median of 5 rounds in turn; each round, fwd | f+b:)
kvax (ours)             3.24 3.01 3.24 3.46 3.52 | 13.50 13.32 13.80 13.61 13.90
FlashAttention-3 (jax)  3.05 3.07 3.05 3.18 3.73 | 11.53 11.77 11.71 12.84 11.99
"""
    assert plot_results.rows_from_tables(text) == {"B1-S64-docs2-pad8": {
        "kvax (ours)": (420.2, 349.8), "kvax (ours, auto:nondeterministic)": (413.1, 358.8),
        "FlashAttention-3 (jax)": (443.5, 404.4)}}


def test_cpu_cp_mode_says_it_needs_gpus(tmp_path):
    with pytest.raises(SystemExit, match="needs them"):
        bench.main(["mha_cp", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_workload_id_styles_keep_the_documents():
    """The same documents under sequential, shuffled and large ids; log-normal lengths."""
    from workloads import Workload

    layouts = [Workload(4096, num_pad_tokens=100, ids=ids, doc_median=150).layout()
               for ids in ("sequential", "shuffled", "large")]
    for pos, seg in layouts[1:]:
        np.testing.assert_array_equal(pos, layouts[0][0])
        np.testing.assert_array_equal(seg == -1, layouts[0][1] == -1)
        starts = np.flatnonzero(np.diff(seg[0]) != 0)
        np.testing.assert_array_equal(starts, np.flatnonzero(np.diff(layouts[0][1][0]) != 0))
    assert layouts[2][1].max() <= np.iinfo(np.int32).max
    lengths = np.diff(np.flatnonzero(np.diff(layouts[0][1][0]) != 0))
    assert lengths.min() < 60 and lengths.max() > 400  # spread over an order of magnitude


def test_first_call_mode_prints_cold_and_warm(tmp_path, monkeypatch, capsys):
    """The first-call measurement on CPU (its numbers matter on a GPU): fresh processes, cold then
    warm, split into lowering, XLA and the first run."""
    import first_call

    rows = first_call.run(first_call.parse_args([
        "--seq-len", "128", "--num-segments", "2", "--num-pad-tokens", "9", "--jax-cache",
        "--doc-median", "30", "--backend", "xla"]))
    assert [r["run"] for r in rows] == ["cold", "warm", "warm again"]
    assert all(r["first_call_s"] >= r["lower_s"] > 0 and r["backend"] == "xla" for r in rows)
    assert "first call" in capsys.readouterr().out


def test_first_call_forward_only_runs_one_cold_process_primed(capsys):
    import first_call

    rows = first_call.run(first_call.parse_args([
        "--seq-len", "128", "--num-segments", "2", "--num-pad-tokens", "9", "--backend", "xla",
        "--forward-only", "--processes", "1", "--prime", "--mask-apart"]))
    assert [(r["run"], r["step"]) for r in rows] == [("cold", "forward")]
    assert rows[0]["prime_first_call_s"] >= rows[0]["prime_lower_s"] > 0
    out = capsys.readouterr().out
    assert "(forward, xla" in out and "primed by half the tokens" in out and "masks apart" in out
    assert rows[0]["mask_s"] > 0


def test_first_call_step_takes_the_layout_as_arguments():
    """The first call's step takes positions and ids as arguments, as a training step does, so
    its masks compile as code. Closed over (--layout-constant), they are constants in the
    program, and XLA spent seconds folding the masks while it compiled."""
    import first_call
    from workloads import Workload

    w = Workload(256, num_segments=3, num_pad_tokens=7, num_heads=2, num_kv_heads=1,
                 head_dim=16)
    sizes = []
    for constant in (False, True):
        step, args, _ = first_call.training_step(w, "xla", layout_constant=constant)
        text = step.lower(*args).as_text()
        sizes.append(max(len(line) for line in text.splitlines() if "constant" in line))
        assert (len(args) == 7) != constant
    assert sizes[0] < 200 < 256 * 8 < sizes[1]  # the 256 positions, hex-coded, only in the second


def test_window_workload_counts_allowed_pairs_exactly():
    from workloads import Workload

    from kvax_testing import mask_terms, reference_mask

    w = Workload(300, num_segments=3, num_pad_tokens=20, window=17)
    pos, seg = w.layout()
    allowed = np.asarray(reference_mask(pos, seg, pos, seg,
                                        mask_terms=mask_terms(local_window_size=(17, 0))))
    assert w.allowed_pairs() == int(allowed.sum()) and "window17" in w.name


@pytest.mark.parametrize("variant", [dict(), dict(causal=False), dict(window=5),
                                     dict(window=4, causal=False)],
                         ids=["causal", "bidirectional", "window", "bidirectional-window"])
def test_allowed_pairs_equal_the_rule(variant):
    """The FLOP count (closed form) equals the element rule every peer's mask is made from."""
    from workloads import Workload

    w = Workload(97, num_segments=4, num_pad_tokens=9, batch=2, **variant)
    pos, seg = w.layout()
    allowed = w.rule(pos[:, :, None], seg[:, :, None], pos[:, None, :], seg[:, None, :])
    assert w.allowed_pairs() == int(allowed.sum())


def test_peer_layouts_and_reasons():
    """Every peer is described once; document offsets for cuDNN's packed path and FA3's
    cu_seqlens follow the layout; unsupported features come back as reasons."""
    import peers
    from workloads import Workload

    assert len({p.label for p in peers.PEERS.values()}) == len(peers.PEERS)
    w = Workload(40, num_segments=3, num_pad_tokens=6, batch=2, seed=3)
    runs = [w.runs(b) for b in range(2)]
    lengths, offsets = peers.cudnn_segments(w)
    for b in range(2):
        assert [tuple(x) for x in zip(offsets[b][:3], offsets[b][:3] + lengths[b][:3])] == runs[b]
        assert runs[b][-1][1] == 34  # documents end where the padding starts
    bounds = peers.fa3_cu_seqlens(w)
    assert bounds[0] == 0 and bounds[-1] == 80 and 40 in bounds and 34 in bounds and 74 in bounds
    assert peers.peer("fa3").why_not(Workload(64, head_dim=64), False).endswith("not 64")
    sink = Workload(64, sinks=True)
    for key in ("cudnn", "cudnn_packed", "fa3", "pallas", "flex", "kvax010"):
        assert "attention sinks" in peers.peer(key).why_not(sink, False), key
    assert peers.peer("flex").why_not(Workload(64, window=8, soft_cap=5.0), False) is None
    with pytest.raises(ValueError, match="unknown peer"):
        peers.peer("nope")


def test_plot_by_workload_reads_printed_tables(tmp_path):
    """--by-workload takes bench.py's printed tables (runs whose results.json did not come back)
    and draws one group of bars per workload."""
    import plot_results

    text = """B1-S1024-docs2-pad10-N4-K2-H16-bfloat16: 1,000 allowed pairs; useful fwd 0.00 TFLOP
implementation             fwd ms  fwd TF/s   f+b ms  f+b TF/s  mask ms  mem GiB  err vs ours
kvax (ours)                 13.25     417.6    50.49     383.5     0.56     2.02-      32
cuDNN (jax.nn)          skipped: RuntimeError: no
cuDNN (jax.nn)              57.60     610.9   223.97     549.8-     4.52     1.41e-03      20
"""
    (tmp_path / "log.txt").write_text(text)
    found = plot_results.by_workload([str(tmp_path / "log.txt")])
    assert found == {"B1-S1024-docs2-pad10-N4-K2-H16-bfloat16": {
        "kvax (ours)": (417.6, 383.5), "cuDNN (jax.nn)": (610.9, 549.8)}}
    assert (tmp_path / "workloads.png").exists() is False
    plot_results.plot_by_workload(found, str(tmp_path))
    assert (tmp_path / "workloads.png").stat().st_size > 0


def test_against_reads_medians_per_call_and_changes_against_the_base():
    from measure import against

    times = {"base": {"fwd": [4.0, 2.0, 3.0]}, "capped": {"fwd": [3.3, 3.3, 9.0]}}
    lines = against(times, "base", per=2)
    assert lines == ["base      1.500 (+0.00%)", "capped    1.650 (+10.00%)"]


def test_in_turns_reverses_every_other_round():
    """Each function is timed once a round, every other round in reverse order, so that no
    implementation always follows the same one."""
    from measure import in_turns

    calls = []
    runs = {key: {kind: (lambda key=key, kind=kind: calls.append((key, kind)))
                  for kind in ("fwd", "fwdbwd")} for key in ("a", "b")}
    times = in_turns(runs, 3, 1)
    turn = [("a", "fwd"), ("a", "fwdbwd"), ("b", "fwd"), ("b", "fwdbwd")]
    # median_ms calls each function once to warm up, then once timed
    assert calls == [x for x in turn for _ in range(2)] + [
        x for x in turn[::-1] for _ in range(2)] + [x for x in turn for _ in range(2)]
    assert all(len(t) == 3 for kinds in times.values() for t in kinds.values())


def test_table_columns_line_up_with_missing_values(capsys):
    """A missing value ("-": ours has no error against ours) keeps its column's width, so each
    value ends under its heading (it printed as "1.00-" against the memory column)."""
    from bench import Row, print_table

    print_table([Row("kvax (ours)", 64, fwd_ms=1.5, fwd_tflops=400.0, fwdbwd_ms=6.0,
                     fwdbwd_tflops=380.0, mask_ms=0.1, peak_gib=1.0, wall_s=16.0),
                 Row("FlashAttention-3 (jax)", 64, fwd_ms=1.4, fwd_tflops=420.0, fwdbwd_ms=5.5,
                     fwdbwd_tflops=400.0, mask_ms=None, peak_gib=0.5, rel_err_vs_ours=2e-3,
                     wall_s=3.0)], Workload(64), 1e9)
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("implementation"))
    ends = [m.end() for m in re.finditer(r"\S+(?: \S+)*", lines[head][24:])]
    for row in lines[head + 1:head + 3]:
        assert [m.end() for m in re.finditer(r"\S+", row[24:])] == ends, row
    assert lines[head + 1][24:].split()[6] == "-" and lines[head + 2][24:].split()[4] == "-"


def test_table_gives_ours_against_the_fastest_peer():
    """Each of our rows over the fastest peer with a time, forward and forward+backward apart;
    skipped peers and the original kvax are not ours; the lines do not read as table rows."""
    import plot_results
    from bench import Row, against_fastest_peer

    entries = [Row("kvax (ours)", 64, fwd_tflops=460.0, fwdbwd_tflops=390.0),
               Row("kvax (ours, auto:nondeterministic)", 64, fwd_tflops=450.0),
               Row("FlashAttention-3 (jax)", 64, fwd_tflops=500.0, fwdbwd_tflops=300.0),
               Row("kvax 0.1.0 (original)", 64, fwd_tflops=100.0, fwdbwd_tflops=400.0),
               Row("cuDNN (jax.nn)", 64, skipped="RuntimeError: no")]
    lines = against_fastest_peer(entries)
    assert lines == [
        ("(fwd against the fastest peer, FlashAttention-3 (jax): kvax (ours) 0.920, "
         "kvax (ours, auto:nondeterministic) 0.900)"),
        "(f+b against the fastest peer, kvax 0.1.0 (original): kvax (ours) 0.975)"]
    assert plot_results.rows_from_tables("B1-S64-x: 1 allowed pairs\n" + "\n".join(lines)) == {}
    assert against_fastest_peer(entries[:2]) == []  # no peer ran
