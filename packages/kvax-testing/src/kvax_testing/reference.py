"""Dense reference attention with Kvax's document-mask semantics.

Shapes: B batch, T query length, S kv length, N query heads, K kv heads (N % K == 0), H head dim of
query and key, Hv head dim of value.

The rule (the truth every kernel is checked against): query i attends key j iff
    query_segment_ids[i] == kv_segment_ids[j] != PADDING_SEGMENT_ID
    and  query_positions[i] >= kv_positions[j].
Query head n reads kv head n // (N // K). A row with nothing to attend gives output 0 and
logsumexp -inf.

The mask is a conjunction of terms, each a function of (query_positions, query_segment_ids,
kv_positions, kv_segment_ids) returning a boolean [B, T, S] array, and the logits pass through an
optional transform before the softmax: windows, bidirectional spans, soft-capping or sinks are added
as extra terms or transforms, without touching this code; sinks are an argument.
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp

PADDING_SEGMENT_ID = -1

MaskTerm = Callable[[jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]
LogitsFn = Callable[[jax.Array], jax.Array]


def document_term(q_pos, q_seg, kv_pos, kv_seg) -> jax.Array:
    """Same segment, and not padding. [B, T, S]."""
    del q_pos, kv_pos
    same = q_seg[:, :, None] == kv_seg[:, None, :]
    return same & (q_seg[:, :, None] != PADDING_SEGMENT_ID)


def causal_term(q_pos, q_seg, kv_pos, kv_seg) -> jax.Array:
    """Query position at or after key position. [B, T, S]."""
    del q_seg, kv_seg
    return q_pos[:, :, None] >= kv_pos[:, None, :]


DEFAULT_MASK_TERMS: tuple[MaskTerm, ...] = (document_term, causal_term)


def window_term(left: int, right: int) -> MaskTerm:
    """-right <= query position - key position <= left. [B, T, S]."""
    def term(q_pos, q_seg, kv_pos, kv_seg):
        del q_seg, kv_seg
        d = q_pos[:, :, None] - kv_pos[:, None, :]
        return (d >= -right) & (d <= left)
    return term


def soft_cap(cap: float) -> LogitsFn:
    """Logit soft-capping, cap * tanh(logits / cap), as a reference_attention logits_fn."""
    return lambda logits: cap * jnp.tanh(logits / cap)


def window_sides(local_window_size) -> tuple[int | None, int | None]:
    """flash_attention's local_window_size as (left, right): None for no window, an int for both
    sides, or the pair itself."""
    if local_window_size is None:
        return None, None
    if isinstance(local_window_size, int):
        return local_window_size, local_window_size
    left, right = local_window_size
    return left, right


def mask_terms(is_causal: bool = True, local_window_size=None) -> tuple[MaskTerm, ...]:
    """The terms of Kvax's rule for flash_attention's is_causal and local_window_size."""
    terms = [document_term] + ([causal_term] if is_causal else [])
    if local_window_size is not None:
        terms.append(window_term(*window_sides(local_window_size)))
    return tuple(terms)


def reference_mask(
    query_positions,
    query_segment_ids,
    kv_positions,
    kv_segment_ids,
    mask_terms: Sequence[MaskTerm] = DEFAULT_MASK_TERMS,
) -> jax.Array:
    """The element-wise mask, [B, T, S] bool: True where query t may attend key s."""
    args = (
        jnp.asarray(query_positions),
        jnp.asarray(query_segment_ids),
        jnp.asarray(kv_positions),
        jnp.asarray(kv_segment_ids),
    )
    allowed = mask_terms[0](*args)
    for term in mask_terms[1:]:
        allowed = allowed & term(*args)
    return allowed


def reference_logits(query, key, scale=1.0) -> jax.Array:
    """scale * Q K^T as [B, N, T, S] in the inputs' dtype (query head n reads kv head n // G)."""
    q, k = jnp.asarray(query), jnp.asarray(key)
    k = jnp.repeat(k, q.shape[2] // k.shape[2], axis=2)
    hi = jax.lax.Precision.HIGHEST
    return jnp.einsum("btnh,bsnh->bnts", q, k, precision=hi) * jnp.asarray(scale, q.dtype)


def reference_attention(
    query,
    key,
    value,
    query_positions,
    query_segment_ids,
    kv_positions,
    kv_segment_ids,
    *,
    scale: float = 1.0,
    dtype=jnp.float32,
    mask_terms: Sequence[MaskTerm] = DEFAULT_MASK_TERMS,
    logits_fn: LogitsFn | None = None,
    sinks=None,
) -> tuple[jax.Array, jax.Array]:
    """Dense attention computed in `dtype`; returns (output [B, T, N, Hv], logsumexp [B, N, T]).

    `sinks` [N]: one logit per query head added to each row's softmax denominator, with no value
    (after scaling and logits_fn). The logsumexp includes it; rows with no allowed key still give
    output 0 and logsumexp -inf.

    With dtype float32/float64 this is the high-precision reference. With the inputs' own dtype
    (bfloat16, float16) every intermediate is rounded to it: that is the "plain computation" whose
    error sets the tolerance of the kernels. Use float64 under `jax.enable_x64(True)`.
    The function is differentiable in query, key and value.
    """
    q = jnp.asarray(query).astype(dtype)
    k = jnp.asarray(key).astype(dtype)
    v = jnp.asarray(value).astype(dtype)
    num_heads, num_kv_heads = q.shape[2], k.shape[2]
    if num_heads % num_kv_heads:
        raise ValueError(f"query heads {num_heads} not a multiple of kv heads {num_kv_heads}")
    group = num_heads // num_kv_heads
    k = jnp.repeat(k, group, axis=2)
    v = jnp.repeat(v, group, axis=2)

    hi = jax.lax.Precision.HIGHEST  # no TF32 shortcuts: the reference is what it says it is
    logits = jnp.einsum("btnh,bsnh->bnts", q, k, precision=hi, preferred_element_type=dtype)
    logits = logits.astype(dtype)
    logits = logits * jnp.asarray(scale, dtype)
    if logits_fn is not None:
        logits = logits_fn(logits)
    allowed = reference_mask(
        query_positions, query_segment_ids, kv_positions, kv_segment_ids, mask_terms
    )[:, None]  # [B, 1, T, S]
    probs, lse = _softmax(logits, allowed, sinks=sinks, dtype=dtype)
    out = jnp.einsum("bnts,bsnh->btnh", probs, v, precision=hi, preferred_element_type=dtype)
    return out.astype(dtype), lse


def _softmax(logits, allowed, *, sinks=None, dtype=jnp.float32):
    """(probabilities [B, N, T, S], logsumexp [B, N, T]) of logits [B, N, T, S] (after scaling
    and logits_fn) over the allowed keys (allowed broadcasts to the logits: [B, 1, T, S]), with
    reference_attention's sinks, computed in `dtype`: rows with no allowed key give 0 and
    -inf."""
    masked = jnp.where(allowed, logits, -jnp.inf)
    row_max = jnp.max(masked, axis=-1, keepdims=True)
    if sinks is not None:
        sink = jnp.asarray(sinks).astype(dtype)[None, :, None, None]  # [1, N, 1, 1]
        row_max = jnp.maximum(row_max, sink)
    any_allowed = jnp.any(allowed, axis=-1, keepdims=True)
    row_max = jnp.where(any_allowed, jax.lax.stop_gradient(row_max), 0)
    weights = jnp.where(allowed, jnp.exp(masked - row_max), 0).astype(dtype)
    denom = jnp.sum(weights, axis=-1, keepdims=True)
    if sinks is not None:
        denom = denom + jnp.where(any_allowed, jnp.exp(sink - row_max), 0).astype(dtype)
    safe_denom = jnp.where(any_allowed, denom, 1)
    probs = (weights / safe_denom).astype(dtype)
    lse = jnp.where(any_allowed, jnp.log(safe_denom) + row_max, -jnp.inf)[..., 0]
    return probs, lse
