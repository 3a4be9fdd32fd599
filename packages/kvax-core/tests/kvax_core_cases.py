"""Shared parameters of kvax-core's tests (a uniquely named module, imported by the tests)."""

from unittest import mock

import pytest

from kvax.utils import FlashAttentionParamsConfig

# The backends every correctness test runs on: the pure-JAX path everywhere, the kernels on a GPU.
BACKENDS = [pytest.param("xla", id="xla"),
            pytest.param("triton", id="triton", marks=pytest.mark.gpu)]

SMALL = FlashAttentionParamsConfig(query_block_size=32, kv_block_size=16, num_warps=4, num_stages=2)


def lowered_for_hopper(kv_len: int = 700, debug_info: bool = False) -> str:
    """A forward+backward step through the public API (packed documents, GQA, head dim 64,
    bf16), traced and lowered for CUDA as on an H100, so through the Mosaic kernels, on any
    machine: its text. jax's caches are cleared first, so the kernels are lowered anew."""
    import jax
    import jax.numpy as jnp
    from kvax._src.attention import backends
    from kvax.ops import create_attention_mask, flash_attention
    from kvax_testing import packed_batch

    fwd = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)
    bwd = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=128)
    batch = packed_batch(23, batch=1, kv_len=kv_len, num_heads=4, num_kv_heads=2, head_dim=64,
                         dtype="bfloat16")
    layout = [jnp.asarray(a) for a in batch.layout.arrays]

    def loss(x):
        masks = create_attention_mask(*layout, fwd_params=fwd, bwd_params=bwd,
                                      calc_bwd_mask=True)
        out = flash_attention(x, x[:, :, :2], x[:, :, 2:], *layout, mask=masks, scale=0.125,
                              fwd_params=fwd, bwd_params=bwd)
        return jnp.sum(out.astype(jnp.float32))

    with mock.patch.object(backends, "_platform", lambda: "gpu"), \
            mock.patch("kvax._src.config.current_device_kind", lambda: "NVIDIA H100 80GB HBM3"):
        jax.clear_caches()
        step = jax.jit(jax.grad(loss)).trace(jnp.asarray(batch.query))
        return step.lower(lowering_platforms=("cuda",)).as_text(debug_info=debug_info)
