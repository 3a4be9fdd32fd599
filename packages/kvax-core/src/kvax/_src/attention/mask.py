"""The block mask: which key blocks each query block visits, and which of them need no element mask.

For each row block (a query block; a key block for the dK/dV mask) four bounds over column blocks:
columns in [lower, lower_full) and [upper_full, upper) are visited with the element-wise mask,
[lower_full, upper_full) are visited without it (every pair in them is allowed), and columns
outside [lower, upper) are skipped. Memory: 4 int32 per row block, O(S / block).

Exact for any segment ids and positions. The element rule decides; the block classification only
has to be conservative: a block holding an allowed pair is never outside [lower, upper), and a
block inside [lower_full, upper_full) holds allowed pairs only. Each block is summarised by three
parts (its first run of equal segment ids, its last run, and whatever lies between) with the
range of segment ids and positions of each; two blocks may interact only if some pair of parts
has overlapping segment ranges and a query position at or after a key position. With one or two
documents per block (the usual case) the test is exact; with more it is conservative.

Segment ids are first relabelled by where they first appear in the row (`relabel_by_appearance`):
equality is all the rule reads, and after relabelling the ids of a block's middle span only the
documents that lie there, whatever labels the data pipeline chose. Without it, shuffled or large
ids made the middle ranges wide and the mask visited 3x the blocks (a 7.7x slower forward on 220
short documents in 64k tokens).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from kvax._src.attention import lexsort, runs
from kvax._src.attention.variant import MaskVariant
from kvax._src.config import PADDING_SEGMENT_ID, FlashAttentionParamsConfig

_INT_MAX = np.iinfo(np.int32).max
_INT_MIN = np.iinfo(np.int32).min
_ROW_CHUNK_ELEMS = 1 << 18  # block-pair tests held at once per batch row


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True, eq=False)
class AttentionMask:
    """Block mask of one kernel (a JAX pytree: pass it through jit, scan, shard_map).

    Arrays are [B, R] int32, R the number of row blocks. `kind` is "fwd", "dq" or "dkdv"; rows are
    query blocks for fwd and dq, key blocks for dkdv. `query_len`/`kv_len` are the sequence lengths
    the mask was built for, `row_block`/`col_block` its block sizes.
    """

    lower_bounds: jax.Array
    upper_bounds: jax.Array
    lower_full_bounds: jax.Array
    upper_full_bounds: jax.Array
    kind: str
    row_block: int
    col_block: int
    query_len: int
    kv_len: int
    params: FlashAttentionParamsConfig
    skip_pad_tokens: bool = True
    variant: MaskVariant = MaskVariant()  # causality and window the mask was built for
    # forward masks of causal documents (T == S): query chunks from each document's first token
    # for the Hopper forward (runs.doc_runs), [B, M, 4] int32; None elsewhere
    doc_runs: jax.Array | None = None
    # on a Hopper GPU (wants_schedule), forward masks whose blocks take the Hopper forward's
    # default tiles: its tables and its copies of the layout (mosaic_fwd.Schedule, a pytree of
    # [B, ...] arrays), built here once; None elsewhere
    schedule: object | None = None

    def tree_flatten(self):
        children = (self.lower_bounds, self.upper_bounds, self.lower_full_bounds,
                    self.upper_full_bounds, self.doc_runs, self.schedule)
        aux = (self.kind, self.row_block, self.col_block, self.query_len, self.kv_len,
               self.params, self.skip_pad_tokens, self.variant)
        return children, aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        *bounds, doc_runs, schedule = children
        return cls(*bounds, *aux, doc_runs=doc_runs, schedule=schedule)

    def flatten(self) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """The four bound arrays, in the original Kvax order."""
        return self.tree_flatten()[0][:4]

    @property
    def num_col_blocks(self) -> int:
        col_len = self.query_len if self.kind == "dkdv" else self.kv_len
        return -(-col_len // self.col_block)

    def block_classes(self, batch_index: int = 0) -> np.ndarray:
        """[R, C] uint8 picture of one batch row: 0 skipped, 1 element-masked, 2 fully visible."""
        lo, hi, lf, uf = (np.asarray(a)[batch_index] for a in self.flatten())
        cols = np.arange(self.num_col_blocks)[None, :]
        visited = (cols >= lo[:, None]) & (cols < hi[:, None])
        full = (cols >= lf[:, None]) & (cols < uf[:, None])
        return (visited.astype(np.uint8) + (visited & full)).astype(np.uint8)

    def format(self, batch_index: int = 0, max_rows: int = 32, max_cols: int = 64) -> str:
        """A text picture: '█' fully visible, '░' element-masked, ' ' skipped (cells averaged
        when the mask is larger than max_rows x max_cols)."""
        classes = self.block_classes(batch_index).astype(np.float32)
        rows, cols = classes.shape
        rs, cs = max(1, -(-rows // max_rows)), max(1, -(-cols // max_cols))
        pr, pc = (-rows) % rs, (-cols) % cs
        pooled = np.pad(classes, ((0, pr), (0, pc))).reshape(
            (rows + pr) // rs, rs, (cols + pc) // cs, cs).max(axis=(1, 3))
        glyph = {0: "  ", 1: "░░", 2: "██"}
        lines = ["".join(glyph[int(c)] for c in row) for row in pooled]
        border = "  " + "==" * pooled.shape[1]
        visited = int(np.count_nonzero(classes))
        head = (f"{self.kind} mask, batch row {batch_index}: {rows}x{cols} blocks of "
                f"{self.row_block}x{self.col_block}, {visited} visited "
                f"({int(np.count_nonzero(classes == 2))} fully visible), "
                f"{visited / max(rows * cols, 1):.1%} of all")
        legend = ("rows: " + ("key" if self.kind == "dkdv" else "query") + " blocks, columns: "
                  + ("query" if self.kind == "dkdv" else "key") + " blocks; '██' fully visible "
                  "(no element mask), '░░' visited with the element mask, ' ' skipped")
        return "\n".join([head, legend, border, *("||" + ln + "||" for ln in lines), border])

    def __repr__(self) -> str:
        shape = tuple(getattr(self.lower_bounds, "shape", ()))
        return (f"AttentionMask(kind={self.kind!r}, bounds={shape}, blocks={self.row_block}x"
                f"{self.col_block}, query_len={self.query_len}, kv_len={self.kv_len}, "
                f"skip_pad_tokens={self.skip_pad_tokens})")


def _pad_to(x: jax.Array, length: int, value: int) -> jax.Array:
    return jnp.pad(x, ((0, 0), (0, length - x.shape[1])), constant_values=value)


def relabel_by_appearance(query_segment_ids: jax.Array, kv_segment_ids: jax.Array):
    """Replace each row's segment ids by the index where the id first appears in that row (kv
    tokens first, then queries: an id seen only among the queries gets S + its query index).

    Equal ids stay equal, different ids stay different, padding stays PADDING_SEGMENT_ID (new
    labels are >= 0), so the element rule is unchanged; labels grow along the row for contiguous
    documents, so block summaries are as tight as with ids numbered 0, 1, 2, .... Int32 [B, T] and
    [B, S] in, the same out. One stable sort per row (lexsort.row_order)."""
    s_len = kv_segment_ids.shape[1]
    both = jnp.concatenate([kv_segment_ids, query_segment_ids], axis=1)  # [B, S + T]
    length = both.shape[1]
    order = lexsort.row_order(both)  # by id, ties by index: the first index leads
    ids = jnp.take_along_axis(both, order, axis=1)
    idx = jnp.arange(length, dtype=jnp.int32)
    starts = jnp.concatenate([jnp.ones_like(ids[:, :1], bool), ids[:, 1:] != ids[:, :-1]], axis=1)
    group_start = jax.lax.cummax(jnp.where(starts, idx, 0), axis=1)  # in sorted order
    first = jnp.take_along_axis(order, group_start, axis=1).astype(jnp.int32)
    labels = jax.vmap(lambda o, f: jnp.zeros(length, jnp.int32).at[o].set(f))(order, first)
    labels = jnp.where(both == PADDING_SEGMENT_ID, PADDING_SEGMENT_ID, labels)
    return labels[:, s_len:], labels[:, :s_len]


def _summaries(pos: jax.Array, seg: jax.Array, block: int, skip_pad: bool) -> dict:
    """Per block three parts (first run, middle, last run): fields [B, nb, 3], and uniformity."""
    b, length = seg.shape
    nb = -(-length // block)
    seg = _pad_to(seg, nb * block, PADDING_SEGMENT_ID).reshape(b, nb, block)
    pos = _pad_to(pos, nb * block, 0).reshape(b, nb, block)
    real = seg != PADDING_SEGMENT_ID
    counted = real if skip_pad else jnp.ones_like(real)
    first = jnp.cumprod(seg == seg[..., :1], axis=-1).astype(bool)
    last = jnp.flip(jnp.cumprod(jnp.flip(seg == seg[..., -1:], -1), axis=-1), -1).astype(bool)
    middle = ~first & ~last
    member = jnp.stack([first, middle, last], axis=-2) & counted[..., None, :]  # [B, nb, 3, blk]
    seg3, pos3 = seg[..., None, :], pos[..., None, :]
    return dict(
        has=jnp.any(member, -1),
        seg_lo=jnp.min(jnp.where(member, seg3, _INT_MAX), -1),
        seg_hi=jnp.max(jnp.where(member, seg3, _INT_MIN), -1),
        pos_lo=jnp.min(jnp.where(member, pos3, _INT_MAX), -1),
        pos_hi=jnp.max(jnp.where(member, pos3, _INT_MIN), -1),
        uniform=jnp.all(first & real, -1),  # one real document fills the block
    )


def _diffs_allowed(q_lo, q_hi, k_lo, k_hi, variant: MaskVariant, *, every: bool):
    """Query-minus-key differences range over [q_lo - k_hi, q_hi - k_lo]. every=False: some of
    them may be allowed (conservative, for visiting); every=True: all are (exact, for full)."""
    low, high = variant.diff_bounds
    smallest = (q_lo, k_hi) if every else (q_hi, k_lo)  # the difference held against low
    largest = (q_hi, k_lo) if every else (q_lo, k_hi)  # the difference held against high
    ok = jnp.ones(jnp.broadcast_shapes(q_lo.shape, k_lo.shape), bool)
    if low is not None:  # written as q >= k + low: no int32 overflow within the limits
        ok = ok & (smallest[0] >= smallest[1] + low)
    if high is not None:
        ok = ok & (largest[0] <= largest[1] + high)
    return ok


def _visible(q: dict, k: dict, variant: MaskVariant) -> tuple[jax.Array, jax.Array]:
    """Block-pair tests; q and k fields broadcast against each other ([X, 3] each).

    any: some allowed pair may exist (conservative); full: every pair is allowed (exact).
    """
    qa = {n: v[..., :, None] for n, v in q.items() if n != "uniform"}  # [X, 3, 1]
    kc = {n: v[..., None, :] for n, v in k.items() if n != "uniform"}  # [X, 1, 3]
    pair = (qa["has"] & kc["has"] & (qa["seg_lo"] <= kc["seg_hi"])
            & (kc["seg_lo"] <= qa["seg_hi"])
            & _diffs_allowed(qa["pos_lo"], qa["pos_hi"], kc["pos_lo"], kc["pos_hi"], variant,
                             every=False))
    any_ = jnp.any(pair, axis=(-2, -1))
    first = lambda d, n: d[n][..., 0]  # noqa: E731  (uniform blocks: the first part is all)
    full = (q["uniform"] & k["uniform"] & (first(q, "seg_lo") == first(k, "seg_lo"))
            & _diffs_allowed(first(q, "pos_lo"), first(q, "pos_hi"), first(k, "pos_lo"),
                             first(k, "pos_hi"), variant, every=True))
    return any_, full & any_


def _row_bounds(any_: jax.Array, full: jax.Array) -> jax.Array:
    """[C] bools -> (lower, upper, lower_full, upper_full); the full range is the longest run."""
    c = any_.shape[-1]
    idx = jnp.arange(c, dtype=jnp.int32)
    has = jnp.any(any_)
    lower = jnp.where(has, jnp.argmax(any_), 0).astype(jnp.int32)
    upper = jnp.where(has, c - jnp.argmax(any_[::-1]), 0).astype(jnp.int32)
    breaks = jax.lax.cummax(jnp.where(full, -1, idx), axis=0)
    run = jnp.where(full, idx - breaks, 0)
    end = jnp.argmax(run).astype(jnp.int32)
    best = run[end]
    upper_full = jnp.where(best > 0, end + 1, lower)
    lower_full = jnp.where(best > 0, end + 1 - best, lower)
    return jnp.stack([lower, upper, lower_full, upper_full])


def _bounds_one_batch_row(rows: dict, cols: dict, rows_are_queries: bool,
                          variant: MaskVariant) -> jax.Array:
    """rows fields [R, 3], cols fields [C, 3] -> [4, R] bounds."""
    num_cols = cols["has"].shape[0]

    def one_row(row):
        row = {n: v[None] for n, v in row.items()}
        any_, full = (_visible(row, cols, variant) if rows_are_queries
                      else _visible(cols, row, variant))
        return _row_bounds(any_, full)

    chunk = max(1, _ROW_CHUNK_ELEMS // max(num_cols, 1))
    return jax.lax.map(one_row, rows, batch_size=chunk).T  # [4, R]


def block_mask(
    query_positions: jax.Array,
    query_segment_ids: jax.Array,
    kv_positions: jax.Array,
    kv_segment_ids: jax.Array,
    *,
    kind: str,
    query_block: int,
    kv_block: int,
    params: FlashAttentionParamsConfig,
    skip_pad_tokens: bool = True,
    variant: MaskVariant = MaskVariant(),
) -> AttentionMask:
    """Build one block mask. For kind "dkdv" rows are key blocks and columns query blocks.
    Segment ids are expected relabelled (build_masks does it once for the three masks)."""
    q_sum = _summaries(query_positions, query_segment_ids, query_block, skip_pad_tokens)
    k_sum = _summaries(kv_positions, kv_segment_ids, kv_block, skip_pad_tokens)
    rows_are_queries = kind != "dkdv"
    rows, cols = (q_sum, k_sum) if rows_are_queries else (k_sum, q_sum)
    bounds = jax.vmap(lambda r, c: _bounds_one_batch_row(r, c, rows_are_queries, variant))(
        rows, cols)
    row_block, col_block = (query_block, kv_block) if rows_are_queries else (kv_block, query_block)
    return AttentionMask(
        bounds[:, 0], bounds[:, 1], bounds[:, 2], bounds[:, 3],
        kind=kind, row_block=row_block, col_block=col_block,
        query_len=query_positions.shape[1], kv_len=kv_positions.shape[1],
        params=params, skip_pad_tokens=skip_pad_tokens, variant=variant,
    )


def wants_schedule() -> bool:
    """Whether create_attention_mask builds the Hopper forward's tables into the forward mask
    (mosaic_fwd.Schedule): where that forward runs, JAX's default device being a Hopper GPU.
    Elsewhere nothing reads them, and they add about 0.3 s to each new mask's compile (CPU)."""
    from kvax._src.config import current_device_kind, is_hopper

    return jax.default_backend() == "gpu" and is_hopper(current_device_kind())


