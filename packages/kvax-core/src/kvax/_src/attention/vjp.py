"""custom_vjp wiring: output and logsumexp are the residuals; gradients flow to q, k, v only."""

from __future__ import annotations

import dataclasses
import functools

import jax
from jax.ad_checkpoint import checkpoint_name

from kvax._src.attention import blockwise
from kvax._src.attention.mask import AttentionMask, build_masks
from kvax._src.config import FlashAttentionParamsConfig

REMAT_NAME = "attention_outputs"


@dataclasses.dataclass(frozen=True)
class Options:
    """Static, non-differentiable options of one attention call."""

    scale: float
    sequential: bool
    backend: str  # "triton" or "xla"
    fwd_params: FlashAttentionParamsConfig
    bwd_params: FlashAttentionParamsConfig
    memory_optimized_gqa_backward: bool = False
    skip_pad_tokens: bool = True
    debug: bool = False


def _forward_impl(opts: Options, q, k, v, q_pos, q_seg, kv_pos, kv_seg, fwd_mask: AttentionMask):
    if opts.backend == "triton":
        from kvax._src.attention import triton_fwd

        return triton_fwd.forward(q, k, v, q_pos, q_seg, kv_pos, kv_seg, fwd_mask,
                                  scale=opts.scale, sequential=opts.sequential,
                                  params=opts.fwd_params, debug=opts.debug)
    return blockwise.forward(q, k, v, q_pos, q_seg, kv_pos, kv_seg, fwd_mask, scale=opts.scale,
                             sequential=opts.sequential)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def attention(opts: Options, q, k, v, q_pos, q_seg, kv_pos, kv_seg, masks):
    """Attention output [B, T, N, Hv]; masks is (fwd,) or (fwd, dq, dkdv)."""
    out, _ = _forward_impl(opts, q, k, v, q_pos, q_seg, kv_pos, kv_seg, masks[0])
    return out


def _attention_fwd(opts, q, k, v, q_pos, q_seg, kv_pos, kv_seg, masks):
    out, lse = _forward_impl(opts, q, k, v, q_pos, q_seg, kv_pos, kv_seg, masks[0])
    out = checkpoint_name(out, REMAT_NAME)
    lse = checkpoint_name(lse, REMAT_NAME)
    return out, (q, k, v, q_pos, q_seg, kv_pos, kv_seg, masks, out, lse)


def _attention_bwd(opts: Options, residuals, dout):
    q, k, v, q_pos, q_seg, kv_pos, kv_seg, masks, out, lse = residuals
    if len(masks) < 3:  # the caller built no backward masks: build them here, once per step
        masks = build_masks(q_pos, q_seg, kv_pos, kv_seg, fwd_params=opts.fwd_params,
                            bwd_params=opts.bwd_params, skip_pad_tokens=opts.skip_pad_tokens)
    _, dq_mask, dkdv_mask = masks
    args = (q, k, v, q_pos, q_seg, kv_pos, kv_seg, out, lse, dout, dq_mask, dkdv_mask)
    if opts.backend == "triton":
        from kvax._src.attention import triton_bwd

        dq, dk, dv = triton_bwd.backward(
            *args, scale=opts.scale, sequential=opts.sequential, params=opts.bwd_params,
            memory_optimized_gqa=opts.memory_optimized_gqa_backward, debug=opts.debug)
    else:
        dq, dk, dv = blockwise.backward(*args, scale=opts.scale, sequential=opts.sequential)
    return dq, dk, dv, None, None, None, None, None


attention.defvjp(_attention_fwd, _attention_bwd)
