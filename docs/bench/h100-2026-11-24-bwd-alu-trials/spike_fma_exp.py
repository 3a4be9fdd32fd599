"""The Mosaic backward with some of P's exponentials on the FMA pipe (mosaic_bwd.exp2_fma) instead
of the MUFU, which exp2 and a soft cap's tanh share: forward+backward by default (fixed-point dQ)
for each layout, without a cap and with --cap, for each count of P's 64 columns in --columns, on a
Hopper GPU in one process. Every configuration is compiled first and its gradients compared with
the all-MUFU ones (largest difference against the largest value); then --rounds rounds time them
in turn:

    git apply docs/bench/h100-2026-11-24-bwd-alu-trials/fma-exp-columns.patch   # on ceb1534
    python docs/bench/h100-2026-11-24-bwd-alu-trials/spike_fma_exp.py [--layouts docs8,lognormal] \
        [--columns 0,16,32] [--cap 30]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from unittest import mock

import numpy as np

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools")
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(TOOLS, "dev"))
from measure import in_turns  # noqa: E402
from spike_mask_cost import LAYOUTS  # noqa: E402
from workloads import inputs  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--layouts", default="docs8,lognormal")
    parser.add_argument("--columns", default="0,16,32")
    parser.add_argument("--cap", type=float, default=30.0, help="0: no capped runs")
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp

    import kvax
    from kvax._src.attention import mosaic_bwd

    columns = [int(c) for c in args.columns.split(",")]
    caps = [None] + ([args.cap] if args.cap else [])
    default = mosaic_bwd.BackwardConfig()
    runs = {}
    for layout in args.layouts.split(","):
        w = LAYOUTS[layout]
        q, k, v, pos, seg = inputs(w)
        q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
        pos, seg = jnp.asarray(pos), jnp.asarray(seg)
        masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)
        for cap in caps:
            first = None
            for cols in columns:
                config = dataclasses.replace(default, fma_exp_columns=cols)
                with mock.patch.object(mosaic_bwd, "BackwardConfig", lambda c=config: c):
                    jax.clear_caches()

                    def attn(q, k, v, cap=cap):
                        return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                                        scale=w.head_dim ** -0.5,
                                                        logits_soft_cap=cap)

                    grad = jax.grad(lambda q, k, v: jnp.sum(attn(q, k, v).astype(jnp.float32)),
                                    argnums=(0, 1, 2))
                    exe = jax.jit(grad).lower(q, k, v).compile()
                name = (layout, "no cap" if cap is None else f"cap {cap:g}", f"{cols} cols")
                runs[name] = {"f+b": lambda exe=exe, q=q, k=k, v=v: exe(q, k, v)}
                out = [np.asarray(x.astype(jnp.float32)) for x in exe(q, k, v)]
                first = first or out
                diffs = " ".join(f"{np.max(np.abs(a - b)) / np.max(np.abs(b)):.2g}"
                                 for a, b in zip(out, first))
                print(f"compiled {' '.join(name)}: finite {all(np.isfinite(x).all() for x in out)}"
                      f", max |d - all MUFU| / max (dq dk dv) {diffs}", flush=True)

    times = in_turns(runs, args.rounds, args.repeats, label=" ".join)
    print(f"\nmedian of {args.rounds} rounds: f+b ms (against 0 columns of the same layout/cap)")
    for name, t in times.items():
        ms = np.median(t["f+b"])
        base = np.median(times[(name[0], name[1], f"{columns[0]} cols")]["f+b"])
        print(f"{' '.join(name):28s} {ms:7.2f} ({ms / base - 1:+.1%})  rounds "
              f"{np.round(t['f+b'], 2)}", flush=True)


if __name__ == "__main__":
    main()
