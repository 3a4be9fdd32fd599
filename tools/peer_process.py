"""The peers that run in their own process (tools/peers.py describes them): PyTorch
FlexAttention and the original kvax 0.1.0.

    python tools/peer_process.py {flex,kvax010} WORKLOAD_JSON OUT_JSON [--once] [--layers N]

Timed (the default): writes {"fwd_ms", "fwdbwd_ms", "mask_ms", "peak_bytes", "out"} (out: the
output at sample_rows, float32; FlexAttention adds "mask_peak_bytes", the peak while its block
mask is made) to OUT_JSON. --once (the memory sweep): one forward+backward on
random inputs made on the device, writes {"peak_bytes"}. Either writes {"skipped": reason} when
the peer fails; the traceback goes to stderr. --layers N times N calls chained, each output the
next call's query (bench.py --layers), and reports the time per call; "out" stays one call's.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import layered, median_ms, memory_gib  # noqa: E402
from workloads import Workload, inputs, sample_rows, shapes  # noqa: E402

REPEATS = 10


def run_flex(w: Workload, once: bool, layers: int = 1) -> dict:
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    dev = "cuda"
    dtype = getattr(torch, w.dtype)
    pos, seg = w.layout()
    if once:
        q, k, v = (torch.randn(shape, device=dev, dtype=dtype) for shape in shapes(w))
    else:
        q, k, v = (torch.tensor(x, device=dev, dtype=dtype) for x in inputs(w)[:3])
    q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))  # [B, heads, S, H]
    pos_t = torch.tensor(pos, device=dev)
    seg_t = torch.tensor(seg, device=dev)

    def mask_mod(b, h, q_idx, kv_idx):
        return w.rule(pos_t[b, q_idx], seg_t[b, q_idx], pos_t[b, kv_idx], seg_t[b, kv_idx])

    # compiled, as torchtitan does: eager create_block_mask materialises the [S, S] mask (16 GiB
    # at 128k tokens) and runs out of memory where the attention itself fits
    compiled_create_block_mask = torch.compile(create_block_mask)

    def make_mask():
        return compiled_create_block_mask(mask_mod, w.batch, None, w.seq_len, w.seq_len,
                                          device=dev)

    block_mask = make_mask()
    attn = torch.compile(flex_attention)
    scale = w.head_dim ** -0.5
    wait = lambda _: torch.cuda.synchronize()  # noqa: E731

    cap = w.soft_cap
    score_mod = None if cap is None else (lambda x, b, h, i, j: cap * torch.tanh(x / cap))

    def call(q):
        return attn(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=True,
                    score_mod=score_mod)

    chain = layered(call, layers)

    def fwd():
        return chain(q)

    def fwdbwd():
        return torch.autograd.grad(fwd(), (q, k, v), dout)

    dout = torch.randn((w.batch, w.num_heads, w.seq_len, w.head_dim), device=dev, dtype=dtype)
    if once:
        torch.cuda.reset_peak_memory_stats()
        q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
        wait(fwdbwd())
        return dict(peak_bytes=torch.cuda.max_memory_allocated())
    torch.cuda.reset_peak_memory_stats()
    mask_ms = median_ms(make_mask, REPEATS, wait)
    mask_peak_bytes = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()  # the attention's own peak from here
    out = call(q)
    fwd_ms = median_ms(fwd, REPEATS, wait) / layers
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    fwdbwd_ms = median_ms(fwdbwd, REPEATS, wait) / layers
    rows = sample_rows(w)
    sampled = out.transpose(1, 2)[rows[:, 0], rows[:, 1]].float().cpu().numpy()
    return dict(fwd_ms=fwd_ms, fwdbwd_ms=fwdbwd_ms, mask_ms=mask_ms,
                peak_bytes=torch.cuda.max_memory_allocated(), mask_peak_bytes=mask_peak_bytes,
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


def run_kvax010(w: Workload, once: bool, layers: int = 1) -> dict:
    if not os.path.isdir("/tmp/kvax010"):
        return dict(skipped="kvax 0.1.0 is not installed (its wheel goes in .whl/)")
    sys.path.insert(0, "/tmp/kvax010")
    _shim_old_jax()
    import jax
    import jax.numpy as jnp
    from kvax.ops import create_attention_mask, flash_attention
    from kvax.utils import attention_specs
    from kvax.utils.common import get_default_flash_attention_params
    from kvax.utils.typing import AttentionMask

    dtype = jnp.dtype(w.dtype)
    pos, seg = (jnp.asarray(x) for x in w.layout())
    if once:
        keys = jax.random.split(jax.random.key(1), 4)
        q, k, v, dout = (jax.random.normal(key, shape, dtype)
                         for key, shape in zip(keys, shapes(w) + (shapes(w)[0],)))
    else:
        q, k, v = (jnp.asarray(x, dtype) for x in inputs(w)[:3])
        dout = jnp.asarray(np.random.default_rng(5).standard_normal(q.shape), dtype)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    scale = w.head_dim ** -0.5
    fwd_params = get_default_flash_attention_params(backward=False)
    bwd_params = get_default_flash_attention_params(backward=True)  # its own default is dropped
    with mesh, attention_specs(("data", None, None, None), ("data", None, None, None)):
        @jax.jit
        def make_mask(pos, seg):  # its AttentionMask is no pytree: its arrays leave jit
            return [m.flatten() for m in create_attention_mask(
                pos, seg, pos, seg, fwd_params=fwd_params, bwd_params=bwd_params,
                calc_bwd_mask=True)]

        # the masks and the layout as arguments, as ours in bench.py: closed over, they would
        # be constants, and XLA would fold what derives from them
        extra = (make_mask(pos, seg), pos, seg)

        @jax.jit
        def single(q, k, v, extra):
            flat, p, s = extra
            mask = tuple(AttentionMask.unflatten(m) for m in flat)
            return flash_attention(q, k, v, p, s, p, s, mask, scale=scale,
                                   fwd_params=fwd_params, bwd_params=bwd_params)

        # one compile without --layers
        fwd = single if layers == 1 else jax.jit(layered(single, layers))

        @jax.jit
        def fwdbwd(q, k, v, extra, dout):
            out, vjp = jax.vjp(lambda q, k, v: fwd(q, k, v, extra), q, k, v)
            return vjp(dout)

        if once:
            jax.block_until_ready(fwdbwd(q, k, v, extra, dout))
            return dict(peak_bytes=None)
        out = single(q, k, v, extra)
        mask_ms = median_ms(lambda: make_mask(pos, seg), REPEATS)
        fwd_ms = median_ms(lambda: fwd(q, k, v, extra), REPEATS) / layers
        fwdbwd_ms = median_ms(lambda: fwdbwd(q, k, v, extra, dout), REPEATS) / layers
        gib = memory_gib(fwdbwd, q, k, v, extra, dout)
    rows = sample_rows(w)
    sampled = np.asarray(out[rows[:, 0], rows[:, 1]], np.float32)
    return dict(fwd_ms=fwd_ms, fwdbwd_ms=fwdbwd_ms, mask_ms=mask_ms,
                peak_bytes=gib * 2**30 if gib else None, out=sampled.tolist())


def main():
    which, workload_json, out_json = sys.argv[1:4]
    flags = sys.argv[4:]
    once = "--once" in flags
    layers = int(flags[flags.index("--layers") + 1]) if "--layers" in flags else 1
    w = Workload(**json.loads(workload_json))
    try:
        result = {"flex": run_flex, "kvax010": run_kvax010}[which](w, once, layers)
    except Exception as err:  # a peer that fails is reported, never silently dropped
        result = dict(skipped=f"{type(err).__name__}: {str(err).splitlines()[0][:300]}")
        traceback.print_exc()  # the whole story on stderr, kept by bench.py in results.json
    with open(out_json, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
