"""Where the Mosaic kernels' time goes, program by program (issue #12), from Mosaic GPU's
on-device profiler.

    python tools/dev/profile_timeline.py [--rows 1,0] [--configs 64x128x2] [--space 8] [--out DIR]
    python tools/dev/profile_timeline.py --backward [--rows 1,0] [--space 8]
    python tools/dev/profile_timeline.py --backward --shape 16,8,256   # Gemma's: the channel split
    python tools/dev/profile_timeline.py --load DIR/row1-64x128x2.npz [--space 8]   # no GPU

The kernels' named scopes (mosaic_fwd: prologue with q_wait, first_key, store_read and meet in
it, loop, epilogue with store_wait inside it, producer; mosaic_bwd: prologue, loop, epilogue with
store_wait) become ranges that each warpgroup stamps with its SM's clock
(`CompilerParams(profile_space=...)`; only the profiled kernel is built with it). Per row
this prints how the SMs' cycles split: between one block's last stamp and the next block's first
on the same SM, blocks with nothing to do, each phase of the consumers (the later consumer's; the
"rest" line is negative where the two overlap), and the SMs idle before their first and after
their last block (the tail); for the forward also a least-squares fit of a program's loop on its
full and masked steps. The raw stamps go to DIR/row<N>-<config>.npz (or row<N>-backward.npz);
--load summarizes them again.

Each block copies its stamps out when it ends, one thread a word, so the gap between blocks
grows with --space (per program on the log-normal row: 0.85, 4.0, 5.8 and 9.8 us at 8, 16, 24
and 40); the phases do not. Keep --space as small as the ranges allow (8 fits every range once).
The kernel is also timed without the profiler. That time and the profiled span come from
different runs, and the span is converted from cycles at the rate the stamps give (at --space 8
on the log-normal row: 2.80 ms profiled, 2.99 ms without), so compare phases as shares of
cycles, not with the plain time. Rows and configurations are spike_mosaic.py's. Its names
without "p" are the grid forward, one program per block. The persistent forward (the default,
"p") runs many programs per block: its summary follows each consumer's programs in turn
(persistent_programs finds each one's item, as the kernel's rounds take them) and splits their
cycles into the gap before each (the work list and the table), prologue, waits, loop and
epilogue. Only the programs whose stamps fit --space are recorded: about (4 x space - 7) / 20
a consumer.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import median_ms  # noqa: E402
from spike_mosaic import ROWS, forward_module, kernels, parse_config  # noqa: E402

PHASES = ("prologue", "q_wait", "first_key", "loop", "epilogue", "store_wait")
WRAP = 2**32  # %clock and the global timer's low word are 32-bit


def capture(make, args, space: int, out_dir: str, module, name: str, runs: int = 3):
    """make() builds a function; module.name (mosaic_fwd.forward or mosaic_bwd.backward) builds
    its kernel with the profiler on, the rest without. Run `runs` times: the last run's raw
    buffer, the CUDA grid and the names' ids. (Pallas names the trace file once, when it lowers,
    and writes it only if absent: it is removed after each run.)"""
    import glob

    import jax
    import jax.experimental.pallas.mosaic_gpu as plgpu
    from jax.experimental.mosaic.gpu import profiler

    taken = []

    def keep(spec, buffer, f, grid, block):  # instead of a Perfetto trace
        taken.append((np.asarray(buffer), tuple(grid), dict(spec.interned_names)))

    original, dump = getattr(module, name), profiler.ProfilerSpec.dump

    def profiled(*a, **kw):  # runs while the function is traced
        plain = plgpu.CompilerParams
        plgpu.CompilerParams = functools.partial(plain, profile_space=space,
                                                 profile_dir=out_dir, profile_bounds_check=True)
        try:
            return original(*a, **kw)
        finally:
            plgpu.CompilerParams = plain

    setattr(module, name, profiled)
    profiler.ProfilerSpec.dump = keep
    try:
        fn = make()
        for _ in range(runs):
            jax.block_until_ready(fn(*args))
            jax.effects_barrier()
            for path in glob.glob(os.path.join(out_dir, "*-trace.json")):
                os.remove(path)
    finally:
        setattr(module, name, original)
        profiler.ProfilerSpec.dump = dump
    if len(taken) != runs:
        raise RuntimeError(f"{len(taken)} profiles of {runs} runs came back")
    return taken[-1]


def walk(e, unname, space: int):
    """One warpgroup's entries e: its ranges as [name, enter, exit, depth] in the order they
    were entered (exit None if never closed). A stamp is read only while its name is known, it
    is not before the stamp before it and its range nests (parse says why)."""
    spans, open_, last = [], [], None
    for j in range(3, space * 4 - 1, 2):
        tag, clock = int(e[j]), int(e[j + 1])
        name = unname.get(tag & 0x7FFFFFFF)
        if name is None or (last is not None and (clock - last) % WRAP > WRAP // 2):
            break
        if tag >> 31 == 0:
            open_.append(len(spans))
            spans.append([name, clock, None, len(open_) - 1])
        else:
            if not open_ or spans[open_[-1]][0] != name:
                break
            spans[open_.pop()][2] = clock
        last = clock
    return spans


def parse(buffer, names, space: int, warpgroups: int = 3):
    """Per (block, warpgroup): (start ns, SM, {range: [(enter, exit) clocks, ...]}), blocks in
    the profiler's order ((x, y, z) = the Pallas grid reversed, z fastest). The profiler's own
    "Init" range (barrier set-up, every block) comes first; the kernel's ranges follow until a
    stamp that is not one of this block's: the header's count misses ranges recorded inside
    `pl.when` bodies (all of ours), and shared memory still holds an earlier block's stamps past
    them (a program with nothing to do records none). So a stamp is read only while its name is
    known, it is not before the stamp before it (Init's exit first), and its range nests."""
    entries = buffer.reshape(-1, warpgroups, space * 4).astype(np.int64)
    unname = {v: k for k, v in names.items()}
    stamps = []
    for blk in range(entries.shape[0]):
        wgs = []
        for wg in range(warpgroups):
            e = entries[blk, wg]
            ranges = {}
            for name, enter, exit_, _ in walk(e, unname, space):
                if exit_ is not None:
                    ranges.setdefault(name, []).append((enter, exit_))
            wgs.append((int(e[0]), int(e[1]), ranges))
        stamps.append(wgs)
    return stamps


def _after(c, ref):
    """Cycles from ref to c on a 32-bit clock (negative if c is earlier)."""
    return (c - ref + WRAP // 2) % WRAP - WRAP // 2


def summarize(stamps, items, label: str):
    """The SMs' time split into phases (shares of SMs x the kernel's span) and per program.
    items: each block's row of the program table (its loop fit), or None (persistent kernels)."""
    blocks = []  # (sm, start ns, first clock, last clock, {phase: cycles}, block, programs)
    for blk, wgs in enumerate(stamps):
        if not wgs[0][2].get("Init"):
            continue
        sm, start_ns, first = wgs[0][1], wgs[0][0], wgs[0][2]["Init"][0][0]
        clocks = [c for _, _, r in wgs for spans in r.values() for pair in spans for c in pair]
        last = first + max(_after(c, first) for c in clocks)
        consumers = [r for _, _, r in wgs[:2]]
        phases = {}
        for name in ("Init",) + PHASES:
            cycles = [sum(_after(b, a) for a, b in r[name]) for r in consumers if r.get(name)]
            if cycles:
                phases[name] = max(cycles)
        if "prologue" in phases:
            phases["table"] = max(_after(r["prologue"][0][0], r["Init"][0][1]) for r in consumers
                                  if r.get("prologue") and r.get("Init"))
        programs = max(len(r.get("loop", ())) for r in consumers)
        blocks.append((sm, start_ns, first, last, phases, blk, programs))
    by_sm = {}
    for b in blocks:
        by_sm.setdefault(b[0], []).append(b)
    rates = []  # cycles per ns: each SM's blocks, first stamp against start time
    for bs in by_sm.values():
        t = np.array([_after(b[1], bs[0][1]) for b in bs], np.float64)
        c = np.array([_after(b[2], bs[0][2]) for b in bs], np.float64)
        if len(bs) >= 3 and np.ptp(t) > 0:
            rates.append(np.polyfit(t, c, 1)[0])
    ghz = float(np.median(rates))
    gaps = 0
    t_first = {sm: min(_after(b[1], blocks[0][1]) for b in bs) for sm, bs in by_sm.items()}
    t_last = {}
    for sm, bs in by_sm.items():
        ref = bs[0][2]
        bs.sort(key=lambda b: _after(b[2], ref))
        gaps += sum(_after(cur[2], prev[3]) for prev, cur in zip(bs, bs[1:]))
        t_last[sm] = t_first[sm] + _after(bs[-1][3], bs[0][2]) / ghz
    t0, t1 = min(t_first.values()), max(t_last.values())
    head = sum(t - t0 for t in t_first.values()) * ghz
    tail = sum(t1 - t for t in t_last.values()) * ghz
    total = (t1 - t0) * len(by_sm) * ghz
    live = [b for b in blocks if b[6]]
    num_programs = sum(b[6] for b in blocks)
    busy_live = sum(_after(b[3], b[2]) for b in live)
    busy_dead = sum(_after(b[3], b[2]) for b in blocks if not b[6])
    sums = {p: sum(b[4].get(p, 0) for b in live) for p in ("Init", "table") + PHASES}
    print(f"{label}: {num_programs} programs with work in {len(live)} blocks, "
          f"{len(blocks) - len(live)} blocks without, on {len(by_sm)} SMs; span "
          f"{(t1 - t0) / 1e3:.0f} us at {ghz:.3f} GHz")

    def line(name, cycles):
        print(f"    {name:<40} {cycles / total * 100:5.1f}%  {cycles / num_programs / ghz:7.0f} "
              f"ns/program")

    line("SMs idle before their first block", head)
    line("between blocks (exit, copy-out, launch)", gaps)
    line("blocks without work", busy_dead)
    line("Init (barriers)", sums["Init"])
    line("Init to the first prologue (the table)", sums["table"])
    line("prologue (q_wait, first_key apart)",
         sums["prologue"] - sums["q_wait"] - sums["first_key"])
    line("q_wait (waiting for Q's tile)", sums["q_wait"])
    line("first_key (waiting for key tile 0)", sums["first_key"])
    line("loop", sums["loop"])
    line("epilogue (store_wait apart)", sums["epilogue"] - sums["store_wait"])
    line("store_wait (the last TMA stores)", sums["store_wait"])
    rest = (busy_live - sums["Init"] - sums["table"] - sums["prologue"] - sums["loop"]
            - sums["epilogue"])
    line("rest of the blocks (between ranges)", rest)
    line("SMs idle after their last block", tail)
    if items is not None and num_programs == len(live):  # loop cycles against steps
        coef, steps, full = loop_fit([b[4]["loop"] for b in live], items[[b[5] for b in live]])
        print(f"    loop fit: {coef[0] / ghz:.0f} ns + {coef[1] / ghz:.0f} ns a full step + "
              f"{coef[2] / ghz:.0f} ns a masked step; {full.sum():.0f} full and "
              f"{(steps - full).sum():.0f} masked steps")


def loop_fit(loop_cycles, item_rows):
    """(fixed, a full step, a masked step) cycles fitted by least squares to programs' loop
    cycles, and their steps and full steps, from each program's row of the table
    (mosaic_fwd.programs)."""
    y = np.asarray(loop_cycles, np.float64)
    steps = item_rows[:, 4].astype(np.float64)
    full = np.maximum(item_rows[:, 6] - item_rows[:, 5], 0).astype(np.float64)
    a = np.stack([np.ones_like(y), full, steps - full], 1)
    return np.linalg.lstsq(a, y, rcond=None)[0], steps, full


def persistent_programs(items, work, workers: int, heads: int):
    """Per worker (block) of the persistent forward, the (batch, item) of each program it runs
    with rows to store, in its order (mosaic_fwd's round_program): round r's lane is the worker,
    or counted from the other end in odd rounds, and its program w = r x workers + lane takes
    head w % heads of the (w // heads)-th code of the work list (mosaic_fwd.work_block reads
    the code). items [B, P, 7], work [B x P]."""
    from kvax._src.attention.mosaic_fwd import work_block

    b, num_items = items.shape[:2]
    total = heads * num_items * b
    r = np.arange(-(-total // workers))[:, None]
    worker = np.arange(workers)[None, :]
    w = r * workers + np.where(r % 2 == 0, worker, workers - 1 - worker)  # [rounds, workers]
    code = np.asarray(work)[np.minimum(w // heads, b * num_items - 1)]
    batch, item = (np.asarray(x) for x in work_block(np.maximum(code, 0), num_items))
    live = (w < total) & (code >= 0) & (items[batch, item, 2] > items[batch, item, 1])
    return [list(zip(batch[live[:, k], k].tolist(), item[live[:, k], k].tolist()))
            for k in range(workers)]


def persistent_records(buffer, names, space: int, taken):
    """Per program recorded by a consumer of the persistent forward: (block, consumer, its
    index in the block, (batch, item), {phase: cycles}), the phases being "gap" (from the
    previous program's epilogue, or Init, to this prologue: reading the work list and the
    table; its GAP_PARTS apart), each of those parts, "prologue" (its PROLOGUE_PARTS apart),
    each of those parts, "loop" and "epilogue". Only programs whose three ranges fit the
    profiler's space are recorded."""
    entries = buffer.reshape(-1, 3, space * 4).astype(np.int64)
    unname = {v: k for k, v in names.items()}
    records = []
    for blk in range(entries.shape[0]):
        for wg in range(2):
            top, nested, last_exit = [], {}, None
            for name, enter, exit_, depth in walk(entries[blk, wg], unname, space):
                if exit_ is None:
                    break
                if depth == 0:
                    top.append((name, enter, exit_))
                elif top:  # inside the top-level range entered last
                    inner = nested.setdefault(len(top) - 1, {})
                    inner[name] = inner.get(name, 0) + _after(exit_, enter)
            # programs: prologue, loop, epilogue in turn after Init
            index, between = 0, {}
            for i, (name, enter, exit_) in enumerate(top):
                if name == "Init":
                    last_exit = exit_
                if name in GAP_PARTS:  # a named range between two programs
                    between[name] = between.get(name, 0) + _after(exit_, enter)
                if name != "prologue" or [n for n, _, _ in top[i:i + 3]] != [
                        "prologue", "loop", "epilogue"]:
                    continue
                inner = nested.get(i, {})  # the ranges inside this prologue
                phases = {name: between.get(name, 0) for name in GAP_PARTS}
                phases["gap"] = _after(enter, last_exit) - sum(phases.values())
                between = {}
                phases.update((name, inner.get(name, 0)) for name in PROLOGUE_PARTS)
                phases["prologue"] = _after(exit_, enter) - sum(
                    phases[name] for name in PROLOGUE_PARTS)
                phases["loop"] = _after(top[i + 1][2], top[i + 1][1])
                phases["epilogue"] = _after(top[i + 2][2], top[i + 2][1])
                last_exit = top[i + 2][2]
                if index < len(taken[blk]):
                    records.append((blk, wg, index, taken[blk][index], phases))
                index += 1
    return records


# the ranges inside the persistent forward's prologue, each apart from the rest of it: the
# waits for Q's tile and the first key tile, for the last program's stores to read shared memory,
# and the consumers' rendezvous
PROLOGUE_PARTS = ("q_wait", "first_key", "store_read", "meet")
# the ranges between two programs a trial may name, each apart from the rest of the gap (none in
# today's kernel; "ahead": the loads for later rounds, "landed": the wait for them after a
# program, docs/bench/h200-2026-11-28-prologue)
GAP_PARTS = ("ahead", "landed")
PERSISTENT_PHASES = ("gap",) + GAP_PARTS + ("prologue",) + PROLOGUE_PARTS + ("loop", "epilogue")


def summarize_persistent(records, items, label: str):
    """Where a persistent program's cycles go: each phase's mean per program and share (and
    each consumer's median and 90th percentile), the first program of each block (its Q loaded
    in its prologue) left out, and a fit of the loop's cycles on the program's full and masked
    steps (one block per SM: no clock rate from the blocks' start times, so cycles only); then
    the phases outside the loop from each consumer's fourth program on."""
    later = [r for r in records if r[2] > 0]
    if not later:
        print(f"{label}: no program past each block's first was recorded (a larger --space)")
        return
    sums = {p: float(sum(r[4][p] for r in later)) for p in PERSISTENT_PHASES}
    total = sum(sums.values())
    blocks = len({r[0] for r in records})
    print(f"{label}: {len(later)} programs recorded past each block's first, in {blocks} "
          f"blocks (per consumer)")
    for p in PERSISTENT_PHASES:  # the mean, then each consumer's median and 90th percentile
        spread = "  ".join(
            f"consumer {wg} p50 {p50:6.0f} p90 {p90:6.0f}" for wg in (0, 1)
            for p50, p90 in [np.percentile([r[4][p] for r in later if r[1] == wg] or [0],
                                           [50, 90])])
        print(f"    {p:<12} {sums[p] / total * 100:5.1f}%  {sums[p] / len(later):8.0f} cycles"
              f"  ({spread})")
    coef, steps, full = loop_fit([r[4]["loop"] for r in later],
                                 np.array([items[r[3][1]] for r in later]))  # batch 1
    print(f"    loop fit: {coef[0]:.0f} cycles + {coef[1]:.0f} a full step + {coef[2]:.0f} a "
          f"masked step; mean {steps.mean():.2f} steps a program, {full.mean():.2f} full; "
          f"outside the loop {(1 - sums['loop'] / total) * 100:.1f}% of the programs' cycles")
    # the recorded programs are each worker's first: its second and third start while every SM
    # loads at once (their gap or prologue 1500-1800 cycles longer on an H200), so the rounds
    # after them apart
    steady = [r for r in records if r[2] >= STEADY_FROM]
    if steady:
        means = {p: np.mean([r[4][p] for r in steady]) for p in PERSISTENT_PHASES}
        outside = sum(means.values()) - means["loop"]
        print(f"    from each consumer's program {STEADY_FROM} on ({len(steady)}): gap "
              f"{means['gap']:.0f}, prologue {means['prologue']:.0f}, epilogue "
              f"{means['epilogue']:.0f}, outside the loop {outside:.0f} cycles "
              f"({outside / (outside + means['loop']) * 100:.1f}%)")


STEADY_FROM = 3  # a consumer's programs from this index on (0 is its first)


def block_items(items, blocks: int, num_heads: int):
    """Each block's row of the program table in the plain (not persistent) forward: the profiler
    numbers blocks (x, y, z) = (batch, q_seq, heads) with z fastest (the Pallas grid reversed);
    batch 1 here, and program q_seq takes item num_items - 1 - q_seq."""
    num_items = items.shape[0]
    return items[num_items - 1 - (np.arange(blocks) // num_heads) % num_items]


def summarize_saved(path: str, space: int, num_heads: int = 32):
    """summarize() again on a saved DIR/row<N>-<config>.npz (no GPU needed)."""
    saved = np.load(path)
    names = {str(name): i for i, name in enumerate(saved["names"])}
    buffer, per_block = saved["buffer"], None
    blocks = len(buffer) // (3 * space * 4)
    if "work" in saved:  # the persistent forward: one block per worker, many programs each
        items = saved["items"]
        taken = persistent_programs(items[None], saved["work"], blocks, int(saved["heads"]))
        records = persistent_records(buffer, names, space, taken)
        summarize_persistent(records, items, os.path.basename(path))
        return
    if "items" in saved:  # the forward's table
        per_block = block_items(saved["items"], blocks,
                                int(saved["heads"]) if "heads" in saved else num_heads)
    summarize(parse(buffer, names, space), per_block, os.path.basename(path))


def backward_timeline(rows, space: int, repeats: int, out_dir: str, shape=None):
    """The default (deterministic) Mosaic backward under jax.grad, profiled alone; shape:
    (query heads, kv heads, head dim) in place of the rows' own."""
    import dataclasses

    import jax
    import jax.numpy as jnp

    import kvax.ops
    from kvax._src.attention import mosaic_bwd
    from workloads import inputs

    for r in rows:
        w = ROWS[int(r)]
        if shape:
            w = dataclasses.replace(w, num_heads=shape[0], num_kv_heads=shape[1],
                                    head_dim=shape[2])
        q, k, v, pos, seg = inputs(w)
        q, k, v = (jnp.asarray(x, w.dtype) for x in (q, k, v))
        pos, seg = jnp.asarray(pos), jnp.asarray(seg)
        masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True,
                                               is_causal=w.causal)

        def make():
            jax.clear_caches()  # kvax's own jitted pieces would keep the kernel traced before

            def loss(q, k, v):
                out = kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                               scale=w.head_dim ** -0.5, is_causal=w.causal)
                return jnp.sum(out.astype(jnp.float32))

            return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))

        plain = make()
        ms = median_ms(lambda: plain(q, k, v), repeats)
        buffer, grid, names = capture(make, (q, k, v), space, out_dir, mosaic_bwd, "backward")
        label = f"{w.name} backward"
        print(f"{label}: forward+backward {ms:.3f} ms without the profiler", flush=True)
        summarize(parse(buffer, names, space), None, label)
        tag = "-h{}".format(w.head_dim) if shape else ""
        np.savez_compressed(os.path.join(out_dir, f"row{r}-backward{tag}.npz"), buffer=buffer,
                            grid=np.array(grid), names=np.array(sorted(names, key=names.get)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--configs", default="64x128x2")
    p.add_argument("--rows", default="1,0")
    p.add_argument("--space", type=int, default=8, help="profiler events per warpgroup")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--out", default="/tmp/profile_timeline")
    p.add_argument("--backward", action="store_true",
                   help="the default Mosaic backward (under jax.grad) instead of the forward")
    p.add_argument("--shape", default=None, metavar="HEADS,KV_HEADS,HEAD_DIM",
                   help="with --backward: the rows at these heads and head dim (e.g. 16,8,256)")
    p.add_argument("--load", nargs="*", default=(),
                   help="saved .npz files to summarize again (taken with --space), no GPU")
    args = p.parse_args(argv)
    if args.load:
        for path in args.load:
            summarize_saved(path, args.space)
        return
    import jax

    from kvax._src.attention.variant import MaskVariant
    from kvax.ops import create_attention_mask
    from kvax.utils import default_params

    os.makedirs(args.out, exist_ok=True)
    print("device", jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
    if args.backward:
        shape = tuple(int(x) for x in args.shape.split(",")) if args.shape else None
        return backward_timeline(args.rows.split(","), args.space, args.repeats, args.out, shape)
    params = default_params(jax.devices()[0].device_kind, backward=False)
    configs = args.configs.split(",")
    for r in args.rows.split(","):
        w = ROWS[int(r)]
        inputs, fns = kernels(w, configs, params)
        q, k, v, pos, seg = inputs
        (mask,) = create_attention_mask(pos, seg, pos, seg, fwd_params=params, is_causal=w.causal)
        for text in configs:
            mosaic_fwd = forward_module(text)  # (a "~NAME" config's own copy)
            plain_ms = median_ms(lambda: fns[text](q, k, v), args.repeats)
            buffer, grid, names = capture(lambda: kernels(w, [text], params)[1][text],
                                          (q, k, v), args.space, args.out, mosaic_fwd, "forward")
            cfg = parse_config(text)
            doc_runs = mosaic_fwd.chunked(mask, cfg, w.head_dim, MaskVariant(w.causal))
            all_items = mosaic_fwd.programs(mask, cfg, w.seq_len, w.seq_len, doc_runs=doc_runs)
            items = np.asarray(all_items)[0]
            label = f"{w.name} {text}"
            print(f"{label}: {plain_ms:.3f} ms without the profiler", flush=True)
            saved = {"buffer": buffer, "grid": np.array(grid), "items": items,
                     "heads": w.num_heads, "names": np.array(sorted(names, key=names.get))}
            if cfg.persistent:  # batch 1: the work list's codes are the row's items
                saved["work"] = np.asarray(mosaic_fwd.persistent_work(all_items)).reshape(-1)
            # (a "~NAME" config's "~" is not a character the device tool brings back)
            path = os.path.join(args.out, f"row{r}-{text.replace('~', '-ab-')}.npz")
            np.savez_compressed(path, **saved)
            summarize_saved(path, args.space)


if __name__ == "__main__":
    main()
