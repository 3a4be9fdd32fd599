"""Pure-JAX blockwise attention: the kernels' algorithm and block-mask semantics, for any backend.

It visits exactly the blocks the mask says and applies the element-wise mask only on blocks the
mask calls partial (so a wrong block classification shows up as a wrong answer in tests on CPU).
Residuals as every backend keeps them (backends.py): logsumexp in natural log, -inf on rows with
nothing to attend.
Legend: B batch, T query length, S kv length, N query heads, K kv heads, G = N // K, H head dim,
Hv value head dim, R row blocks, C column blocks.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from kvax._src.config import PADDING_SEGMENT_ID
from kvax._src.attention.mask import AttentionMask
from kvax._src.attention.variant import MaskVariant

_HI = jax.lax.Precision.HIGHEST
_F32 = jnp.float32
LOG2E = math.log2(math.e)


def _blocks(x: jax.Array, block: int, fill=0) -> jax.Array:
    """[B, L, ...] -> [B, ceil(L / block), block, ...], padded with `fill`."""
    length = x.shape[1]
    nb = -(-length // block)
    pad = [(0, 0), (0, nb * block - length)] + [(0, 0)] * (x.ndim - 2)
    x = jnp.pad(x, pad, constant_values=fill)
    return x.reshape(x.shape[0], nb, block, *x.shape[2:])


def _gather(x: jax.Array, idx: jax.Array) -> jax.Array:
    """x [B, C, ...], idx [B, R] -> [B, R, ...]: block idx[b, r] of batch row b."""
    idx = idx.reshape(*idx.shape, *([1] * (x.ndim - 2)))
    return jnp.take_along_axis(x, idx, axis=1)


def _layout(pos, seg, block, sequential):
    """Positions and segments as blocks [B, nb, block]; index positions when sequential."""
    if sequential:
        pos = jnp.broadcast_to(jnp.arange(pos.shape[1], dtype=jnp.int32), pos.shape)
    return _blocks(pos, block), _blocks(seg, block, PADDING_SEGMENT_ID)


def _element_mask(q_pos, q_seg, k_pos, k_seg, variant: MaskVariant):
    """[..., bq] x [..., bk] -> [..., bq, bk]: the element rule."""
    return variant.element_rule(q_pos[..., :, None], q_seg[..., :, None], k_pos[..., None, :],
                                k_seg[..., None, :], PADDING_SEGMENT_ID)


def _visit(mask: AttentionMask, init, step):
    """Run step(state, col_block [B, R], active [B, R], full [B, R]) over each row's range."""
    lo, hi, lf, uf = mask.flatten()
    num_steps = jnp.max(hi - lo, initial=0)
    last = mask.num_col_blocks - 1

    def body(carry):
        i, state = carry
        j = lo + i
        active = j < hi
        full = (j >= lf) & (j < uf)
        return i + 1, step(state, jnp.clip(j, 0, last), active, full)

    return jax.lax.while_loop(lambda c: c[0] < num_steps, body, (jnp.int32(0), init))[1]


def _zero_padding(x, seg):
    """Zero the rows of padding tokens, so NaN or Inf there cannot reach real rows."""
    keep = (seg != PADDING_SEGMENT_ID).reshape(*seg.shape, *([1] * (x.ndim - 2)))
    return jnp.where(keep, x, jnp.zeros((), x.dtype))


