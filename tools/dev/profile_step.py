"""Where a forward+backward step's GPU time goes: runs one benchmark row's step under JAX's
profiler and sums the GPU kernels' durations by name (from the Perfetto trace), for the forward
alone, then forward+backward with the default backward and with deterministic=False. The layout
and the masks are the step's arguments, as in training (closed over, XLA would fold what the
forward builds from them into constants and the profile would miss it).

With --fa3, FlashAttention-3's varlen forward and forward+backward the same way after ours
(its document boundaries an argument too), to set our calls' time outside the kernel beside
FA3's.

    python tools/dev/profile_step.py [--doc-median 190] [--num-segments 8] [--steps 5]
        [--seq-len 65536] [--ids shuffled] [--fa3]
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import median_ms  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


def kernel_times(trace_dir: str, steps: int):
    """({kernel name: ms per step}, the GPU's ms per step from the first kernel's start to the
    last one's end: the kernels plus the GPU's idle gaps) from the Perfetto trace of `steps`
    steps (GPU events: those on threads whose name mentions a stream)."""
    (path,) = glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"), recursive=True)
    with gzip.open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    totals = collections.Counter()
    kernels = []
    for e in events:
        if e.get("ph") == "X" and "stream" in threads.get((e["pid"], e.get("tid")), "").lower():
            totals[e["name"][:90]] += e.get("dur", 0) / 1000 / steps
            kernels.append((e["ts"], e["ts"] + e.get("dur", 0)))
    if not totals:  # say what the trace holds instead
        print("no stream threads; threads:", sorted(set(threads.values()))[:40], flush=True)
        return totals, float("nan")
    span = (max(e for _, e in kernels) - min(s for s, _ in kernels)) / 1000 / steps
    return totals, span


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-segments", type=int, default=8)
    parser.add_argument("--doc-median", type=int, default=None)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seq-len", type=int, default=65536, help="tokens, padding included")
    parser.add_argument("--ids", default="sequential", help="segment ids: sequential, shuffled")
    parser.add_argument("--num-pad-tokens", type=int, default=2000)
    parser.add_argument("--fa3", action="store_true",
                        help="also FlashAttention-3 (flash-attn3-jax), the same way")
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp

    import kvax

    w = Workload(args.seq_len, num_segments=args.num_segments,
                 num_pad_tokens=args.num_pad_tokens,
                 doc_median=args.doc_median, ids=args.ids)
    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    print(w.name, flush=True)
    masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)
    layout = (pos, seg, masks)  # arguments, as the module doc says
    steps = []
    for deterministic in (None, True, False):
        def forward(q, k, v, layout, deterministic=deterministic):
            pos, seg, masks = layout
            return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                            scale=w.head_dim ** -0.5,
                                            deterministic=bool(deterministic))

        steps.append(("forward" if deterministic is None else
                      f"forward+backward, deterministic={deterministic}",
                      forward, deterministic is not None, layout))
    if args.fa3:
        from peers import peer

        fa3 = peer("fa3").jax_attention(w, False)
        for grad in (False, True):
            steps.append((f"FlashAttention-3 {'forward+backward' if grad else 'forward'}",
                          fa3.attn, grad, fa3.extra(pos, seg)))
    # a first trace of as many steps, queued as the timed ones, discarded: its start-up and the
    # allocator's growth (each queued step's output is a new buffer; the first time, memory is
    # allocated while the steps queue) land in it
    warmed = False
    for what, attn, grad, extra in steps:  # extra: the call's layout argument
        def loss(q, k, v, extra, attn=attn):
            return jnp.sum(attn(q, k, v, extra).astype(jnp.float32))

        step = jax.jit(jax.grad(loss, argnums=(0, 1, 2)) if grad else attn)
        for _ in range(3):
            jax.block_until_ready(step(q, k, v, extra))
        if not warmed:
            with tempfile.TemporaryDirectory() as tmp, jax.profiler.trace(tmp):
                jax.block_until_ready([step(q, k, v, extra) for _ in range(args.steps)])
            warmed = True
        with tempfile.TemporaryDirectory() as tmp:
            with jax.profiler.trace(tmp, create_perfetto_trace=True):
                jax.block_until_ready([step(q, k, v, extra) for _ in range(args.steps)])
            totals, span = kernel_times(tmp, args.steps)
        wall = median_ms(lambda: step(q, k, v, extra), args.steps)
        print(f"\n{what}: {sum(totals.values()):.2f} ms of GPU kernels per step; GPU span "
              f"{span:.2f} ms a step (steps queued back to back); wall {wall:.2f} ms a step "
              f"(one at a time); {len(totals)} kernels", flush=True)
        for name, ms in totals.most_common(25):
            print(f"  {ms:8.3f} ms  {name}", flush=True)


if __name__ == "__main__":
    main()
