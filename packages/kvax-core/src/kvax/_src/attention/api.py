"""Public functions: create_attention_mask and flash_attention, with the original Kvax signatures.

On one device no mesh and no attention_specs are needed. When a mesh is given, or kvax-dist's
attention_specs context is active, the call is handed to the sharded implementation (kvax-dist,
found through kvax._src.sharded).
Legend: B batch, T query length, S kv length, N query heads, K kv heads, H head dim, Hv value dim.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp

from kvax._src import sharded
from kvax._src.attention import backends, validate
from kvax._src.attention.mask import AttentionMask, build_masks, wants_schedule
from kvax._src.attention.variant import MaskVariant, check_positions_for_window, make_variant
from kvax._src.attention.vjp import Options, attention
from kvax._src.config import FlashAttentionParamsConfig, current_device_kind, default_params


def as_int32(*arrays):
    """Validated positions and segment ids (their values fit int32) as int32 arrays."""
    return tuple(jnp.asarray(a).astype(jnp.int32) for a in arrays)


# Jitted so that eager calls of one shape compile once; inlined under an outer jit.
_build_masks = jax.jit(build_masks, static_argnames=("fwd_params", "bwd_params",
                                                     "skip_pad_tokens", "variant", "schedule"))


def resolve_params(fwd_params, bwd_params, masks: Sequence[AttentionMask] = ()):
    """Call params, else the mask's, else the device kind's defaults."""
    validate.check_params("fwd_params", fwd_params)
    validate.check_params("bwd_params", bwd_params)
    if fwd_params is None:
        fwd_params = masks[0].params if masks else default_params(current_device_kind(),
                                                                  backward=False)
    if bwd_params is None:
        bwd_params = masks[1].params if len(masks) > 1 else default_params(
            current_device_kind(), backward=True)
    return fwd_params, bwd_params


def create_attention_mask_local(query_positions, query_segment_ids, kv_positions, kv_segment_ids,
                                fwd_params=None, bwd_params=None, calc_bwd_mask=False,
                                skip_pad_tokens=True, *, variant: MaskVariant = MaskVariant()
                                ) -> tuple[AttentionMask, ...]:
    """create_attention_mask on this device's arrays (kvax-dist calls it inside shard_map)."""
    validate.check_layout_arrays(query_positions, query_segment_ids, kv_positions,
                                 kv_segment_ids)
    check_positions_for_window(variant, {"query_positions": query_positions,
                                         "kv_positions": kv_positions})
    fwd_params, bwd_params = resolve_params(fwd_params, bwd_params)
    return _build_masks(*as_int32(query_positions, query_segment_ids, kv_positions,
                                   kv_segment_ids),
                        fwd_params=fwd_params, bwd_params=bwd_params if calc_bwd_mask else None,
                        skip_pad_tokens=bool(skip_pad_tokens), variant=variant,
                        schedule=wants_schedule())


def create_attention_mask(
    query_positions: jax.Array,
    query_segment_ids: jax.Array,
    kv_positions: jax.Array,
    kv_segment_ids: jax.Array,
    fwd_params: FlashAttentionParamsConfig | None = None,
    bwd_params: FlashAttentionParamsConfig | None = None,
    calc_bwd_mask: bool = False,
    skip_pad_tokens: bool = True,
    mesh: jax.sharding.Mesh | None = None,
    *,
    is_causal: bool = True,
    local_window_size: int | tuple[int, int] | None = None,
) -> tuple[AttentionMask, ...]:
    """Block masks for the forward and (calc_bwd_mask=True) backward kernels.

    Build them once per step and pass them to every layer's flash_attention. Positions and segment
    ids are integer [B, T] (queries) and [B, S] (keys/values); padding carries PADDING_SEGMENT_ID.
    They are computed in int32: int8/16/32 and uint8/16 are taken as they are; int64, uint32 and
    uint64 only when their values are known to fit (a concrete array is checked; under jit such a
    dtype is a ValueError), never silently cast.
    Returns (fwd,) or (fwd, dq, dkdv), each an AttentionMask pytree. skip_pad_tokens=False keeps
    blocks of padding in the visited ranges (slower; the result is the same: padding never attends).
    `is_causal=False` lets a query attend later keys of its document too; `local_window_size`
    (an int, or (left, right)) keeps key s visible from query t only if -right <= pos[t] - pos[s]
    <= left. Pass the same two to flash_attention: the masks remember them.
    """
    variant = make_variant(is_causal, local_window_size)
    dist = sharded.for_call(mesh)
    if dist is not None:
        return dist.create_attention_mask(query_positions, query_segment_ids, kv_positions,
                                          kv_segment_ids, fwd_params=fwd_params,
                                          bwd_params=bwd_params, calc_bwd_mask=calc_bwd_mask,
                                          skip_pad_tokens=skip_pad_tokens, mesh=mesh,
                                          variant=variant)
    return create_attention_mask_local(query_positions, query_segment_ids, kv_positions,
                                       kv_segment_ids, fwd_params, bwd_params, calc_bwd_mask,
                                       skip_pad_tokens, variant=variant)


