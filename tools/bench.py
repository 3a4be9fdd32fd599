"""Kvax benchmark: ours against the peers on packed document masks, side by side in one run.

    python tools/bench.py mha_bwd --num-segments 8 --num-pad-tokens 2000 --seq-lens 16384 65536

On a GPU: times forward and forward+backward of every implementation (warm-up, synchronised,
median of repeats), counts FLOPs from the exact number of allowed query-key pairs (and prints the
original Kvax's block-visited FLOPs beside them), times mask creation, reports memory and checks
every peer's output against ours on sampled rows. Writes a table to stdout, results.json and PNG
plots to --out. Peers (tools/peers.py, each described once there): cuDNN through
jax.nn.dot_product_attention, cuDNN's packed (THD) path, FlashAttention-3 (flash-attn3-jax varlen),
JAX's Pallas GPU attention, and in their own processes PyTorch FlexAttention and the original
kvax 0.1.0; one that cannot run is reported with the reason.
On CPU: runs a small packed batch through the CPU path, checks it (outputs and gradients) against
kvax-testing's reference, prints the block-mask picture, and says which peers need a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cp import run_cp  # noqa: E402
from measure import in_turns, layered, median_ms, memory_gib, rel_err  # noqa: E402
from peers import PEERS, peer as get_peer  # noqa: E402
from workloads import Workload, for_args, inputs, sample_rows, shapes, sink_logits  # noqa: E402

MODES = ("mha", "mha_bwd", "mha_cp", "mha_cp_bwd")
# The environment as it was before jax_triton's import blanked TRITON_CACHE_DIR (it sets it to ""
# for its own compiles); the peers' processes get this one, or torch.compile finds no cache dir.
PEER_ENV = dict(os.environ)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("mode", choices=MODES, nargs="?", default="mha_bwd")
    p.add_argument("--seq-lens", type=int, nargs="+", default=None,
                   help="sequence lengths to sweep (default: 16384 65536 on GPU, 512 on CPU)")
    p.add_argument("--num-segments", type=int, default=3)
    p.add_argument("--num-pad-tokens", type=int, default=1000)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16", "float32"))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--peers", default=",".join(PEERS),
                   help="comma-separated subset of " + ",".join(PEERS) + " (tools/peers.py)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--rounds", type=int, default=1,
                   help="time ours and the in-process peers (FA3, cuDNN) this many times in "
                        "turn at each length, after each was measured once; rows read the "
                        "median of their rounds and keep them all (the GPU's clocks drift "
                        "between timings; turns spread that over every implementation alike)")
    p.add_argument("--layers", type=int, default=1,
                   help="time every implementation as this many calls in one jitted function "
                        "(torch: queued before one wait), each call's output the next one's "
                        "query (a model's layers sharing keys, values and the mask), and report "
                        "the time per call: without each call's dispatch and synchronisation, "
                        "which a model's step pays once")
    p.add_argument("--peer-timeout", type=float, default=300,
                   help="seconds a peer's own process (FlexAttention, kvax 0.1.0) may take for one "
                        "length, compilation included, before it is killed and reported as skipped")
    p.add_argument("--show-attention-mask", action="store_true")
    p.add_argument("--permute-tokens-for-load-balance", default="true",
                   choices=("true", "false", "striped"),
                   help="mha_cp modes: true = Llama 3 chunks (the original's), striped = every "
                        "cp-th token per shard (balanced for any document layout)")
    p.add_argument("--out", default="bench-out", help="folder for results.json and plots")
    p.add_argument("--memory-sweep", action="store_true",
                   help="instead of timing: the longest sequence each implementation runs "
                        "forward+backward on one device, doubling from the first --seq-lens "
                        "value until out of memory (or --max-seq-len); leave pallas out of "
                        "--peers for long sweeps (its causal kernel visits other documents' "
                        "blocks: minutes per step at 1M tokens)")
    p.add_argument("--max-seq-len", type=int, default=1 << 21)
    p.add_argument("--first-call", action="store_true",
                   help="instead of timing: seconds from our first forward+backward call to its "
                        "result in fresh processes, cold and warm, without and with JAX's "
                        "persistent cache (tools/first_call.py), at the first --seq-lens value")
    p.add_argument("--cp-sizes", type=int, nargs="+", default=None,
                   help="mha_cp modes: context sizes to compare (default: all local devices); "
                        "1 is the single-device baseline")
    p.add_argument("--ids", default="sequential", choices=("sequential", "shuffled", "large"),
                   help="segment ids as a data pipeline assigns them (the same documents)")
    p.add_argument("--doc-median", type=int, default=None,
                   help="log-normal document lengths with this median (sigma 1) instead of "
                        "--num-segments equal-probability cuts")
    p.add_argument("--window", type=int, default=None,
                   help="sliding window: each query sees keys up to this many positions back "
                        "(ours: local_window_size=(W, 0); the peers that have windows get the "
                        "same mask, the others are skipped with the reason)")
    p.add_argument("--logits-soft-cap", type=float, default=None,
                   help="logit soft-capping c * tanh(x / c) (ours: logits_soft_cap; "
                        "FlexAttention: the same score_mod; the other peers are skipped)")
    p.add_argument("--bidirectional", action="store_true",
                   help="every key of the query's document, not only earlier ones")
    p.add_argument("--sinks", action="store_true",
                   help="attention sinks, one logit per query head (ours: sinks=; no peer here "
                        "has them: they are skipped)")
    p.add_argument("--backend", default="auto",
                   help="our backend for the main row (auto: mosaic on Hopper, else triton); "
                        "NAME:nondeterministic passes deterministic=False (the Mosaic backward)")
    p.add_argument("--also-backends", default="",
                   help="comma-separated backends of ours to time as extra rows (e.g. triton, "
                        "auto:nondeterministic)")
    p.add_argument("--doc-len", type=int, default=None,
                   help="average document length: --num-segments becomes seq_len / doc_len, so "
                        "every length of a sweep has documents of the same size")
    return p.parse_args(argv)


@dataclasses.dataclass
class Row:
    impl: str
    seq_len: int
    fwd_ms: float | None = None
    fwdbwd_ms: float | None = None
    fwd_tflops: float | None = None
    fwdbwd_tflops: float | None = None
    mask_ms: float | None = None
    peak_gib: float | None = None
    rel_err_vs_ours: float | None = None
    wall_s: float | None = None  # this implementation's whole turn, compiles included
    skipped: str | None = None
    detail: str | None = None
    rounds: dict | None = None  # {"fwd": [ms, ...], "fwdbwd": [...]} with --rounds
    layers: int = 1  # calls chained in each timed function (--layers); times are per call


def set_rates(row: Row, w: Workload):
    """The row's TF/s of useful work from its times."""
    if row.fwd_ms:
        row.fwd_tflops = w.flops(False) / row.fwd_ms / 1e9
    if row.fwdbwd_ms:
        row.fwdbwd_tflops = w.flops(True) / row.fwdbwd_ms / 1e9


