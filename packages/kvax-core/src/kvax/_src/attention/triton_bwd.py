"""Backward Triton kernel: one launch whose programs compute either dK/dV (one per key tile and kv
head, the group's query heads summed in registers, so no per-query-head copies) or dQ (one per
query tile and query head). Deterministic: no atomics; every output element is written by exactly
one program. One launch instead of two kernels lets dQ programs fill the dK/dV programs' tail:
6-12% faster on document masks on an H100 (docs/bench/h100-2026-11-22/tuning.md)."""

from __future__ import annotations

import jax.numpy as jnp
import triton
import triton.language as tl

from kvax._src.attention import triton_common as tc
from kvax._src.attention.mask import AttentionMask
from kvax._src.config import current_compute_capability, current_device_kind


@triton.jit
def _dkdv_visit(dk, dv, k, v, k_pos, k_seg, q_base, do_base, qpos_ptr, qseg_ptr, lse_ptr,
                delta_ptr, start, end, lf, uf, T, stride_qt, stride_dot, qk_scale, offs_m, offs_h,
                offs_hv, H: tl.constexpr, HV: tl.constexpr, EVEN_H: tl.constexpr,
                EVEN_HV: tl.constexpr, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
                SEQUENTIAL: tl.constexpr, PAD_ID: tl.constexpr, VARIANT: tl.constexpr,
                IEEE: tl.constexpr):
    """Accumulate one query head's contribution over query tiles (tc.masked_tile's order)."""
    for t in tl.range(start, end):
        q_start = tc.masked_tile(t, lf, uf, MASKED).to(tl.int64) * BLOCK_M
        q_ptrs = q_base + q_start * stride_qt + offs_m[:, None] * stride_qt + offs_h[None, :]
        do_ptrs = do_base + q_start * stride_dot + offs_m[:, None] * stride_dot + offs_hv[None, :]
        if MASKED:
            q_pos, q_seg, q_live = tc.load_tile_layout(qpos_ptr, qseg_ptr, q_start, offs_m, T,
                                                       SEQUENTIAL, PAD_ID)
            q = tl.load(q_ptrs, mask=q_live[:, None] & (offs_h[None, :] < H), other=0.0)
            do = tl.load(do_ptrs, mask=q_live[:, None] & (offs_hv[None, :] < HV), other=0.0)
            lse = tl.load(lse_ptr + q_start + offs_m, mask=q_live, other=float("inf"))
            delta = tl.load(delta_ptr + q_start + offs_m, mask=q_live, other=0.0)
        else:
            if EVEN_H:
                q = tl.load(q_ptrs)  # [BLOCK_M, BLOCK_H]
            else:
                q = tl.load(q_ptrs, mask=offs_h[None, :] < H, other=0.0)
            if EVEN_HV:
                do = tl.load(do_ptrs)  # [BLOCK_M, BLOCK_HV]
            else:
                do = tl.load(do_ptrs, mask=offs_hv[None, :] < HV, other=0.0)
            lse = tl.load(lse_ptr + q_start + offs_m)
            delta = tl.load(delta_ptr + q_start + offs_m)
        s_t = tc.scores(tc.mma(k, tl.trans(q), None, IEEE) * qk_scale, VARIANT, IEEE)  # [N, M]
        p_t = tl.math.exp2(tc.to_log2(s_t, VARIANT) - lse[None, :])
        if MASKED:
            # [BLOCK_N, BLOCK_M]
            allowed_t = tc.element_mask_t(k_pos, k_seg, q_pos, q_seg, PAD_ID, VARIANT)
            p_t = tl.where(allowed_t, p_t, 0.0)
        pw_t = tc.cap_weight(p_t, s_t, VARIANT)
        dv = tc.mma(p_t.to(do.dtype), do, dv, IEEE)
        dp_t = tc.mma(v, tl.trans(do), None, IEEE)  # [BLOCK_N, BLOCK_M]
        ds_t = pw_t * (dp_t - delta[None, :])
        dk = tc.mma(ds_t.to(q.dtype), q, dk, IEEE)
    return dk, dv


