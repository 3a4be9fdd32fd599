"""custom_vjp wiring: output and logsumexp are the residuals (and both are outputs, so the logsumexp
is differentiable too); gradients flow to q, k, v, scale and the sinks.

The backends (backends.py) keep one residual convention: logsumexp [B, N, T] float32 in natural
log, sinks included, -inf on rows with nothing to attend.

Tracing: eager calls go through a jit of the whole op with its static options, so that calls of
one shape compile once. Under a trace (a jitted step) the custom_vjp is called as it is, so
that jax's differentiation meets it directly and traces only its forward rule: a jit around it
had jax trace the non-differentiated forward too (the Mosaic forward's kernel traced twice a
step, 0.5 s of a 64k step's 1.4 s of tracing on a 2-core CPU). The forward, the forward rule
and the backward rule are each jitted inside, so a model's layers of one shape trace each once.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from kvax._src.attention import backends
from kvax._src.attention.mask import AttentionMask, build_masks
from kvax._src.attention.variant import MaskVariant
from kvax._src.config import PADDING_SEGMENT_ID, FlashAttentionParamsConfig

REMAT_NAME = "attention_outputs"
_HI = jax.lax.Precision.HIGHEST


@dataclasses.dataclass(frozen=True)
class Options:
    """Static, non-differentiable options of one attention call."""

    sequential: bool
    backend: str  # a registered backend's name (backends.py), already resolved
    fwd_params: FlashAttentionParamsConfig
    bwd_params: FlashAttentionParamsConfig
    memory_optimized_gqa_backward: bool = False
    skip_pad_tokens: bool = True
    debug: bool = False
    variant: MaskVariant = MaskVariant()
    logits_soft_cap: float | None = None
    deterministic: bool = True  # False lets a backend take a faster, atomics-based backward


@functools.partial(jax.jit, static_argnums=(0,))
def _forward(opts: Options, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg,
             fwd_mask: AttentionMask):
    return backends.get(opts.backend).forward(opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos,
                                              kv_seg, fwd_mask)


@functools.partial(jax.jit, static_argnums=(0,))
def _forward_for_grad(opts: Options, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, masks):
    # q_saved: the query as the backend's backward takes it (backends.Backend.forward_for_grad)
    return backends.get(opts.backend).forward_for_grad(opts, q, k, v, scale, sinks, q_pos, q_seg,
                                                       kv_pos, kv_seg, masks)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(opts: Options, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, masks):
    return _forward(opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, masks[0])


def _attention_fwd(opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, masks):
    out, lse, q_saved = _forward_for_grad(opts, q, k, v, scale, sinks, q_pos, q_seg, kv_pos,
                                          kv_seg, masks)
    out = checkpoint_name(out, REMAT_NAME)
    lse = checkpoint_name(lse, REMAT_NAME)
    residuals = (q_saved, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, masks, out, lse)
    if backends.get(opts.backend).lowers_backward_ahead:  # its kernels built from now on
        from kvax._src.attention import triton_launch

        about = ("backward", opts, str(jax.tree.map(jax.typeof, residuals)))
        triton_launch.lower_ahead(about, functools.partial(_attention_bwd, opts), residuals,
                                  (out, lse))
    return (out, lse), residuals


def _delta(out, dout, lse, dlse):
    """rowsum(dO * O) - d(logsumexp) as [B, N, T] float32, 0 on rows with nothing to attend.
    d lse / d logit = p, so the logsumexp's cotangent enters every dS = P (dP - delta) this way."""
    delta = jnp.einsum("btnd,btnd->bnt", dout, out, preferred_element_type=jnp.float32,
                       precision=_HI)
    return jnp.where(jnp.isfinite(lse), delta - dlse.astype(jnp.float32), 0.0)


@functools.partial(jax.jit, static_argnums=(0,))
def _attention_bwd(opts: Options, residuals, cotangents):
    q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, masks, out, lse = residuals
    dout, dlse = cotangents
    fwd_mask = masks[0]
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
    live_q = (q_seg != PADDING_SEGMENT_ID)[:, :, None, None]
    delta = _delta(jnp.where(live_q, out, 0), jnp.where(live_q, dout, 0), lse, dlse)
    dq, dk, dv = backends.get(opts.backend).backward(
        opts, q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, out, lse, delta, dout, dq_mask,
        dkdv_mask, fwd_mask=fwd_mask)
    # d out / d scale = sum(dS * Q K^T) and dQ = scale * dS K, so dscale = <Q, dQ> / scale
    # (a reduction XLA drops when nobody asks for the scale's gradient). Padding rows are left
    # out: their dQ is 0, but their Q may hold NaN or Inf.
    dscale = jnp.sum(jnp.where(live_q, q.astype(jnp.float32) * dq.astype(jnp.float32), 0.0))
    dscale = (dscale / scale).astype(scale.dtype)
    dsinks = None
    if sinks is not None:
        # the sink is a logit with no value: d loss / d sink = -p_sink * delta, summed over rows
        p_sink = jnp.exp(sinks.astype(jnp.float32)[None, :, None] - lse)  # 0 where lse = -inf
        p_sink = jnp.where(jnp.isfinite(lse), p_sink, 0.0)
        dsinks = (-jnp.sum(p_sink * delta, axis=(0, 2))).astype(sinks.dtype)
    return dq, dk, dv, dscale, dsinks, None, None, None, None, None


_attention.defvjp(_attention_fwd, _attention_bwd)


_attention_jit = jax.jit(_attention, static_argnums=(0,))


def attention(opts: Options, q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, masks):
    """(output [B, T, N, Hv], logsumexp [B, N, T]); scale a float32 scalar; sinks [N] or None;
    masks (fwd,) or (fwd, dq, dkdv). Under a trace the custom_vjp itself, eagerly its jit (the
    module's docstring says why)."""
    args = (q, k, v, scale, sinks, q_pos, q_seg, kv_pos, kv_seg, masks)
    traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args))
    return (_attention if traced else _attention_jit)(opts, *args)
