"""What each part of create_attention_mask costs to compile, one part per fresh process (after a
small warm-up compile, so that XLA's once-a-process start falls there): seconds to lower and to
compile (XLA), its first and second runs, the median of RUNS runs after them, and its sorts
(in the step as lowered; after XLA's passes, those given to CUB and those XLA compiles).

    python tools/dev/mask_compile.py --part all [--doc-median 1100] [--seq-len 65536]

Parts: relabel (relabel_by_appearance), fwd / dq / dkdv (one block mask each, the device's
default blocks), doc_runs, schedule (the Hopper forward's tables and layouts from a built
forward mask), programs and layouts (the schedule's table of programs, and its key-rank
layouts, apart), masks (create_attention_mask with calc_bwd_mask, as on this device),
masks-no-schedule (the same without the tables). --part all runs each in its own process.
--profile also names the three LLVM modules XLA took longest to compile (jax's profiler).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from workloads import Workload, inputs  # noqa: E402

PARTS = ("relabel", "fwd", "dq", "dkdv", "doc_runs", "schedule", "programs", "layouts", "masks",
         "masks-no-schedule")
TABLES = ("schedule", "programs", "layouts")  # parts read from a built forward mask
RUNS = 50


def measure(part: str, workload: dict, profile: bool = False) -> dict:
    import jax
    import jax.numpy as jnp

    from kvax._src.attention import api, mask, mosaic_fwd, runs
    from kvax._src.config import PADDING_SEGMENT_ID, current_device_kind, default_params

    t0 = time.perf_counter()
    jax.block_until_ready(jax.jit(lambda x: x * 2 + 1)(jnp.ones((8,))))
    warm_up = time.perf_counter() - t0
    _, _, _, pos, seg = inputs(Workload(**workload))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    kind = current_device_kind()
    fwd_p, bwd_p = default_params(kind, backward=False), default_params(kind, backward=True)
    q_lab, k_lab = jax.jit(mask.relabel_by_appearance)(seg, seg)

    def one(kind_, q_block, kv_block, params):
        return lambda p, q_l, k_l: mask.block_mask(p, q_l, p, k_l, kind=kind_,
                                                   query_block=q_block, kv_block=kv_block,
                                                   params=params)

    fns = {
        "relabel": (lambda s: mask.relabel_by_appearance(s, s), (seg,)),
        "fwd": (one("fwd", fwd_p.query_block_size, fwd_p.kv_block_size, fwd_p),
                (pos, q_lab, k_lab)),
        "dq": (one("dq", *bwd_p.dq_blocks, bwd_p), (pos, q_lab, k_lab)),
        "dkdv": (one("dkdv", bwd_p.query_block_size, bwd_p.kv_block_size, bwd_p),
                 (pos, q_lab, k_lab)),
        "doc_runs": (lambda p, l: runs.doc_runs(p, l, p, l), (pos, q_lab)),
        "masks": (lambda p, s: api.create_attention_mask(p, s, p, s, calc_bwd_mask=True),
                  (pos, seg)),
    }
    if part in TABLES:
        built = jax.jit(lambda p, s: api.create_attention_mask(p, s, p, s))(pos, seg)[0]
        config = mosaic_fwd.MosaicConfig(persistent=True, rank_rule=True)  # schedule()'s
        t = pos.shape[1]
        fns["schedule"] = (lambda m, p, s: mosaic_fwd.schedule(m, p, s, p, s,
                                                               pad_id=PADDING_SEGMENT_ID),
                           (built, pos, seg))
        fns["programs"] = (lambda m: mosaic_fwd.programs(m, config, t, t, doc_runs=m.doc_runs),
                           (built,))
        fns["layouts"] = (lambda p, s: mosaic_fwd.kernel_layouts(
            p, s, p, s, pad_id=PADDING_SEGMENT_ID, config=config, variant=built.variant),
            (pos, seg))
    patch = (mock.patch.object(api, "wants_schedule", lambda: False)
             if part == "masks-no-schedule" else contextlib.nullcontext())
    fn, args = fns["masks" if part == "masks-no-schedule" else part]
    trace_dir = tempfile.mkdtemp(prefix="kvax-mask-compile-") if profile else None
    with patch:
        t0 = time.perf_counter()
        lowered = jax.jit(fn).lower(*args)
        t1 = time.perf_counter()
        if profile:
            jax.profiler.start_trace(trace_dir)
        compiled = lowered.compile()
        t2 = time.perf_counter()
        if profile:
            jax.profiler.stop_trace()
    jax.block_until_ready(compiled(*args))
    t3 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    t4 = time.perf_counter()
    times = []
    for _ in range(RUNS):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append((time.perf_counter() - t) * 1e3)
    text = lowered.as_text()
    optimized = compiled.as_text() or ""
    modules = []
    if profile:
        from compile_profile import ranges

        modules = sorted(((r["ms"], r["name"][len("Compiling IR:"):])
                          for r in ranges(trace_dir) if r["name"].startswith("Compiling IR:")),
                         reverse=True)[:3]
    return dict(part=part, longest_modules=modules, warm_up_s=warm_up, lower_s=t1 - t0,
                compile_s=t2 - t1,
                first_run_s=t3 - t2, second_run_ms=(t4 - t3) * 1e3,
                median_run_ms=float(np.median(times)),
                hlo_ops=text.count(" = stablehlo."), whiles=text.count("stablehlo.while"),
                sorts=text.count("stablehlo.sort"),
                cub_sorts=len(re.findall(r'custom_call_target="[^"]*cub[^"]*"', optimized, re.I)),
                xla_sorts=len(re.findall(r"\bsort\(", optimized)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--part", default="all", choices=("all",) + PARTS)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--doc-median", type=int, default=1100)
    p.add_argument("--num-pad-tokens", type=int, default=1000)
    p.add_argument("--profile", action="store_true",
                   help="also the three LLVM modules that took XLA longest (ms, name)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    workload = dict(seq_len=args.seq_len, doc_median=args.doc_median,
                    num_pad_tokens=args.num_pad_tokens, ids="shuffled")
    if args.child:
        print(json.dumps(measure(args.part, workload, args.profile)))
        return
    rows = []
    for part in PARTS if args.part == "all" else (args.part,):
        out = subprocess.run([sys.executable, __file__, "--child", "--part", part,
                              "--seq-len", str(args.seq_len), "--doc-median",
                              str(args.doc_median), "--num-pad-tokens",
                              str(args.num_pad_tokens)] + ["--profile"] * args.profile,
                             capture_output=True, text=True)
        if out.returncode:
            print(f"{part}: failed\n{out.stderr[-2000:]}", flush=True)
            continue
        row = json.loads(out.stdout.splitlines()[-1])
        rows.append(row)
        print(f"{part:>18}: lower {row['lower_s']:.2f} s, compile {row['compile_s']:.2f} s, "
              f"first run {row['first_run_s']:.2f} s, second {row['second_run_ms']:.1f} ms "
              f"(median of {RUNS} after it {row['median_run_ms']:.2f} ms) "
              f"({row['hlo_ops']} ops, {row['whiles']} while, {row['sorts']} sort: "
              f"{row['cub_sorts']} by CUB, {row['xla_sorts']} by XLA; warm-up "
              f"{row['warm_up_s']:.2f} s)", flush=True)
        for ms, name in row["longest_modules"]:
            print(f"{'':>20}LLVM module {name}: {ms:.0f} ms", flush=True)
    return rows


if __name__ == "__main__":
    main()
