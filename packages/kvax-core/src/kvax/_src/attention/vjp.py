"""custom_vjp wiring: output and logsumexp are the residuals; gradients flow to q, k, v and scale.

`attention` is jitted with its static options, so eager calls of one shape compile once; under an
outer jit it is inlined as usual.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from kvax._src.attention import blockwise
from kvax._src.attention.mask import AttentionMask, build_masks
from kvax._src.attention.variant import MaskVariant
from kvax._src.config import PADDING_SEGMENT_ID, FlashAttentionParamsConfig

REMAT_NAME = "attention_outputs"


@dataclasses.dataclass(frozen=True)
class Options:
    """Static, non-differentiable options of one attention call."""

    sequential: bool
    backend: str  # "triton" or "xla"
    fwd_params: FlashAttentionParamsConfig
    bwd_params: FlashAttentionParamsConfig
    memory_optimized_gqa_backward: bool = False
    skip_pad_tokens: bool = True
    debug: bool = False
    variant: MaskVariant = MaskVariant()
    logits_soft_cap: float | None = None


def _forward_impl(opts: Options, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg,
                  fwd_mask: AttentionMask):
    if opts.backend == "triton":
        from kvax._src.attention import triton_fwd

        return triton_fwd.forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, fwd_mask,
                                  sequential=opts.sequential, params=opts.fwd_params,
                                  debug=opts.debug, logits_soft_cap=opts.logits_soft_cap)
    return blockwise.forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, fwd_mask,
                             sequential=opts.sequential, logits_soft_cap=opts.logits_soft_cap)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(opts: Options, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks):
    out, _ = _forward_impl(opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks[0])
    return out


def _attention_fwd(opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks):
    out, lse = _forward_impl(opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks[0])
    out = checkpoint_name(out, REMAT_NAME)
    lse = checkpoint_name(lse, REMAT_NAME)
    return out, (q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks, out, lse)


def _attention_bwd(opts: Options, residuals, dout):
    q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks, out, lse = residuals
    if len(masks) < 3:  # the caller built no backward masks: build them here, once per step
        masks = build_masks(q_pos, q_seg, kv_pos, kv_seg, fwd_params=opts.fwd_params,
                            bwd_params=opts.bwd_params, skip_pad_tokens=opts.skip_pad_tokens,
                            variant=opts.variant)
    _, dq_mask, dkdv_mask = masks
    # Round the cotangent to the inputs' dtype once, behind a barrier: with XLA's excess
    # precision, the producer of dout (say `out * 1.5`) could otherwise be fused into delta's
    # contraction at float32 while the dP products read the rounded copy, and rows whose exact
    # gradient is 0 would get rounding noise (~3e-2 in bfloat16).
    dout = jax.lax.optimization_barrier(dout.astype(q.dtype))
    args = (q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, out, lse, dout, dq_mask, dkdv_mask)
    if opts.backend == "triton":
        from kvax._src.attention import triton_bwd

        dq, dk, dv = triton_bwd.backward(
            *args, sequential=opts.sequential, params=opts.bwd_params,
            memory_optimized_gqa=opts.memory_optimized_gqa_backward, debug=opts.debug,
            logits_soft_cap=opts.logits_soft_cap)
    else:
        dq, dk, dv = blockwise.backward(*args, sequential=opts.sequential,
                                        logits_soft_cap=opts.logits_soft_cap)
    # d out / d scale = sum(dS * Q K^T) and dQ = scale * dS K, so dscale = <Q, dQ> / scale
    # (a reduction XLA drops when nobody asks for the scale's gradient). Padding rows are left
    # out: their dQ is 0, but their Q may hold NaN or Inf.
    live = (q_seg != PADDING_SEGMENT_ID)[:, :, None, None]
    dscale = jnp.sum(jnp.where(live, q.astype(jnp.float32) * dq.astype(jnp.float32), 0.0))
    dscale = dscale / scale
    return dq, dk, dv, dscale.astype(scale.dtype), None, None, None, None, None


_attention.defvjp(_attention_fwd, _attention_bwd)


@functools.partial(jax.jit, static_argnums=(0,))
def attention(opts: Options, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks):
    """Attention output [B, T, N, Hv]; scale a float32 scalar; masks (fwd,) or (fwd, dq, dkdv)."""
    return _attention(opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, masks)
