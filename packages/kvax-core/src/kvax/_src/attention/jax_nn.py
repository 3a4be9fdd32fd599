"""kvax.nn.dot_product_attention: jax.nn.dot_product_attention's signature and meaning, run by Kvax,
plus the packed-sequence arguments (segment ids, positions) and Kvax's variants.

Everything jax.nn takes keeps jax.nn's meaning; the sequence lengths and segment ids become Kvax's
layout arrays (padding = PADDING_SEGMENT_ID), positions default to arange (so causal and windows are
top-left aligned as in jax.nn), and the call goes to kvax.ops.flash_attention (sharded too, inside
kvax-dist's attention_specs).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kvax._src.attention import api, backends, validate
from kvax._src.config import PADDING_SEGMENT_ID

_DENSE_HINT = ("Kvax never materialises a [T, S] mask: express it with query_segment_ids / "
               "kv_segment_ids (documents, padding), query_seq_lengths / key_value_seq_lengths, "
               "is_causal, local_window_size and positions (see the README's recipes for "
               "prefix-LM and chunked attention)")


def _pair(name_q, q_arr, name_kv, kv_arr, q_len, kv_len):
    """One of a query/kv pair may stand for both when the lengths agree."""
    if q_arr is None and kv_arr is None:
        return None, None
    if q_arr is None or kv_arr is None:
        if q_len != kv_len:
            given, missing = (name_q, name_kv) if kv_arr is None else (name_kv, name_q)
            raise ValueError(f"{given} was given without {missing}; with query length {q_len} "
                             f"!= kv length {kv_len} pass both")
        q_arr = kv_arr if q_arr is None else q_arr
        kv_arr = q_arr if kv_arr is None else kv_arr
    return jnp.asarray(q_arr), jnp.asarray(kv_arr)


def _batched(name, x, batch, length):
    """[L] or [B, L] integers -> [B, L] int32 (values checked as flash_attention checks them, and
    cast before any arithmetic: -1 must not wrap around in an unsigned type)."""
    validate.check_int32_values(name, x)
    x = jnp.asarray(x).astype(jnp.int32)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2 or x.shape[1] != length or x.shape[0] not in (1, batch):
        raise ValueError(f"{name} must have shape ({batch}, {length}) (or ({length},)), got "
                         f"{tuple(x.shape)}")
    return jnp.broadcast_to(x, (batch, length))


def _to_kvax_segments(seg, padding_segment_id: int):
    """Segment ids with the caller's padding id as Kvax's (-1). A real id equal to -1 takes the
    caller's padding id instead (a swap keeps every document distinct)."""
    if padding_segment_id == PADDING_SEGMENT_ID:
        return seg
    pad = jnp.asarray(padding_segment_id, seg.dtype)
    return jnp.where(seg == pad, PADDING_SEGMENT_ID,
                     jnp.where(seg == PADDING_SEGMENT_ID, pad, seg)).astype(seg.dtype)


def _seq_lengths(name, lengths, batch, length):
    lengths = jnp.asarray(lengths)
    if lengths.shape != (batch,) or not jnp.issubdtype(lengths.dtype, jnp.integer):
        raise ValueError(f"{name} must be an integer array of shape ({batch},), got shape "
                         f"{tuple(lengths.shape)} and dtype {lengths.dtype}")
    return jnp.arange(length)[None, :] < lengths[:, None]  # [B, L] bool: inside the sequence


