"""Spike: query heads of a kv group packed into one Hopper forward program (MosaicConfig.pack,
FA3's PackGQA) against one head per program, both without key splits, and the default choice
(choose_config: packed heads and MosaicConfig.splits, FA3's split-KV), on few queries against
many keys (decode and chunked prefill: the queries are a document's last T tokens, causal).
Same inputs, one process, every kernel timed in turn for --rounds rounds. With --fa3,
FlashAttention-3's decode call (flash-attn3-jax's flash_mha_with_kvcache, causal: its queries
are the cache's last T tokens, as ours are) runs in the same rounds, for each --fa3-splits (its
key splits; 1 is the wrapper's default, and the wrapper has no automatic choice), and its
largest difference from our output is printed.

    python tools/dev/spike_pack.py [--queries 1,16,64,127,128,512] [--kv-len 16384] [--batch 8] \
        [--fa3] [--fa3-splits 1,8]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import median_ms  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--queries", default="1,16,64,127,128,512")
    p.add_argument("--kv-len", type=int, default=16384)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", default="32,8", help="query heads, kv heads")
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--fa3", action="store_true", help="time FlashAttention-3 in the same rounds")
    p.add_argument("--fa3-splits", default="1,8", help="FA3's key splits (num_splits) to time")
    args = p.parse_args(argv)
    import jax
    import jax.numpy as jnp

    from kvax._src.attention import mosaic_fwd
    from kvax._src.attention.mask import build_masks
    from kvax._src.attention.variant import MaskVariant
    from kvax.utils import PADDING_SEGMENT_ID, default_params

    print("device", jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
    params = default_params(jax.devices()[0].device_kind, backward=False)
    n, num_kv = map(int, args.heads.split(","))
    b, s, h = args.batch, args.kv_len, args.head_dim
    group = n // num_kv
    rng = np.random.default_rng(0)
    k, v = (jnp.asarray(rng.standard_normal((b, s, num_kv, h)), jnp.bfloat16) for _ in "kv")
    kv_pos = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (b, s))
    kv_seg = jnp.zeros((b, s), jnp.int32)
    for t in map(int, args.queries.split(",")):
        q = jnp.asarray(rng.standard_normal((b, t, n, h)), jnp.bfloat16)
        q_pos = kv_pos[:, s - t:]
        q_seg = kv_seg[:, s - t:]
        (mask,) = build_masks(q_pos, q_seg, kv_pos, kv_seg, fwd_params=params, bwd_params=None,
                              skip_pad_tokens=True)
        pairs = b * sum(s - t + i + 1 for i in range(t))
        flops = 4 * pairs * n * h
        fns, outs = {}, {}  # by the name printed
        chosen = mosaic_fwd.choose_config(mask, h, group, False, t, batch=b, heads=n, keys=s)
        configs = {f"pack {pack}": mosaic_fwd.MosaicConfig(block_kv=chosen.block_kv, pack=pack)
                   for pack in sorted({1, mosaic_fwd.pack_heads(group)})}
        if chosen.splits > 1:
            configs[f"default (pack {chosen.pack}, {chosen.splits} splits)"] = chosen
        for name, config in configs.items():
            fns[name] = jax.jit(lambda q, k, v, config=config: mosaic_fwd.forward(
                q, k, v, h ** -0.5, q_pos, q_seg, kv_pos, kv_seg, mask,
                variant=MaskVariant(), pad_id=PADDING_SEGMENT_ID, config=config))
            outs[name] = np.asarray(jax.block_until_ready(fns[name](q, k, v))[0], np.float32)
        diff = max(float(np.max(np.abs(o - outs["pack 1"]))) for o in outs.values())
        if args.fa3:
            from flash_attn3_jax import flash_mha_with_kvcache

            for splits in map(int, args.fa3_splits.split(",")):
                name = f"FA3 splits {splits}"
                fns[name] = jax.jit(lambda q, k, v, splits=splits: flash_mha_with_kvcache(
                    q, k, v, softmax_scale=h ** -0.5, is_causal=True, num_splits=splits))
                out = np.asarray(jax.block_until_ready(fns[name](q, k, v)), np.float32)
                print(f"T{t} {name}: largest difference from ours "
                      f"{float(np.max(np.abs(out - outs['pack 1']))):.1e}", flush=True)
        for r in range(args.rounds):
            cells = []
            for name, fn in (fns.items() if r % 2 == 0 else list(fns.items())[::-1]):
                ms = median_ms(lambda fn=fn: fn(q, k, v), args.repeats)
                cells.append(f"{name}: {ms * 1e3:8.1f} us {flops / ms / 1e9:6.1f} TF/s")
            print(f"B{b} T{t:<4} S{s} N{n} K{num_kv} H{h} round {r + 1}: "
                  + "  ".join(sorted(cells)) + f"  max diff {diff:.1e}", flush=True)

if __name__ == "__main__":
    main()