def more_rounds(timed, rounds: int, repeats: int):
    """Times each (row, timers) rounds - 1 more times, all of them in turn in each round (the
    first measurement is round 1); each row then reads the median of its rounds and keeps them in
    row.rounds. timers: {"fwd" or "fwdbwd": a function that runs it once}."""
    more = in_turns(dict(enumerate(timers for _, timers in timed)), rounds - 1, repeats)
    for i, (row, timers) in enumerate(timed):
        row.rounds = {kind: [getattr(row, f"{kind}_ms")] + [t / row.layers for t in more[i][kind]]
                      for kind in timers}
        for kind, values in row.rounds.items():
            setattr(row, f"{kind}_ms", float(np.median(values)))


def bench_ours(w: Workload, args, spec: str = "auto"):
    """Our row for a backend spec: a backend name, with ":nondeterministic" for
    deterministic=False."""
    import jax
    import jax.numpy as jnp

    from kvax._src.attention import backends
    from kvax.ops import create_attention_mask, flash_attention

    backend, _, option = spec.partition(":")
    if option not in ("", "nondeterministic"):
        raise ValueError(f"backend spec must be NAME or NAME:nondeterministic, got {spec!r}")
    q, k, v, pos, seg = inputs(w)
    dt = jnp.dtype(w.dtype)
    q, k, v = (jnp.asarray(x, dt) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    scale = w.head_dim ** -0.5
    window = None if w.window is None else (w.window, 0 if w.causal else 2**30)
    variant = dict(is_causal=w.causal, local_window_size=window)
    make_mask = jax.jit(lambda p, s: create_attention_mask(p, s, p, s, calc_bwd_mask=True,
                                                           **variant))
    masks = make_mask(pos, seg)
    mask_ms = median_ms(lambda: make_mask(pos, seg), args.repeats)

    sinks = sink_logits(w)
    sinks = None if sinks is None else jnp.asarray(sinks)
    def attn(q, k, v, extra):  # the layout as arguments, as a training step has it
        m, p, s = extra
        return flash_attention(q, k, v, p, s, p, s, mask=m, scale=scale, **variant,
                               logits_soft_cap=w.soft_cap, sinks=sinks, backend=backend,
                               deterministic=not option)

    label = "kvax (ours)" if spec == args.backend else f"kvax (ours, {spec})"
    row, sampled, timers = _bench_jax_fn(label, attn, w, args, q, k, v, (masks, pos, seg),
                                         fwd_memory=True)
    resolved = backends.resolve(backend, q, k, v, fwd_params=masks[0].params)
    row.mask_ms = mask_ms
    row.detail = f"backend {resolved}" + (f", {option} backward" if option else "")
    visited = sum(int(np.count_nonzero(masks[0].block_classes(b))) for b in range(w.batch))
    block_flops = (4.0 * w.num_heads * w.head_dim * visited * masks[0].row_block
                   * masks[0].col_block)
    return row, sampled, masks, block_flops, timers


def bench_jax_peer(peer, w: Workload, args):
    """A JAX peer in this process, on the same inputs as ours."""
    import jax
    import jax.numpy as jnp

    fn = peer.jax_attention(w, False)
    q, k, v, pos, seg = inputs(w)
    dt = jnp.dtype(w.dtype)
    q, k, v = (jnp.asarray(x, dt) for x in (q, k, v))
    if fn.repeat_kv:  # no GQA: as many key/value heads as query heads
        k, v = (jnp.repeat(x, w.num_heads // w.num_kv_heads, axis=2) for x in (k, v))
    extra, mask_ms = None, None
    if fn.extra is not None:
        make = jax.jit(fn.extra)
        pos, seg = jnp.asarray(pos), jnp.asarray(seg)
        extra = make(pos, seg)
        mask_ms = median_ms(lambda: make(pos, seg), args.repeats)
    row, out, timers = _bench_jax_fn(peer.label, fn.attn, w, args, q, k, v, extra)
    row.mask_ms = mask_ms
    return row, out, timers


def _bench_jax_fn(name, attn, w, args, q, k, v, extra, fwd_memory=False):
    """Times attn(q, k, v, extra) forward and forward+backward (gradients of q, k, v), each as
    args.layers chained calls (--layers); memory is forward+backward's, or with fwd_memory the
    forward's in the forward-only modes. (row, the output's sampled rows, timers)."""
    import jax
    import jax.numpy as jnp

    single = jax.jit(attn)
    out = single(q, k, v, extra)
    fwd = single if args.layers == 1 else jax.jit(layered(attn, args.layers))

    @jax.jit
    def fwdbwd(q, k, v, extra, dout):
        _, vjp = jax.vjp(lambda q, k, v: fwd(q, k, v, extra), q, k, v)
        return vjp(dout)

    row = Row(name, w.seq_len, layers=args.layers)
    timers = {"fwd": lambda: fwd(q, k, v, extra)}
    row.fwd_ms = median_ms(timers["fwd"], args.repeats) / args.layers
    if args.mode.endswith("bwd"):
        dout = jnp.asarray(np.random.default_rng(3).standard_normal(out.shape), out.dtype)
        timers["fwdbwd"] = lambda: fwdbwd(q, k, v, extra, dout)
        row.fwdbwd_ms = median_ms(timers["fwdbwd"], args.repeats) / args.layers
        row.peak_gib = memory_gib(fwdbwd, q, k, v, extra, dout)
    elif fwd_memory:
        row.peak_gib = memory_gib(fwd, q, k, v, extra)
    rows = sample_rows(w)
    return row, np.asarray(out[rows[:, 0], rows[:, 1]], np.float32), timers


def run_peer_process(which, w: Workload, once=False, timeout=300.0, layers=1) -> dict:
    """tools/peer_process.py in its own process (its calls chained `layers` times, as --layers);
    its result, or RuntimeError with the peer's reason (a process still running after timeout
    seconds is killed and reported)."""
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "out.json")
        cmd = [sys.executable, os.path.join(os.path.dirname(__file__), "peer_process.py"), which,
               json.dumps(dataclasses.asdict(w)), out_json] + (["--once"] if once else []) + (
                   ["--layers", str(layers)] if layers > 1 else [])
        env = dict(PEER_ENV)
        if not env.get("TRITON_CACHE_DIR"):
            env["TRITON_CACHE_DIR"] = os.path.join(tmp, "triton-cache")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired as err:
            tail = (err.stderr or b"")
            tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
            raise RuntimeError(f"{which} process gave no result within {timeout:.0f} s and was "
                               f"killed (--peer-timeout)\n{tail.strip()[-2000:]}") from None
        if not os.path.exists(out_json):
            raise RuntimeError(f"{which} process failed: {proc.stderr.strip()[-300:]}")
        with open(out_json) as f:
            res = json.load(f)
    if "skipped" in res:
        tail = proc.stderr.strip().splitlines()[-40:]
        raise RuntimeError(res["skipped"] + ("\n" + "\n".join(tail) if tail else ""))
    return res


def bench_subprocess(which, name, w: Workload, args):
    res = run_peer_process(which, w, timeout=args.peer_timeout, layers=args.layers)
    row = Row(name, w.seq_len, layers=args.layers, fwd_ms=res["fwd_ms"],
              fwdbwd_ms=res["fwdbwd_ms"] if args.mode.endswith("bwd") else None,
              mask_ms=res.get("mask_ms"),
              peak_gib=res["peak_bytes"] / 2**30 if res.get("peak_bytes") else None)
    if res.get("mask_peak_bytes"):
        row.detail = f"peak memory while making the mask: {res['mask_peak_bytes'] / 2**30:.2f} GiB"
    return row, np.asarray(res["out"], np.float32), None  # timed once, in its own process


def bench_peer(key, w: Workload, args):
    peer = get_peer(key)
    reason = peer.why_not(w, False)
    if reason:
        raise RuntimeError(reason)
    if peer.jax_attention is not None:
        return bench_jax_peer(peer, w, args)
    return bench_subprocess(key, peer.label, w, args)


def run_gpu(args, save):
    """Every length: ours, then each peer on the same inputs. After each implementation its
    result is saved (the length's entry rewritten) and a line printed, so that a run cut short
    keeps what it measured; with --rounds, then the in-process ones in turns (saved again); the
    table follows each length."""
    peers = [p for p in args.peers.split(",") if p]
    own = [PEERS[p].label for p in peers if p in PEERS and PEERS[p].jax_attention is None]
    for seq_len in args.seq_lens or [16384, 65536]:
        w = for_args(args, seq_len)
        entries, timed = [], []
        # a first line at once: a peer's first compile can take minutes with nothing printed
        print(f"{w.name}: ours, then {', '.join(peers) or 'no peers'}; a line as each ends, its "
              "time including its compiles" + (f"; {' and '.join(own)} compile in their own "
              f"processes, up to --peer-timeout {args.peer_timeout:.0f} s each" if own else ""),
              flush=True)

        def save_entries(replace: bool):  # the length's entry: added, then rewritten
            save(dict(workload=dataclasses.asdict(w), name=w.name,
                      allowed_pairs=w.allowed_pairs(), useful_fwd_flops=w.flops(False),
                      block_visited_fwd_flops=block_flops,
                      rows=[dataclasses.asdict(r) for r in entries]), replace=replace)

        def record(row, start, timers=None):
            row.wall_s = time.perf_counter() - start
            set_rates(row, w)
            entries.append(row)
            if timers and args.rounds > 1:  # else let its arrays go before the next one's
                timed.append((row, timers))
            save_entries(replace=len(entries) > 1)
            done = (f"skipped: {row.skipped}" if row.skipped else
                    f"fwd {fmt(row.fwd_ms, '.2f')} ms, f+b {fmt(row.fwdbwd_ms, '.2f')} ms")
            print(f"  {w.name} {row.impl}: {done} ({row.wall_s:.0f} s)", flush=True)

        start = time.perf_counter()
        ours, ours_out, masks, block_flops, timers = bench_ours(w, args, args.backend)
        record(ours, start, timers)
        if args.show_attention_mask:
            print(masks[0].format())
        for backend in filter(None, args.also_backends.split(",")):
            start = time.perf_counter()
            row, out, _, _, timers = bench_ours(w, args, backend)
            row.rel_err_vs_ours = rel_err(out, ours_out)
            record(row, start, timers)
        for peer in peers:
            start, timers = time.perf_counter(), None
            try:
                row, out, timers = bench_peer(peer, w, args)
                row.rel_err_vs_ours = rel_err(out, ours_out)
            except Exception as err:  # noqa: BLE001 - reported in the table, never dropped
                row = Row(PEERS[peer].label if peer in PEERS else peer, seq_len,
                          skipped=f"{type(err).__name__}: {str(err).splitlines()[0][:160]}")
                row.detail = str(err)[-4000:]  # kept in results.json for debugging
            record(row, start, timers)
        if args.rounds > 1 and timed:
            more_rounds(timed, args.rounds, args.repeats)
            for row, _ in timed:
                set_rates(row, w)
            save_entries(replace=True)
        print_table(entries, w, block_flops)


def fmt(x, spec):
    """x in spec's format; a missing value as "-" in the same width, so the columns stay put."""
    return format(x, spec) if x is not None else "-".rjust(int(spec.split(".")[0] or 0))


def print_table(entries, w: Workload, block_flops: float):
    print(f"\n{w.name}: {w.allowed_pairs():,} allowed pairs; useful fwd "
          f"{w.flops(False) / 1e12:.2f} TFLOP, block-visited fwd (original's count) "
          f"{block_flops / 1e12:.2f} TFLOP; mem: the compiled program (JAX) or the peak "
          "allocated (torch)")
    print(f"{'implementation':<24}{'fwd ms':>9}{'fwd TF/s':>10}{'f+b ms':>9}{'f+b TF/s':>10}"
          f"{'mask ms':>9}{'mem GiB':>9}{'err vs ours':>13}{'wall s':>8}")
    for r in entries:
        if r.skipped:
            print(f"{r.impl:<24}skipped: {r.skipped}")
            continue
        print(f"{r.impl:<24}{fmt(r.fwd_ms, '9.2f')}{fmt(r.fwd_tflops, '10.1f')}"
              f"{fmt(r.fwdbwd_ms, '9.2f')}{fmt(r.fwdbwd_tflops, '10.1f')}{fmt(r.mask_ms, '9.2f')}"
              f"{fmt(r.peak_gib, '9.2f')}{fmt(r.rel_err_vs_ours, '13.2e')}{fmt(r.wall_s, '8.0f')}")
    for line in against_fastest_peer(entries):
        print(line)
    layered_rows = [r.impl for r in entries if r.layers > 1]
    if layered_rows:
        print(f"(ms per call: {', '.join(layered_rows)} timed as {max(r.layers for r in entries)}"
              " calls chained (in one jitted function, or queued in torch), --layers; the others "
              "one call at a time)")
    rounds = [r for r in entries if r.rounds]
    if rounds:
        print(f"(ms above: the median of {len(rounds[0].rounds['fwd'])} rounds in turn; "
              "each round, fwd | f+b:)")
        for r in rounds:
            print(f"{r.impl:<24}" + " | ".join(" ".join(f"{t:.2f}" for t in times)
                                               for times in r.rounds.values()))


def against_fastest_peer(entries) -> list[str]:
    """Lines giving each of our rows' TF/s over the fastest peer's, forward and forward+backward
    (the ratios the README's tables quote; a peer timed one call at a time while ours is chained
    reads as the table shows it)."""
    ours = [r for r in entries if r.impl.startswith("kvax (ours") and not r.skipped]
    others = [r for r in entries if not r.impl.startswith("kvax (ours") and not r.skipped]
    lines = []
    for key, label in (("fwd_tflops", "fwd"), ("fwdbwd_tflops", "f+b")):
        best = max((r for r in others if getattr(r, key)), key=lambda r: getattr(r, key),
                   default=None)
        mine = [r for r in ours if getattr(r, key)]
        if best is None or not mine:
            continue
        ratios = ", ".join(f"{r.impl} {getattr(r, key) / getattr(best, key):.3f}" for r in mine)
        lines.append(f"({label} against the fastest peer, {best.impl}: {ratios})")
    return lines


def plot(results, out_dir):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots")
        return
    for key, title in (("fwd_tflops", "forward"), ("fwdbwd_tflops", "forward + backward")):
        series = {}
        for res in results:
            for r in res["rows"]:
                if r.get(key):
                    series.setdefault(r["impl"], []).append((res["workload"]["seq_len"], r[key]))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for impl, pts in series.items():
            xs, ys = zip(*sorted(pts))
            ax.plot(xs, ys, marker="o", label=impl)
        w = results[0]["workload"]
        docs = sorted({(r["workload"]["seq_len"], r["workload"]["num_segments"],
                        r["workload"]["num_pad_tokens"]) for r in results})
        ax.set(xscale="log", xlabel="sequence length (tokens)", ylabel="TFLOP/s (useful pairs)",
               title=f"{title}, N={w['num_heads']}, K={w['num_kv_heads']}, H={w['head_dim']}, "
                     f"{w['dtype']}\n(length, documents, padding): "
                     + ", ".join(str(d) for d in docs))
        ax.grid(alpha=0.3)
        ax.legend()
        path = os.path.join(out_dir, f"{key.split('_')[0]}.png")
        fig.savefig(path, dpi=120, bbox_inches="tight")
        print(f"plot written to {path}")


def is_out_of_memory(err: BaseException) -> bool:
    text = f"{type(err).__name__}: {err}"
    return any(m in text for m in ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory",
                                   "OutOfMemory"))


def memory_sweep(runners: dict, start: int, stop: int, save=None) -> dict:
    """{name: (longest length that ran, the failure that stopped it, GiB at the longest)},
    doubling from start.

    A runner runs one forward+backward at a length, returns its memory in GiB (or None) and raises
    on failure; out-of-memory ends the sweep for that implementation, any other error is reported
    as such. save(name, found) is called after each implementation."""
    found = {}
    for name, run_once in runners.items():
        longest, stopped, gib = None, f"reached --max-seq-len {stop}", None
        length = start
        while length <= stop:
            start_s = time.perf_counter()
            try:
                used = run_once(length)
            except Exception as err:  # noqa: BLE001 - reported, never swallowed
                kind = "out of memory" if is_out_of_memory(err) else "error"
                stopped = f"{kind} at {length}: {str(err).splitlines()[0][:120]}"
                print(f"  {name} {length}: {kind} ({time.perf_counter() - start_s:.0f} s)",
                      flush=True)
                break
            print(f"  {name} {length}: ran ({time.perf_counter() - start_s:.0f} s)", flush=True)
            longest, gib, length = length, used, length * 2
            if save and length <= stop:  # what a run cut short during the next step keeps
                save(name, (longest, f"cut short while running {length}", gib))
        found[name] = (longest, stopped, gib)
        print(f"{name:<24} longest fwd+bwd: {longest or '-':>9}   "
              f"{'' if gib is None else f'{gib:.1f} GiB '}({stopped})", flush=True)
        if save:
            save(name, found[name])
    return found


def sweep_from_log(text: str) -> dict:
    """A memory sweep's steps as printed ("  NAME LENGTH: ran (..)"), for runs cut short before
    they saved: {name: {"longest", "stopped", "gib_at_longest": None}}."""
    sweep = {}
    for line in text.splitlines():
        done = re.match(r"^(\S.*?)\s+longest fwd\+bwd:\s+(\S+)\s+(?:([\d.]+) GiB )?\((.*)\)$",
                        line)
        if done:  # the implementation's summary line is the last word on it
            name, longest, gib, stopped = done.groups()
            sweep[name] = dict(longest=None if longest == "-" else int(longest), stopped=stopped,
                               gib_at_longest=float(gib) if gib else None)
            continue
        m = re.match(r"^  (.+) (\d+): (ran|out of memory|error) \(\d+ s\)$", line)
        if not m:
            continue
        name, length, outcome = m.group(1), int(m.group(2)), m.group(3)
        entry = sweep.setdefault(name, dict(longest=None, stopped=None, gib_at_longest=None))
        if outcome == "ran":
            entry.update(longest=length, stopped=f"cut short while running {2 * length}")
        else:
            entry["stopped"] = f"{outcome} at {length}"
    return sweep


def jax_step_once(which: str, w: Workload) -> float | None:
    """One forward+backward of ours ("ours", or "ours-nondet" for deterministic=False) or a JAX
    peer on random inputs made on the device; the compiled program's memory in GiB."""
    import jax
    import jax.numpy as jnp

    from kvax.ops import create_attention_mask, flash_attention

    dt = jnp.dtype(w.dtype)
    q_shape, kv_shape, _ = shapes(w)
    ours = which in ("ours", "ours-nondet")
    fn = None if ours else get_peer(which).jax_attention(w, True)
    if fn is not None and fn.repeat_kv:
        kv_shape = q_shape
    keys = jax.random.split(jax.random.key(w.seed), 4)
    q, k, v, dout = (jax.random.normal(key, shape, dt)
                     for key, shape in zip(keys, (q_shape, kv_shape, kv_shape, q_shape)))
    pos, seg = (jnp.asarray(x) for x in w.layout())
    if fn is None:
        masks = jax.jit(lambda p, s: create_attention_mask(p, s, p, s, calc_bwd_mask=True))(
            pos, seg)
        extra, scale = (masks, pos, seg), w.head_dim ** -0.5

        def attn(q, k, v, extra):
            m, p, s = extra
            return flash_attention(q, k, v, p, s, p, s, mask=m, scale=scale,
                                   deterministic=which == "ours")
    else:
        attn = fn.attn
        extra = None if fn.extra is None else jax.jit(fn.extra)(pos, seg)
    step = jax.jit(lambda q, k, v, x, d: jax.vjp(lambda *a: attn(*a, x), q, k, v)[1](d))
    compiled = step.lower(q, k, v, extra, dout).compile()
    jax.block_until_ready(compiled(q, k, v, extra, dout))
    m = compiled.memory_analysis()
    return None if m is None else (m.temp_size_in_bytes + m.argument_size_in_bytes
                                   + m.output_size_in_bytes) / 2**30


def run_memory_sweep(args, save):
    """Ours, cuDNN, then the peers in their own processes (main() makes JAX hand memory back
    between steps, so the order does not matter)."""
    def jax_runner(which):
        def run_once(seq_len):
            import jax

            try:
                return jax_step_once(which, for_args(args, seq_len,
                                                     min(args.num_pad_tokens, seq_len // 2)))
            finally:
                jax.clear_caches()
        return run_once

    def process_runner(which):
        def run_once(seq_len):
            w = for_args(args, seq_len, min(args.num_pad_tokens, seq_len // 2))
            peak = run_peer_process(which, w, once=True,
                                    timeout=args.peer_timeout).get("peak_bytes")
            return peak / 2**30 if peak else None
        return run_once

    runners = {"kvax (ours)": jax_runner("ours")}
    for key in (p for p in args.peers.split(",") if p):
        peer = get_peer(key)
        runners[peer.label] = (jax_runner(key) if peer.jax_attention is not None
                               else process_runner(key))
    sweep = {}

    def save_one(name, found):
        sweep[name] = dict(longest=found[0], stopped=found[1], gib_at_longest=found[2])
        save(dict(memory_sweep=sweep), replace=True)

    memory_sweep(runners, (args.seq_lens or [32768])[0], args.max_seq_len, save_one)


def plot_memory_sweep(results, out_dir):
    """Bar chart: the longest sequence each implementation ran forward+backward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = results[0]["memory_sweep"]
    names = list(sweep)
    longest = [sweep[n]["longest"] or 0 for n in names]
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.5 * len(names)))
    ax.barh(names, longest)
    for y, (n, v) in enumerate(zip(names, longest)):
        why = (sweep[n]["stopped"] or "").split(":")[0]  # "out of memory at 262144" and the like
        ax.text(v, y, f" {v:,}" if v else " none", va="center")
        ax.text(v * 1.02 if v else 1, y - 0.3, f" {why}", va="center", fontsize=7, color="gray")
    ax.set(xscale="log", xlim=(2**15, 2 ** 23), xlabel="longest sequence run forward+backward "
           "(tokens, one GPU; doubling until out of memory)")
    path = os.path.join(out_dir, "memory.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    print(f"plot written to {path}")


def run_cpu(args):
    """The newcomer's check on a machine without a GPU: the CPU path against the reference."""
    import jax

    from kvax.ops import create_attention_mask, flash_attention
    from kvax.utils import FlashAttentionParamsConfig
    from kvax_testing import check_attention, packed_batch

    seq_len = (args.seq_lens or [512])[0]
    pad = min(args.num_pad_tokens, seq_len // 4)
    batch = packed_batch(0, batch=1, kv_len=seq_len, num_heads=min(args.heads, 8),
                         num_kv_heads=min(args.kv_heads, 2), head_dim=min(args.head_dim, 64),
                         dtype=args.dtype, num_docs=args.num_segments, pad_tokens=pad)
    params = FlashAttentionParamsConfig(query_block_size=32, kv_block_size=32)
    scale = batch.query.shape[-1] ** -0.5

    def attention(q, k, v, *layout):
        masks = create_attention_mask(*layout, fwd_params=params, bwd_params=params,
                                      calc_bwd_mask=True)
        return flash_attention(q, k, v, *layout, mask=masks, scale=scale)

    print(f"No GPU ({jax.default_backend()}): running the pure-JAX path on a packed batch of "
          f"{seq_len} tokens, {args.num_segments} documents, {pad} padding.")
    masks = create_attention_mask(*batch.layout.arrays, fwd_params=params)
    print(masks[0].format())
    report = check_attention(jax.jit(attention), batch, scale=scale)
    print("Checked against kvax-testing's float64 reference (error <= 2x the plain "
          f"{args.dtype} computation's):")
    print(report)
    print(f"Peers {', '.join(p.label for p in PEERS.values())} need a CUDA GPU: skipped.")
    return report.ok


class ResultsFile:
    """OUT/results.json: the run's metadata and results, rewritten after every measurement so that
    a run cut short keeps what it measured."""

    def __init__(self, out_dir, meta):
        self.path, self.meta, self.results = os.path.join(out_dir, "results.json"), meta, []

    def save(self, result, replace=False):
        if replace and self.results:
            self.results[-1] = result
        else:
            self.results.append(result)
        with open(self.path, "w") as f:
            json.dump(dict(meta=self.meta, results=self.results), f, indent=1)


def versions() -> dict:
    found = {}
    for dist in ("jax", "jaxlib", "triton", "jax-triton", "numpy", "torch"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = None
    return found


def main(argv=None):
    args = parse_args(argv)
    if args.memory_sweep:  # JAX's pool would keep what one step took from the next (and peers)
        os.environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")
    import jax

    if jax.default_backend() != "gpu":
        if args.mode.startswith("mha_cp"):
            sys.exit(f"{args.mode} measures context parallelism across GPUs and needs them; "
                     f"JAX's backend is {jax.default_backend()!r}. The sharded code is tested "
                     "on fake CPU devices by `pytest packages/kvax-dist`.")
        sys.exit(0 if run_cpu(args) else 1)  # prints; writes nothing
    os.makedirs(args.out, exist_ok=True)
    meta = dict(date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                command=" ".join(sys.argv), device=jax.devices()[0].device_kind,
                device_count=jax.device_count(), versions=versions())
    results = ResultsFile(args.out, meta)
    if args.first_call:
        import first_call

        for jax_cache in (False, True):
            workload = ["--seq-len", str((args.seq_lens or [65536])[0]), "--num-segments",
                        str(args.num_segments), "--num-pad-tokens", str(args.num_pad_tokens)]
            if args.doc_median:
                workload += ["--doc-median", str(args.doc_median)]
            for row in first_call.run(first_call.parse_args(
                    workload + ["--jax-cache"] * jax_cache)):
                results.save(row)
    elif args.memory_sweep:
        run_memory_sweep(args, results.save)
        plot_memory_sweep(results.results, args.out)
    elif args.mode.startswith("mha_cp"):  # cp results: the table above and results.json
        for result in run_cp(args):
            results.save(result)
    else:
        run_gpu(args, results.save)
        plot(results.results, args.out)


if __name__ == "__main__":
    main()