def check_implementation(implementation) -> None:
    """Accepts a Kvax backend's name or None. jax.nn's "cudnn" is a NotImplementedError that
    says where cuDNN is; anything else a ValueError."""
    if implementation == "cudnn":  # jax.nn's, valid there
        raise NotImplementedError(
            "implementation='cudnn' is jax.nn's cuDNN kernel, not one of Kvax's: pass one of "
            f"{backends.names()} or None (auto), or call jax.nn.dot_product_attention for cuDNN")
    backends.check_name(implementation, "implementation", or_none=True)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None, return_residual=False,
                          query_segment_ids=None, kv_segment_ids=None, query_positions=None,
                          kv_positions=None, padding_segment_id=PADDING_SEGMENT_ID,
                          logits_soft_cap=None, sinks=None, permute_tokens_for_load_balance=False,
                          deterministic=True):
    """jax.nn.dot_product_attention through Kvax.

    query [B, T, N, H] or [T, N, H]; key and value [B, S, K, H] / [S, K, H] (N % K == 0). Every
    argument jax.nn has means what it means there: `scale` defaults to 1 / sqrt(H); `is_causal`
    is top-left aligned when T != S; the sequence lengths mark the tokens past them as padding;
    `local_window_size` (left, right) or an int; `return_residual` adds the logsumexp [B, T, N]
    (natural log). On every row with something to attend the result equals
    jax.nn.dot_product_attention(..., implementation="xla"); rows with nothing to attend give 0
    (and logsumexp -inf). `implementation` names a Kvax backend ("mosaic", "triton", "xla"; None:
    "auto").

    Added: `query_segment_ids` / `kv_segment_ids` [B, T] / [B, S] (or one of them when T == S)
    restrict attention to equal ids, tokens with `padding_segment_id` being padding (MaxText and
    Transformer Engine use 0: pass padding_segment_id=0); `query_positions` / `kv_positions`
    replace arange in the causal and window rules (packed documents restart them);
    `logits_soft_cap`, `sinks` and `deterministic` as in kvax.ops.flash_attention. A dense `bias`
    or `mask` is NotImplementedError. Inside kvax-dist's attention_specs the call runs sharded;
    the tokens are taken in order unless `permute_tokens_for_load_balance` names the permutation
    applied to them (as in kvax.ops.flash_attention; then pass the permuted query positions and
    segment ids, and the kv ones in original order).
    """
    if bias is not None or mask is not None:
        raise NotImplementedError(f"a dense {'bias' if bias is not None else 'mask'} is not "
                                  f"supported. {_DENSE_HINT}")
    check_implementation(implementation)
    query, key, value = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
    ranks = (query.ndim, key.ndim, value.ndim)
    if ranks not in ((3, 3, 3), (4, 4, 4)):
        raise ValueError(f"query, key and value must all be [B, T, N, H] or all [T, N, H], got "
                         f"shapes {query.shape}, {key.shape}, {value.shape}")
    unbatched = query.ndim == 3
    if unbatched:
        query, key, value = query[None], key[None], value[None]
    b, t, _, h = query.shape
    s = key.shape[1]
    if scale is None:
        scale = 1.0 / float(np.sqrt(h))
    if isinstance(padding_segment_id, bool) or not isinstance(padding_segment_id,
                                                             (int, np.integer)):
        raise ValueError(f"padding_segment_id must be an int, got {padding_segment_id!r}")

    q_seg, kv_seg = _pair("query_segment_ids", query_segment_ids, "kv_segment_ids",
                          kv_segment_ids, t, s)
    if q_seg is None:
        q_seg, kv_seg = jnp.zeros((b, t), jnp.int32), jnp.zeros((b, s), jnp.int32)
    else:
        q_seg = _to_kvax_segments(_batched("query_segment_ids", q_seg, b, t),
                                  int(padding_segment_id))
        kv_seg = _to_kvax_segments(_batched("kv_segment_ids", kv_seg, b, s),
                                   int(padding_segment_id))
    pad = jnp.asarray(PADDING_SEGMENT_ID, q_seg.dtype)
    if query_seq_lengths is not None:
        q_seg = jnp.where(_seq_lengths("query_seq_lengths", query_seq_lengths, b, t), q_seg, pad)
    if key_value_seq_lengths is not None:
        kv_seg = jnp.where(_seq_lengths("key_value_seq_lengths", key_value_seq_lengths, b, s),
                           kv_seg, pad)

    q_pos, kv_pos = _pair("query_positions", query_positions, "kv_positions", kv_positions, t, s)
    if q_pos is None:
        q_pos = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
        kv_pos = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (b, s))
    else:
        q_pos = _batched("query_positions", q_pos, b, t)
        kv_pos = _batched("kv_positions", kv_pos, b, s)

    result = api.flash_attention(
        query, key, value, q_pos, q_seg, kv_pos, kv_seg, scale=scale,
        backend="auto" if implementation is None else implementation, is_causal=is_causal,
        local_window_size=local_window_size, logits_soft_cap=logits_soft_cap, sinks=sinks,
        return_residual=return_residual, deterministic=deterministic,
        permute_tokens_for_load_balance=permute_tokens_for_load_balance)
    if unbatched:
        result = jax.tree.map(lambda x: x[0], result)
    return result
