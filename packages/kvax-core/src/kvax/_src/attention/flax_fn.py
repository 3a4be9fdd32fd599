"""kvax.nn.make_attention_fn: an `attention_fn` for flax.nnx.MultiHeadAttention (flax itself
is not imported).

nnx calls attention_fn(query, key, value, mask=..., dropout_rng=..., dropout_rate=...,
broadcast_dropout=..., deterministic=..., dtype=..., precision=..., module=..., is_causal=...)
with query [B, T, N, H] and key/value [B, S, K, H]. The batch's layout is bound when the function
is made (once per step, outside the model); the keywords nnx passes are honoured or refused.
"""

from __future__ import annotations

import jax.numpy as jnp

from kvax._src.attention import api, jax_nn
from kvax._src.config import PADDING_SEGMENT_ID


def make_attention_fn(*, query_segment_ids=None, kv_segment_ids=None, query_positions=None,
                      kv_positions=None, masks=None, is_causal=None, local_window_size=None,
                      logits_soft_cap=None, sinks=None, scale=None,
                      padding_segment_id=PADDING_SEGMENT_ID, implementation=None,
                      permute_tokens_for_load_balance=False, deterministic_backward=True):
    """A function for `nnx.MultiHeadAttention(..., attention_fn=...)` that runs Kvax on this
    batch's layout.

    Layout: segment ids [B, T] / [B, S] (one of them when T == S; `padding_segment_id` marks
    padding) and positions (default arange; packed documents restart them), or `masks` from
    kvax.ops.create_attention_mask together with the arrays they were built from (Kvax's padding
    id -1). Variant: `is_causal` (None: the model's is_causal call argument), `local_window_size`,
    `logits_soft_cap`, `sinks`, `scale` (default 1 / sqrt(head_dim), as nnx). `implementation`
    names a backend ("mosaic", "triton", "xla"; None: "auto"); `deterministic_backward=False` is
    flash_attention's `deterministic=False` (nnx's own `deterministic` is about dropout). Inside
    kvax-dist's attention_specs it runs sharded, tokens in order unless
    `permute_tokens_for_load_balance` names their permutation.

    Refused with NotImplementedError: a dense `mask` from nnx (put its information in the
    layout), dropout on the attention weights, `sow_weights` (the weights are never formed) and
    `input_positions` (RoPE inside the attention); unknown keywords are a TypeError.
    """
    jax_nn.check_implementation(implementation)
    if masks is not None:
        missing = [name for name, x in (("query_positions", query_positions),
                                        ("query_segment_ids", query_segment_ids),
                                        ("kv_positions", kv_positions),
                                        ("kv_segment_ids", kv_segment_ids)) if x is None]
        if missing:
            raise ValueError(f"masks= needs the arrays they were built from: pass {missing}")
        if padding_segment_id != PADDING_SEGMENT_ID:
            raise ValueError("masks= reads Kvax's layout (padding id -1): leave "
                             "padding_segment_id at its default")

    bound_causal = is_causal  # the model's call passes its own is_causal

    def attention_fn(query, key, value, mask=None, dropout_rng=None, dropout_rate=0.0,
                     broadcast_dropout=True, deterministic=True, dtype=None, precision=None,
                     module=None, is_causal=False, input_positions=None, **others):
        del dropout_rng, broadcast_dropout, precision  # the products run in the kernels
        if others:
            raise TypeError(f"Kvax's attention_fn does not know the arguments {sorted(others)}")
        if input_positions is not None:
            raise NotImplementedError(
                "input_positions asks the attention_fn to apply RoPE; Kvax's does not: rotate "
                "the queries and keys before attention (positions for the mask go to "
                "make_attention_fn)")
        if mask is not None:
            raise NotImplementedError(
                "the model passed a dense mask to Kvax's attention_fn: describe documents, "
                "padding and causality with make_attention_fn's layout arguments instead")
        if dropout_rate > 0.0 and not deterministic:
            raise NotImplementedError("attention-weight dropout is not supported by Kvax")
        if module is not None:
            raise NotImplementedError("sow_weights: Kvax never forms the attention weights")
        causal = is_causal if bound_causal is None else bound_causal
        if is_causal and not causal:
            raise ValueError("the model asks for is_causal=True but make_attention_fn was "
                             "given is_causal=False")
        if dtype is not None:
            query, key, value = (jnp.asarray(x, dtype) for x in (query, key, value))
        if masks is not None:
            return api.flash_attention(
                query, key, value, query_positions, query_segment_ids, kv_positions,
                kv_segment_ids, mask=masks,
                scale=query.shape[-1] ** -0.5 if scale is None else scale,
                backend="auto" if implementation is None else implementation, is_causal=causal,
                local_window_size=local_window_size, logits_soft_cap=logits_soft_cap,
                sinks=sinks, permute_tokens_for_load_balance=permute_tokens_for_load_balance,
                deterministic=deterministic_backward)
        return jax_nn.dot_product_attention(
            query, key, value, scale=scale, is_causal=causal, local_window_size=local_window_size,
            implementation=implementation, query_segment_ids=query_segment_ids,
            kv_segment_ids=kv_segment_ids, query_positions=query_positions,
            kv_positions=kv_positions, padding_segment_id=padding_segment_id,
            logits_soft_cap=logits_soft_cap, sinks=sinks,
            permute_tokens_for_load_balance=permute_tokens_for_load_balance,
            deterministic=deterministic_backward)

    return attention_fn
