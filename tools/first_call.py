"""First-call latency: seconds from our forward+backward call to its first result, in fresh
processes, cold (empty kernel caches, kvax's and Triton's) and warm (a second process, same shapes).

    python tools/first_call.py --seq-len 65536 --num-segments 8 [--jax-cache]
    python tools/first_call.py --doc-median 1100 --backend triton   # log-normal documents, Triton
    python tools/first_call.py --doc-median 1100 --forward-only --processes 1   # a cold forward
    python tools/first_call.py --doc-median 1100 --processes 1 --prime  # once-a-process costs apart
    python tools/first_call.py --doc-median 1100 --processes 1 --mask-apart  # masks compiled apart
    python tools/first_call.py --doc-median 1100 --processes 1 --layout-constant  # the old way

Each process: import (reported apart), then one jitted forward+backward of the workload (or, with
--forward-only, its forward), timed from the call to the result on the host. The step takes the
positions and ids as arguments, as a training step takes its batch; --layout-constant closes it
over them, and XLA then folds the masks into constants while it compiles (training_step).
--jax-cache also turns on JAX's persistent compilation cache (XLA's part of the compile); without
it only kvax's kernel cache (KVAX_CACHE_DIR) is warm. Writes OUT/first_call_*.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import Workload, inputs  # noqa: E402

# the child's switches (parse_args' flags, child's keywords) and each one's suffix of the file name
SWITCHES = {"forward_only": "forward", "prime": "primed", "mask_apart": "mask_apart",
            "layout_constant": "layout_constant"}


def training_step(w: Workload, backend: str = "auto", forward_only: bool = False,
                  mask_apart: bool = False, layout_constant: bool = False):
    """(the jitted step, its arguments, the masks' first call in seconds or 0) for the workload:
    the masks built in the step (or, with mask_apart, by a jitted call of their own, passed in),
    then flash_attention forward (and backward). A training step takes the batch's positions and
    ids as arguments. With layout_constant it closes over them instead (how this tool measured
    until 2026-11-27): they are then constants, and XLA folds the masks into constants as it
    compiles, seconds more than compiling them (docs/bench/h100-2026-11-27-stagger)."""
    import jax
    import jax.numpy as jnp

    from kvax.ops import create_attention_mask, flash_attention

    q, k, v, pos, seg = inputs(w)
    dt = jnp.dtype(w.dtype)
    q, k, v, dout = (jnp.asarray(x, dt) for x in (q, k, v, q))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    jax.block_until_ready((q, k, v, dout, pos, seg))

    def build(pos, seg):
        return create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=not forward_only)

    t0 = time.perf_counter()
    built = jax.block_until_ready(jax.jit(build)(pos, seg)) if mask_apart else None
    mask_s = time.perf_counter() - t0

    def step(q, k, v, dout, built, pos, seg):
        masks = built if mask_apart else build(pos, seg)

        def attend(*x):
            return flash_attention(*x, pos, seg, pos, seg, mask=masks,
                                   scale=w.head_dim ** -0.5, backend=backend)

        if forward_only:
            return attend(q, k, v)
        out, vjp = jax.vjp(attend, q, k, v)
        return out, vjp(dout)

    if layout_constant:
        return jax.jit(functools.partial(step, pos=pos, seg=seg)), (q, k, v, dout, built), mask_s
    return jax.jit(step), (q, k, v, dout, built, pos, seg), mask_s


def child(workload: dict, backend: str = "auto", forward_only: bool = False,
          prime: bool = False, mask_apart: bool = False, layout_constant: bool = False) -> dict:
    """One process's first call of the workload's training_step. prime: first the same step at
    half the tokens (its own shapes: compiled apart), timed as prime_*, so that the timed call's
    compile no longer holds what a process pays once, whatever the shapes. mask_apart: the masks
    built by a jitted function of their own (mask_s: its first call) and passed to the step, so
    that the step's compile is the kernels' and the XLA work around them, without the masks'."""
    t0 = time.perf_counter()
    import jax

    import kvax.ops  # noqa: F401

    imported = time.perf_counter() - t0

    def first_call(w: Workload) -> dict:
        step, args, mask_s = training_step(w, backend, forward_only, mask_apart, layout_constant)
        t1 = time.perf_counter()
        lowered = step.lower(*args)  # tracing, and the Triton compiles (or cache)
        t_lower = time.perf_counter()
        compiled = lowered.compile()  # XLA (or JAX's persistent cache)
        t_compile = time.perf_counter()
        jax.block_until_ready(compiled(*args))  # jaxlib's ptxas at the first launch
        t2 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        return dict(first_call_s=t2 - t1, lower_s=t_lower - t1, mask_s=mask_s,
                    xla_compile_s=t_compile - t_lower, first_run_s=t2 - t_compile,
                    second_call_s=time.perf_counter() - t2)

    primed = {}
    if prime:
        half = dict(workload, seq_len=workload["seq_len"] // 2,
                    num_pad_tokens=workload["num_pad_tokens"] // 2)
        primed = {f"prime_{key}": value for key, value in first_call(Workload(**half)).items()}
    return dict(import_s=imported, **first_call(Workload(**workload)), **primed, **kernel_counts())


def kernel_counts() -> dict:
    """This process's Mosaic kernels compiled ahead and read from disk, lowerings reused, and
    its Triton kernels built (or read) ahead of the step's lowering (build_ahead) and in it."""
    from kvax._src.attention import mosaic_cache, prewarm, triton_launch

    ahead = sum(thread == triton_launch.AHEAD_THREAD for _, thread in triton_launch.obtained)
    return dict(kernels_compiled=len(prewarm.compiled), kernels_loaded=len(prewarm.loaded),
                lowerings_reused=len(mosaic_cache.reused), triton_ahead=ahead,
                triton_in_lowering=len(triton_launch.obtained) - ahead)


def cold_env(folder: str) -> dict:
    """The environment of a cold process: kvax's kernel cache and Triton's own both in (empty)
    folders under `folder`, so that it finds neither kvax's kernels nor Triton's."""
    return dict(os.environ, KVAX_CACHE_DIR=os.path.join(folder, "kvax"),
                TRITON_CACHE_DIR=os.path.join(folder, "triton"))


def run(args) -> list[dict]:
    """Fresh processes, one after another (cold, warm, warm again: args.processes of them);
    args from parse_args."""
    workload = workload_of(args)
    backend = args.backend
    switches = ["--" + name.replace("_", "-") for name in SWITCHES if getattr(args, name)]
    step = "forward" if args.forward_only else "forward+backward"
    cache = tempfile.mkdtemp(prefix="kvax-cache-")
    env = cold_env(cache)
    if args.jax_cache:
        env["JAX_COMPILATION_CACHE_DIR"] = os.path.join(cache, "jax")
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    rows = []
    labels = ("cold", "warm", "warm again")[:args.processes]
    for label in labels:
        out = subprocess.run([sys.executable, __file__, "--child", json.dumps(workload),
                              "--backend", backend, *switches],
                             env=env, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(out.stderr[-3000:])
        row = dict(run=label, jax_cache=args.jax_cache, backend=backend, step=step,
                   **json.loads(out.stdout.splitlines()[-1]))
        apart = f"; masks apart first: {row['mask_s']:.1f} s" if args.mask_apart else ""
        apart += "; positions and ids constant" if args.layout_constant else ""
        primed = (f"; primed by half the tokens first: {row['prime_first_call_s']:.1f} s (lower "
                  f"{row['prime_lower_s']:.1f}, XLA {row['prime_xla_compile_s']:.1f})"
                  if args.prime else "")
        print(f"{label:>10} ({step}, {backend}, jax cache {'on' if args.jax_cache else 'off'}): "
              f"first call {row['first_call_s']:.1f} s (lower {row['lower_s']:.1f}, XLA "
              f"{row['xla_compile_s']:.1f}, first run {row['first_run_s']:.1f}), second "
              f"{row['second_call_s'] * 1e3:.0f} ms, import {row['import_s']:.1f} s{apart}{primed}"
              f"; Mosaic kernels compiled ahead {row['kernels_compiled']}, read from disk "
              f"{row['kernels_loaded']}, lowerings reused {row['lowerings_reused']}; Triton "
              f"kernels ahead {row['triton_ahead']}, in the lowering "
              f"{row['triton_in_lowering']}",
              flush=True)
        rows.append(row)
    return rows


def workload_parser(doc: str) -> argparse.ArgumentParser:
    """A parser with the step's workload (--seq-len, --num-segments, --num-pad-tokens,
    --doc-median) and the hidden --child, for this tool and those built on its step."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--num-segments", type=int, default=8)
    p.add_argument("--num-pad-tokens", type=int, default=2000)
    p.add_argument("--doc-median", type=int, default=None,
                   help="log-normal document lengths with this median instead of --num-segments")
    return p


def workload_of(args: argparse.Namespace) -> dict:
    """The Workload keywords of workload_parser's arguments (as the child gets them, in JSON)."""
    return dict(seq_len=args.seq_len, num_segments=args.num_segments,
                num_pad_tokens=args.num_pad_tokens, doc_median=args.doc_median)


def parse_args(argv=None) -> argparse.Namespace:
    p = workload_parser(__doc__)
    p.add_argument("--backend", default="auto",
                   help="flash_attention's backend (auto: the Mosaic kernels on Hopper)")
    p.add_argument("--jax-cache", action="store_true")
    p.add_argument("--forward-only", action="store_true", help="time a forward step only")
    p.add_argument("--processes", type=int, default=3, choices=(1, 2, 3),
                   help="fresh processes: cold, then warm ones")
    p.add_argument("--prime", action="store_true",
                   help="each process first calls the step at half the tokens (timed apart), so "
                        "that what a process pays once falls there")
    p.add_argument("--mask-apart", action="store_true",
                   help="build the masks in a jitted call of their own (timed apart) and pass "
                        "them to the step")
    p.add_argument("--layout-constant", action="store_true",
                   help="close the step over the positions and ids (constants: XLA folds the "
                        "masks while it compiles) instead of passing them as a training step "
                        "does")
    p.add_argument("--out", default="bench-out")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child), args.backend,
                               **{name: getattr(args, name) for name in SWITCHES})))
        return
    rows = run(args)
    os.makedirs(args.out, exist_ok=True)
    suffixes = "".join(f"_{suffix}" for name, suffix in SWITCHES.items() if getattr(args, name))
    path = os.path.join(args.out, f"first_call_{args.backend}{suffixes}"
                              f"{'_jax_cache' if args.jax_cache else ''}.json")
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
