"""Which (query, key) pairs a mask allows beyond the document rule: causality and a local window.

One description, frozen and hashable (static under jit), read by every layer: its element
predicate (the pure-JAX path and the tests' reference), the block tests of the block mask
(mask.py) and the VARIANT constexpr the kernels read (triton_common.common_constants).

The rule: query t attends key s iff the segment ids are equal and not padding, and, with d =
query_positions[t] - kv_positions[s]: d >= 0 when causal, and -right <= d <= left with a window
(left, right). Positions must lie in [-2**30, 2**30] when a window is used, so that d and the
window's bounds never overflow int32.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

POSITION_LIMIT = 2**30


@dataclasses.dataclass(frozen=True)
class MaskVariant:
    is_causal: bool = True
    window: tuple[int, int] | None = None  # (left, right), as local_window_size gives it

    @property
    def diff_bounds(self) -> tuple[int | None, int | None]:
        """(lowest, highest) allowed query-minus-key position difference; None: unbounded."""
        low = 0 if self.is_causal else None
        high = None
        if self.window is not None:
            left, right = self.window
            low = -right if low is None else max(low, -right)
            high = left
        return low, high

    def allows(self, q_pos, k_pos):
        """The position part of the rule, elementwise (broadcasting) on int32 arrays."""
        ok = jnp.ones(jnp.broadcast_shapes(jnp.shape(q_pos), jnp.shape(k_pos)), bool)
        return self._and_positions(ok, q_pos, k_pos)

    def element_rule(self, q_pos, q_seg, k_pos, k_seg, pad_id):
        """The whole rule, elementwise on arrays that broadcast against each other (queries'
        [..., T, 1] against keys' [..., 1, S], or tiles already broadcast): equal segment ids,
        not padding, and the position part. Every pure-JAX user reads it here (the CPU path, the
        Mosaic kernel); the Triton kernels have their own (triton_common.element_mask)."""
        return self._and_positions((q_seg == k_seg) & (q_seg != pad_id), q_pos, k_pos)

    def intervals(self, q_pos, q_seg, k_pos, k_seg, pad_id):
        """The rule as intervals of key ranks, for kernels that test one value per key instead
        of two: (rank [B, S], lo [B, T], hi [B, T]) int32 such that query t attends key s iff
        lo[t] <= rank[s] <= hi[t], exactly as element_rule says, for any ids and positions.
        rank is the key's place in the keys sorted by (segment id, position); a query's
        visible keys are one run of that order (its id, positions within its bounds), found by
        two binary searches. Queries with the padding id get the empty interval (0, -1). One
        sort of the keys, a scatter and about 2 log2(S) gathers a row: built with the mask, not
        in each call."""
        from jax import lax

        b, s = k_seg.shape
        index = lax.broadcasted_iota(jnp.int32, (b, s), 1)
        seg_sorted, pos_sorted, order = lax.sort((k_seg, k_pos, index), dimension=1, num_keys=2)
        rows = lax.broadcasted_iota(jnp.int32, (b, s), 0)
        rank = jnp.zeros((b, s), jnp.int32).at[rows, order].set(index, unique_indices=True)
        low, high = self.diff_bounds

        def count(before):
            """How many sorted keys j have before(seg_j, pos_j), per query (true, then false
            along the order)."""
            first = jnp.zeros(q_seg.shape, jnp.int32)
            end = jnp.full(q_seg.shape, s, jnp.int32)
            for _ in range(s.bit_length()):
                mid = (first + end) // 2
                at = jnp.minimum(mid, s - 1)
                yes = before(jnp.take_along_axis(seg_sorted, at, axis=1),
                             jnp.take_along_axis(pos_sorted, at, axis=1))
                open_ = first < end
                first = jnp.where(open_ & yes, mid + 1, first)
                end = jnp.where(open_ & ~yes, mid, end)
            return first

        def too_far_behind(seg, pos):  # keys of lower ids, or of the query's id before its window
            if high is None:
                return seg < q_seg
            return (seg < q_seg) | ((seg == q_seg) & (q_pos > pos + high))

        def not_ahead(seg, pos):  # keys of lower ids, or of the query's id not past its bound
            if low is None:
                return seg <= q_seg
            return (seg < q_seg) | ((seg == q_seg) & (q_pos >= pos + low))

        lo, end = count(too_far_behind), count(not_ahead)
        live = q_seg != pad_id
        return rank, jnp.where(live, lo, 0), jnp.where(live, end - 1, -1)

    def _and_positions(self, ok, q_pos, k_pos):
        low, high = self.diff_bounds
        if low is not None:  # d >= low  <=>  q >= k + low (no overflow within the limits)
            ok = ok & (q_pos >= k_pos + low)
        if high is not None:
            ok = ok & (q_pos <= k_pos + high)
        return ok

    def describe(self) -> str:
        return (f"is_causal={self.is_causal}, local_window_size="
                f"{None if self.window is None else self.window}")


def make_variant(is_causal=True, local_window_size=None) -> MaskVariant:
    """Validated MaskVariant from the API's arguments: local_window_size is None, an int (the same
    on both sides) or (left, right), non-negative ints up to 2**30."""
    if not isinstance(is_causal, (bool, np.bool_)):
        raise ValueError(f"is_causal must be True or False, got {is_causal!r}")
    window = local_window_size
    if window is not None:
        if isinstance(window, (int, np.integer)) and not isinstance(window, bool):
            window = (int(window), int(window))
        if (not isinstance(window, (tuple, list)) or len(window) != 2
                or not all(isinstance(w, (int, np.integer)) and not isinstance(w, bool)
                           for w in window)):
            raise ValueError(f"local_window_size must be None, an int or (left, right) ints, "
                             f"got {local_window_size!r}")
        window = (int(window[0]), int(window[1]))
        if not all(0 <= w <= POSITION_LIMIT for w in window):
            raise ValueError(f"local_window_size must be in [0, 2**30] on each side, got "
                             f"{local_window_size!r}")
    return MaskVariant(bool(is_causal), window)


def check_positions_for_window(variant: MaskVariant, named_positions: dict) -> None:
    """With a window, concrete positions must lie in [-2**30, 2**30] (traced ones cannot be
    checked: the README states the limit)."""
    import jax

    if variant.window is None:
        return
    for name, x in named_positions.items():
        if isinstance(x, jax.core.Tracer):
            continue
        values = np.asarray(x)
        if values.size and np.max(np.abs(values.astype(np.int64))) > POSITION_LIMIT:
            raise ValueError(f"{name} must lie in [-2**30, 2**30] with local_window_size, got "
                             f"values in [{values.min()}, {values.max()}]")
