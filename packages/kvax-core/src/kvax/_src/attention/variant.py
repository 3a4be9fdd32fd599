"""Which (query, key) pairs a mask allows beyond the document rule: causality and a local window.

One description, frozen and hashable (static under jit), read by every layer: its element
predicate (the pure-JAX path and the tests' reference), the block tests of the block mask
(mask.py) and the VARIANT constexpr the kernels read (triton_common.common_constants).

The rule: query t attends key s iff the segment ids are equal and not padding, and, with d =
query_positions[t] - kv_positions[s]: d >= 0 when causal, and -right <= d <= left with a window
(left, right). Positions must lie in [-2**30, 2**30] and each side of a window below 2**30 when
a window is used, so that d and the window's bounds never overflow int32.
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
        Mosaic kernels where they read positions and ids); the Triton kernels have their own
        (triton_common.element_mask), and the Mosaic forward's rank rule reads intervals()."""
        return self._and_positions((q_seg == k_seg) & (q_seg != pad_id), q_pos, k_pos)

    def intervals(self, q_pos, q_seg, k_pos, k_seg, pad_id):
        """The rule as intervals of key ranks, for kernels that test one value per key instead
        of two: (rank [B, S], lo [B, T], hi [B, T]) int32 such that query t attends key s iff
        lo[t] <= rank[s] <= hi[t], exactly as element_rule says, for any ids and positions.
        rank is the key's place in the keys ordered by (segment id, position). A query's visible
        keys are one run of that order: its id, positions within its bounds. One sort of the
        keys together with two probes per query, the first bound and the last, placed before
        and after keys of equal (id, position): the keys before each item are a key's rank and
        a query's interval ends. The items go in as (first bounds, keys, last bounds), so that
        ties of (id, position) keep that order (lexsort.row_order is stable). Queries with the
        padding id get the empty interval (0, -1)."""
        from jax import lax

        from kvax._src.attention.lexsort import row_order

        s, t = k_seg.shape[1], q_seg.shape[1]
        low, high = self.diff_bounds
        lowest, highest = jnp.iinfo(jnp.int32).min, jnp.iinfo(jnp.int32).max
        # visible: q_pos - high <= k_pos <= q_pos - low (no overflow within the limits)
        first = jnp.full_like(q_pos, lowest) if high is None else q_pos - high
        last = jnp.full_like(q_pos, highest) if low is None else q_pos - low
        seg = jnp.concatenate([q_seg, k_seg, q_seg], axis=1)
        order = row_order(seg, jnp.concatenate([first, k_pos, last], axis=1))
        key = ((order >= t) & (order < t + s)).astype(jnp.int32)
        before = jnp.cumsum(key, axis=1, dtype=jnp.int32) - key  # keys before each item
        rows = lax.broadcasted_iota(jnp.int32, order.shape, 0)
        counts = jnp.zeros_like(order).at[rows, order].set(before, unique_indices=True)
        lo, rank, end = counts[:, :t], counts[:, t:t + s], counts[:, t + s:]
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
    on both sides) or (left, right), non-negative ints below 2**30 (so that a position plus or
    minus a side, within the position limits, never overflows int32)."""
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
        if not all(0 <= w < POSITION_LIMIT for w in window):
            raise ValueError(f"local_window_size must be in [0, 2**30) on each side, got "
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
