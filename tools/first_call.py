"""First-call latency: seconds from our forward+backward call to its first result, in fresh
processes, cold (empty kernel cache) and warm (a second process, same shapes).

    python tools/first_call.py --seq-len 65536 --num-segments 8 [--jax-cache]
    python tools/first_call.py --doc-median 1100 --backend triton   # log-normal documents, Triton

Each process: import (reported apart), then one jitted forward+backward of the workload, timed
from the call to the result on the host. --jax-cache also turns on JAX's persistent compilation
cache (XLA's part of the compile); without it only kvax's kernel cache (KVAX_CACHE_DIR) is warm.
Writes OUT/first_call.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import Workload, inputs  # noqa: E402


def child(workload: dict, backend: str = "auto") -> dict:
    t0 = time.perf_counter()
    import jax
    import jax.numpy as jnp

    from kvax.ops import create_attention_mask, flash_attention

    imported = time.perf_counter() - t0
    w = Workload(**workload)
    q, k, v, pos, seg = inputs(w)
    dt = jnp.dtype(w.dtype)
    q, k, v, dout = (jnp.asarray(x, dt) for x in (q, k, v, q))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    jax.block_until_ready((q, k, v, dout, pos, seg))

    @jax.jit
    def step(q, k, v, dout):
        masks = create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)
        out, vjp = jax.vjp(lambda *x: flash_attention(*x, pos, seg, pos, seg, mask=masks,
                                                      scale=w.head_dim ** -0.5, backend=backend),
                           q, k, v)
        return out, vjp(dout)

    t1 = time.perf_counter()
    lowered = step.lower(q, k, v, dout)  # tracing, and the Triton compiles (or cache reads)
    t_lower = time.perf_counter()
    compiled = lowered.compile()  # XLA (or JAX's persistent cache)
    t_compile = time.perf_counter()
    jax.block_until_ready(compiled(q, k, v, dout))  # jaxlib's ptxas at the kernels' first launch
    t2 = time.perf_counter()
    jax.block_until_ready(compiled(q, k, v, dout))
    return dict(import_s=imported, first_call_s=t2 - t1, lower_s=t_lower - t1,
                xla_compile_s=t_compile - t_lower, first_run_s=t2 - t_compile,
                second_call_s=time.perf_counter() - t2)


def run(args) -> list[dict]:
    """Three fresh processes (cold, warm, warm again); args as main's."""
    workload = dict(seq_len=args.seq_len, num_segments=args.num_segments,
                    num_pad_tokens=args.num_pad_tokens, doc_median=args.doc_median)
    backend = args.backend
    cache = tempfile.mkdtemp(prefix="kvax-cache-")
    env = dict(os.environ, KVAX_CACHE_DIR=os.path.join(cache, "kvax"))
    if args.jax_cache:
        env["JAX_COMPILATION_CACHE_DIR"] = os.path.join(cache, "jax")
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    rows = []
    for label in ("cold", "warm", "warm again"):
        out = subprocess.run([sys.executable, __file__, "--child", json.dumps(workload),
                              "--backend", backend], env=env, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(out.stderr[-3000:])
        row = dict(run=label, jax_cache=args.jax_cache, backend=backend,
                   **json.loads(out.stdout.splitlines()[-1]))
        print(f"{label:>10} ({backend}, jax cache {'on' if args.jax_cache else 'off'}): first call "
              f"{row['first_call_s']:.1f} s (lower {row['lower_s']:.1f}, XLA "
              f"{row['xla_compile_s']:.1f}, first run {row['first_run_s']:.1f}), second "
              f"{row['second_call_s'] * 1e3:.0f} ms, import {row['import_s']:.1f} s", flush=True)
        rows.append(row)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--num-segments", type=int, default=8)
    p.add_argument("--num-pad-tokens", type=int, default=2000)
    p.add_argument("--doc-median", type=int, default=None,
                   help="log-normal document lengths with this median instead of --num-segments")
    p.add_argument("--backend", default="auto",
                   help="flash_attention's backend (auto: the Mosaic kernels on Hopper)")
    p.add_argument("--jax-cache", action="store_true")
    p.add_argument("--out", default="bench-out")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child), args.backend)))
        return
    rows = run(args)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"first_call_{args.backend}"
                              f"{'_jax_cache' if args.jax_cache else ''}.json")
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
