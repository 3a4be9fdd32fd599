"""Random packed batches: many documents a row, padding at the end, from a seed.

Legend: B batch, T query length, S kv length, N query heads, K kv heads, H head dim, Hv value head
dim.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from kvax_testing.reference import PADDING_SEGMENT_ID, window_sides

SegmentIdStyle = Literal["sequential", "shuffled", "large", "reused"]


@dataclasses.dataclass(frozen=True)
class PackedLayout:
    """Positions and segment ids of one packed batch, numpy int32 arrays."""

    query_positions: np.ndarray  # [B, T]
    query_segment_ids: np.ndarray  # [B, T]
    kv_positions: np.ndarray  # [B, S]
    kv_segment_ids: np.ndarray  # [B, S]

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (self.query_positions, self.query_segment_ids, self.kv_positions,
                self.kv_segment_ids)

    def allowed_pairs(self, is_causal: bool = True, local_window_size=None) -> int:
        """The exact number of allowed (query, key) pairs, summed over the batch, for Kvax's rule
        with these variant arguments (FLOPs: 4 * N * H per pair forward). Without materialising
        the [T, S] mask: per document, the keys whose positions fall in each query's range."""
        left, right = window_sides(local_window_size)
        total = 0
        for b in range(self.query_positions.shape[0]):
            qs, qp = self.query_segment_ids[b], self.query_positions[b].astype(np.int64)
            ks, kp = self.kv_segment_ids[b], self.kv_positions[b].astype(np.int64)
            for seg in np.unique(qs[qs != PADDING_SEGMENT_ID]):
                kpos, q = np.sort(kp[ks == seg]), qp[qs == seg]
                # key positions allowed for query position p: [p - left, p + right], and <= p
                # when causal; a missing side is unbounded (positions are int32, 2**40 is beyond)
                high = q + (2**40 if right is None else right)
                high = np.minimum(high, q) if is_causal else high
                low = q - (2**40 if left is None else left)
                total += int((np.searchsorted(kpos, high, side="right")
                              - np.searchsorted(kpos, low, side="left")).clip(min=0).sum())
        return total


@dataclasses.dataclass(frozen=True)
class PackedBatch:
    """A packed batch: inputs of one attention call (numpy; feed them to jnp.asarray)."""

    query: np.ndarray  # [B, T, N, H]
    key: np.ndarray  # [B, S, K, H]
    value: np.ndarray  # [B, S, K, Hv]
    layout: PackedLayout

    @property
    def positions_and_segments(self):
        return self.layout.arrays


def _segment_ids(num_docs: int, style: SegmentIdStyle, rng: np.random.Generator) -> np.ndarray:
    if style == "sequential":
        return np.arange(num_docs, dtype=np.int64)
    if style == "shuffled":
        return rng.permutation(num_docs).astype(np.int64) * 3 + 1
    if style == "large":
        return rng.choice(np.arange(2**31 - 2 - 4 * num_docs, 2**31 - 2), num_docs, replace=False)
    if style == "reused":
        # A B A: an id comes back after another document; still two separate documents.
        ids = np.arange(num_docs, dtype=np.int64) % 2 + 7
        return ids
    raise ValueError(f"unknown segment id style {style=}")


def packed_layout(
    seed: int,
    *,
    batch: int,
    kv_len: int,
    q_len: int | None = None,
    num_docs: int | tuple[int, int] = (1, 5),
    pad_tokens: int | tuple[int, int] = (0, 40),
    segment_ids: SegmentIdStyle = "sequential",
    positions: Literal["per_document", "global", "zeros"] = "per_document",
) -> PackedLayout:
    """Positions and segment ids of a random packed batch.

    Each row holds documents of random lengths followed by padding (segment id PADDING_SEGMENT_ID).
    `num_docs` and `pad_tokens` take a number or an inclusive (low, high) range drawn per row.
    Positions restart at 0 in each document ("per_document"), run over the whole row ("global"), or
    are all zero ("zeros": bidirectional attention within a document). The queries are the last
    `q_len` of the `kv_len` tokens (continued prefill; q_len=1 is decode); q_len=None means T = S.
    """
    rng = np.random.default_rng(seed)
    q_len = kv_len if q_len is None else q_len
    if not 0 < q_len <= kv_len:
        raise ValueError(f"need 0 < q_len <= kv_len, got {q_len=} {kv_len=}")

    def draw(value):
        return int(rng.integers(value[0], value[1] + 1)) if isinstance(value, tuple) else int(value)

    kv_pos = np.zeros((batch, kv_len), np.int32)
    kv_seg = np.full((batch, kv_len), PADDING_SEGMENT_ID, np.int32)
    for b in range(batch):
        pad = min(draw(pad_tokens), kv_len - 1)
        real = kv_len - pad
        docs = max(1, min(draw(num_docs), real))
        cuts = np.sort(rng.choice(np.arange(1, real), docs - 1, replace=False)) if docs > 1 else []
        bounds = np.concatenate([[0], cuts, [real]]).astype(np.int64)
        ids = _segment_ids(docs, segment_ids, rng)
        for d in range(docs):
            lo, hi = bounds[d], bounds[d + 1]
            kv_seg[b, lo:hi] = ids[d]
            if positions == "per_document":
                kv_pos[b, lo:hi] = np.arange(hi - lo)
        if positions == "global":
            kv_pos[b, :real] = np.arange(real)
        # Padding positions are arbitrary; make them large so position tests alone never hide them.
        kv_pos[b, real:] = rng.integers(0, 2 * kv_len, pad)
    q_pos = kv_pos[:, kv_len - q_len :].copy()
    q_seg = kv_seg[:, kv_len - q_len :].copy()
    return PackedLayout(q_pos, q_seg, kv_pos, kv_seg)


def packed_batch(
    seed: int,
    *,
    batch: int = 2,
    kv_len: int = 257,
    q_len: int | None = None,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 64,
    value_head_dim: int | None = None,
    dtype="float32",
    poison_padding: bool = False,
    **layout_kwargs,
) -> PackedBatch:
    """A random packed batch of query, key and value (normal, unit variance) and its layout.

    With poison_padding=True, the query, key and value of padding tokens are NaN and Inf, so that
    a kernel that lets padding leak into real rows fails loudly.
    """
    import jax.numpy as jnp

    layout = packed_layout(seed, batch=batch, kv_len=kv_len, q_len=q_len, **layout_kwargs)
    rng = np.random.default_rng(seed + 1_000_003)
    t_len = layout.query_positions.shape[1]
    value_head_dim = head_dim if value_head_dim is None else value_head_dim
    np_dtype = jnp.dtype(dtype)
    q = rng.standard_normal((batch, t_len, num_heads, head_dim), np.float32).astype(np_dtype)
    k = rng.standard_normal((batch, kv_len, num_kv_heads, head_dim), np.float32).astype(np_dtype)
    v = rng.standard_normal((batch, kv_len, num_kv_heads, value_head_dim), np.float32).astype(
        np_dtype
    )
    if poison_padding:
        q_pad = layout.query_segment_ids == PADDING_SEGMENT_ID
        kv_pad = layout.kv_segment_ids == PADDING_SEGMENT_ID
        q[q_pad] = np.nan
        k[kv_pad] = np.inf
        v[kv_pad] = np.nan
    return PackedBatch(q, k, v, layout)
