"""What soft-capping costs the Mosaic kernels on 64k tokens in 8 documents (a Hopper GPU; forward,
and forward+backward with deterministic=False), caps c given by --caps:

    python tools/dev/spike_softcap.py [--repeats 10]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import median_ms  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--caps", default="30", help="comma-separated soft caps")
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp

    import kvax

    w = Workload(65536, num_segments=8, num_pad_tokens=2000)
    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)
    base = {}
    for cap in [None] + [float(c) for c in args.caps.split(",")]:
        def attn(q, k, v, cap=cap):
            return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                            scale=w.head_dim ** -0.5, backend="mosaic",
                                            logits_soft_cap=cap, deterministic=False)

        fwd = jax.jit(attn)
        fb = jax.jit(jax.grad(lambda q, k, v: jnp.sum(attn(q, k, v).astype(jnp.float32)),
                              argnums=(0, 1, 2)))
        times = (median_ms(lambda: fwd(q, k, v), args.repeats),
                 median_ms(lambda: fb(q, k, v), args.repeats))
        base = base or dict(zip(("fwd", "fb"), times))
        name = "no cap" if cap is None else f"cap {cap:g}"
        print(f"{name:12s} fwd {times[0]:7.2f} ms ({times[0] / base['fwd'] - 1:+.1%})   "
              f"f+b {times[1]:7.2f} ms ({times[1] / base['fb'] - 1:+.1%})", flush=True)


if __name__ == "__main__":
    main()
