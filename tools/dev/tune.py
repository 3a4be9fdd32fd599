"""Kernel tuning sweep on the GPU: forward and backward block parameters on one workload; every
candidate's output (or gradients) is compared with the default's.

    source tools/gpu_env.sh && python3 tools/dev/tune.py --out $OUT/tune.json
    python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 --fwd --bwd 64,64,8,2
        # Gemma's shape, the backward's (mask) blocks only: the Mosaic channel split on Hopper
    ... --head-dim 256 --fwd --bwd 64,64,8,2 --triton-bwd
        # the Triton backward's tiles there instead, as the API ran before session 67
    ... --fwd --bwd --bwd-config rotate=1 rank_rule=1+rotate=1
        # the Mosaic backward with other BackwardConfig fields, each beside the default

Prints one line per candidate (ms, useful TF/s, relative difference from the default) and writes
them all to --out. Used to choose the defaults in kvax/_src/config.py and the tiles in
triton_common.choose_tiles
(results: docs/bench/h100-2026-11-22/tuning.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import median_ms  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--num-segments", type=int, default=8)
    p.add_argument("--num-pad-tokens", type=int, default=2000)
    p.add_argument("--doc-median", type=int, default=None,
                   help="log-normal document lengths with this median instead of equal cuts")
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128,
                   help="e.g. 256 (Gemma), where the backward on Hopper is the Triton one")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--skip-bwd", action="store_true")
    p.add_argument("--fwd", nargs="*", default=None, metavar="QB,KB,WARPS,STAGES",
                   help="only these forward parameter sets, after the default")
    p.add_argument("--bwd", nargs="*", default=None, metavar="QB,KB,WARPS,STAGES",
                   help="only these backward parameter sets, after the default")
    p.add_argument("--triton-bwd", action="store_true",
                   help="the Triton backward wherever the Mosaic one would run (Hopper)")
    p.add_argument("--bwd-config", nargs="*", default=(), metavar="FIELD=INT[+FIELD=INT]",
                   help="after the backward sweep, the default blocks again with the Mosaic "
                        "backward's config (chosen_config's) changed so, e.g. rotate=1")
    p.add_argument("--out", default="tune.json")
    args = p.parse_args()

    import jax
    import jax.numpy as jnp

    from kvax._src.attention import mosaic_bwd
    from kvax.ops import create_attention_mask, flash_attention
    from kvax.utils import FlashAttentionParamsConfig as P
    from kvax.utils import default_params

    if args.triton_bwd:
        mosaic_bwd.supported = lambda *_, **__: "tune.py --triton-bwd"
    w = Workload(args.seq_len, args.num_segments, args.num_pad_tokens,
                 num_heads=args.heads, num_kv_heads=args.kv_heads, head_dim=args.head_dim,
                 doc_median=args.doc_median)
    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    dout = jnp.asarray(np.random.default_rng(3).standard_normal(q.shape), jnp.bfloat16)
    scale = w.head_dim ** -0.5
    kind = jax.devices()[0].device_kind
    records = []

    def run(name, fwd_params, bwd_params, backward):
        masks = jax.jit(lambda p, s: create_attention_mask(
            p, s, p, s, fwd_params=fwd_params, bwd_params=bwd_params,
            calc_bwd_mask=backward))(pos, seg)

        def attn(q, k, v):
            return flash_attention(q, k, v, pos, seg, pos, seg, mask=masks, scale=scale,
                                   fwd_params=fwd_params, bwd_params=bwd_params)

        fwd = jax.jit(attn)
        out = fwd(q, k, v)
        if backward:
            step = jax.jit(lambda q, k, v: jax.vjp(attn, q, k, v)[1](dout))
            grads = step(q, k, v)
            ms = median_ms(lambda: step(q, k, v), args.repeats)
            return ms, grads
        ms = median_ms(lambda: fwd(q, k, v), args.repeats)
        return ms, (out,)

    def record(name, backward, fn):
        try:
            ms, result = fn()
            tf = w.flops(backward) / ms / 1e9
            rec = dict(name=name, backward=backward, ms=ms, tflops=tf)
        except Exception as err:  # a candidate that fails to compile or run is reported
            rec = dict(name=name, backward=backward, error=f"{type(err).__name__}: "
                       f"{str(err).splitlines()[0][:300] if str(err) else ''}")
            traceback.print_exc(limit=3)
            result = None
        records.append(rec)
        return rec, result

    def diff(result, base):
        errs = []
        for a, b in zip(result, base):
            a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
            errs.append(float(np.linalg.norm(a - b) / np.linalg.norm(b)))
        return max(errs)

    fwd_default = default_params(kind, backward=False)
    bwd_default = default_params(kind, backward=True)
    print(f"{kind}, {w.name}, {w.allowed_pairs():,} allowed pairs")

    base_bwd = []  # the backward sweep's first result

    def sweep(backward, candidates):
        """Time each candidate; the first one's result is the reference for the rest."""
        base = None
        for params in candidates:
            fp, bp = (fwd_default, params) if backward else (params, bwd_default)
            name = f"{'fwd+bwd' if backward else 'fwd'} {params}"
            rec, res = record(name, backward, lambda: run(name, fp, bp, backward))
            if res is not None:
                base = res if base is None else base
                rec["rel_diff"] = diff(res, base)
                if backward and not base_bwd:
                    base_bwd.append(base)
            print(json.dumps(rec), flush=True)

    fwd_params = [fwd_default, P(128, 64, 8, 3), P(128, 64, 4, 4), P(128, 128, 8, 2),
                  P(64, 128, 4, 3), P(128, 64, 8, 5)]
    if args.fwd is not None:
        fwd_params = [fwd_default] + [P(*map(int, c.split(","))) for c in args.fwd]
    sweep(False, fwd_params)
    if not args.skip_bwd:
        bwd_params = [bwd_default, P(32, 128, 8, 3), P(64, 64, 8, 3), P(32, 64, 4, 3),
                      P(64, 128, 8, 2), P(32, 128, 8, 2), P(64, 64, 4, 3)]
        if args.bwd is not None:
            bwd_params = [bwd_default] + [P(*map(int, c.split(","))) for c in args.bwd]
        sweep(True, bwd_params)
        chosen = mosaic_bwd.chosen_config
        for text in args.bwd_config:  # each against the sweep's first (the default config)
            edits = {f: int(x) for f, x in (e.split("=") for e in text.split("+"))}
            mosaic_bwd.chosen_config = lambda h=128, e=edits: dataclasses.replace(chosen(h), **e)
            name = f"fwd+bwd {bwd_default} {text}"
            rec, res = record(name, True, lambda: run(name, fwd_default, bwd_default, True))
            if res is not None:
                rec["rel_diff"] = diff(res, base_bwd[0])
            print(json.dumps(rec), flush=True)
        mosaic_bwd.chosen_config = chosen

    with open(args.out, "w") as f:
        json.dump(dict(device=kind, workload=w.name, records=records), f, indent=1)


if __name__ == "__main__":
    main()
