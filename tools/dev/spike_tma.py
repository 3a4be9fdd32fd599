"""Spike (issue: FA3-class speed): the forward with K/V tiles by device-side TMA descriptors
against today's pointer loads, same inputs, one process.

    python tools/dev/spike_tma.py [--seq-len 65536] [--num-segments 8]

Prints fwd ms and TF/s for each, and the largest difference between the two outputs (they must
agree: same products, same order). Rows: documents + padding, log-normal short documents, one
causal document. Results go to the tuning notes.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import median_ms  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


def run(w: Workload, repeats: int) -> dict:
    import jax
    import jax.numpy as jnp

    from kvax._src.attention import triton_fwd
    from kvax.ops import create_attention_mask
    from kvax.utils import default_params

    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    params = default_params(jax.devices()[0].device_kind, backward=False)
    (mask,) = create_attention_mask(pos, seg, pos, seg, fwd_params=params)
    scale = jnp.float32(w.head_dim ** -0.5)
    out = {}
    for tma in (False, True):
        fn = jax.jit(lambda q, k, v, tma=tma: triton_fwd.forward(
            q, k, v, scale, pos, seg, pos, seg, mask, sequential=False, params=params,
            tma=tma)[0])
        result = jax.block_until_ready(fn(q, k, v))
        ms = median_ms(lambda: fn(q, k, v), repeats)
        out[tma] = (ms, np.asarray(result, np.float32))
    flops = w.flops(backward=False)
    diff = float(np.nanmax(np.abs(out[True][1] - out[False][1])))
    return dict(workload=w.name, pointer_ms=out[False][0], tma_ms=out[True][0],
                pointer_tflops=flops / out[False][0] / 1e9, tma_tflops=flops / out[True][0] / 1e9,
                max_diff=diff, finite=bool(np.all(np.isfinite(out[True][1]))))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args(argv)
    rows = [Workload(args.seq_len, 8, 2000), Workload(args.seq_len, num_pad_tokens=1000,
                                                      doc_median=1100),
            Workload(args.seq_len, num_pad_tokens=1000, doc_median=190),
            Workload(args.seq_len, 1, 0)]
    for w in rows:
        r = run(w, args.repeats)
        print(f"{r['workload']:<58} pointer {r['pointer_ms']:.2f} ms {r['pointer_tflops']:.0f} "
              f"TF/s | TMA {r['tma_ms']:.2f} ms {r['tma_tflops']:.0f} TF/s | max diff "
              f"{r['max_diff']:.2e} finite {r['finite']}", flush=True)


if __name__ == "__main__":
    main()
