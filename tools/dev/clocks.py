"""Time, SM clock and power of forward, backward and forward+backward calls, ours (deterministic
and not) and FA3's, in turns on a Hopper GPU: whether a gap in time is a gap in cycles or in
clock.

Each (layout, implementation, kind) runs calls back to back for --seconds a round, each call
waited for, in turns (every other round reversed); nvidia-smi samples every 20 ms. Per entry:
ms per call (median over the rounds), the SM clock and the power while it ran (medians of the
samples, the first 0.2 s of each window left out), nvidia-smi's memory utilisation (the share
of time DRAM was busy: a coarse view of the memory traffic, which draws power), the throttle
reasons seen, and Mcycles per call (ms x MHz / 1000), the time at a fixed clock.

    python tools/dev/clocks.py [--layouts causal1,lognormal,docs8] [--rounds 3] [--seconds 2]

Layouts are spike_mask_cost.py's. Needs a Hopper GPU and flash-attn3-jax.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from per_call import smi_log, smi_rows  # noqa: E402
from spike_mask_cost import LAYOUTS  # noqa: E402
from workloads import inputs  # noqa: E402

SMI_FIELDS = ("timestamp,clocks.sm,power.draw,utilization.memory,"
              "clocks_throttle_reasons.active")
IMPLEMENTATIONS = ("det", "nondet", "fa3")


def calls(w, implementations):
    """{(implementation, kind): jitted () -> result} for w: kind "fwd" (the output), "f+b" (the
    gradients of the output's sum) or "bwd" (the backward alone, from the forward's residuals)."""
    import jax
    import jax.numpy as jnp

    import kvax
    from peers import peer

    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True,
                                           is_causal=w.causal)
    if "fa3" in implementations:
        fa3 = peer("fa3").jax_attention(w, False)
        fa3_extra = fa3.extra(pos, seg)
    out = {}
    for name in implementations:
        if name == "fa3":
            def attn(q, k, v):
                return fa3.attn(q, k, v, fa3_extra)
        else:
            def attn(q, k, v, deterministic=name == "det"):
                return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                                scale=w.head_dim ** -0.5, is_causal=w.causal,
                                                deterministic=deterministic)
        grad = jax.grad(lambda q, k, v, attn=attn: jnp.sum(attn(q, k, v).astype(jnp.float32)),
                        argnums=(0, 1, 2))
        for kind, fn in (("fwd", attn), ("f+b", grad)):
            exe = jax.jit(fn).lower(q, k, v).compile()
            out[(name, kind)] = lambda exe=exe: exe(q, k, v)
        # the backward alone: the forward's residuals (in vjp's closure) passed in
        _, vjp = jax.vjp(jax.jit(attn), q, k, v)
        cotangent = jnp.ones(q.shape, q.dtype)
        exe = jax.jit(lambda vjp, g: vjp(g)).lower(vjp, cotangent).compile()
        out[(name, "bwd")] = lambda exe=exe, vjp=vjp: exe(vjp, cotangent)
    return out


def window(fn, seconds: float):
    """(start, end, ms of each call) of calls of fn back to back for about `seconds`."""
    import jax

    jax.block_until_ready(fn())
    start = time.time()
    times = []
    while time.time() - start < seconds or len(times) < 3:
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append((time.perf_counter() - t) * 1e3)
    return start, time.time(), times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--layouts", default="causal1,lognormal,docs8")
    p.add_argument("--implementations", default=",".join(IMPLEMENTATIONS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2.0)
    args = p.parse_args(argv)
    import jax

    print("device", jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
    smi_path = os.path.join(tempfile.mkdtemp(), "smi.csv")
    print(f"\n{'layout':10s} {'impl':7s} {'kind':4s} {'ms':>8s} {'MHz':>6s} {'W':>5s} "
          f"{'mem%':>5s} {'Mcycles':>8s}  rounds' ms; throttle reasons", flush=True)
    with smi_log(smi_path, SMI_FIELDS):
        for layout in args.layouts.split(","):
            fns = calls(LAYOUTS[layout], args.implementations.split(","))
            windows = {}  # (implementation, kind): [(start, end, [ms])]
            for r in range(args.rounds):
                for key in list(fns) if r % 2 == 0 else list(fns)[::-1]:
                    windows.setdefault(key, []).append(window(fns[key], args.seconds))
            del fns
            time.sleep(2.0)  # nvidia-smi's buffered lines reach the file
            summarise(layout, windows, smi_path)


def summarise(layout: str, windows, smi_path: str) -> None:
    samples, seen = smi_rows(smi_path)  # time, MHz, W, memory utilisation %
    for (name, kind), ws in windows.items():
        ms = [float(np.median(t)) for _, _, t in ws]
        inside = np.zeros(len(samples), bool)
        for start, end, _ in ws:
            inside |= (samples[:, 0] >= start + 0.2) & (samples[:, 0] < end)
        mhz, watts, mem = (float(np.median(samples[inside, c])) if inside.any() else float("nan")
                           for c in (1, 2, 3))
        print(f"{layout:10s} {name:7s} {kind:4s} {np.median(ms):8.3f} {mhz:6.0f} {watts:5.0f} "
              f"{mem:5.0f} {np.median(ms) * mhz / 1e3:8.1f}  {np.round(ms, 3)}; "
              f"{' '.join(sorted(set(seen[inside])))}", flush=True)


if __name__ == "__main__":
    main()
