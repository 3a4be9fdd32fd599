"""What the element rule costs the Mosaic kernels on packed documents (a Hopper GPU), in one
process: the forward and forward+backward with deterministic=False as they are (`rule`), with the
rule's per-element padding test left out (`no pad test`: timing only, the padding rows' results
are not what they should be), with every visited tile treated as full (`bound`: no element rule
at all, wrong results; what the masked tiles could at best come down to), with --before FILE
(a mosaic_fwd.py of an earlier revision) that forward (`before`; with --before-bwd FILE, an
earlier mosaic_bwd.py, that backward too), with row-aligned programs
only (`no chunks`: the documents' chunks of runs.py left out), and with forward mask blocks of
another size than the default 128x128 (`fwd RxC`: the mask and the call both get them, as a user
passes fwd_params). Every configuration is compiled first; --rounds rounds then time them in
turn:

    git show REV:packages/kvax-core/src/kvax/_src/attention/mosaic_fwd.py > .whl/before.py
    python tools/dev/spike_mask_cost.py [--layouts lognormal,short,docs8] [--rounds 4] \
        [--configs rule,bound,before,"fwd 128x64"] [--before .whl/before.py] \
        [--before-bwd .whl/before_bwd.py]
"""

from __future__ import annotations

import argparse
import os
import sys
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import in_turns  # noqa: E402
from workloads import Workload, inputs  # noqa: E402

LAYOUTS = {
    "lognormal": Workload(65536, num_pad_tokens=1000, doc_median=1100, ids="shuffled"),
    "short": Workload(65536, num_pad_tokens=1000, doc_median=190, ids="shuffled"),
    "docs8": Workload(65536, num_segments=8, num_pad_tokens=2000),
    "causal1": Workload(65536),
    "bidir16k": Workload(16384, causal=False),
    "docs8bidir": Workload(65536, num_segments=8, num_pad_tokens=2000, causal=False),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--layouts", default="lognormal,short,docs8")
    parser.add_argument("--configs", default="rule,no pad test,bound")
    parser.add_argument("--before", default=None, help="an earlier mosaic_fwd.py")
    parser.add_argument("--before-bwd", default=None, help="an earlier mosaic_bwd.py")
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp

    import kvax
    from kvax._src.attention import backends, mosaic_bwd, mosaic_fwd, variant

    def no_pad_test(self, q_pos, q_seg, k_pos, k_seg, pad_id):
        return self._and_positions(q_seg == k_seg, q_pos, k_pos)

    def all_full(*a):
        lo, hi, _, _ = real_bounds(*a)
        return lo, hi, lo, hi

    real_bounds = mosaic_fwd.block_bounds
    real_programs = mosaic_fwd.programs
    patches = {
        "rule": [],
        "before": [],
        "no pad test": [mock.patch.object(variant.MaskVariant, "element_rule", no_pad_test)],
        # row-aligned programs only, the documents' chunks (runs.py) left out
        "no chunks": [mock.patch.object(mosaic_fwd, "programs",
                                        lambda *a, doc_runs=None: real_programs(*a))],
        "bound": [mock.patch.object(mosaic_fwd, "block_bounds", all_full),
                  mock.patch.object(mosaic_bwd, "block_bounds", all_full)],
    }
    def load(name, path):
        import importlib.util

        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        return module

    if args.before:
        before = load("mosaic_fwd_before", args.before)
        patches["before"] = [mock.patch.object(mosaic_fwd, "forward", before.forward)]
    if args.before_bwd:  # with the plain forward under grad, as before forward_for_grad
        before = load("mosaic_bwd_before", args.before_bwd)
        patches["before"] += [
            mock.patch.object(mosaic_bwd, "backward",
                              lambda *a, query_padding_zeroed=False, **kw: before.backward(
                                  *a, **kw)),
            mock.patch.object(backends.MosaicBackend, "forward_for_grad",
                              backends.Backend.forward_for_grad)]
    patches = {name: patches.get(name, []) for name in args.configs.split(",")}

    def fwd_params(name):
        """The forward blocks a `fwd RxC` configuration asks for, else None (the defaults)."""
        if not name.startswith("fwd "):
            return None
        rows, cols = (int(x) for x in name.split()[1].split("x"))
        return kvax.utils.FlashAttentionParamsConfig(query_block_size=rows, kv_block_size=cols)

    runs, flops = {}, {}
    for layout in args.layouts.split(","):
        w = LAYOUTS[layout]
        q, k, v, pos, seg = inputs(w)
        q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
        pos, seg = jnp.asarray(pos), jnp.asarray(seg)
        flops[layout] = 4 * w.allowed_pairs() * w.num_heads * w.head_dim

        def compiled(grad, params, pos=pos, seg=seg, w=w, q=q, k=k, v=v):
            masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True,
                                                   fwd_params=params)

            def attn(q, k, v):
                return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                                scale=w.head_dim ** -0.5, deterministic=False,
                                                fwd_params=params)

            fn = attn if not grad else jax.grad(
                lambda q, k, v: jnp.sum(attn(q, k, v).astype(jnp.float32)), argnums=(0, 1, 2))
            exe = jax.jit(fn).lower(q, k, v).compile()
            return lambda: exe(q, k, v)

        for name, ps in patches.items():
            for p in ps:
                p.start()
            jax.clear_caches()
            runs[(layout, name)] = {"fwd": compiled(False, fwd_params(name)),
                                    "f+b nondet": compiled(True, fwd_params(name))}
            for p in ps:
                p.stop()
            print(f"compiled {layout} {name}", flush=True)

    times = in_turns(runs, args.rounds, args.repeats, label="/".join)

    print(f"\nmedian of {args.rounds} rounds: ms (TF/s, against `rule`), fwd | f+b nondet")
    for (layout, name), t in times.items():
        base = times[(layout, "rule")]
        cells = []
        for kind, ms in t.items():
            scale = 1.0 if kind == "fwd" else 3.5
            cells.append(f"{np.median(ms):7.2f} ({scale * flops[layout] / np.median(ms) / 1e9:4.0f}"
                         f", {np.median(ms) / np.median(base[kind]) - 1:+.1%})")
        print(f"{layout:10s} {name:12s} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
