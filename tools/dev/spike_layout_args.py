"""What closing a timed step over the batch's layout changes, on a GPU, in one process: our
public call timed forward and forward+backward with its masks, positions and ids as arguments
(`args`: a training step's case, and bench.py's since 2026-11-27), with the masks as arguments
but positions and ids closed over (`layout const`: bench.py's way until then), and with all of
them closed over (`all const`: per_call.py's). Closed-over arrays are constants in the program,
and XLA folds what derives from them while it compiles. Each is compiled first (compile seconds
printed), then --rounds rounds time them in turn, --layers calls chained per timing:

    python tools/dev/spike_layout_args.py [--layouts lognormal,docs8] [--rounds 10] [--layers 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import against, in_turns, layered  # noqa: E402
from spike_mask_cost import LAYOUTS  # noqa: E402
from workloads import inputs  # noqa: E402

WAYS = ("args", "layout const", "all const")


def operands(w):
    """(q, k, v, masks, positions, ids) of the workload, on the device."""
    import jax
    import jax.numpy as jnp

    import kvax

    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    masks = jax.jit(lambda p, s: kvax.ops.create_attention_mask(p, s, p, s,
                                                                calc_bwd_mask=True))(pos, seg)
    return q, k, v, masks, pos, seg


def steps(w, way: str, layers: int, q, k, v, masks, pos, seg):
    """({kind: jitted fn}, their arguments) for one way of passing the layout."""
    import jax
    import jax.numpy as jnp

    import kvax

    def attend(q, k, v, masks, pos, seg):
        return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                        scale=w.head_dim ** -0.5)

    if way == "args":
        call, extra = attend, (masks, pos, seg)
    elif way == "layout const":
        call, extra = (lambda q, k, v, m: attend(q, k, v, m, pos, seg)), (masks,)
    else:
        call, extra = (lambda q, k, v: attend(q, k, v, masks, pos, seg)), ()
    fwd = layered(call, layers)

    def loss(q, k, v, *extra):
        return jnp.sum(fwd(q, k, v, *extra).astype(jnp.float32))

    fns = {"fwd": jax.jit(fwd), "f+b": jax.jit(jax.grad(loss, argnums=(0, 1, 2)))}
    return fns, (q, k, v, *extra)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layouts", default="lognormal,docs8")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layers", type=int, default=8)
    args = parser.parse_args(argv)
    import jax

    runs = {}
    for layout in args.layouts.split(","):
        data = operands(LAYOUTS[layout])  # the same arrays for every way
        for way in WAYS:
            fns, call_args = steps(LAYOUTS[layout], way, args.layers, *data)
            compiled = {}
            for kind, fn in fns.items():
                t0 = time.perf_counter()
                compiled[kind] = fn.lower(*call_args).compile()
                print(f"compiled {layout} {way} {kind}: {time.perf_counter() - t0:.1f} s",
                      flush=True)
            jax.block_until_ready([exe(*call_args) for exe in compiled.values()])
            runs[(layout, way)] = {kind: (lambda exe=exe, x=call_args: exe(*x))
                                   for kind, exe in compiled.items()}
    times = in_turns(runs, args.rounds, args.repeats, label="/".join)
    print(f"\nmedian of {args.rounds} rounds, ms per call of {args.layers} chained "
          "(fwd | f+b), against `args`:")
    for layout in args.layouts.split(","):
        part = {way: times[(layout, way)] for way in WAYS}
        print(f"{layout}:\n" + "\n".join(against(part, "args", args.layers)), flush=True)


if __name__ == "__main__":
    main()
