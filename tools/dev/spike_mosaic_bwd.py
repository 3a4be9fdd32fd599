"""Spike and tuning harness of the Mosaic GPU backward (kvax/_src/attention/mosaic_bwd.py, dQ by
TMA reduce-add), beside the Triton backward, on the issue's rows.

    python tools/dev/spike_mosaic_bwd.py [--lower-only] [--configs 240/24,232/40,240/24/3,240/24r]

The run checks dq, dk, dv against the Triton backward and against the float64 reference on small
odd shapes with NaN in the padding, then times both backwards on the issue's rows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import lowered_for_cuda, median_ms  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


def _problem(w: Workload, *, backward_params, lower_only=False):
    """Inputs, forward residuals and masks of one workload (the forward by the Triton kernel;
    lower_only: stand-in residuals, no kernel runs)."""
    import jax.numpy as jnp

    from kvax._src.attention import mosaic_fwd, triton_fwd
    from kvax._src.attention.mask import build_masks
    from kvax._src.attention.variant import MaskVariant
    from kvax.utils import default_params

    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, w.dtype) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    variant = MaskVariant(w.causal)
    fwd_params = default_params("NVIDIA H100 80GB HBM3", backward=False)
    fwd, dq_mask, dkdv_mask = build_masks(pos, seg, pos, seg, fwd_params=fwd_params,
                                          bwd_params=backward_params, skip_pad_tokens=True,
                                          variant=variant)
    scale = jnp.float32(w.head_dim ** -0.5)
    if lower_only:
        out = q
        lse = jnp.zeros((q.shape[0], q.shape[2], q.shape[1]), jnp.float32)
    else:
        out, lse = triton_fwd.forward(q, k, v, scale, pos, seg, pos, seg, fwd, sequential=False,
                                      params=fwd_params)
    dout = jnp.asarray(np.random.default_rng(w.seed + 5).standard_normal(out.shape), w.dtype)
    live = (seg != -1)[:, None, :]
    delta = jnp.einsum("btnd,btnd->bnt", dout.astype(jnp.float32), out.astype(jnp.float32))
    delta = jnp.where(live & jnp.isfinite(lse), delta, 0.0)
    # the rank rule's layouts, as the forward mask's schedule brings them (built once)
    t_pad = mosaic_fwd.round_up(w.seq_len, 128) + 128
    ranks = mosaic_fwd.rank_layouts(pos, seg, pos, seg, t_pad, t_pad, pad_id=-1, variant=variant)
    return dict(q=q, k=k, v=v, pos=pos, seg=seg, scale=scale, lse=lse, delta=delta, dout=dout,
                dq_mask=dq_mask, dkdv_mask=dkdv_mask, variant=variant, ranks=ranks)


def _runners(p, bwd_params, configs):
    import jax

    from kvax._src.attention import mosaic_bwd, triton_bwd

    args = (p["q"], p["k"], p["v"])
    fns = {"triton": jax.jit(lambda q, k, v: triton_bwd.backward(
        q, k, v, p["scale"], p["pos"], p["seg"], p["pos"], p["seg"], p["lse"], p["delta"],
        p["dout"], p["dq_mask"], p["dkdv_mask"], sequential=False, params=bwd_params))}
    for name, config in configs.items():
        fns[name] = jax.jit(lambda q, k, v, config=config: mosaic_bwd.backward(
            q, k, v, p["scale"], p["pos"], p["seg"], p["pos"], p["seg"], p["lse"], p["delta"],
            p["dout"], p["dkdv_mask"], variant=p["variant"], pad_id=-1, config=config,
            ranks=p["ranks"] if config.rank_rule else None))
    return args, fns


def _configs(text: str):
    """"240/24,232/40/3,240/24r" -> {name: BackwardConfig} (consumer/producer registers
    [/stages], and "r": the rank rule, its layouts built once outside the timed call)."""
    from kvax._src.attention.mosaic_bwd import BackwardConfig

    configs = {}
    for item in text.split(","):
        consumer, producer, *stages = (int(x) for x in item.rstrip("r").split("/"))
        configs[f"mosaic{item}"] = BackwardConfig(consumer_registers=consumer,
                                                  producer_registers=producer,
                                                  stages=stages[0] if stages else 2,
                                                  rank_rule=item.endswith("r"))
    return configs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lower-only", action="store_true",
                        help="lower the kernels for CUDA and stop (works without a GPU)")
    parser.add_argument("--configs", default="240/24,232/40")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every kernel in turn this many times (the machine's drift)")
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp

    from kvax.utils import FlashAttentionParamsConfig

    configs = _configs(args.configs)
    bwd_params = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=128, num_warps=8,
                                            num_stages=3)
    if args.lower_only:
        for w in (Workload(1000, 5, 77, num_heads=4, num_kv_heads=2),
                  Workload(513, 1, 0, head_dim=64, num_heads=2, num_kv_heads=2, causal=False)):
            p = _problem(w, backward_params=bwd_params, lower_only=True)
            args_, fns = _runners(p, bwd_params, configs)
            for name, fn in fns.items():
                if name != "triton":
                    print(f"{w.name} {name}: {lowered_for_cuda(fn, *args_)}", flush=True)
        return
    print("device", jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
    for w in (Workload(1000, 5, 77, num_heads=4, num_kv_heads=2, seed=11, ids="shuffled"),
              Workload(777, 1, 0, head_dim=64, num_heads=2, num_kv_heads=2, seed=13,
                       causal=False)):
        p = _problem(w, backward_params=bwd_params)
        pad = (p["seg"] == -1)[:, :, None, None]
        poisoned = [jnp.where(pad, jnp.nan, x) for x in (p["q"], p["k"], p["v"])]
        _, fns = _runners(p, bwd_params, configs)
        want = [np.asarray(x, np.float32) for x in fns.pop("triton")(*poisoned)]
        for name, fn in fns.items():
            got = [np.asarray(x, np.float32) for x in fn(*poisoned)]
            for grad, a, b in zip(("dq", "dk", "dv"), got, want):
                err = float(np.max(np.abs(a - b))) if np.all(np.isfinite(a)) else float("nan")
                print(f"  {w.name:<58} {name} {grad} max |mosaic - triton| {err:.2e} "
                      f"(max |triton| {float(np.max(np.abs(b))):.2e})", flush=True)
    for w in (Workload(65536, 8, 2000), Workload(65536, num_pad_tokens=2000, doc_median=1100,
                                                 ids="shuffled"),
              Workload(65536, num_pad_tokens=2000, doc_median=190)):
        p = _problem(w, backward_params=bwd_params)
        args_, fns = _runners(p, bwd_params, configs)
        flops = w.flops(backward=True) - w.flops(backward=False)
        failed = set()
        for r in range(args.rounds):
            for name, fn in fns.items():
                if name in failed:
                    continue
                try:
                    start = time.perf_counter()
                    jax.block_until_ready(fn(*args_))
                    first = time.perf_counter() - start
                    ms = median_ms(lambda fn=fn: fn(*args_), args.repeats)
                except Exception:  # noqa: BLE001 - a spike reports and goes on
                    print(f"  {w.name} {name}: FAILED\n{traceback.format_exc()[-2000:]}",
                          flush=True)
                    failed.add(name)
                    continue
                print(f"  {w.name:<62} {name:<14} backward {ms:8.2f} ms "
                      f"{flops / ms / 1e9:6.0f} TF/s first {first:5.1f} s round {r + 1}",
                      flush=True)


if __name__ == "__main__":
    main()
