"""Sharded create_attention_mask and flash_attention through jax.shard_map.

Data parallel over the batch (one or several mesh axes), tensor parallel over heads, context
parallel over the query sequence: each shard gathers the whole key/value sequence (all-gather; its
transpose reduce-scatters dK/dV) and attends its own queries with kvax-core's single-device op.
Legend: B batch, T query length, S kv length, N query heads, K kv heads, H head dim.
"""

from __future__ import annotations

import jax
from jax.sharding import PartitionSpec as P

from kvax._src.attention.api import create_attention_mask_local, flash_attention_local
from kvax._src.attention.mask import AttentionMask
from kvax._src.attention import validate
from kvax_dist import permutation
from kvax_dist.specs import (AttentionSpecs, axis_size, check_axes, get_attention_specs,
                             mesh_axes, resolve_mesh)


def _setup(mesh):
    specs = get_attention_specs()
    mesh = resolve_mesh(mesh)
    check_axes(mesh, specs)
    return specs, mesh


def _layout_specs(specs: AttentionSpecs):
    return P(specs.batch, specs.context), P(specs.batch, None)


def _check_divisible(name, length, parts, what):
    if parts > 1 and length % parts:
        raise ValueError(f"{name} {length} must be divisible by {what} = {parts}")


def create_attention_mask(query_positions, query_segment_ids, kv_positions, kv_segment_ids, *,
                          fwd_params=None, bwd_params=None, calc_bwd_mask=False,
                          skip_pad_tokens=True, mesh=None):
    """Masks for each shard's queries against the whole kv sequence; rows sharded like queries."""
    specs, mesh = _setup(mesh)
    b, t, s = validate.check_layout_arrays(query_positions, query_segment_ids, kv_positions,
                                           kv_segment_ids)
    _check_divisible("batch size", b, axis_size(mesh, specs.batch), "the batch mesh axes' size")
    _check_divisible("query sequence length", t, axis_size(mesh, specs.context),
                     "the context mesh axes' size")
    q_spec, kv_spec = _layout_specs(specs)

    def local(qp, qs, kp, ks):
        return create_attention_mask_local(qp, qs, kp, ks, fwd_params, bwd_params,
                                           calc_bwd_mask, skip_pad_tokens)

    local_t = t // axis_size(mesh, specs.context)
    local_shapes = [jax.ShapeDtypeStruct((1, n), "int32") for n in (local_t, local_t, s, s)]
    out_specs = jax.tree.map(lambda _: q_spec, jax.eval_shape(local, *local_shapes))
    sharded = jax.shard_map(local, mesh=mesh, in_specs=(q_spec, q_spec, kv_spec, kv_spec),
                            out_specs=out_specs, check_vma=False)
    return sharded(query_positions, query_segment_ids, kv_positions, kv_segment_ids)


def _kv_heads_for_shard(k, v, num_heads_local, group, head_axes):
    """Tensor parallel with replicated kv heads: the kv heads this shard's query heads read."""
    shard = jax.lax.axis_index(head_axes)
    first_q = shard * num_heads_local
    count = max(1, num_heads_local // group)
    start = first_q // group
    k = jax.lax.dynamic_slice_in_dim(k, start, count, axis=2)
    v = jax.lax.dynamic_slice_in_dim(v, start, count, axis=2)
    return k, v


def flash_attention(query, key, value, query_positions, query_segment_ids, kv_positions,
                    kv_segment_ids, *, mask=None, scale=1.0, bias=None, fwd_params=None,
                    bwd_params=None, assume_sequential_positions=False,
                    memory_optimized_gqa_backward=False, permute_tokens_for_load_balance=True,
                    debug=False, mesh=None, backend="auto"):
    specs, mesh = _setup(mesh)
    validate.check_qkv(query, key, value)
    b, t, n, h = query.shape
    s, k_heads = key.shape[1], key.shape[2]
    validate.check_layout_arrays(query_positions, query_segment_ids, kv_positions,
                                 kv_segment_ids, batch=b, q_len=t, kv_len=s)
    dp = axis_size(mesh, specs.batch)
    cp = axis_size(mesh, specs.context)
    tp_q = axis_size(mesh, specs.query_specs[2])
    tp_kv = axis_size(mesh, specs.kv_specs[2])
    _check_divisible("batch size", b, dp, "the batch mesh axes' size")
    _check_divisible("query heads", n, tp_q, "the query head axes' size")
    _check_divisible("kv heads", k_heads, tp_kv, "the kv head axes' size")
    if tp_kv > 1 and mesh_axes(specs.kv_specs[2]) != mesh_axes(specs.query_specs[2]):
        raise ValueError(f"kv heads sharded over {specs.kv_specs[2]!r} but query heads over "
                         f"{specs.query_specs[2]!r}: shard both over the same axes")
    group = n // k_heads
    n_local = n // tp_q
    if tp_kv == 1 and tp_q > 1 and n_local % group and group % n_local:
        raise ValueError(f"query heads per shard ({n_local}) and the GQA group ({group}) must "
                         "divide one another when kv heads are not sharded")
    strategy = (permutation.check_strategy(permute_tokens_for_load_balance)
                if permute_tokens_for_load_balance is not False else None)
    permuted = strategy is not None and cp > 1
    if cp > 1:
        chunked = permuted and strategy == "chunks"
        _check_divisible("query sequence length", t, 2 * cp if chunked else cp,
                         "2 x context size" if chunked else "the context size")
        if t != s:
            raise NotImplementedError(f"context parallelism needs query and kv lengths equal, "
                                      f"got T={t}, S={s}")
    if mask is not None:
        masks = (mask,) if isinstance(mask, AttentionMask) else tuple(mask)
        if masks and masks[0].query_len * cp != t:
            raise ValueError(f"mask was built for {masks[0].query_len} queries per shard x {cp} "
                             f"shards, but query has {t}: build it under the same attention_specs")
    else:
        masks = None

    q_spec = P(*specs.query_specs)
    kv_in = P(specs.batch, specs.context, specs.kv_specs[2], None)  # gathered inside
    lay_q, lay_kv = _layout_specs(specs)
    mask_specs = None if masks is None else jax.tree.map(lambda _: lay_q, masks)
    head_axes = specs.query_specs[2]

    def local(q, k, v, qp, qs, kp, ks, m):
        if cp > 1:
            k = jax.lax.all_gather(k, specs.context, axis=1, tiled=True)
            v = jax.lax.all_gather(v, specs.context, axis=1, tiled=True)
            if permuted:  # gathered in permuted order; kv positions come in original order
                k = permutation.unpermute(k, cp, strategy)
                v = permutation.unpermute(v, cp, strategy)
        if tp_q > 1 and tp_kv == 1:
            k, v = _kv_heads_for_shard(k, v, q.shape[2], group, head_axes)
        return flash_attention_local(
            q, k, v, qp, qs, kp, ks, m, scale, bias, fwd_params, bwd_params,
            False if cp > 1 else assume_sequential_positions, memory_optimized_gqa_backward,
            debug, backend=backend)

    sharded = jax.shard_map(local, mesh=mesh,
                            in_specs=(q_spec, kv_in, kv_in, lay_q, lay_q, lay_kv, lay_kv,
                                      mask_specs),
                            out_specs=q_spec, check_vma=False)
    return sharded(query, key, value, query_positions, query_segment_ids, kv_positions,
                   kv_segment_ids, masks)