def _check_masks(mask, batch, q_len, kv_len, fwd_params, bwd_params,
                 variant: MaskVariant) -> tuple[AttentionMask, ...]:
    masks = (mask,) if isinstance(mask, AttentionMask) else tuple(mask)
    if len(masks) not in (1, 3) or not all(isinstance(m, AttentionMask) for m in masks):
        raise ValueError("mask must be what create_attention_mask returned: (fwd,) or "
                         f"(fwd, dq, dkdv) AttentionMasks, got {type(mask).__name__} of "
                         f"{[type(m).__name__ for m in masks]}")
    kinds = tuple(m.kind for m in masks)
    if kinds not in (("fwd",), ("fwd", "dq", "dkdv")):
        raise ValueError(f"mask kinds must be ('fwd',) or ('fwd', 'dq', 'dkdv'), got {kinds}")
    for m in masks:
        if m.variant != variant:
            raise ValueError(f"mask was built for {m.variant.describe()}, but the call asks for "
                             f"{variant.describe()}: pass the same is_causal and "
                             "local_window_size to create_attention_mask and flash_attention")
        if (m.query_len, m.kv_len) != (q_len, kv_len):
            raise ValueError(
                f"mask was built for query_len={m.query_len}, kv_len={m.kv_len}, but the call "
                f"has query_len={q_len}, kv_len={kv_len}")
        rows = -(-(q_len if m.kind != "dkdv" else kv_len) // m.row_block)
        if tuple(m.lower_bounds.shape) != (batch, rows):
            raise ValueError(f"{m.kind} mask bounds have shape {tuple(m.lower_bounds.shape)}, "
                             f"expected (batch, row_blocks) = {(batch, rows)}")
    pairs = [("fwd_params", fwd_params, masks[0],
              (masks[0].row_block, masks[0].col_block))]
    if len(masks) == 3:
        pairs.append(("bwd_params", bwd_params, masks[2],
                      (masks[2].col_block, masks[2].row_block)))
    for name, params, m, built in pairs:
        if params is not None and (params.query_block_size, params.kv_block_size) != built:
            raise ValueError(
                f"mask was built with {name} query_block_size, kv_block_size = {built}, but the "
                f"call uses {(params.query_block_size, params.kv_block_size)}: pass the same "
                "params to create_attention_mask and flash_attention")
    return masks


def resolve_backend(backend: str, query, key, value, fwd_params) -> str:
    """A registered backend's name: the one asked for, or for "auto" the first that can run."""
    backends.check_name(backend)
    return backends.resolve(backend, query, key, value, fwd_params=fwd_params)


def flash_attention_local(query, key, value, query_positions, query_segment_ids, kv_positions,
                          kv_segment_ids, mask=None, scale=1.0, bias=None, fwd_params=None,
                          bwd_params=None, assume_sequential_positions=False,
                          memory_optimized_gqa_backward=False, debug=False, *,
                          backend: str = "auto", variant: MaskVariant = MaskVariant(),
                          logits_soft_cap: float | None = None, sinks=None,
                          return_residual: bool = False, deterministic: bool = True):
    """flash_attention on this device's arrays (kvax-dist calls it inside shard_map)."""
    validate.check_qkv(query, key, value)
    batch, q_len, num_heads, _ = query.shape
    sinks = validate.check_sinks(sinks, num_heads)
    kv_len = key.shape[1]
    validate.check_layout_arrays(query_positions, query_segment_ids, kv_positions, kv_segment_ids,
                                 batch=batch, q_len=q_len, kv_len=kv_len)
    scale = validate.check_scale(scale)
    if bias is not None:
        raise NotImplementedError("bias is not supported (as in the original Kvax)")
    validate.check_params("fwd_params", fwd_params)
    validate.check_params("bwd_params", bwd_params)
    check_positions_for_window(variant, {"query_positions": query_positions,
                                         "kv_positions": kv_positions})
    masks = () if mask is None else _check_masks(mask, batch, q_len, kv_len, fwd_params,
                                                 bwd_params, variant)
    fwd_params, bwd_params = resolve_params(fwd_params, bwd_params, masks)
    resolved = resolve_backend(backend, query, key, value, fwd_params)
    layout = as_int32(query_positions, query_segment_ids, kv_positions, kv_segment_ids)
    skip_pad = masks[0].skip_pad_tokens if masks else True
    if not masks:
        masks = _build_masks(*layout, fwd_params=fwd_params, bwd_params=None,
                             skip_pad_tokens=skip_pad, variant=variant)
    opts = Options(sequential=bool(assume_sequential_positions), backend=resolved,
                   fwd_params=fwd_params, bwd_params=bwd_params,
                   memory_optimized_gqa_backward=bool(memory_optimized_gqa_backward),
                   skip_pad_tokens=skip_pad, debug=bool(debug), variant=variant,
                   logits_soft_cap=validate.check_soft_cap(logits_soft_cap),
                   deterministic=validate.check_flag("deterministic", deterministic))
    out, lse = attention(opts, query, key, value, jnp.asarray(scale, jnp.float32), sinks,
                         *layout, masks)
    return (out, lse.transpose(0, 2, 1)) if return_residual else out


def flash_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    query_positions: jax.Array,
    query_segment_ids: jax.Array,
    kv_positions: jax.Array,
    kv_segment_ids: jax.Array,
    mask: Sequence[AttentionMask] | AttentionMask | None = None,
    scale: float | jax.Array = 1.0,
    bias: jax.Array | None = None,
    fwd_params: FlashAttentionParamsConfig | None = None,
    bwd_params: FlashAttentionParamsConfig | None = None,
    assume_sequential_positions: bool = False,
    memory_optimized_gqa_backward: bool = False,
    permute_tokens_for_load_balance: bool | str = True,
    debug: bool = False,
    mesh: jax.sharding.Mesh | None = None,
    *,
    backend: str = "auto",
    is_causal: bool = True,
    local_window_size: int | tuple[int, int] | None = None,
    logits_soft_cap: float | None = None,
    sinks: jax.Array | None = None,
    return_residual: bool = False,
    deterministic: bool = True,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Document-masked attention: query [B, T, N, H], key [B, S, K, H], value [B, S, K, Hv].

    Query t attends key s iff their segment ids are equal and not PADDING_SEGMENT_ID and
    query_positions[t] >= kv_positions[s] (with is_causal=False: at any position; with
    local_window_size (left, right), or an int for both: -right <= pos[t] - pos[s] <= left);
    rows with nothing to attend give 0. `logits_soft_cap=c` turns the scaled logits x into
    c * tanh(x / c) (Gemma 2's soft-capping; the backward carries tanh's derivative). `sinks`, a
    float array [N], adds one logit per query head to every row's softmax denominator, with no
    value (gpt-oss's attention sinks; differentiable; not capped). `mask` is what
    create_attention_mask returned (built here when None). `scale` multiplies the logits: a
    Python number or a scalar float array (traced under jit too; the output is differentiable in
    it). Positions and segment ids are int32 (or narrower, or wider with values that fit: see
    create_attention_mask). `assume_sequential_positions=True`
    promises positions arange(T) and arange(S) and skips loading them. `backend`: "auto" picks the
    first registered backend that can run the call (the Triton kernels on a GPU, else the
    pure-JAX blockwise path); "triton" or "xla" forces one (NotImplementedError if it cannot).
    Returns [B, T, N, Hv] in the inputs' dtype, or with return_residual=True (output, logsumexp
    [B, T, N] float32): the natural log of each row's softmax denominator, sinks included, -inf
    on rows with nothing to attend. Differentiable in query, key, value, scale, sinks (and
    through the logsumexp too). By default every backward gives bitwise-equal reruns (the Hopper
    backend sums dQ's partial sums in fixed point); `deterministic=False` lets it add them in
    float32 in arrival order, 2-3% faster on an H100 (dQ may then differ in its last bits between
    reruns).
    With context parallelism (kvax-dist), `permute_tokens_for_load_balance` says how the tokens
    were permuted: True or "chunks" (Llama 3, the original's), "striped" (balanced for any
    document layout), False (not permuted).
    """
    variant = make_variant(is_causal, local_window_size)
    dist = sharded.for_call(mesh)
    if dist is not None:
        return dist.flash_attention(
            query, key, value, query_positions, query_segment_ids, kv_positions, kv_segment_ids,
            mask=mask, scale=scale, bias=bias, fwd_params=fwd_params, bwd_params=bwd_params,
            assume_sequential_positions=assume_sequential_positions,
            memory_optimized_gqa_backward=memory_optimized_gqa_backward,
            permute_tokens_for_load_balance=permute_tokens_for_load_balance, debug=debug,
            mesh=mesh, backend=backend, variant=variant,
            logits_soft_cap=logits_soft_cap, sinks=sinks, return_residual=bool(return_residual),
            deterministic=deterministic)
    return flash_attention_local(
        query, key, value, query_positions, query_segment_ids, kv_positions, kv_segment_ids,
        mask, scale, bias, fwd_params, bwd_params, assume_sequential_positions,
        memory_optimized_gqa_backward, debug, backend=backend, variant=variant,
        logits_soft_cap=logits_soft_cap, sinks=sinks, return_residual=bool(return_residual),
        deterministic=deterministic)
