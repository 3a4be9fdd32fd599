"""Forward Triton kernel: online softmax in exp2 with the scale folded in, one program per
(query block, batch x head), one loop for the element-masked key tiles, then one for the fully
visible ones."""

from __future__ import annotations

import jax.numpy as jnp
import triton
import triton.language as tl

from kvax._src.attention import triton_common as tc
from kvax._src.attention.blockwise import capped_reference
from kvax._src.attention.mask import AttentionMask
from kvax._src.config import current_compute_capability, current_device_kind


@triton.jit
def _fwd_visit(acc, m_i, l_i, q, q_pos, q_seg, k_base, v_base, kpos_ptr, kseg_ptr, start, end,
               lf, uf, S, stride_kt, stride_vt, qk_scale, offs_h, offs_hv, offs_n,
               k_desc, v_desc, b, kvh,
               H: tl.constexpr, HV: tl.constexpr, EVEN_H: tl.constexpr, EVEN_HV: tl.constexpr,
               BLOCK_N: tl.constexpr, MASKED: tl.constexpr, SEQUENTIAL: tl.constexpr,
               PAD_ID: tl.constexpr, VARIANT: tl.constexpr, IEEE: tl.constexpr, TMA: tl.constexpr,
               FIXED_M: tl.constexpr):
    """Visit key tiles (tc.masked_tile's order); m_i is in scaled log2 units, s in score units
    (tc.scores: with a cap, t = tanh of the logit over the cap; tc.to_log2 converts). FIXED_M
    (capped float32 logits, blockwise.capped_reference): m_i stays there, no row maxima, no
    rescaling.
    Measured on an H100 and dropped (tools/dev/tune.py): the scale folded into exp2's argument
    (no change), rescaling the accumulator only when a row maximum grew by more than 2^8 (3-7%
    slower), tl.range(warp_specialize=True) with pointer loads (no change). With TMA loads
    Triton 3.6 does not specialise this loop either: at 8 warps it keeps 8 (no consumer groups),
    at 4 its NVGPUWarpSpecialization pass fails (compiled for sm_90, 2026-11-23).
    TMA (experimental, off by default): K and V tiles by device-side TMA descriptors over
    [B, S, K * H] (zero past S); see the tuning notes."""
    for t in tl.range(start, end):
        kv_start = tc.masked_tile(t, lf, uf, MASKED).to(tl.int64) * BLOCK_N
        k_ptrs = k_base + kv_start * stride_kt + offs_n[:, None] * stride_kt + offs_h[None, :]
        v_ptrs = v_base + kv_start * stride_vt + offs_n[:, None] * stride_vt + offs_hv[None, :]
        if TMA:
            k = k_desc.load([b, kv_start.to(tl.int32), kvh * H]).reshape(BLOCK_N, H)
        elif MASKED:
            in_range = (kv_start + offs_n) < S
            k = tl.load(k_ptrs, mask=in_range[:, None] & (offs_h[None, :] < H), other=0.0)
        elif EVEN_H:
            k = tl.load(k_ptrs)  # [BLOCK_N, BLOCK_H]
        else:
            k = tl.load(k_ptrs, mask=offs_h[None, :] < H, other=0.0)
        s = tc.scores(tc.mma(q, tl.trans(k), None, IEEE) * qk_scale, VARIANT, IEEE)  # [M, N]
        if MASKED:
            k_pos, k_seg, kv_live = tc.load_tile_layout(kpos_ptr, kseg_ptr, kv_start, offs_n, S,
                                                        SEQUENTIAL, PAD_ID)
            allowed = tc.element_mask(q_pos, q_seg, k_pos, k_seg, PAD_ID, VARIANT)
            s = tl.where(allowed, s, float("-inf"))
            if FIXED_M is None:
                m_new = tl.maximum(m_i, tc.to_log2(tl.max(s, 1), VARIANT))
                m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            if TMA:  # padding rows may hold NaN or Inf: zero them, as the masked load does
                v = v_desc.load([b, kv_start.to(tl.int32), kvh * HV]).reshape(BLOCK_N, HV)
                v = tl.where(kv_live[:, None], v, 0.0)
            else:
                v = tl.load(v_ptrs, mask=kv_live[:, None] & (offs_hv[None, :] < HV), other=0.0)
        else:
            if FIXED_M is None:
                m_new = tl.maximum(m_i, tc.to_log2(tl.max(s, 1), VARIANT))
                m_use = m_new
            if TMA:
                v = v_desc.load([b, kv_start.to(tl.int32), kvh * HV]).reshape(BLOCK_N, HV)
            elif EVEN_HV:
                v = tl.load(v_ptrs)  # [BLOCK_N, BLOCK_HV]
            else:
                v = tl.load(v_ptrs, mask=offs_hv[None, :] < HV, other=0.0)
        if FIXED_M is None:
            p = tl.math.exp2(tc.to_log2(s, VARIANT) - m_use[:, None])
            alpha = tl.math.exp2(m_i - m_use)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            m_i = m_new
        else:
            p = tl.math.exp2(tc.to_log2(s, VARIANT) - FIXED_M)
            l_i = l_i + tl.sum(p, 1)
        acc = tc.mma(p.to(v.dtype), v, acc, IEEE)
    return acc, m_i, l_i


