"""Split counts and tile shapes for few queries (decode), in turns, beside FA3's best."""
import sys, os, dataclasses
import numpy as np
sys.path.insert(0, "tools")
from measure import in_turns
import jax, jax.numpy as jnp
from kvax._src.attention import mosaic_fwd
from kvax._src.attention.mask import build_masks
from kvax._src.attention.variant import MaskVariant
from kvax.utils import PADDING_SEGMENT_ID, default_params
from flash_attn3_jax import flash_mha_with_kvcache

params = default_params(jax.devices()[0].device_kind, backward=False)
n, nk, h = 32, 8, 128
for b, s, t in [(8, 16384, 1), (8, 16384, 16), (8, 16384, 127), (1, 65536, 1), (2, 32768, 16)]:
    rng = np.random.default_rng(0)
    k, v = (jnp.asarray(rng.standard_normal((b, s, nk, h)), jnp.bfloat16) for _ in "kv")
    q = jnp.asarray(rng.standard_normal((b, t, n, h)), jnp.bfloat16)
    kv_pos = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (b, s))
    kv_seg = jnp.zeros((b, s), jnp.int32)
    q_pos, q_seg = kv_pos[:, s - t:], kv_seg[:, s - t:]
    (mask,) = build_masks(q_pos, q_seg, kv_pos, kv_seg, fwd_params=params, bwd_params=None,
                          skip_pad_tokens=True)
    chosen = mosaic_fwd.choose_config(mask, h, n // nk, False, t, batch=b, heads=n, keys=s)
    runs = {}
    for splits in sorted({1, 2, 4, 8, 16, chosen.splits}):
        for kv, st in ((128, 2), (64, 4)):
            cfg = dataclasses.replace(chosen, splits=splits, block_kv=kv, stages=st)
            fn = jax.jit(lambda q, k, v, cfg=cfg: mosaic_fwd.forward(
                q, k, v, h ** -0.5, q_pos, q_seg, kv_pos, kv_seg, mask, variant=MaskVariant(),
                pad_id=PADDING_SEGMENT_ID, config=cfg)[0])
            try:
                jax.block_until_ready(fn(q, k, v))
            except Exception as e:
                print("fail", cfg, type(e).__name__, str(e)[:200], flush=True)
                continue
            runs[f"s{splits} {kv}x{st}"] = {"fwd": lambda fn=fn: fn(q, k, v)}
    for sp in (1, 4, 8, 16):
        fn = jax.jit(lambda q, k, v, sp=sp: flash_mha_with_kvcache(
            q, k, v, softmax_scale=h ** -0.5, is_causal=True, num_splits=sp))
        runs[f"FA3 s{sp}"] = {"fwd": lambda fn=fn: fn(q, k, v)}
    times = in_turns(runs, 3, 20, label=str)
    med = {name: float(np.median(d["fwd"])) * 1e3 for name, d in times.items()}
    best = min(v for k_, v in med.items() if k_.startswith("FA3"))
    print(f"B{b} S{s} T{t} chosen splits {chosen.splits} pack {chosen.pack}: " + "  ".join(
        f"{k_} {v:.0f}us ({best / v:.2f})" for k_, v in sorted(med.items(), key=lambda x: x[1])), flush=True)