def _grouped(x, k):
    """[B, L, N, H] -> [B, L, K, G, H]."""
    b, l, n, h = x.shape
    return x.reshape(b, l, k, n // k, h)


def _soft_cap(s, cap):
    """c * tanh(s / c) when a cap is set (natural-log logits)."""
    return s if cap is None else cap * jnp.tanh(s / cap)


def _soft_cap_grad(ds, s_capped, cap):
    """ds times the cap's derivative, 1 - tanh^2, read off the capped logits."""
    return ds if cap is None else ds * (1.0 - jnp.square(s_capped / cap))


def capped_reference(logits_soft_cap: float | None, dtype) -> float | None:
    """The Triton forward's fixed row reference m (log2 units) for soft-capped float32 logits,
    or None where the softmax keeps running row maxima. Capped logits lie in [-f, f],
    f = c * log2(e), so p = exp2(logit - m) with m = min(f, 24) stays in [2^-(f + m), 2^(f - m)]
    for any scores: for f <= 80 (c <= 55) every p, the row sums (< 2^80 up to 2^24 keys) and
    products p * v with 2^-22 <= |v| <= 2^40 are normal float32 numbers, so the softmax skips
    the row maximum's reduction and the output's rescaling. Only where P stays float32 (IEEE
    products): no weight is then exactly 1, and a 16-bit copy of P would put its rounding, up
    to 2^-9 of v in bfloat16, on the output of a row that sees one key, where the maxima give
    v exactly (fuzz seed 5812, docs/bench/h200x2-2026-11-29-fuzz-b/). 16-bit inputs keep the
    maxima here; the Mosaic forward takes this m for bfloat16 and repairs those rows
    (mosaic_fwd.fixed_weights)."""
    if logits_soft_cap is None or jnp.dtype(dtype) != jnp.float32:
        return None
    f = logits_soft_cap * LOG2E
    return min(f, 24.0) if f <= 80.0 else None


def forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, mask: AttentionMask, *,
            sequential: bool, logits_soft_cap: float | None = None, sinks=None):
    """Returns output [B, T, N, Hv] in q's dtype and logsumexp [B, N, T] (float32, natural log,
    -inf if empty). scale: a float32 scalar, traced or not; sinks: [N] or None."""
    b, t, n, _ = q.shape
    num_kv = k.shape[2]
    bq, bk = mask.row_block, mask.col_block
    qr = _blocks(_grouped(_zero_padding(q, q_seg), num_kv), bq).astype(_F32)  # [B,R,bq,K,G,H]
    kc = _blocks(_zero_padding(k, kv_seg), bk).astype(_F32)  # [B,C,bk,K,H]
    vc = _blocks(_zero_padding(v, kv_seg), bk).astype(_F32)  # [B,C,bk,K,Hv]
    qp, qs = _layout(q_pos, q_seg, bq, sequential)  # [B,R,bq]
    kp, ks = _layout(kv_pos, kv_seg, bk, sequential)  # [B,C,bk]
    r, g, hv = qr.shape[1], n // num_kv, v.shape[3]

    def step(state, j, active, full):
        m, l, acc = state
        kj, vj = _gather(kc, j), _gather(vc, j)  # [B,R,bk,K,H]
        s = _soft_cap(jnp.einsum("brqkgh,brskh->brkgqs", qr, kj, precision=_HI) * scale,
                      logits_soft_cap)
        elem = _element_mask(qp, qs, _gather(kp, j), _gather(ks, j), mask.variant)  # [B,R,bq,bk]
        allowed = (active[..., None, None] & (full[..., None, None] | elem))[:, :, None, None]
        s = jnp.where(allowed, s, -jnp.inf)
        m_new = jnp.maximum(m, jnp.max(s, axis=-1))
        m_safe = jnp.where(jnp.isneginf(m_new), 0.0, m_new)
        p = jnp.exp(s - m_safe[..., None])
        alpha = jnp.exp(m - m_safe)
        l = l * alpha + jnp.sum(p, axis=-1)
        acc = acc * alpha[..., None] + jnp.einsum("brkgqs,brskd->brkgqd", p, vj, precision=_HI)
        return m_new, l, acc

    init = (jnp.full((b, r, num_kv, g, bq), -jnp.inf, _F32), jnp.zeros((b, r, num_kv, g, bq), _F32),
            jnp.zeros((b, r, num_kv, g, bq, hv), _F32))
    m, l, acc = _visit(mask, init, step)
    live = l > 0
    if sinks is not None:  # one more logit per head, with no value, joins each row's denominator
        sink = sinks.astype(_F32).reshape(num_kv, g)[None, None, :, :, None]  # [1,1,K,G,1]
        m, l, acc = _fold_sink(m, l, acc, sink, live)
    out = jnp.where(live[..., None], acc / jnp.where(live, l, 1.0)[..., None], 0.0)
    lse = jnp.where(live, m + jnp.log(jnp.where(live, l, 1.0)), -jnp.inf)
    out = out.transpose(0, 1, 4, 2, 3, 5).reshape(b, r * bq, n, hv)[:, :t]
    lse = lse.transpose(0, 2, 3, 1, 4).reshape(b, n, r * bq)[:, :, :t]
    return out.astype(q.dtype), lse


def _fold_sink(m, l, acc, sink, live):
    """The running (max, sum, accumulator) with a sink logit added to the sum; rows that attended
    nothing stay as they are (their output is 0 whatever the sink)."""
    m_new = jnp.where(live, jnp.maximum(m, sink), m)
    alpha = jnp.where(live, jnp.exp(m - m_new), 1.0)
    l = jnp.where(live, l * alpha + jnp.exp(sink - m_new), l)
    return m_new, l, acc * alpha[..., None]


