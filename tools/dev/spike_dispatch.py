"""How much of a benchmark time is the call's dispatch, not the GPU's work: ours (the benchmark's
jitted call, masks as an argument) and FlashAttention-3 on one row, each timed two ways in turn:
one call at a time, waiting for each (what tools/bench.py reports), and `--queue` calls queued
back to back with one wait at the end, per call (how a training step's layers run: the host
enqueues while the GPU works).

    python tools/dev/spike_dispatch.py [--doc-median 1100 --ids shuffled | --num-segments 8]
        [--rounds 5] [--queue 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench  # noqa: E402
from measure import median_ms  # noqa: E402
from peers import peer  # noqa: E402
from workloads import add_row_args, row_from_args  # noqa: E402


def queued_ms(fn, calls: int) -> float:
    """ms per call of `calls` calls enqueued back to back, one wait for the last."""
    import jax

    jax.block_until_ready(fn())
    start = time.perf_counter()
    out = [fn() for _ in range(calls)]
    jax.block_until_ready(out)
    return (time.perf_counter() - start) * 1e3 / calls


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    add_row_args(p)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--queue", type=int, default=20)
    args = p.parse_args(argv)
    w = row_from_args(args)
    options = bench.parse_args(["mha_bwd", "--repeats", str(args.repeats)])
    print(w.name, flush=True)
    timers = {"kvax": bench.bench_ours(w, options)[-1],
              "FA3": bench.bench_jax_peer(peer("fa3"), w, options)[-1]}
    times = {(name, kind, how): [] for name, t in timers.items() for kind in t
             for how in ("one at a time", "queued")}
    for r in range(args.rounds):
        order = list(timers) if r % 2 == 0 else list(timers)[::-1]
        for name in order:
            for kind, fn in timers[name].items():
                times[(name, kind, "one at a time")].append(median_ms(fn, args.repeats))
                times[(name, kind, "queued")].append(queued_ms(fn, args.queue))
    print(f"\nms a call, median of {args.rounds} rounds in turn (every round printed)")
    for (name, kind, how), t in times.items():
        print(f"{name:5s} {kind:7s} {how:14s} {np.median(t):7.3f}  {np.round(t, 3)}", flush=True)
    for kind in timers["kvax"]:
        for how in ("one at a time", "queued"):
            ratio = np.median(times[("FA3", kind, how)]) / np.median(times[("kvax", kind, how)])
            print(f"{kind} {how}: kvax / FA3 speed {ratio:.3f}", flush=True)


if __name__ == "__main__":
    main()