@triton.jit
def _dkdv_program(
    pid_n, b, kvh, Q, K, V, DO, LSE, DELTA, QPOS, QSEG, KPOS, KSEG, LO, HI, LF, UF, T, S, R,
    qk_scale, scale, DK, DV,
    N: tl.constexpr, G: tl.constexpr, H: tl.constexpr, HV: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_HV: tl.constexpr, EVEN_H: tl.constexpr, EVEN_HV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ROW_RATIO: tl.constexpr,
    COL_RATIO: tl.constexpr, SEQUENTIAL: tl.constexpr, PAD_ID: tl.constexpr, VARIANT: tl.constexpr,
    IEEE: tl.constexpr,
):
    """dK, dV of key tile pid_n (BLOCK_N keys) of kv head kvh, visiting query tiles of BLOCK_M."""
    # Strides from the static shapes (see the forward kernel).
    stride_qt = N * H
    stride_kt = (N // G) * H
    stride_vt = (N // G) * HV
    stride_dot = N * HV
    row = b * R + pid_n // ROW_RATIO  # tiles split mask blocks ROW_RATIO ways
    lo, hi, lf, uf = tc.load_bounds(LO, HI, LF, UF, row, COL_RATIO)

    kv_start = pid_n.to(tl.int64) * BLOCK_N
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_h = tl.arange(0, BLOCK_H)
    offs_hv = tl.arange(0, BLOCK_HV)
    k_pos, k_seg, k_live = tc.load_tile_layout(KPOS + b * S, KSEG + b * S, kv_start, offs_n, S,
                                               SEQUENTIAL, PAD_ID)
    k_base = K + b * S * stride_kt + kv_start * stride_kt + kvh * H
    v_base = V + b * S * stride_vt + kv_start * stride_vt + kvh * HV
    k = tl.load(k_base + offs_n[:, None] * stride_kt + offs_h[None, :],
                mask=k_live[:, None] & (offs_h[None, :] < H), other=0.0)  # [BLOCK_N, BLOCK_H]
    v = tl.load(v_base + offs_n[:, None] * stride_vt + offs_hv[None, :],
                mask=k_live[:, None] & (offs_hv[None, :] < HV), other=0.0)  # [BLOCK_N, BLOCK_HV]

    dk = tl.zeros([BLOCK_N, BLOCK_H], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_HV], dtype=tl.float32)
    for g in range(G):  # the query heads that read this kv head
        n = kvh * G + g
        q_base = Q + b * T * stride_qt + n * H
        do_base = DO + b * T * stride_dot + n * HV
        lse_ptr = LSE + (b * N + n) * T
        delta_ptr = DELTA + (b * N + n) * T
        qpos_ptr = QPOS + b * T
        qseg_ptr = QSEG + b * T
        dk, dv = _dkdv_visit(dk, dv, k, v, k_pos, k_seg, q_base, do_base, qpos_ptr, qseg_ptr,
                             lse_ptr, delta_ptr, lo, lf + hi - uf, lf, uf, T, stride_qt,
                             stride_dot, qk_scale, offs_m, offs_h, offs_hv, H, HV, EVEN_H,
                             EVEN_HV, BLOCK_M, True, SEQUENTIAL, PAD_ID, VARIANT, IEEE)
        dk, dv = _dkdv_visit(dk, dv, k, v, k_pos, k_seg, q_base, do_base, qpos_ptr, qseg_ptr,
                             lse_ptr, delta_ptr, lf, uf, lf, uf, T, stride_qt, stride_dot,
                             qk_scale, offs_m, offs_h, offs_hv, H, HV, EVEN_H, EVEN_HV, BLOCK_M,
                             False, SEQUENTIAL, PAD_ID, VARIANT, IEEE)

    kv_rows = (kv_start + offs_n) < S
    dk_base = DK + b * S * stride_kt + kv_start * stride_kt + kvh * H
    dv_base = DV + b * S * stride_vt + kv_start * stride_vt + kvh * HV
    tl.store(dk_base + offs_n[:, None] * stride_kt + offs_h[None, :],
             (dk * scale).to(DK.dtype.element_ty), mask=kv_rows[:, None] & (offs_h[None, :] < H))
    tl.store(dv_base + offs_n[:, None] * stride_vt + offs_hv[None, :], dv.to(DV.dtype.element_ty),
             mask=kv_rows[:, None] & (offs_hv[None, :] < HV))


@triton.jit
def _dq_visit(dq, q, do, lse, delta, q_pos, q_seg, k_base, v_base, kpos_ptr, kseg_ptr, start,
              end, lf, uf, S, stride_kt, stride_vt, qk_scale, offs_n, offs_h, offs_hv,
              H: tl.constexpr, HV: tl.constexpr, EVEN_H: tl.constexpr, EVEN_HV: tl.constexpr,
              BLOCK_N: tl.constexpr, MASKED: tl.constexpr, SEQUENTIAL: tl.constexpr,
              PAD_ID: tl.constexpr, VARIANT: tl.constexpr, IEEE: tl.constexpr):
    """Accumulate dQ over key tiles (tc.masked_tile's order)."""
    for t in tl.range(start, end):
        kv_start = tc.masked_tile(t, lf, uf, MASKED).to(tl.int64) * BLOCK_N
        k_ptrs = k_base + kv_start * stride_kt + offs_n[:, None] * stride_kt + offs_h[None, :]
        v_ptrs = v_base + kv_start * stride_vt + offs_n[:, None] * stride_vt + offs_hv[None, :]
        if MASKED:
            k_pos, k_seg, k_live = tc.load_tile_layout(kpos_ptr, kseg_ptr, kv_start, offs_n, S,
                                                       SEQUENTIAL, PAD_ID)
            k = tl.load(k_ptrs, mask=k_live[:, None] & (offs_h[None, :] < H), other=0.0)
            v = tl.load(v_ptrs, mask=k_live[:, None] & (offs_hv[None, :] < HV), other=0.0)
        else:
            if EVEN_H:
                k = tl.load(k_ptrs)  # [BLOCK_N, BLOCK_H]
            else:
                k = tl.load(k_ptrs, mask=offs_h[None, :] < H, other=0.0)
            if EVEN_HV:
                v = tl.load(v_ptrs)  # [BLOCK_N, BLOCK_HV]
            else:
                v = tl.load(v_ptrs, mask=offs_hv[None, :] < HV, other=0.0)
        s = tc.scores(tc.mma(q, tl.trans(k), None, IEEE) * qk_scale, VARIANT, IEEE)  # [M, N]
        p = tl.math.exp2(tc.to_log2(s, VARIANT) - lse[:, None])
        if MASKED:
            p = tl.where(tc.element_mask(q_pos, q_seg, k_pos, k_seg, PAD_ID, VARIANT), p, 0.0)
        pw = tc.cap_weight(p, s, VARIANT)
        dp = tc.mma(do, tl.trans(v), None, IEEE)  # [BLOCK_M, BLOCK_N]
        ds = pw * (dp - delta[:, None])
        dq = tc.mma(ds.to(k.dtype), k, dq, IEEE)
    return dq


@triton.jit
def _dq_program(
    pid_m, b, n, Q, K, V, DO, LSE, DELTA, QPOS, QSEG, KPOS, KSEG, LO, HI, LF, UF, T, S, R,
    qk_scale, scale, DQ,
    N: tl.constexpr, G: tl.constexpr, H: tl.constexpr, HV: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_HV: tl.constexpr, EVEN_H: tl.constexpr, EVEN_HV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ROW_RATIO: tl.constexpr,
    COL_RATIO: tl.constexpr, SEQUENTIAL: tl.constexpr, PAD_ID: tl.constexpr, VARIANT: tl.constexpr,
    IEEE: tl.constexpr,
):
    """dQ of query tile pid_m (BLOCK_M queries) of query head n, visiting key tiles of BLOCK_N."""
    stride_qt = N * H
    stride_kt = (N // G) * H
    stride_vt = (N // G) * HV
    stride_dot = N * HV
    kvh = n // G
    row = b * R + pid_m // ROW_RATIO
    lo, hi, lf, uf = tc.load_bounds(LO, HI, LF, UF, row, COL_RATIO)

    q_start = pid_m.to(tl.int64) * BLOCK_M
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_h = tl.arange(0, BLOCK_H)
    offs_hv = tl.arange(0, BLOCK_HV)
    q_pos, q_seg, q_live = tc.load_tile_layout(QPOS + b * T, QSEG + b * T, q_start, offs_m, T,
                                               SEQUENTIAL, PAD_ID)
    q_base = Q + b * T * stride_qt + q_start * stride_qt + n * H
    do_base = DO + b * T * stride_dot + q_start * stride_dot + n * HV
    q = tl.load(q_base + offs_m[:, None] * stride_qt + offs_h[None, :],
                mask=q_live[:, None] & (offs_h[None, :] < H), other=0.0)  # [BLOCK_M, BLOCK_H]
    do = tl.load(do_base + offs_m[:, None] * stride_dot + offs_hv[None, :],
                 mask=q_live[:, None] & (offs_hv[None, :] < HV), other=0.0)  # [BLOCK_M, BLOCK_HV]
    lse = tl.load(LSE + (b * N + n) * T + q_start + offs_m, mask=q_live, other=float("inf"))
    delta = tl.load(DELTA + (b * N + n) * T + q_start + offs_m, mask=q_live, other=0.0)

    k_base = K + b * S * stride_kt + kvh * H
    v_base = V + b * S * stride_vt + kvh * HV
    kpos_ptr = KPOS + b * S
    kseg_ptr = KSEG + b * S
    dq = tl.zeros([BLOCK_M, BLOCK_H], dtype=tl.float32)
    dq = _dq_visit(dq, q, do, lse, delta, q_pos, q_seg, k_base, v_base, kpos_ptr, kseg_ptr, lo,
                   lf + hi - uf, lf, uf, S, stride_kt, stride_vt, qk_scale, offs_n, offs_h,
                   offs_hv, H, HV, EVEN_H, EVEN_HV, BLOCK_N, True, SEQUENTIAL, PAD_ID, VARIANT,
                   IEEE)
    dq = _dq_visit(dq, q, do, lse, delta, q_pos, q_seg, k_base, v_base, kpos_ptr, kseg_ptr, lf,
                   uf, lf, uf, S, stride_kt, stride_vt, qk_scale, offs_n, offs_h, offs_hv, H, HV,
                   EVEN_H, EVEN_HV, BLOCK_N, False, SEQUENTIAL, PAD_ID, VARIANT, IEEE)
    dq_base = DQ + b * T * stride_qt + q_start * stride_qt + n * H
    tl.store(dq_base + offs_m[:, None] * stride_qt + offs_h[None, :],
             (dq * scale).to(DQ.dtype.element_ty),
             mask=((q_start + offs_m) < T)[:, None] & (offs_h[None, :] < H))


@triton.jit
def _bwd_kernel(
    Q, K, V, SCALE, DO, LSE, DELTA, QPOS, QSEG, KPOS, KSEG,
    KV_LO, KV_HI, KV_LF, KV_UF, Q_LO, Q_HI, Q_LF, Q_UF,
    T, S, KV_R, Q_R, KV_NT, Q_NT,
    DQ, DK, DV,
    N: tl.constexpr, G: tl.constexpr, KH: tl.constexpr, H: tl.constexpr, HV: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_HV: tl.constexpr, EVEN_H: tl.constexpr, EVEN_HV: tl.constexpr,
    KV_BLOCK_Q: tl.constexpr, KV_BLOCK_K: tl.constexpr, KV_ROW_RATIO: tl.constexpr,
    KV_COL_RATIO: tl.constexpr, Q_BLOCK_Q: tl.constexpr, Q_BLOCK_K: tl.constexpr,
    Q_ROW_RATIO: tl.constexpr, Q_COL_RATIO: tl.constexpr,
    SEQUENTIAL: tl.constexpr, PAD_ID: tl.constexpr, VARIANT: tl.constexpr, IEEE: tl.constexpr,
    LOG2E: tl.constexpr,
):
    """Grid (KV_NT + G * Q_NT, B * KH): for each batch row and kv head, KV_NT dK/dV programs (one
    per key tile), then G * Q_NT dQ programs (the group's query heads, heavier query tiles
    first)."""
    scale = tl.load(SCALE)  # a device scalar: the scale may be traced
    qk_scale = tc.logit_scale(scale * LOG2E, VARIANT)  # log2 units, over the cap
    pid = tl.program_id(0)
    pid_bk = tl.program_id(1)
    b = (pid_bk // KH).to(tl.int64)
    kvh = pid_bk % KH
    if pid < KV_NT:
        _dkdv_program(pid, b, kvh, Q, K, V, DO, LSE, DELTA, QPOS, QSEG, KPOS, KSEG, KV_LO, KV_HI,
                      KV_LF, KV_UF, T, S, KV_R, qk_scale, scale, DK, DV, N, G, H, HV, BLOCK_H,
                      BLOCK_HV, EVEN_H, EVEN_HV, KV_BLOCK_Q, KV_BLOCK_K, KV_ROW_RATIO,
                      KV_COL_RATIO, SEQUENTIAL, PAD_ID, VARIANT, IEEE)
    else:
        j = pid - KV_NT
        pid_m = Q_NT - 1 - j % Q_NT
        _dq_program(pid_m, b, kvh * G + j // Q_NT, Q, K, V, DO, LSE, DELTA, QPOS, QSEG, KPOS,
                    KSEG, Q_LO, Q_HI, Q_LF, Q_UF, T, S, Q_R, qk_scale, scale, DQ, N, G, H, HV,
                    BLOCK_H, BLOCK_HV, EVEN_H, EVEN_HV, Q_BLOCK_Q, Q_BLOCK_K, Q_ROW_RATIO,
                    Q_COL_RATIO, SEQUENTIAL, PAD_ID, VARIANT, IEEE)


def backward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, lse, delta, dout,
             dq_mask: AttentionMask, dkdv_mask: AttentionMask, *, sequential: bool, params,
             debug: bool = False, logits_soft_cap: float | None = None):
    """(dq, dk, dv) in the inputs' dtypes; lse and delta [B, N, T] as backends.py describes them.
    These kernels never hold per-query-head copies of dK/dV, so memory_optimized_gqa_backward
    (the original API's) changes nothing here."""
    b, t, n, h = q.shape
    s_len, num_kv, hv = k.shape[1], k.shape[2], v.shape[3]
    dout = dout.astype(q.dtype)
    # the kernels read log2 units with +inf on empty rows, so that exp2(s - lse) is 0 there
    lse = jnp.where(jnp.isneginf(lse), jnp.inf, lse * tc.LOG2E)

    # dK/dV rows are key tiles over query columns; dQ rows are query tiles over key columns
    kv_tiles, q_tiles, stages = tc.backward_tiles(
        q.dtype, h, hv, (dkdv_mask.row_block, dkdv_mask.col_block),
        (dq_mask.row_block, dq_mask.col_block), params, current_device_kind(),
        current_compute_capability())
    kv_nt = -(-s_len // kv_tiles["BLOCK_M_TILE"])
    q_nt = -(-t // q_tiles["BLOCK_M_TILE"])
    group = n // num_kv
    dq, dk, dv = tc.launch(
        _bwd_kernel, q, k, v, tc.scale_array(scale), dout, lse, delta, q_pos, q_seg, kv_pos,
        kv_seg, *dkdv_mask.flatten(), *dq_mask.flatten(), t, s_len,
        dkdv_mask.lower_bounds.shape[1], dq_mask.lower_bounds.shape[1], kv_nt, q_nt,
        out_shape=[tc.shape_dtype(q.shape, q.dtype), tc.shape_dtype(k.shape, k.dtype),
                   tc.shape_dtype(v.shape, v.dtype)],
        grid=(kv_nt + group * q_nt, b * num_kv), name="kvax_bwd", num_warps=params.num_warps,
        num_stages=stages, debug=debug, N=n, G=group,
        KH=num_kv, KV_BLOCK_Q=kv_tiles["BLOCK_N_TILE"], KV_BLOCK_K=kv_tiles["BLOCK_M_TILE"],
        KV_ROW_RATIO=kv_tiles["ROW_RATIO"], KV_COL_RATIO=kv_tiles["COL_RATIO"],
        Q_BLOCK_Q=q_tiles["BLOCK_M_TILE"], Q_BLOCK_K=q_tiles["BLOCK_N_TILE"],
        Q_ROW_RATIO=q_tiles["ROW_RATIO"], Q_COL_RATIO=q_tiles["COL_RATIO"],
        **tc.common_constants(q.dtype, h, hv, sequential, dq_mask.variant, logits_soft_cap))
    return dq, dk, dv
