"""The deterministic Mosaic backward (dQ summed in fixed point) against the Triton one it
replaces as the default and against deterministic=False (float32 reduce-add), on a Hopper GPU, in
one process: forward+backward per layout, compiled first, then --rounds rounds in turn. Also
checks that two runs of each deterministic configuration are bitwise equal (and equal to `mosaic
det`'s: its sums do not depend on the programs' order), and prints dQ's largest difference from
the float32 reduce-add's.

    python tools/dev/spike_det_bwd.py [--layouts lognormal,docs8,short] [--rounds 4] \
        [--variant "stages3:stages=3"]

--variant (repeatable) adds a `mosaic det` configuration with other BackwardConfig fields
(`deterministic=0` among them makes it a `mosaic nondet` one);
--before FILE adds `before det` and `before nondet`, the backward of an older mosaic_bwd.py (e.g.
`git show REV:packages/kvax-core/src/kvax/_src/attention/mosaic_bwd.py > FILE`); --cap C
soft-caps every run; --evict-last adds `evict_last`, the default with dQ's reduce-adds under an
L2 evict-last policy (docs/bench/h100-2026-11-28-bwd-dq-store).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import in_turns  # noqa: E402
from spike_mask_cost import LAYOUTS  # noqa: E402
from workloads import inputs  # noqa: E402

CONFIGS = {  # name: (deterministic, the Triton backward in place of the Mosaic one)
    "triton det": (True, True),
    "mosaic det": (True, False),
    "mosaic nondet": (False, False),
}


def evict_last_reduce():
    """A patch under which Mosaic GPU's TMA reduce-adds carry an L2 evict-last cache policy."""
    from jax.experimental.mosaic.gpu import launch_context

    real = launch_context.llvm.inline_asm

    def inline_asm(result, operands, asm, constraints, **kwargs):
        if "cp.reduce.async.bulk.tensor" in asm:
            if asm.count(".bulk_group [") != 1 or not asm.endswith("], [$1];"):
                raise ValueError(f"a reduce-add this patch does not know: {asm}")
            asm = asm.replace(".bulk_group [", ".bulk_group.L2::cache_hint [")
            asm = asm[:-len("], [$1];")] + "], [$1], policy;"
            asm = ("{ .reg .b64 policy; createpolicy.fractional.L2::evict_last.b64 policy, 1.0; "
                   + asm + " }")
        return real(result, operands, asm, constraints, **kwargs)

    return mock.patch.object(launch_context.llvm, "inline_asm", inline_asm)