def _rows_to_blocks(x, block, num_kv):
    """[B, N, T] -> [B, R, K, G, block]."""
    b, n, t = x.shape
    x = _blocks(x.transpose(0, 2, 1), block)  # [B,R,block,N]
    return x.reshape(*x.shape[:3], num_kv, n // num_kv).transpose(0, 1, 3, 4, 2)


def backward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, lse, delta, dout,
             dq_mask: AttentionMask, dkdv_mask: AttentionMask, *, sequential: bool,
             logits_soft_cap: float | None = None):
    """Gradients (dq, dk, dv) in the inputs' dtype; dk/dv summed over each kv head's group.
    lse and delta [B, N, T] as backends.py describes them."""
    b, t, n, h = q.shape
    s_len, num_kv, hv = k.shape[1], k.shape[2], v.shape[3]
    q0 = _grouped(_zero_padding(q, q_seg), num_kv).astype(_F32)  # [B,T,K,G,H]
    do0 = _grouped(_zero_padding(dout, q_seg), num_kv).astype(_F32)  # [B,T,K,G,Hv]
    k0 = _zero_padding(k, kv_seg).astype(_F32)
    v0 = _zero_padding(v, kv_seg).astype(_F32)
    lse = jnp.where(jnp.isneginf(lse), jnp.inf, lse)  # empty rows: exp(s - lse) = 0, not inf

    # dQ: rows are query blocks.
    bq, bk = dq_mask.row_block, dq_mask.col_block
    qr, dor = _blocks(q0, bq), _blocks(do0, bq)  # [B,R,bq,K,G,*]
    lse_r, delta_r = _rows_to_blocks(lse, bq, num_kv), _rows_to_blocks(delta, bq, num_kv)
    kc, vc = _blocks(k0, bk), _blocks(v0, bk)
    qp, qs = _layout(q_pos, q_seg, bq, sequential)
    kp, ks = _layout(kv_pos, kv_seg, bk, sequential)

    def dq_step(dq, j, active, full):
        kj, vj = _gather(kc, j), _gather(vc, j)
        s = _soft_cap(jnp.einsum("brqkgh,brskh->brkgqs", qr, kj, precision=_HI) * scale,
                      logits_soft_cap)
        elem = _element_mask(qp, qs, _gather(kp, j), _gather(ks, j), dq_mask.variant)
        allowed = (active[..., None, None] & (full[..., None, None] | elem))[:, :, None, None]
        p = jnp.where(allowed, jnp.exp(s - lse_r[..., None]), 0.0)
        dp = jnp.einsum("brqkgd,brskd->brkgqs", dor, vj, precision=_HI)
        ds = _soft_cap_grad(p * (dp - delta_r[..., None]), s, logits_soft_cap)
        return dq + jnp.einsum("brkgqs,brskh->brqkgh", ds, kj, precision=_HI) * scale

    dq = _visit(dq_mask, jnp.zeros(qr.shape, _F32), dq_step)
    dq = dq.reshape(b, -1, n, h)[:, :t]

    # dK, dV: rows are key blocks, columns query blocks; the group's heads summed in place.
    bk, bq = dkdv_mask.row_block, dkdv_mask.col_block
    kr, vr = _blocks(k0, bk), _blocks(v0, bk)  # [B,R,bk,K,*]
    qc, doc = _blocks(q0, bq), _blocks(do0, bq)  # [B,C,bq,K,G,*]
    lse_c, delta_c = _rows_to_blocks(lse, bq, num_kv), _rows_to_blocks(delta, bq, num_kv)
    kp, ks = _layout(kv_pos, kv_seg, bk, sequential)
    qp, qs = _layout(q_pos, q_seg, bq, sequential)

    def dkdv_step(state, i, active, full):
        dk, dv = state
        qi, doi = _gather(qc, i), _gather(doc, i)  # [B,R,bq,K,G,*]
        s = _soft_cap(jnp.einsum("brqkgh,brskh->brkgqs", qi, kr, precision=_HI) * scale,
                      logits_soft_cap)
        elem = _element_mask(_gather(qp, i), _gather(qs, i), kp, ks,
                             dkdv_mask.variant)  # [B,R,bq,bk]
        allowed = (active[..., None, None] & (full[..., None, None] | elem))[:, :, None, None]
        p = jnp.where(allowed, jnp.exp(s - _gather(lse_c, i)[..., None]), 0.0)
        dv = dv + jnp.einsum("brkgqs,brqkgd->brskd", p, doi, precision=_HI)
        dp = jnp.einsum("brqkgd,brskd->brkgqs", doi, vr, precision=_HI)
        ds = _soft_cap_grad(p * (dp - _gather(delta_c, i)[..., None]), s, logits_soft_cap)
        dk = dk + jnp.einsum("brkgqs,brqkgh->brskh", ds, qi, precision=_HI) * scale
        return dk, dv

    dk, dv = _visit(dkdv_mask, (jnp.zeros(kr.shape, _F32), jnp.zeros(vr.shape, _F32)), dkdv_step)
    dk = dk.reshape(b, -1, num_kv, h)[:, :s_len]
    dv = dv.reshape(b, -1, num_kv, hv)[:, :s_len]
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype)
