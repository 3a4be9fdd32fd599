"""Compiled memory of tools/bench.py's timed forward+backward with --layers L (L attention calls
chained in one jitted function, each output the next call's query): ours (both backwards) and
FA3 at each L, and what one more layer adds. Compiles only; runs nothing.

    python tools/dev/memory_layers.py --layers 1 2 4 8 --doc-median 1100
    python tools/dev/memory_layers.py --layers 2 --only kvax --dump DIR

With --dump, XLA's dumps of each compiled step go to DIR
(*buffer-assignment.txt: the largest allocations and the values they hold), to see what each
layer keeps. Needs a GPU (FA3: Hopper and flash-attn3-jax).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--layers", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--doc-median", type=int, default=1100)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--dump", default=None)
    p.add_argument("--only", default=None, help="one of: kvax, 'kvax nondet.', fa3")
    args = p.parse_args(argv)
    if args.dump:  # before jax starts: XLA reads its flags once
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={args.dump}"
                                   " --xla_dump_hlo_module_re=.*chain.*")
    import jax
    import jax.numpy as jnp
    import numpy as np

    import bench
    from kvax.ops import create_attention_mask, flash_attention
    from measure import layered
    from peers import peer
    from workloads import for_args, inputs

    w = for_args(bench.parse_args(["mha_bwd", "--doc-median", str(args.doc_median),
                                   "--num-pad-tokens", "1000", "--ids", "shuffled"]),
                 args.seq_len)
    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    masks = jax.jit(lambda p, s: create_attention_mask(p, s, p, s, calc_bwd_mask=True))(pos, seg)
    fa3 = peer("fa3").jax_attention(w, False)
    impls = {
        "kvax": (lambda q, k, v, m: flash_attention(q, k, v, pos, seg, pos, seg, mask=m,
                                                    scale=w.head_dim ** -0.5), masks),
        "kvax nondet.": (lambda q, k, v, m: flash_attention(
            q, k, v, pos, seg, pos, seg, mask=m, scale=w.head_dim ** -0.5,
            deterministic=False), masks),
        "fa3": (fa3.attn, fa3.extra(pos, seg)),
    }
    gib = 2.0 ** 30
    print(f"{w.name}: q {q.nbytes / gib:.2f} GiB, k and v {k.nbytes / gib:.2f} GiB each")
    for name, (attn, extra) in impls.items():
        if args.only and name != args.only:
            continue
        sizes = []
        for layers in args.layers:
            chain = layered(attn, layers)

            def chain_step(q, k, v, extra, dout, chain=chain):
                _, vjp = jax.vjp(lambda q, k, v: chain(q, k, v, extra), q, k, v)
                return vjp(dout)

            m = jax.jit(chain_step).lower(q, k, v, extra, q).compile().memory_analysis()
            total = m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes
            sizes.append(total)
            print(f"{name:<13} layers {layers:2d}: {total / gib:6.2f} GiB (temporaries "
                  f"{m.temp_size_in_bytes / gib:.2f}, arguments "
                  f"{m.argument_size_in_bytes / gib:.2f}, outputs "
                  f"{m.output_size_in_bytes / gib:.2f})", flush=True)
        if len(sizes) > 1:
            per = np.diff(sizes) / np.diff(args.layers) / gib
            print(f"{name:<13} each further layer: " + " ".join(f"{x:.2f}" for x in per)
                  + " GiB", flush=True)


if __name__ == "__main__":
    main()
