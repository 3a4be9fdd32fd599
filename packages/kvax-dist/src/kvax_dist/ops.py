"""Sharded create_attention_mask and flash_attention through jax.shard_map.

Data parallel over the batch (one or several mesh axes), tensor parallel over heads, context
parallel over the query sequence: each shard gathers the whole key/value sequence (all-gather; its
transpose reduce-scatters dK/dV) and attends its own queries with kvax-core's single-device op.
Legend: B batch, T query length, S kv length, N query heads, K kv heads, H head dim.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

from kvax.extend import (AttentionMask, MaskVariant, as_int32, create_attention_mask_local,
                         flash_attention_local, validate)
from kvax_dist import permutation
from kvax_dist.specs import (AttentionSpecs, axis_size, check_axes, explicit_axes,
                             get_attention_specs, mesh_axes, resolve_mesh)


def _setup(mesh):
    specs = get_attention_specs()
    mesh = resolve_mesh(mesh)
    check_axes(mesh, specs)
    return specs, mesh


def _layout_specs(specs: AttentionSpecs):
    return P(specs.batch, specs.context), P(specs.batch, None)


def _as_specs(mesh, args, specs):
    """On a mesh with Explicit axes (what jax.make_mesh gives) arrays carry their sharding in
    their type and shard_map wants it to match in_specs: reshard them first. Auto axes need
    nothing."""
    if not explicit_axes(mesh):
        return args

    def reshard(spec, subtree):  # a spec may be a prefix of a pytree (the masks)
        sharding = NamedSharding(mesh, spec)
        return jax.tree.map(lambda x: jax.sharding.reshard(x, sharding), subtree)

    return tuple(reshard(spec, arg) for spec, arg in zip(specs, args))


def _sharded(local, mesh, in_specs, out_specs):
    """shard_map(local), inputs resharded for Explicit meshes, jitted: eager calls of one shape
    compile once (builders below are cached on their static arguments)."""
    mapped = jax.shard_map(local, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                           check_vma=False)
    return jax.jit(lambda *args: mapped(*_as_specs(mesh, args, in_specs)))


def _check_divisible(name, length, parts, what):
    if parts > 1 and length % parts:
        raise ValueError(f"{name} {length} must be divisible by {what} = {parts}")


def create_attention_mask(query_positions, query_segment_ids, kv_positions, kv_segment_ids, *,
                          fwd_params=None, bwd_params=None, calc_bwd_mask=False,
                          skip_pad_tokens=True, mesh=None, variant=None):
    """Masks for each shard's queries against the whole kv sequence; rows sharded like queries."""
    specs, mesh = _setup(mesh)
    b, t, s = validate.check_layout_arrays(query_positions, query_segment_ids, kv_positions,
                                           kv_segment_ids)
    _check_divisible("batch size", b, axis_size(mesh, specs.batch), "the batch mesh axes' size")
    _check_divisible("query sequence length", t, axis_size(mesh, specs.context),
                     "the context mesh axes' size")
    local_t = t // axis_size(mesh, specs.context)
    build = _mask_builder(mesh, mesh.axis_types, specs, local_t, s, fwd_params, bwd_params,
                          bool(calc_bwd_mask), bool(skip_pad_tokens), variant or MaskVariant())
    return build(*as_int32(query_positions, query_segment_ids, kv_positions, kv_segment_ids))


@functools.lru_cache(maxsize=128)
def _mask_builder(mesh, axis_types, specs, local_t, s, fwd_params, bwd_params, calc_bwd_mask,
                  skip_pad_tokens, variant):
    """axis_types is part of the cache key: meshes that differ only in them compare equal."""
    q_spec, kv_spec = _layout_specs(specs)

    def local(qp, qs, kp, ks):
        return create_attention_mask_local(qp, qs, kp, ks, fwd_params, bwd_params,
                                           calc_bwd_mask, skip_pad_tokens, variant=variant)

    local_shapes = [jax.ShapeDtypeStruct((1, n), "int32") for n in (local_t, local_t, s, s)]
    out_specs = jax.tree.map(lambda _: q_spec, jax.eval_shape(local, *local_shapes))
    return _sharded(local, mesh, (q_spec, q_spec, kv_spec, kv_spec), out_specs)


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
                    debug=False, mesh=None, backend="auto", variant=None,
                    logits_soft_cap=None, sinks=None, return_residual=False,
                    deterministic=True):
    specs, mesh = _setup(mesh)
    validate.check_qkv(query, key, value)
    if bias is not None:
        raise NotImplementedError("bias is not supported (as in the original Kvax)")
    b, t, n, h = query.shape
    sinks = validate.check_sinks(sinks, n)
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

    fn = _attention_builder(
        mesh, mesh.axis_types, specs, cp, permuted, strategy, tp_q > 1 and tp_kv == 1, group,
        (fwd_params, bwd_params, False if cp > 1 else bool(assume_sequential_positions),
         bool(memory_optimized_gqa_backward), bool(debug), backend, variant or MaskVariant(),
         validate.check_soft_cap(logits_soft_cap), sinks is not None, bool(return_residual),
         validate.check_flag("deterministic", deterministic)))
    scale = validate.check_scale(scale)
    extra = () if sinks is None else (sinks,)
    return fn(query, key, value, jnp.asarray(scale, jnp.float32), *extra,
              *as_int32(query_positions, query_segment_ids, kv_positions, kv_segment_ids), masks)


@functools.lru_cache(maxsize=128)
def _attention_builder(mesh, axis_types, specs, cp, permuted, strategy, slice_kv_heads, group,
                       options):
    (fwd_params, bwd_params, sequential, memory_optimized, debug, backend, variant,
     logits_soft_cap, has_sinks, return_residual, deterministic) = options
    q_spec = P(*specs.query_specs)
    kv_in = P(specs.batch, specs.context, specs.kv_specs[2], None)  # gathered inside
    lay_q, lay_kv = _layout_specs(specs)
    head_axes = specs.query_specs[2]

    def local(q, k, v, scale, *rest):
        sinks, (qp, qs, kp, ks, m) = (rest[0], rest[1:]) if has_sinks else (None, rest)
        if cp > 1:
            k = jax.lax.all_gather(k, specs.context, axis=1, tiled=True)
            v = jax.lax.all_gather(v, specs.context, axis=1, tiled=True)
            if permuted:  # gathered in permuted order; kv positions come in original order
                k = permutation.unpermute(k, cp, strategy)
                v = permutation.unpermute(v, cp, strategy)
        if slice_kv_heads:
            k, v = _kv_heads_for_shard(k, v, q.shape[2], group, head_axes)
        return flash_attention_local(q, k, v, qp, qs, kp, ks, m, scale, None, fwd_params,
                                     bwd_params, sequential, memory_optimized, debug,
                                     backend=backend, variant=variant,
                                     logits_soft_cap=logits_soft_cap, sinks=sinks,
                                     return_residual=return_residual,
                                     deterministic=deterministic)

    # Sinks are sharded like the query heads; shard_map's transpose sums their gradient over the
    # other axes. The masks' leaves are sharded like the query layout (a spec prefix for the
    # whole tuple). The logsumexp [B, T, N] is sharded like the query without its head dim.
    sink_specs = (P(head_axes),) if has_sinks else ()
    in_specs = (q_spec, kv_in, kv_in, P(), *sink_specs, lay_q, lay_q, lay_kv, lay_kv, lay_q)
    out_specs = (q_spec, P(*specs.query_specs[:3])) if return_residual else q_spec
    return _sharded(local, mesh, in_specs, out_specs)
