"""Spike (issue: FA3-class speed, deliverable 3): a Mosaic GPU backward with dQ accumulated by TMA
reduce-add (the "atomics" option), driven by our dK/dV block mask. NOT RUN YET: written and
lowered for CUDA on a CPU machine (`--lower-only`) when the session's device time was spent.

    python tools/dev/spike_mosaic_bwd.py [--lower-only]

One program per (kv head, 128 keys, batch row): two consumer warpgroups own 64 keys each and keep
dK and dV in registers across the group's query heads (GQA summed there, deterministic); a
producer warpgroup streams (Q, dO, logsumexp, delta) tiles of the query blocks the dK/dV mask
visits. Per tile: S^T = K Q^T, P^T, dV += P^T dO, dP^T = V dO^T, dS^T = P^T (dP^T - delta),
dK += dS^T Q, and dQ_partial = dS K written through shared memory and added into a float32
accumulator in global memory by TMA reduce-add: 5 products per pair instead of the Triton
kernels' 7, at the price of a non-deterministic dQ (float32 additions in arrival order). The
accumulator is a `jax.new_ref` passed to the kernel (aliased in and out; plgpu.kernel takes no
input_output_aliases). No soft cap, no ping-pong between the consumers yet.

The run checks dq, dk, dv against the Triton backward and against the float64 reference on small
odd shapes with NaN in the padding, then times both backwards on the issue's rows.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import median_ms  # noqa: E402
from workloads import Workload, inputs  # noqa: E402

LOG2E = math.log2(math.e)


def backward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, lse, delta, dout, dkdv_mask, *,
             variant, pad_id, block_q=64, stages=2):
    """(dq, dk, dv) in the inputs' dtypes; lse [B, N, T] natural log (-inf on empty rows), delta
    [B, N, T] float32, as backends.py describes them."""
    import jax
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu
    import jax.numpy as jnp
    from jax import lax

    from kvax._src.attention.mosaic_fwd import block_bounds, pad_tokens as pad

    b, t, n, h = q.shape
    s_len, num_kv = k.shape[1], k.shape[2]
    group = n // num_kv
    dtype = q.dtype
    keys_per_wg, keys = 64, 128
    if dkdv_mask.row_block % keys or dkdv_mask.col_block % block_q:
        raise NotImplementedError(f"needs dK/dV mask blocks of multiples of {keys}x{block_q}, got "
                                  f"{dkdv_mask.row_block}x{dkdv_mask.col_block}")
    row_ratio, col_ratio = dkdv_mask.row_block // keys, dkdv_mask.col_block // block_q
    t_pad, s_pad = -(-t // block_q) * block_q, -(-s_len // keys) * keys
    num_k_tiles, num_q_tiles = s_pad // keys, t_pad // block_q

    # zero the padding's values: 0 x NaN is NaN in every product they enter
    q_live = (q_seg != pad_id)[:, :, None, None]
    kv_live = (kv_seg != pad_id)[:, :, None, None]
    zero = jnp.zeros((), dtype)
    q = pad(jnp.where(q_live, q, zero), t_pad, 0)
    dout = pad(jnp.where(q_live, dout.astype(dtype), zero), t_pad, 0)
    k = pad(jnp.where(kv_live, k, zero), s_pad, 0)
    v = pad(jnp.where(kv_live, v, zero), s_pad, 0)
    lse2 = jnp.where(jnp.isneginf(lse), jnp.inf, lse * LOG2E)  # log2; +inf: P = 0
    stats = jnp.stack([lse2, delta.astype(jnp.float32)], axis=2)  # [B, N, 2, T]
    stats = jnp.pad(stats, ((0, 0), (0, 0), (0, 0), (0, t_pad - t)), constant_values=jnp.inf)
    stats = stats.at[:, :, 1, t:].set(0.0)
    q_lay = jnp.stack([pad(q_pos, t_pad, 0), pad(q_seg, t_pad, pad_id)], 1)
    k_lay = jnp.stack([pad(kv_pos, s_pad, 0), pad(kv_seg, s_pad, pad_id)], 1)
    bounds = jnp.stack(dkdv_mask.flatten(), axis=-1).astype(jnp.int32)  # [B, R, 4]
    factors = jnp.stack([jnp.asarray(scale, jnp.float32) * LOG2E,
                         jnp.asarray(scale, jnp.float32)])
    row_layout = plgpu.Layout.WGMMA.reduce(1)
    col_layout = plgpu.Layout.WGMMA.reduce(0)

    def allowed(k_pos_r, k_seg_r, q_pos_c, q_seg_c, shape):
        """The element rule on a [keys, queries] tile."""
        def rows(x):
            return lax.broadcast_in_dim(x, shape, [0])

        def cols(x):
            return lax.broadcast_in_dim(x, shape, [1])

        return variant.element_rule(cols(q_pos_c), cols(q_seg_c), rows(k_pos_r), rows(k_seg_r),
                                    pad_id)

    def kernel(q_ref, k_ref, v_ref, do_ref, stats_ref, qlay_ref, klay_ref, bounds_ref,
               factors_ref, dq_ref, dk_ref, dv_ref, scoped):
        batch = lax.axis_index("batch")
        kvh = lax.axis_index("heads")
        tile = lax.axis_index("k_seq")
        wg = lax.axis_index("wg")
        (q_smem, do_smem, st_smem, k_smem, v_smem, ds_smem, dq_smem), ready, free, kv_ready = \
            scoped
        q_ready, do_ready, st_ready = ready

        lo, hi, lf, uf = block_bounds(bounds_ref, batch, tile // row_ratio, col_ratio,
                                      num_q_tiles)
        per_head = hi - lo
        steps = per_head * group

        def where_step(s):
            """(query head, query tile) of step s: the group's heads in turn, each over
            [lo, hi)."""
            g = lax.div(s, jnp.maximum(per_head, 1))
            return kvh * group + g, lo + s - g * per_head

        @pl.when(wg < 2)
        def _consumer():
            plgpu.set_max_registers(232, action="increase")
            k_start = tile * keys + wg * keys_per_wg
            kv_slice = (batch, pl.ds(k_start, keys_per_wg), kvh)
            plgpu.copy_gmem_to_smem(k_ref.at[kv_slice], k_smem.at[wg], kv_ready.at[wg])
            plgpu.copy_gmem_to_smem(v_ref.at[kv_slice], v_smem.at[wg], kv_ready.at[2 + wg])
            k_pos_r = plgpu.load(klay_ref.at[batch, 0, pl.ds(k_start, keys_per_wg)],
                                 layout=row_layout, optimized=False)
            k_seg_r = plgpu.load(klay_ref.at[batch, 1, pl.ds(k_start, keys_per_wg)],
                                 layout=row_layout, optimized=False)
            c, sc = factors_ref[0], factors_ref[1]
            plgpu.barrier_wait(kv_ready.at[wg])
            plgpu.barrier_wait(kv_ready.at[2 + wg])
            dk = plgpu.layout_cast(jnp.full((keys_per_wg, h), 0.0, jnp.float32),
                                   plgpu.Layout.WGMMA)
            dv = plgpu.layout_cast(jnp.full((keys_per_wg, h), 0.0, jnp.float32),
                                   plgpu.Layout.WGMMA)

            def step(s, carry, masked: bool):
                dk, dv = carry
                slot = lax.rem(s, stages)
                head, qt = where_step(s)
                plgpu.barrier_wait(q_ready.at[slot])
                plgpu.barrier_wait(st_ready.at[slot])

                def st_scope(acc_ref):
                    plgpu.wgmma(acc_ref, k_smem.at[wg], q_smem.at[slot].transpose((1, 0)))
                    return acc_ref[...]

                s_t = pl.run_scoped(st_scope, plgpu.ACC((keys_per_wg, block_q), jnp.float32))
                shape = (keys_per_wg, block_q)
                lse_c = plgpu.load(st_smem.at[slot, 0], layout=col_layout)
                delta_c = plgpu.load(st_smem.at[slot, 1], layout=col_layout)
                p_t = jnp.exp2(s_t * c - lax.broadcast_in_dim(lse_c, shape, [1]))
                if masked:
                    q_start = qt * block_q
                    q_pos_c = plgpu.load(qlay_ref.at[batch, 0, pl.ds(q_start, block_q)],
                                         layout=col_layout, optimized=False)
                    q_seg_c = plgpu.load(qlay_ref.at[batch, 1, pl.ds(q_start, block_q)],
                                         layout=col_layout, optimized=False)
                    p_t = jnp.where(allowed(k_pos_r, k_seg_r, q_pos_c, q_seg_c, shape), p_t,
                                    0.0)
                plgpu.barrier_wait(do_ready.at[slot])
                zeros = plgpu.layout_cast(jnp.full(shape, 0.0, jnp.float32), plgpu.Layout.WGMMA)

                def dv_dp_scope(refs):
                    dv_ref, dp_ref = refs
                    plgpu.wgmma(dv_ref, p_t.astype(dtype), do_smem.at[slot])
                    plgpu.wgmma(dp_ref, v_smem.at[wg], do_smem.at[slot].transpose((1, 0)))

                dv, dp_t = pl.run_state(dv_dp_scope)((plgpu.ACC.init(dv), plgpu.ACC.init(zeros)))
                ds_t = (p_t * (dp_t - lax.broadcast_in_dim(delta_c, shape, [1]))).astype(dtype)

                def dk_scope(acc_ref):
                    plgpu.wgmma(acc_ref, ds_t, q_smem.at[slot])

                dk = pl.run_state(dk_scope)(plgpu.ACC.init(dk))
                # dQ partial = dS K: dS^T through shared memory, read transposed
                ds_smem.at[wg][...] = ds_t
                plgpu.commit_smem()

                def dq_scope(acc_ref):
                    plgpu.wgmma(acc_ref, ds_smem.at[wg].transpose((1, 0)), k_smem.at[wg])
                    return acc_ref[...]

                dq = pl.run_scoped(dq_scope, plgpu.ACC((block_q, h), jnp.float32))
                plgpu.barrier_arrive(free.at[slot])
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)  # the last add read dq_smem
                dq_smem.at[wg][...] = dq * sc
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(dq_smem.at[wg],
                                        dq_ref.at[batch, pl.ds(qt * block_q, block_q), head],
                                        reduction_op="add")
                return dk, dv

            def head_loop(g, carry):
                base = g * per_head
                carry = lax.fori_loop(base, base + lf - lo,
                                      lambda s, c_: step(s, c_, True), carry)
                carry = lax.fori_loop(base + lf - lo, base + uf - lo,
                                      lambda s, c_: step(s, c_, False), carry)
                return lax.fori_loop(base + uf - lo, base + per_head,
                                     lambda s, c_: step(s, c_, True), carry)

            dk, dv = lax.fori_loop(0, group, head_loop, (dk, dv))
            plgpu.wait_smem_to_gmem(0)
            k_smem.at[wg][...] = (dk * sc).astype(dtype)
            v_smem.at[wg][...] = dv.astype(dtype)
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(k_smem.at[wg], dk_ref.at[kv_slice], commit_group=False)
            plgpu.copy_smem_to_gmem(v_smem.at[wg], dv_ref.at[kv_slice], commit_group=False)
            plgpu.commit_smem_to_gmem_group()
            plgpu.wait_smem_to_gmem(0)

        @pl.when(wg == 2)
        def _producer():
            plgpu.set_max_registers(40, action="decrease")

            def issue(s, slot, wait):
                head, qt = where_step(s)
                q_slice = (batch, pl.ds(qt * block_q, block_q), head)
                if wait:
                    plgpu.barrier_wait(free.at[slot])
                plgpu.copy_gmem_to_smem(q_ref.at[q_slice], q_smem.at[slot], q_ready.at[slot])
                plgpu.copy_gmem_to_smem(stats_ref.at[batch, head, :, pl.ds(qt * block_q,
                                                                          block_q)],
                                        st_smem.at[slot], st_ready.at[slot])
                plgpu.copy_gmem_to_smem(do_ref.at[q_slice], do_smem.at[slot], do_ready.at[slot])

            for i in range(stages):
                pl.when(i < steps)(lambda i=i: issue(jnp.int32(i), i, False))

            @pl.loop(0, jnp.maximum(steps - stages, 0))
            def _(s):
                issue(s + stages, lax.rem(s, stages), True)

    def entry(q_ref, k_ref, v_ref, do_ref, stats_ref, qlay_ref, klay_ref, bounds_ref, factors_ref,
              dq_ref, dk_ref, dv_ref):
        tiled = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))
        smem = (
            plgpu.SMEM((stages, block_q, h), dtype, transforms=tiled),  # Q
            plgpu.SMEM((stages, block_q, h), dtype, transforms=tiled),  # dO
            plgpu.SMEM((stages, 2, block_q), jnp.float32),  # logsumexp (log2), delta
            plgpu.SMEM((2, keys_per_wg, h), dtype, transforms=tiled),  # K, then dK
            plgpu.SMEM((2, keys_per_wg, h), dtype, transforms=tiled),  # V, then dV
            plgpu.SMEM((2, keys_per_wg, block_q), dtype, transforms=tiled),  # dS^T
            plgpu.SMEM((2, block_q, h), jnp.float32),  # dQ partial
        )
        ready = (plgpu.Barrier(num_barriers=stages),) * 3
        pl.run_scoped(
            lambda *scoped: kernel(q_ref, k_ref, v_ref, do_ref, stats_ref, qlay_ref, klay_ref,
                                   bounds_ref, factors_ref, dq_ref, dk_ref, dv_ref, scoped),
            smem, ready, plgpu.Barrier(num_arrivals=2, num_barriers=stages),
            plgpu.Barrier(num_barriers=4), collective_axes="wg")

    dq_acc = jax.new_ref(jnp.zeros((b, t_pad, n, h), jnp.float32))
    dk, dv = plgpu.kernel(
        entry,  # refs: the inputs (dq_acc last, aliased), then dk and dv
        out_type=(jax.ShapeDtypeStruct((b, s_pad, num_kv, h), dtype),
                  jax.ShapeDtypeStruct((b, s_pad, num_kv, h), dtype)),
        grid=(num_kv, num_k_tiles, b),
        grid_names=("heads", "k_seq", "batch"),
        num_threads=3,
        thread_name="wg",
        compiler_params=plgpu.CompilerParams(approx_math=True),
    )(q, k, v, dout, stats, q_lay, k_lay, bounds, factors, dq_acc)
    dq = dq_acc[...]
    return dq[:, :t].astype(dtype), dk[:, :s_len], dv[:, :s_len]


def _problem(w: Workload, *, backward_params):
    """Inputs, forward residuals and masks of one workload (the forward by the Triton kernel)."""
    import jax.numpy as jnp

    from kvax._src.attention import triton_fwd
    from kvax._src.attention.mask import build_masks
    from kvax._src.attention.variant import MaskVariant
    from kvax.utils import default_params

    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, w.dtype) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    variant = MaskVariant(w.causal)
    fwd_params = default_params("NVIDIA H100 80GB HBM3", backward=False)
    fwd, dq_mask, dkdv_mask = build_masks(pos, seg, pos, seg, fwd_params=fwd_params,
                                          bwd_params=backward_params, skip_pad_tokens=True,
                                          variant=variant)
    scale = jnp.float32(w.head_dim ** -0.5)
    out, lse = triton_fwd.forward(q, k, v, scale, pos, seg, pos, seg, fwd, sequential=False,
                                  params=fwd_params)
    dout = jnp.asarray(np.random.default_rng(w.seed + 5).standard_normal(out.shape), w.dtype)
    live = (seg != -1)[:, None, :]
    delta = jnp.einsum("btnd,btnd->bnt", dout.astype(jnp.float32), out.astype(jnp.float32))
    delta = jnp.where(live & jnp.isfinite(lse), delta, 0.0)
    return dict(q=q, k=k, v=v, pos=pos, seg=seg, scale=scale, lse=lse, delta=delta, dout=dout,
                dq_mask=dq_mask, dkdv_mask=dkdv_mask, variant=variant)


def _runners(p, bwd_params):
    import jax

    from kvax._src.attention import triton_bwd

    args = (p["q"], p["k"], p["v"])
    triton = jax.jit(lambda q, k, v: triton_bwd.backward(
        q, k, v, p["scale"], p["pos"], p["seg"], p["pos"], p["seg"], p["lse"], p["delta"],
        p["dout"], p["dq_mask"], p["dkdv_mask"], sequential=False, params=bwd_params))
    mosaic = jax.jit(lambda q, k, v: backward(
        q, k, v, p["scale"], p["pos"], p["seg"], p["pos"], p["seg"], p["lse"], p["delta"],
        p["dout"], p["dkdv_mask"], variant=p["variant"], pad_id=-1))
    return args, {"triton": triton, "mosaic": mosaic}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lower-only", action="store_true",
                        help="lower the kernel for CUDA and stop (works without a GPU)")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp

    from kvax.utils import FlashAttentionParamsConfig

    bwd_params = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=128, num_warps=8,
                                            num_stages=3)
    if args.lower_only:
        from kvax._src.attention.mask import build_masks
        from kvax._src.attention.variant import MaskVariant

        for t, h, causal in ((1000, 128, True), (513, 64, False)):
            q = jnp.zeros((1, t, 4, h), jnp.bfloat16)
            k = jnp.zeros((1, t, 2, h), jnp.bfloat16)
            pos = jnp.arange(t, dtype=jnp.int32)[None]
            seg = jnp.zeros((1, t), jnp.int32)
            _, _, dkdv = build_masks(pos, seg, pos, seg, fwd_params=bwd_params,
                                     bwd_params=bwd_params, skip_pad_tokens=True,
                                     variant=MaskVariant(causal))
            lse = jnp.zeros((1, 4, t), jnp.float32)
            fn = jax.jit(lambda q, k, v, dkdv=dkdv, causal=causal, pos=pos, seg=seg, lse=lse: (
                backward(q, k, v, 0.1, pos, seg, pos, seg, lse, lse, q, dkdv,
                         variant=MaskVariant(causal), pad_id=-1)))
            text = fn.trace(q, k, k).lower(lowering_platforms=("cuda",)).as_text()
            print(f"T={t} H={h} causal={causal}: lowered, mosaic_gpu calls "
                  f"{text.count('custom_call @mosaic_gpu')}", flush=True)
        return
    print("device", jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
    small = [Workload(1000, 5, 77, num_heads=4, num_kv_heads=2, seed=11, ids="shuffled"),
             Workload(777, 1, 0, num_heads=2, num_kv_heads=2, seed=13, causal=False),
             Workload(2048, num_pad_tokens=300, doc_median=90, num_heads=4, num_kv_heads=1,
                      seed=14)]
    for w in small:  # against the Triton backward (checked against the reference in the suite)
        p = _problem(w, backward_params=bwd_params)
        pad = (p["seg"] == -1)[:, :, None, None]
        poisoned = [jnp.where(pad, jnp.nan, x) for x in (p["q"], p["k"], p["v"])]
        _, fns = _runners(p, bwd_params)
        try:
            want = [np.asarray(x, np.float32) for x in fns["triton"](*poisoned)]
            got = [np.asarray(x, np.float32) for x in fns["mosaic"](*poisoned)]
        except Exception:  # noqa: BLE001 - a spike reports and goes on
            print(f"  {w.name}: FAILED\n{traceback.format_exc()[-3000:]}", flush=True)
            continue
        for name, a, b in zip(("dq", "dk", "dv"), got, want):
            err = float(np.max(np.abs(a - b))) if np.all(np.isfinite(a)) else float("nan")
            scale_ = float(np.max(np.abs(b)))
            print(f"  {w.name:<58} {name} max |mosaic - triton| {err:.2e} (max |triton| "
                  f"{scale_:.2e})", flush=True)
    for w in (Workload(65536, 8, 2000), Workload(65536, num_pad_tokens=2000, doc_median=1100,
                                                 ids="shuffled"), Workload(65536, 1, 0)):
        p = _problem(w, backward_params=bwd_params)
        args_, fns = _runners(p, bwd_params)
        flops = w.flops(backward=True) - w.flops(backward=False)
        for name, fn in fns.items():
            try:
                start = time.perf_counter()
                jax.block_until_ready(fn(*args_))
                first = time.perf_counter() - start
                ms = median_ms(lambda fn=fn: fn(*args_), args.repeats)
            except Exception:  # noqa: BLE001
                print(f"  {w.name} {name}: FAILED\n{traceback.format_exc()[-2000:]}", flush=True)
                continue
            print(f"  {w.name:<62} {name:<7} backward {ms:8.2f} ms {flops / ms / 1e9:6.0f} TF/s "
                  f"first {first:5.1f} s", flush=True)


if __name__ == "__main__":
    main()