def build_masks(
    query_positions, query_segment_ids, kv_positions, kv_segment_ids, *,
    fwd_params: FlashAttentionParamsConfig, bwd_params: FlashAttentionParamsConfig | None,
    skip_pad_tokens: bool, variant: MaskVariant = MaskVariant(), schedule: bool = False,
) -> tuple[AttentionMask, ...]:
    """(fwd,) or (fwd, dq, dkdv) masks for already validated int32 inputs; with schedule, the
    forward mask carries the Hopper forward's tables and its copies of this layout where its
    blocks take them."""
    given = (query_positions, query_segment_ids, kv_positions, kv_segment_ids)
    query_segment_ids, kv_segment_ids = relabel_by_appearance(query_segment_ids, kv_segment_ids)
    args = (query_positions, query_segment_ids, kv_positions, kv_segment_ids)

    def apart(i):
        """args behind a barrier of their own per mask, so that XLA cannot merge the masks'
        sibling reductions into one multi-output fusion: on a GPU its LLVM module took 2.3 s
        to compile, 0.7 s apart, with the masks as fast (docs/bench/h200-2026-11-29-mosaic-
        cache)."""
        return jax.lax.optimization_barrier((args, jnp.int32(i)))[0]

    fwd = block_mask(*apart(0), kind="fwd", query_block=fwd_params.query_block_size,
                     kv_block=fwd_params.kv_block_size, params=fwd_params,
                     skip_pad_tokens=skip_pad_tokens, variant=variant)
    if variant == MaskVariant() and query_positions.shape == kv_positions.shape:
        fwd = dataclasses.replace(fwd, doc_runs=runs.doc_runs(*apart(3)))
    if schedule:
        from kvax._src.attention import mosaic_fwd  # (it imports this module)

        fwd = dataclasses.replace(fwd, schedule=mosaic_fwd.schedule(
            fwd, *given, pad_id=PADDING_SEGMENT_ID))
    masks = [fwd]
    if bwd_params is not None:
        dq_q, dq_k = bwd_params.dq_blocks
        masks.append(block_mask(*apart(1), kind="dq", query_block=dq_q, kv_block=dq_k,
                                params=bwd_params, skip_pad_tokens=skip_pad_tokens,
                                variant=variant))
        masks.append(block_mask(*apart(2), kind="dkdv", query_block=bwd_params.query_block_size,
                                kv_block=bwd_params.kv_block_size, params=bwd_params,
                                skip_pad_tokens=skip_pad_tokens, variant=variant))
    return tuple(masks)