@triton.jit
def _fwd_kernel(
    Q, K, V, SCALE, SINKS, QPOS, QSEG, KPOS, KSEG, LO, HI, LF, UF,
    B, T, S, R, NT,
    O, LSE,
    N: tl.constexpr, G: tl.constexpr, H: tl.constexpr, HV: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_HV: tl.constexpr, EVEN_H: tl.constexpr, EVEN_HV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ROW_RATIO: tl.constexpr,
    COL_RATIO: tl.constexpr, SEQUENTIAL: tl.constexpr, PAD_ID: tl.constexpr, VARIANT: tl.constexpr,
    IEEE: tl.constexpr, LOG2E: tl.constexpr, TMA: tl.constexpr, HAS_SINKS: tl.constexpr,
    FIXED_M: tl.constexpr,
):
    # Strides from the static shapes, so Triton knows their divisibility and vectorises the loads
    # (jax-triton passes integer scalars without divisibility hints).
    stride_qt = N * H
    stride_kt = (N // G) * H
    stride_vt = (N // G) * HV
    stride_ot = N * HV
    # a device scalar (the scale may be traced), in log2 units and over the cap (tc.logit_scale)
    qk_scale = tc.logit_scale(tl.load(SCALE) * LOG2E, VARIANT)
    pid_m = NT - 1 - tl.program_id(0)  # heavier (later) query blocks first
    pid_bn = tl.program_id(1)
    b = (pid_bn // N).to(tl.int64)
    n = pid_bn % N
    kvh = n // G
    row = b * R + pid_m // ROW_RATIO  # tiles split mask blocks ROW_RATIO ways
    lo, hi, lf, uf = tc.load_bounds(LO, HI, LF, UF, row, COL_RATIO)

    q_start = pid_m.to(tl.int64) * BLOCK_M
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_h = tl.arange(0, BLOCK_H)
    offs_hv = tl.arange(0, BLOCK_HV)
    q_rows = (q_start + offs_m) < T

    # out-of-range rows read as padding; NaN in padding rows stays out
    q_pos, q_seg, q_live = tc.load_tile_layout(QPOS + b * T, QSEG + b * T, q_start, offs_m, T,
                                               SEQUENTIAL, PAD_ID)
    q_base = Q + b * T * stride_qt + q_start * stride_qt + n * H
    q = tl.load(q_base + offs_m[:, None] * stride_qt + offs_h[None, :],
                mask=q_live[:, None] & (offs_h[None, :] < H), other=0.0)  # [BLOCK_M, BLOCK_H]

    k_base = K + b * S * stride_kt + kvh * H
    v_base = V + b * S * stride_vt + kvh * HV
    kpos_ptr = KPOS + b * S
    kseg_ptr = KSEG + b * S

    if TMA:  # [B, S, K * H] views: the descriptor zero-fills rows past S
        k_desc = tl.make_tensor_descriptor(K, shape=[B, S, stride_kt], strides=[S * stride_kt,
                                           stride_kt, 1], block_shape=[1, BLOCK_N, H])
        v_desc = tl.make_tensor_descriptor(V, shape=[B, S, stride_vt], strides=[S * stride_vt,
                                           stride_vt, 1], block_shape=[1, BLOCK_N, HV])
    else:
        k_desc = K
        v_desc = V
    acc = tl.zeros([BLOCK_M, BLOCK_HV], dtype=tl.float32)
    if FIXED_M is None:
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    else:
        m_i = tl.full([BLOCK_M], FIXED_M, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc, m_i, l_i = _fwd_visit(acc, m_i, l_i, q, q_pos, q_seg, k_base, v_base, kpos_ptr, kseg_ptr,
                               lo, lf + hi - uf, lf, uf, S, stride_kt, stride_vt, qk_scale, offs_h,
                               offs_hv, offs_n, k_desc, v_desc, b.to(tl.int32), kvh, H, HV,
                               EVEN_H, EVEN_HV, BLOCK_N, True, SEQUENTIAL, PAD_ID, VARIANT, IEEE,
                               TMA, FIXED_M)
    acc, m_i, l_i = _fwd_visit(acc, m_i, l_i, q, q_pos, q_seg, k_base, v_base, kpos_ptr, kseg_ptr,
                               lf, uf, lf, uf, S, stride_kt, stride_vt, qk_scale, offs_h, offs_hv,
                               offs_n, k_desc, v_desc, b.to(tl.int32), kvh, H, HV, EVEN_H,
                               EVEN_HV, BLOCK_N, False, SEQUENTIAL, PAD_ID, VARIANT, IEEE, TMA,
                               FIXED_M)

    live = l_i > 0.0
    if HAS_SINKS:  # head n's sink logit joins the denominator (rows that attended nothing: no)
        sink = tl.load(SINKS + n) * LOG2E
        m_f = tl.where(live, tl.maximum(m_i, sink), m_i)
        alpha = tl.where(live, tl.math.exp2(m_i - m_f), 1.0)
        l_i = tl.where(live, l_i * alpha + tl.math.exp2(sink - m_f), l_i)
        acc = acc * alpha[:, None]
        m_i = m_f
    out = acc / tl.where(live, l_i, 1.0)[:, None]
    out = tl.where(live[:, None], out, 0.0)
    # natural log, -inf where nothing was attended (backends.py)
    lse = tl.where(live, (m_i + tl.math.log2(tl.where(live, l_i, 1.0))) / LOG2E, float("-inf"))
    o_base = O + b * T * stride_ot + q_start * stride_ot + n * HV
    tl.store(o_base + offs_m[:, None] * stride_ot + offs_hv[None, :], out.to(O.dtype.element_ty),
             mask=q_rows[:, None] & (offs_hv[None, :] < HV))
    lse_base = LSE + (b * N + n) * T + q_start
    tl.store(lse_base + offs_m, lse, mask=q_rows)


def forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, mask: AttentionMask, *,
            sequential: bool, params, debug: bool = False, tma: bool = False,
            logits_soft_cap: float | None = None, sinks=None):
    """Output [B, T, N, Hv] (q's dtype) and logsumexp [B, N, T] (float32, natural log, -inf on
    rows with nothing to attend); sinks [N] or None."""
    b, t, n, h = q.shape
    s_len, num_kv, hv = k.shape[1], k.shape[2], v.shape[3]
    r = mask.lower_bounds.shape[1]
    tiles = tc.forward_tiles(q.dtype, h, hv, (mask.row_block, mask.col_block), params,
                             current_device_kind(), current_compute_capability())
    num_tiles = -(-t // tiles["BLOCK_M_TILE"])
    out_shapes = [tc.shape_dtype((b, t, n, hv), q.dtype), tc.shape_dtype((b, n, t), "float32")]
    out, lse = tc.launch(
        _fwd_kernel, q, k, v, tc.scale_array(scale),
        tc.scale_array(0.0) if sinks is None else sinks.astype(jnp.float32),
        q_pos, q_seg, kv_pos, kv_seg,
        *mask.flatten(), b, t, s_len, r, num_tiles,
        out_shape=out_shapes, grid=(num_tiles, b * n), name="kvax_fwd",
        num_warps=params.num_warps, num_stages=tiles["num_stages"], debug=debug,
        N=n, G=n // num_kv, BLOCK_M=tiles["BLOCK_M_TILE"], BLOCK_N=tiles["BLOCK_N_TILE"],
        ROW_RATIO=tiles["ROW_RATIO"], COL_RATIO=tiles["COL_RATIO"],
        TMA=bool(tma), HAS_SINKS=sinks is not None,
        FIXED_M=capped_reference(logits_soft_cap, v.dtype),
        **tc.common_constants(q.dtype, h, hv, sequential, mask.variant, logits_soft_cap),
    )
    return out, lse
