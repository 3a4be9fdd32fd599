"""Measurement helpers shared by the benchmark's single-device and context-parallel parts."""

from __future__ import annotations

import time

import numpy as np


def median_ms(fn, repeats, wait=None):
    """Median wall time of fn() in ms, waiting for its results with wait(result) (default: JAX's
    block_until_ready; torch passes a device synchronisation); warm-up runs (the first compiles)
    never outnumber the repeats."""
    if wait is None:
        import jax

        wait = jax.block_until_ready
    for _ in range(min(3, repeats)):
        wait(fn())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        wait(fn())
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def lowered_for_cuda(fn, *args) -> str:
    """"lowered in S s, mosaic_gpu calls N, C characters": fn traced and lowered for CUDA (any
    machine), JAX's caches cleared first. kvax's lowering cache (mosaic_cache) still hands back
    a module this process, or the disk, lowered before: time a first lowering with
    KVAX_CACHE_DIR=off, before any repeat of it."""
    import jax

    jax.clear_caches()  # traced and lowered again, not taken from jit's caches
    start = time.perf_counter()
    text = fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
    return (f"lowered in {time.perf_counter() - start:.2f} s, mosaic_gpu calls "
            f"{text.count('custom_call @mosaic_gpu')}, {len(text)} characters")


def in_turns(runs: dict, rounds: int, repeats: int, label=None) -> dict:
    """Times every function of runs ({key: {kind: fn}}) `rounds` times, all of them in turn in
    each round, so that the GPU's clock drift falls on all alike: {key: {kind: [ms per round]}}.
    Every other round runs them in reverse order: in a fixed order the first forward of a round
    always follows the last one's backward, and two rows of the same kernel read 3-4% apart
    (docs/bench/h100-2026-11-25-bench-rerun/README.md). With label (key -> str) each round's
    times are printed as it ends."""
    times = {key: {kind: [] for kind in fns} for key, fns in runs.items()}
    turns = [(key, kind, fn) for key, fns in runs.items() for kind, fn in fns.items()]
    for r in range(rounds):
        for key, kind, fn in turns if r % 2 == 0 else turns[::-1]:
            times[key][kind].append(median_ms(fn, repeats))
        if label is not None:
            print(f"round {r + 1}: " + "  ".join(
                f"{label(key)} {' / '.join(f'{t[-1]:.2f}' for t in times[key].values())}"
                for key in runs), flush=True)
    return times


def layered(call, layers: int):
    """call(q, *rest) -> output called `layers` times in turn, each output the next call's
    query, as a model's layers call attention with the same keys, values and mask (--layers).
    Framework-free: JAX functions to jit, or torch calls to queue."""
    def chain(q, *rest):
        for _ in range(layers):
            q = call(q, *rest)
        return q

    return chain


def against(times: dict, base, per: int = 1) -> list[str]:
    """in_turns' times as lines, one per key: each kind's median over the rounds divided by per
    (ms per call of per chained calls), and its change against the base key's median."""
    ref = {kind: np.median(t) for kind, t in times[base].items()}
    width = max(len(str(key)) for key in times) + 1
    return [f"{str(key):{width}s} " + " | ".join(
        f"{np.median(t) / per:7.3f} ({np.median(t) / ref[kind] - 1:+.2%})"
        for kind, t in kinds.items()) for key, kinds in times.items()]


def rel_err(a, b) -> float:
    """Relative L2 difference of a from b, in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def memory_gib(jitted, *args) -> float | None:
    """Arguments + outputs + temporaries of the compiled program, per device (None where the
    backend does not report it)."""
    try:
        m = jitted.lower(*args).compile().memory_analysis()
        return (m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes) / 2**30
    except Exception:  # noqa: BLE001 - not every backend reports it
        return None
