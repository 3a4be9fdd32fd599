"""What soft-capping costs on 64k tokens in 8 documents (a Hopper GPU), in one process: the
forward, forward+backward by default (deterministic) and with deterministic=False, for no cap
and each cap in --caps (bfloat16 inputs: no row maxima, on blockwise.capped_reference's fixed
reference, MosaicConfig.fixed_reference's default since session 57), and with
--overlap each of them again with the Mosaic forward's MosaicConfig(overlap=True) (`ovl`), with
--maxima each cap again with running row maxima on the tanhs (MosaicConfig(fixed_reference=False),
the default before session 57: `maxima`); with --sinks also attention sinks without a cap
(`sinks`: one random logit per query head). Every configuration is compiled first; then
--rounds rounds time them in turn, so that clocks and heat drift over all of them alike:

    python tools/dev/spike_softcap.py [--caps 30,50] [--rounds 4] [--repeats 10] [--overlap] \
        [--maxima] [--sinks] [--layers 8] [--head-dim 256 --heads 16 --kv-heads 8]

--layers N times N calls chained in each jitted function (each output the next call's query, as
bench.py --layers), so that no call's dispatch dilutes the cost; times are per call.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import against, in_turns, layered  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--caps", default="30", help="comma-separated soft caps")
    parser.add_argument("--doc-median", type=int, default=0,
                        help="log-normal documents of this median length, shuffled ids "
                             "(default: 8 documents)")
    parser.add_argument("--seq-len", type=int, default=65536)
    parser.add_argument("--head-dim", type=int, default=128, help="e.g. 256 (Gemma's)")
    parser.add_argument("--heads", type=int, default=32, help="query heads")
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--overlap", action="store_true",
                        help="also time each configuration with MosaicConfig(overlap=True)")
    parser.add_argument("--maxima", action="store_true",
                        help="also time each cap with MosaicConfig(fixed_reference=False)")
    parser.add_argument("--sinks", action="store_true", help="also time sinks without a cap")
    parser.add_argument("--layers", type=int, default=1, help="calls chained per timing")
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp

    import kvax
    from kvax._src.attention import mosaic_fwd

    n = args.seq_len
    shape = dict(head_dim=args.head_dim, num_heads=args.heads, num_kv_heads=args.kv_heads)
    w = (Workload(n, num_pad_tokens=1000 * n // 65536, doc_median=args.doc_median,
                  ids="shuffled", **shape) if args.doc_median
         else Workload(n, num_segments=8, num_pad_tokens=2000 * n // 65536, **shape))
    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)

    sink_logits = jnp.asarray(np.random.default_rng(5).normal(0, 1, w.num_heads), jnp.float32)

    def compiled(cap, deterministic, grad, sinks=False):
        attn = layered(lambda q, k, v: kvax.ops.flash_attention(
            q, k, v, pos, seg, pos, seg, mask=masks, scale=w.head_dim ** -0.5,
            logits_soft_cap=cap, deterministic=deterministic,
            sinks=sink_logits if sinks else None), args.layers)

        fn = attn if not grad else jax.grad(
            lambda q, k, v: jnp.sum(attn(q, k, v).astype(jnp.float32)), argnums=(0, 1, 2))
        return jax.jit(fn).lower(q, k, v).compile()

    # (name, cap, the MosaicConfig fields set, sinks)
    configs = [("no cap", None, {}, False)] + ([("sinks", None, {}, True)] if args.sinks else [])
    caps = [float(c) for c in filter(None, args.caps.split(","))]
    configs += [(f"cap {cap:g}", cap, {}, False) for cap in caps]
    if args.overlap:
        configs += [(f"{name} ovl", cap, {"overlap": True}, sinks)
                    for name, cap, _, sinks in configs]
    if args.maxima:
        configs += [(f"cap {cap:g} maxima", cap, {"fixed_reference": False}, False)
                    for cap in caps]
    choose = mosaic_fwd.choose_config
    runs = {}
    for name, cap, fields, sinks in configs:
        config = ((lambda *a, fields=fields, **kw: dataclasses.replace(choose(*a, **kw), **fields))
                  if fields else choose)
        with mock.patch.object(mosaic_fwd, "choose_config", config):
            jax.clear_caches()  # each configuration traced afresh under its own switch
            runs[name] = {kind: (lambda exe=compiled(cap, deterministic, grad, sinks):
                                 exe(q, k, v))
                          for kind, deterministic, grad in [("fwd", True, False),
                                                            ("f+b", True, True),
                                                            ("f+b nondet", False, True)]}
        print(f"compiled {name}", flush=True)

    times = in_turns(runs, args.rounds, args.repeats, label=str)
    print(f"\nmedian of {args.rounds} rounds (ms per call of {args.layers} chained, cost against "
          "no cap): " + " | ".join(runs["no cap"]))
    print("\n".join(against(times, "no cap", args.layers)), flush=True)


if __name__ == "__main__":
    main()
