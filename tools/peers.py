"""Peer implementations run in their own process: PyTorch FlexAttention and the original kvax 0.1.0.

    python tools/peers.py {flex,kvax010} WORKLOAD_JSON OUT_JSON [--backward]

Each prints nothing on success and writes {"fwd_ms", "fwdbwd_ms", "peak_bytes", "rows", "out"}
(out: the output at sample_rows, float32) or {"skipped": reason} to OUT_JSON.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import Workload, inputs, sample_rows  # noqa: E402

REPEATS = 10


def _median_ms(fn, sync, repeats=REPEATS, warmup=3):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def run_flex(w: Workload) -> dict:
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    dev = "cuda"
    dtype = getattr(torch, w.dtype)
    q, k, v, pos, seg = inputs(w)
    q, k, v = (torch.tensor(x, device=dev, dtype=dtype).transpose(1, 2).contiguous()
               for x in (q, k, v))  # [B, heads, S, H]
    pos_t = torch.tensor(pos, device=dev)
    seg_t = torch.tensor(seg, device=dev)

    def mask_mod(b, h, q_idx, kv_idx):
        same = seg_t[b, q_idx] == seg_t[b, kv_idx]
        return same & (seg_t[b, q_idx] != -1) & (pos_t[b, q_idx] >= pos_t[b, kv_idx])

    block_mask = create_block_mask(mask_mod, w.batch, None, w.seq_len, w.seq_len, device=dev)
    attn = torch.compile(flex_attention)
    scale = w.head_dim ** -0.5
    sync = torch.cuda.synchronize

    def fwd():
        return attn(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=True)

    out = fwd()
    torch.cuda.reset_peak_memory_stats()
    fwd_ms = _median_ms(fwd, sync)
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    dout = torch.randn_like(out)

    def fwdbwd():
        o = attn(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=True)
        return torch.autograd.grad(o, (q, k, v), dout)

    fwdbwd_ms = _median_ms(fwdbwd, sync)
    rows = sample_rows(w)
    sampled = out.transpose(1, 2)[rows[:, 0], rows[:, 1]].float().cpu().numpy()
    return dict(fwd_ms=fwd_ms, fwdbwd_ms=fwdbwd_ms, peak_bytes=torch.cuda.max_memory_allocated(),
                out=sampled.tolist())


def _shim_old_jax():
    """kvax 0.1.0 imports jax.experimental.shard_map, which JAX 0.11 removed."""
    import jax

    module = types.ModuleType("jax.experimental.shard_map")

    def shard_map(f, mesh, in_specs, out_specs, check_rep=True, **kw):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                             check_vma=False)

    module.shard_map = shard_map
    module.Specs = object
    sys.modules["jax.experimental.shard_map"] = module
    jax.experimental.shard_map = module
    os.environ.setdefault("TRITON_ALLOW_NON_CONSTEXPR_GLOBALS", "1")


def run_kvax010(w: Workload) -> dict:
    if not os.path.isdir("/tmp/kvax010"):
        return dict(skipped="kvax 0.1.0 is not installed (its wheel goes in .whl/)")
    sys.path.insert(0, "/tmp/kvax010")
    _shim_old_jax()
    import jax
    import jax.numpy as jnp
    from kvax.ops import create_attention_mask, flash_attention
    from kvax.utils import attention_specs

    q, k, v, pos, seg = inputs(w)
    dtype = jnp.dtype(w.dtype)
    q, k, v = (jnp.asarray(x, dtype) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    scale = w.head_dim ** -0.5
    from kvax.utils.common import get_default_flash_attention_params

    fwd_params = get_default_flash_attention_params(backward=False)
    bwd_params = get_default_flash_attention_params(backward=True)  # its own default is dropped
    with mesh, attention_specs(("data", None, None, None), ("data", None, None, None)):
        mask = create_attention_mask(pos, seg, pos, seg, fwd_params=fwd_params,
                                     bwd_params=bwd_params, calc_bwd_mask=True)

        @jax.jit
        def fwd(q, k, v):
            return flash_attention(q, k, v, pos, seg, pos, seg, mask, scale=scale,
                                   fwd_params=fwd_params, bwd_params=bwd_params)

        @jax.jit
        def fwdbwd(q, k, v, dout):
            out, vjp = jax.vjp(fwd, q, k, v)
            return vjp(dout)

        out = fwd(q, k, v).block_until_ready()
        dout = jnp.asarray(np.random.default_rng(5).standard_normal(out.shape), dtype)
        sync = lambda: jax.block_until_ready(jnp.zeros(()))  # noqa: E731
        fwd_ms = _median_ms(lambda: fwd(q, k, v).block_until_ready(), sync)
        fwdbwd_ms = _median_ms(lambda: jax.block_until_ready(fwdbwd(q, k, v, dout)), sync)
    rows = sample_rows(w)
    sampled = np.asarray(out[rows[:, 0], rows[:, 1]], np.float32)
    return dict(fwd_ms=fwd_ms, fwdbwd_ms=fwdbwd_ms, peak_bytes=None, out=sampled.tolist())


def main():
    which, workload_json, out_json = sys.argv[1:4]
    w = Workload(**json.loads(workload_json))
    try:
        result = {"flex": run_flex, "kvax010": run_kvax010}[which](w)
    except Exception as err:  # a peer that fails is reported, never silently dropped
        result = dict(skipped=f"{type(err).__name__}: {str(err).splitlines()[0][:300]}")
        traceback.print_exc()  # the whole story on stderr, kept by bench.py in results.json
    with open(out_json, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
