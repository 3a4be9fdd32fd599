"""The Mosaic kernels' loops, each step's code emitted once per kind or not, on a Hopper GPU in
one process: compile seconds of each (Mosaic GPU's LLVM and ptxas run inside XLA's compile), then
forward and forward+backward timed in turns, N calls chained per timing as a model's layers:
- "default": the forward's steps by masked_full_masked (each step's code once), the backward's
  by head_steps (three loops a query head, the masked step's code twice);
- "flat": the backward too with each step's code once, all the group's heads in one loop of
  2 x group rounds (masked_then_full);
- "nested": the backward a loop over the group's heads, each head a masked_full_masked;
- "three loops": the forward too three loops in a row (as before 2026-11-27).

    python tools/dev/spike_step_copies.py [--doc-median 1100 | --num-segments 8] [--layers 8] \
        [--rounds 10] [--repeats 3]

All must agree bitwise: the steps run in the same order.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import against, in_turns, layered  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


def three_loops(lo, lf, uf, hi, masked_step, full_step, carry):
    """masked_full_masked as it was: three loops, the masked step's code twice."""
    from jax import lax

    carry = lax.fori_loop(lo, lf, masked_step, carry)
    carry = lax.fori_loop(lf, uf, full_step, carry)
    return lax.fori_loop(uf, hi, masked_step, carry)


def per_head(loops):
    """mosaic_bwd.head_steps with each head's steps by loops."""
    def steps(group, per_head, lf, uf, masked_step, full_step, carry):
        from jax import lax

        def head(g, carry):
            base = g * per_head
            return loops(base, base + lf, base + uf, base + per_head,
                         lambda s, c: masked_step(s, g, c), lambda s, c: full_step(s, g, c),
                         carry)

        return lax.fori_loop(0, group, head, carry)

    return steps


def flat(group, per_head, lf, uf, masked_step, full_step, carry):
    """mosaic_bwd.head_steps as one loop of 2 x group rounds, each step's code once."""
    from jax import lax

    from kvax._src.attention.mosaic_fwd import masked_then_full

    def one_round(r, carry):
        g = lax.div(r, 2)
        base = g * per_head
        return masked_then_full(lax.rem(r, 2) == 0, base, base + lf, base + uf, base + per_head,
                                lambda s, c: masked_step(s, g, c),
                                lambda s, c: full_step(s, g, c), carry)

    return lax.fori_loop(0, 2 * group, one_round, carry)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--doc-median", type=int, default=0,
                   help="log-normal documents of this median, shuffled ids")
    p.add_argument("--num-segments", type=int, default=8)
    p.add_argument("--num-pad-tokens", type=int, default=None)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    import jax
    import jax.numpy as jnp

    import kvax
    from kvax._src.attention import mosaic_bwd, mosaic_fwd

    n = args.seq_len
    pad = args.num_pad_tokens
    w = (Workload(n, num_pad_tokens=1000 * n // 65536 if pad is None else pad,
                  doc_median=args.doc_median, ids="shuffled") if args.doc_median
         else Workload(n, num_segments=args.num_segments,
                       num_pad_tokens=2000 * n // 65536 if pad is None else pad))
    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)

    attn = layered(lambda q, k, v: kvax.ops.flash_attention(
        q, k, v, pos, seg, pos, seg, mask=masks, scale=w.head_dim ** -0.5), args.layers)

    grad = jax.grad(lambda q, k, v: jnp.sum(attn(q, k, v).astype(jnp.float32)),
                    argnums=(0, 1, 2))
    runs, outputs = {}, {}
    two_rounds = mosaic_fwd.masked_full_masked
    variants = (("default", two_rounds, mosaic_bwd.head_steps),
                ("flat", two_rounds, flat),
                ("nested", two_rounds, per_head(two_rounds)),
                ("three loops", three_loops, mosaic_bwd.head_steps))  # head_steps: 3 loops
    for name, forward_loops, backward_loops in variants:
        with mock.patch.object(mosaic_fwd, "masked_full_masked", forward_loops), \
             mock.patch.object(mosaic_bwd, "head_steps", backward_loops):
            runs[name] = {}
            for kind, fn in (("fwd", attn), ("f+b", grad)):
                jax.clear_caches()  # each traced and compiled afresh under its own loops
                t0 = time.perf_counter()
                lowered = jax.jit(fn).lower(q, k, v)
                t1 = time.perf_counter()
                exe = lowered.compile()
                t2 = time.perf_counter()
                print(f"{name} {kind}: lowered in {t1 - t0:.1f} s, XLA compile {t2 - t1:.1f} s",
                      flush=True)
                runs[name][kind] = lambda exe=exe: exe(q, k, v)
                outputs[name, kind] = jax.tree.leaves(jax.block_until_ready(exe(q, k, v)))
    for kind in ("fwd", "f+b"):
        same = all(np.array_equal(np.asarray(a), np.asarray(b)) for name, *_ in variants
                   for a, b in zip(outputs[name, kind], outputs["three loops", kind]))
        print(f"{kind}: all agree bitwise: {same}")

    times = in_turns(runs, args.rounds, args.repeats, label=str)
    print(f"\nmedian of {args.rounds} rounds, ms per call of {args.layers} chained "
          "(against three loops): " + " | ".join(runs["three loops"]))
    print("\n".join(against(times, "three loops", args.layers)), flush=True)


if __name__ == "__main__":
    main()