def variant(spec: str):
    """(name, deterministic, patch) of a --variant "NAME:FIELD=INT,...": the patch makes the
    API's backward calls (mosaic_bwd.chosen_config) take BackwardConfig with those fields."""
    from kvax._src.attention import mosaic_bwd

    name, fields = spec.split(":")
    fields = {key: int(value) for key, value in (f.split("=") for f in fields.split(","))}
    deterministic = bool(fields.pop("deterministic", 1))
    config = dataclasses.replace(mosaic_bwd.BackwardConfig(), **fields)
    return name, deterministic, mock.patch.object(mosaic_bwd, "chosen_config", lambda *_: config)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--layouts", default="lognormal,docs8,short")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME:FIELD=INT,... a Mosaic backward with these BackwardConfig "
                             "fields (deterministic unless deterministic=0 is one of them)")
    parser.add_argument("--before", help="an older mosaic_bwd.py to time as `before det` and "
                                         "`before nondet`")
    parser.add_argument("--cap", type=float, default=None, help="a logit soft cap for every run")
    parser.add_argument("--evict-last", action="store_true",
                        help="adds `evict_last`: `mosaic det` with dQ's reduce-adds asking L2 to "
                             "keep their lines (FA3's hint; jax's Mosaic GPU has no option for "
                             "it, so its PTX string is rewritten while the kernel lowers)")
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp

    import kvax
    from kvax._src.attention import backends, mosaic_bwd

    # name: (deterministic, what is patched while it compiles)
    triton_bwd = mock.patch.object(backends.MosaicBackend, "_mosaic_backward",
                                   staticmethod(lambda *a: False))
    configs = {name: (deterministic, triton_bwd if triton else contextlib.nullcontext())
               for name in args.configs.split(",")
               for deterministic, triton in [CONFIGS[name]]}
    for spec in args.variant:
        name, deterministic, patch = variant(spec)
        configs[name] = (deterministic, patch)
    if args.evict_last:
        configs["evict_last"] = (True, evict_last_reduce())
    if args.before:
        import importlib.util

        spec = importlib.util.spec_from_file_location("before_bwd", args.before)
        before = sys.modules["before_bwd"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(before)
        for deterministic in (True, False):
            name = "before " + ("det" if deterministic else "nondet")
            configs[name] = (deterministic, mock.patch.object(mosaic_bwd, "backward",
                                                              before.backward))

    runs, flops, results = {}, {}, {}
    for layout in args.layouts.split(","):
        w = LAYOUTS[layout]
        q, k, v, pos, seg = inputs(w)
        q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
        pos, seg = jnp.asarray(pos), jnp.asarray(seg)
        flops[layout] = 3.5 * 4 * w.allowed_pairs() * w.num_heads * w.head_dim
        masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True,
                                               is_causal=w.causal)
        for name, (deterministic, patch) in configs.items():
            def attn(q, k, v, deterministic=deterministic):
                return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                                scale=w.head_dim ** -0.5,
                                                deterministic=deterministic,
                                                logits_soft_cap=args.cap, is_causal=w.causal)

            grad = jax.grad(lambda q, k, v: jnp.sum(attn(q, k, v).astype(jnp.float32)),
                            argnums=(0, 1, 2))
            try:
                with patch:
                    jax.clear_caches()
                    exe = jax.jit(grad).lower(q, k, v).compile()
            except Exception as e:  # e.g. a variant past the shared memory: time the others
                message = str(e).strip().splitlines()
                print(f"could not compile {layout} {name}: {type(e).__name__}: "
                      f"{message[0] if message else ''}", flush=True)
                continue
            runs[(layout, name)] = {"f+b": lambda exe=exe, q=q, k=k, v=v: exe(q, k, v)}
            first = [np.asarray(x.astype(jnp.float32)) for x in exe(q, k, v)]
            again = [np.asarray(x.astype(jnp.float32)) for x in exe(q, k, v)]
            same = all(np.array_equal(a, b) for a, b in zip(first, again))
            results[(layout, name)] = first
            print(f"compiled {layout} {name}: reruns bitwise equal {same}, "
                  f"finite {all(np.isfinite(x).all() for x in first)}", flush=True)
        det = results.get((layout, "mosaic det"))
        for name, (deterministic, _) in configs.items():
            if (det is not None and deterministic and name != "mosaic det"
                    and (layout, name) in results):
                equal = all(np.array_equal(a, b) for a, b in zip(results[(layout, name)], det))
                print(f"  {layout} {name}: bitwise equal to `mosaic det` {equal}", flush=True)
                if not equal:  # how far, against the largest gradient
                    print("    max |d - det| / max |det|: " + ", ".join(
                        f"{g} {np.max(np.abs(a - b)) / np.max(np.abs(b)):.3g}" for g, a, b
                        in zip(("dq", "dk", "dv"), results[(layout, name)], det)), flush=True)
        ref = results.get((layout, "mosaic nondet"))
        for name in configs:
            if ref is not None and (layout, name) in results:
                diffs = [float(np.max(np.abs(a - b))) for a, b in zip(results[(layout, name)],
                                                                      ref)]
                scale = [float(np.max(np.abs(b))) for b in ref]
                print(f"  {layout} {name}: max |d - nondet| dq {diffs[0]:.3g} dk {diffs[1]:.3g} "
                      f"dv {diffs[2]:.3g} (max |dq| {scale[0]:.3g})", flush=True)
        results.clear()

    times = in_turns(runs, args.rounds, args.repeats, label="/".join)
    print(f"\nmedian of {args.rounds} rounds: f+b ms (TF/s, against `triton det`)")
    for (layout, name), t in times.items():
        ms = np.median(t["f+b"])
        base = times.get((layout, "triton det"), t)
        print(f"{layout:10s} {name:14s} {ms:7.2f} ({flops[layout] / ms / 1e9:4.0f}, "
              f"{ms / np.median(base['f+b']) - 1:+.1%})  rounds {np.round(t['f+b'], 2)}",
              flush=True)


if __name__ == "__main__":
    main()
