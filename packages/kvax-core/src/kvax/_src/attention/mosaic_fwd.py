"""Hopper forward in Pallas Mosaic GPU, driven by our block mask (experimental).

One program per (query head, block of 2 x block_q query rows, batch row), three warpgroups: a
producer that streams the program's key/value tiles into a ring of shared-memory slots by TMA,
and two consumers, each owning block_q query rows, that take turns on the tensor cores (one runs
its softmax while the other's QK^T or PV is in flight; the schedule barrier orders them). Each
program reads its rows, key tiles and fully visible tiles from one table (`programs`): the block
mask's row-aligned tiles, or on rows of contiguous causal documents the documents' chunks
(runs.py: 128 rows from each document's start, its keys from there; a chunk stores only its own
document's rows, whole 8-row groups by TMA and the partial ones row by row from a plain copy of
O; the logsumexp goes to a slot per program, gathered into token order after the kernel; on an
H100 4% faster on log-normal documents, docs/bench/h100-2026-11-24-doc-chunks). On a Hopper GPU
a mask whose blocks take the default tiles carries these tables (Schedule: the programs, the
persistent work list, the logsumexp's slots), built once by create_attention_mask; elsewhere
each call builds them (about eight small kernels before its own on a GPU). Tiles in the
fully visible range skip the element mask; the others apply the document/causal/window rule,
read from global memory in the accumulator's column layout before the tile's QK^T is issued (the
loads fly during it). Where the mask's schedule brings its layouts (MosaicConfig.rank_rule, by
default) the rule is one test on key ranks: each key's place in the keys ordered by (segment
id, position), against each row's interval of visible ranks (rank_layouts,
MaskVariant.intervals): one value loaded per key and two compares an element, for any ids and
positions. On an H200 that made the forward 8-13% faster on short documents and left the other
rows level (docs/bench/h200-2026-11-28-rank-rule). Elsewhere (layouts built in the call: packed
heads, key splits, head dim 256, other blocks) the rule reads the keys' positions and segment
ids, so that a call does not pay for the ranks' sort.
Consumers get most registers, the producer few. The softmax takes its row maxima on the raw
products (or their tanh, soft-capped float16 or caps over 55), so each exponent is one FMA; a
negative scale flips the consumer's Q tile once instead. Soft-capped bfloat16 logits (caps up to
55) take no maxima (MosaicConfig.fixed_reference, by default since session 57): every weight is
exp2(logit - m) against blockwise.capped_reference's fixed m, as the Triton forward's float32,
with no rescaling; on an H200 the cap then cost 0.8-3.2% forward against 9-13% with the maxima
(docs/bench/h200-2026-11-30-fixed-reference, h200x2-2026-11-30-fixed-default). No weight is then
exactly 1, so a row that sees one key would get its value times bf16(p) / p: masked tiles keep
each row's largest weight, and a row whose sum is that weight is divided by it rounded as P was.
`MosaicConfig(overlap=True)` (not the default: on an H100 level with it on 8 documents and one
causal document, 3% slower on log-normal ones; it keeps the maxima) issues each tile's QK^T
together with the previous tile's PV and runs the tile's softmax while that PV is in flight,
FA3's order inside a warpgroup; there the consumers pass a turn to issue their products (one
barrier each) instead of meeting twice a step, so their softmaxes may overlap.

`MosaicConfig.persistent` (choose_config's default where a program holds one query head and no key
splits, up to head dim 128): one program per SM takes the programs that store rows in turns
(persistent_work, every other round from the other end). The key/value ring goes on from one
program to the next, so the producer loads the next one's first tiles while the consumers finish
the current one. Each consumer has two Q tiles, the next program's loaded at the start of the
current one once the last program's stores have read that buffer, and the chunks' partial stores
go out of the program's own Q buffer viewed untiled. Each program's fixed cost (about 3 us on an
H100: its table entry, Q's load, O's store) then hides behind work. Call by call beside the grid,
it is 3% faster on log-normal documents, 10% on short ones, 1.5% on 8 documents and level on one
causal document (docs/bench/h100-2026-11-25-persistent). The consumers load each program's work
code and table entries one to three rounds before it runs, the logits' factor once, and the
rows' layout before the prologue's waits: a program's cycles outside its loop fell from about
2850 to 2250 on short documents (docs/bench/h200-2026-11-28-prefetch). ptxas still copies each
loaded value into the round loop's carried registers right after its load, and the copy waits
for it (about 400 cycles a program: docs/bench/h200-2026-11-28-prologue).

`MosaicConfig.pack` > 1 (FA3's PackGQA) puts that many query heads of one kv group in a program:
each consumer's 64 rows are 64 / pack tokens of each head (Q and O by one TMA copy per head, the
rows' positions and ids gathered per program before the kernel), so a program spans 128 / pack
tokens and its heads share every K/V tile; the document chunks are split into programs of that
many tokens. Chosen for fewer queries than a program's rows (decoding, chunked prefill: 1.6-1.8x
at up to 64 queries on an H100); on training-length rows it computes fewer pairs but is not
faster (docs/bench/h100-2026-11-25-packed-heads).

`MosaicConfig.splits` > 1 (FA3's split-KV, flash-decoding) cuts each program's key tiles into
that many runs, one program each, when a call has too few programs to fill the GPU (decoding, a
few queries against long keys, batch 1). Each stores its output, normalised over its own keys, and
logsumexp in a slot of its own; combine_splits weighs them together after the kernel (a split
that saw no key has logsumexp -inf and weight 0). Its outputs are rounded to the input dtype
before they are combined. Splits take the row-aligned tiles, never the document chunks, and
no sinks.

Q, K and V are not copied to whole tiles: a tile past the end of the tokens comes in by TMA as zeros
and the output tile's rows past the end are not stored (TMA skips out-of-bounds rows); only lengths
that are not a multiple of 8 (the shared-memory tiling's rows) get padded copies. The small
position/segment-id layout is padded, with the padding segment id, so the rule hides those rows. V's
padding rows must be 0 where a product reads them (P = 0 times NaN is NaN): a tile that holds
padding is never fully visible, so only the masked steps read a flag per tile (padding_windows) and,
in the rare tiles that hold some, both consumers zero those rows in shared memory before their PV
(the overlapped order zeroes them in a copy first); NaN in Q's or K's padding only reaches logits
the rule replaces. The residuals follow backends.py: the logsumexp in natural log, -inf on rows with
nothing to attend. The phases are named (jax.named_scope: prologue with q_wait, first_key,
store_read and meet, loop, epilogue, store_wait, producer) for Mosaic GPU's on-device profiler,
tools/dev/profile_timeline.py; without the profiler the names cost nothing.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from kvax._src.attention import prewarm, runs
from kvax._src.attention.blockwise import LOG2E, capped_reference
from kvax._src.attention.mask import AttentionMask
from kvax._src.attention.variant import MaskVariant

# rows of a tiled shared-memory tile: token lengths the tiled TMA copies take without a padded
# copy, and the rows they start on, are multiples of this
TMA_ROWS = runs.ALIGN
# the persistent forward's largest head dim: two Q tiles per consumer fit beside two 128-key
# stages in shared memory up to this
PERSISTENT_HEAD_DIM = 128


@dataclasses.dataclass(frozen=True)
class MosaicConfig:
    block_q: int = 64  # query rows per consumer warpgroup; a program holds two
    block_kv: int = 128
    stages: int = 2  # key/value tiles in flight
    layout_by_tma: bool = False  # tiles' ids/positions by TMA into shared memory, not loads
    overlap: bool = False  # a tile's softmax under the previous tile's PV (FA3's order)
    pack: int = 1  # query heads of one kv head per program (FA3's PackGQA), sharing its tiles
    splits: int = 1  # programs per row block, each with a share of its key tiles (split-KV)
    persistent: bool = False  # one program per SM takes the programs in turns
    # masked tiles test each key's rank against the rows' intervals (rank_layouts) instead of
    # positions and ids; None: where the mask's Schedule carries those layouts
    rank_rule: bool | None = None
    # soft-capped bfloat16 without row maxima, as the Triton forward's float32 (fixed_weights);
    # rows whose weight is one key's are divided by that weight rounded as P is, so that they
    # return its value exactly. False: running row maxima (the default before session 57)
    fixed_reference: bool = True

    @property
    def rows(self) -> int:
        return 2 * self.block_q

    @property
    def tokens(self) -> int:
        """Query tokens per program: its rows are `pack` heads of these tokens."""
        return self.rows // self.pack


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def pad_tokens(x, length: int, value):
    """x [B, L, ...] padded with value to length along the tokens."""
    extra = length - x.shape[1]
    if extra == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[1] = (0, extra)
    return jnp.pad(x, widths, constant_values=value)


def choose_config(mask: AttentionMask, head_dim: int, group: int = 1, sinks: bool = False,
                  queries: int | None = None, *, batch: int | None = None,
                  heads: int | None = None, keys: int | None = None) -> MosaicConfig:
    """Tiles for this mask and head dim (measured on an H100, docs/bench/h100-2026-11-23-mosaic):
    128-key tiles and two stages where shared memory allows, 64-key tiles otherwise. With fewer
    queries than a program's rows and `group` query heads per kv head, pack_heads of them share
    a program (no sinks). Given the batch, query heads and keys too, with fewer queries than
    keys (decoding, chunked prefill), split_count splits the keys where the programs are too
    few for the GPU (no sinks). The rest run persistent up to head dim 128 (on an H100 3% faster
    on log-normal documents, 10% on short ones, 1.5% on 8 documents, level on one causal
    document: docs/bench/h100-2026-11-25-persistent)."""
    block_kv = 128 if head_dim <= 128 and mask.col_block % 128 == 0 else 64
    config = MosaicConfig(block_q=64, block_kv=block_kv, stages=2)
    if queries is not None and queries < config.rows and not sinks:
        config = dataclasses.replace(config, pack=pack_heads(group))
    if None not in (queries, batch, heads, keys) and queries < keys and not sinks:
        programs = batch * (heads // config.pack) * -(-queries // config.tokens)
        config = dataclasses.replace(
            config, splits=split_count(programs, -(-keys // block_kv), device_sms()))
    if config.pack == 1 and config.splits == 1 and head_dim <= PERSISTENT_HEAD_DIM:
        config = dataclasses.replace(config, persistent=True)
    return config


# split_count's least key tiles per split: shorter runs spend more on each program's fixed cost
# and on the combination than they gain
MIN_SPLIT_TILES = 4


def split_count(programs: int, key_tiles: int, sms: int) -> int:
    """Key splits per program (MosaicConfig.splits) for `programs` programs of up to `key_tiles`
    key tiles each on `sms` SMs: none where the programs fill them; else as many as fit in one
    wave of the SMs, each with at least MIN_SPLIT_TILES tiles."""
    if programs >= sms:
        return 1
    return max(1, min(sms // programs, key_tiles // MIN_SPLIT_TILES))


def device_sms() -> int:
    """The default device's SM count (132 on an H100 SXM or an H200) where it reports one."""
    return getattr(jax.devices()[0], "core_count", None) or 132


def pack_heads(group: int, block_q: int = 64) -> int:
    """How many query heads of a kv group share a program: the largest power of two up to 8
    that divides the group (each consumer then holds block_q / pack tokens of each head, a
    whole number of 8-row groups, as TMA copies into tiled shared memory need)."""
    pack = 8
    while group % pack or block_q // pack < TMA_ROWS:
        pack //= 2
    return pack


def supported(mask_blocks: tuple[int, int]) -> str | None:
    """Why masks of these (row, column) blocks cannot drive the kernel, or None."""
    rows, cols = mask_blocks
    if rows % MosaicConfig().rows or cols % 64:
        return (f"the Mosaic forward needs mask blocks that are multiples of "
                f"{MosaicConfig().rows}x64, got {rows}x{cols}")
    return None


def for_tma(x):
    """x [B, L, ...] with its tokens padded by zeros to a multiple of TMA_ROWS (x itself when L
    is one already): what the kernels' TMA copies take."""
    return pad_tokens(x, round_up(x.shape[1], TMA_ROWS), 0)


def tiled_layout(pos, seg, length: int, pad_id: int):
    """[B, 2, length] int32 for the kernels: positions (0 past the end) and segment ids (pad_id
    past the end, so the element rule hides the tiles' padding)."""
    return jnp.stack([pad_tokens(pos, length, 0), pad_tokens(seg, length, pad_id)], 1)


def padding_windows(seg, pad_id: int, length: int, size: int):
    """[B, length / TMA_ROWS] int32 for the kernels: 1 where tokens [8j, 8j + size) hold
    padding (seg == pad_id), 0 elsewhere and past the tokens (TMA reads zeros there). One
    windowed maximum (a single small kernel on a GPU; a cumulative sum took three)."""
    pad = pad_tokens((seg == pad_id).astype(jnp.int32), length, 0)
    return lax.reduce_window(pad, 0, lax.max, (1, size), (1, TMA_ROWS),
                             ((0, 0), (0, size - TMA_ROWS)))


def zero_padding_rows(tile_ref, seg_r, pad_id: int):
    """Inside a consumer: a shared-memory tile's padding rows (seg_r: the rows' segment ids in
    the row layout) set to 0. Both consumers may zero one tile at once: they write the same
    values."""
    import jax.experimental.pallas.mosaic_gpu as plgpu

    x = plgpu.load(tile_ref, layout=plgpu.Layout.WGMMA)
    live = lax.broadcast_in_dim(seg_r != pad_id, x.shape, [0])
    tile_ref[...] = jnp.where(live, x, jnp.zeros((), x.dtype))
    plgpu.commit_smem()


def load_layout(lay_ref, batch, start, size: int, layout, rows=(0, 1)):
    """Inside a kernel: rows `rows` of tokens [start, start + size) of a layout array (a
    tiled_layout's: positions, segment ids), by global loads into registers of the given
    layout."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    return tuple(plgpu.load(lay_ref.at[batch, row, pl.ds(start, size)], layout=layout,
                            optimized=False) for row in rows)


def rank_layouts(q_pos, q_seg, kv_pos, kv_seg, q_len: int, kv_len: int, *, pad_id: int,
                 variant: MaskVariant):
    """([B, 3, q_len], [B, 2, kv_len]) int32 for MosaicConfig.rank_rule: each query's interval
    (lo, hi) of visible key ranks and its segment id, each key's rank and segment id
    (MaskVariant.intervals); past the tokens the queries' intervals are empty (0, -1) and the
    keys' ranks -1, so the rule hides them, and their ids are padding."""
    rank, lo, hi = variant.intervals(q_pos, q_seg, kv_pos, kv_seg, pad_id)
    q_lay = jnp.stack([pad_tokens(lo, q_len, 0), pad_tokens(hi, q_len, -1),
                       pad_tokens(q_seg, q_len, pad_id)], 1)
    k_lay = jnp.stack([pad_tokens(rank, kv_len, -1), pad_tokens(kv_seg, kv_len, pad_id)], 1)
    return q_lay, k_lay


def in_intervals(rank, lo, hi):
    """The rank rule on arrays broadcast to a tile (rank_layouts'): a key of rank `rank` is
    visible to a row whose interval is (lo, hi) iff lo <= rank <= hi. Keys past the tokens have
    rank -1 and padding keys the padding id's ranks, outside every real row's interval; padding
    rows and rows past the tokens have the empty interval (0, -1)."""
    return (rank >= lo) & (rank <= hi)


def mask_bounds(mask: AttentionMask):
    """The block mask's four bounds per row as one [B, R, 4] int32 array (read by
    block_bounds)."""
    return jnp.stack(mask.flatten(), axis=-1).astype(jnp.int32)


def fixed_weights(config: MosaicConfig, logits_soft_cap: float | None, dtype) -> float | None:
    """MosaicConfig.fixed_reference's row reference (blockwise.capped_reference's, log2 units),
    or None where the softmax keeps its row maxima: soft-capped bfloat16 only (float16 cannot
    hold weights up to 2^(f - m)), not with overlap."""
    if not config.fixed_reference or config.overlap or jnp.dtype(dtype) != jnp.bfloat16:
        return None
    return capped_reference(logits_soft_cap, jnp.float32)


def logit_factor(scale, logits_soft_cap: float | None):
    """What the raw product S is multiplied by in the kernels: scale * LOG2E (logits in log2
    units), or with a soft cap c, scale / c (the kernels then take tanh(.) * c * LOG2E)."""
    return jnp.asarray(scale, jnp.float32) * (LOG2E if logits_soft_cap is None
                                              else 1.0 / logits_soft_cap)


def ordered_bounds(bound):
    """(lower, upper, lower_full, upper_full) ordered lower <= lower_full <= upper_full <= upper,
    from bound(i): the block mask's i-th bound in kernel tiles, clipped to the tiles that exist
    (one row's scalars inside a kernel, block_bounds, or whole arrays, tile_bounds)."""
    lo, hi = bound(0), bound(1)
    hi = jnp.maximum(hi, lo)
    lf = jnp.clip(bound(2), lo, hi)
    uf = jnp.clip(bound(3), lf, hi)
    return lo, hi, lf, uf


def masked_full_masked(lo, lf, uf, hi, masked_step, full_step, carry):
    """Inside a kernel: steps [lo, lf) and [uf, hi) by masked_step(i, carry), [lf, uf) by
    full_step, in that order (lo <= lf <= uf <= hi), with each step's code emitted once: two
    rounds, each a masked range and then (the first round only) the full one. Three loops in a
    row emit the masked step twice, and a step is most of a kernel's code: the forward compiled
    in about 2.5 s so (Mosaic GPU's LLVM and ptxas, inside XLA's compile, on an H100) and in
    about 2.0 s this way, at the same speed (docs/bench/h100-2026-11-27-compile)."""

    return lax.fori_loop(0, 2, lambda r, carry: masked_then_full(
        r == 0, lo, lf, uf, hi, masked_step, full_step, carry), carry)


def masked_then_full(first, lo, lf, uf, hi, masked_step, full_step, carry):
    """One round of masked_full_masked: [lo, lf) masked and [lf, uf) full where first, else
    [uf, hi) masked."""
    carry = lax.fori_loop(jnp.where(first, lo, uf), jnp.where(first, lf, hi), masked_step, carry)
    return lax.fori_loop(lf, jnp.where(first, uf, lf), full_step, carry)


def block_bounds(bounds_ref, batch, row, col_ratio: int, num_tiles: int):
    """Inside a kernel: one block-mask row's (lower, upper, lower_full, upper_full) in kernel
    tiles (col_ratio per mask block), ordered_bounds of them."""
    last = jnp.int32(num_tiles)
    return ordered_bounds(lambda i: jnp.minimum(bounds_ref[batch, row, i] * col_ratio, last))


def tile_bounds(bounds, num_rows: int, row_ratio: int, col_ratio: int, num_tiles: int):
    """Outside a kernel: the block mask's bounds (mask_bounds, [B, R, 4]) for each of num_rows
    kernel tiles along the rows (row_ratio per mask block), in kernel tiles along the columns
    (col_ratio per mask block, clipped to num_tiles): ordered_bounds of them, each [B, num_rows].
    The arrays block_bounds reads one row of inside the kernel."""
    bounds = bounds[:, jnp.arange(num_rows) // row_ratio]
    return ordered_bounds(lambda i: jnp.minimum(bounds[..., i] * col_ratio, num_tiles))


def programs(mask: AttentionMask, config: MosaicConfig, t: int, s_len: int, doc_runs=None):
    """[B, P, 7] int32, one row per program: (first row / 8, start and end of the rows it
    stores, first key / 8, key tiles, first and end of its fully visible tiles), its tokens
    being [first, first + config.tokens) (config.pack heads of each) and its key tiles
    config.block_kv keys each from the first key on (both multiples of 8, as TMA copies into
    tiled shared memory need; passed over 8 so that the kernel's layout inference sees it).
    Row-aligned tiles from the block mask (program m: tokens [m x tokens, ...), its mask row's
    bounds), or where doc_runs marks a batch row exact, that row's document chunks (runs.py: the
    chunk's document from its start, every tile between the first and the diagonal one full;
    with pack > 1 each chunk of runs.CHUNK tokens is split into programs of config.tokens).
    Programs past a row's last store nothing and return at once."""
    tokens, block_kv = config.tokens, config.block_kv
    row_ratio, col_ratio = mask.row_block // tokens, mask.col_block // block_kv
    num_q_tiles, num_kv_tiles = -(-t // tokens), -(-s_len // block_kv)
    lo, hi, lf, uf = tile_bounds(mask_bounds(mask), num_q_tiles, row_ratio, col_ratio,
                                 num_kv_tiles)
    m = jnp.broadcast_to(jnp.arange(num_q_tiles, dtype=jnp.int32), lo.shape)
    tiles = jnp.stack([m * (tokens // TMA_ROWS), m * tokens, (m + 1) * tokens,
                       lo * (block_kv // TMA_ROWS), hi - lo, lf - lo, uf - lo],
                      axis=-1).astype(jnp.int32)
    if doc_runs is None:
        return tiles
    exact = doc_runs[:, :1, 2:3] >= 0
    if config.pack == 1:  # rows of many short documents keep the row-aligned tiles (max_chunks)
        limit = runs.max_chunks(t, 8)
        exact &= jnp.sum(doc_runs[..., 2] > doc_runs[..., 1], axis=1)[:, None, None] <= limit
        doc_runs = doc_runs[:, :limit]
    split = runs.CHUNK // tokens  # programs per chunk
    count = doc_runs.shape[1] * split
    tiles = jnp.pad(tiles, ((0, 0), (0, count - num_q_tiles), (0, 0)))  # these store nothing
    first, own_start, own_end, doc_start = (
        jnp.repeat(doc_runs[..., i], split, axis=1) for i in range(4))
    first = first + jnp.tile(jnp.arange(split, dtype=jnp.int32) * tokens, doc_runs.shape[1])
    own_start = jnp.maximum(own_start, first)
    own_end = jnp.minimum(own_end, first + tokens)
    own_start, own_end = (jnp.where(own_end > own_start, x, 0) for x in (own_start, own_end))
    attends = doc_start >= 0
    base = jnp.maximum(doc_start, 0) - jnp.maximum(doc_start, 0) % TMA_ROWS  # its first key
    before = jnp.where(attends, (first - base) // block_kv, 0)  # tiles before the first row
    # the first key tile holds the previous document's last keys where the document starts
    # inside an 8-row group (for the first chunk that tile is the diagonal one)
    inside = (attends & (doc_start % TMA_ROWS != 0) & (before > 0)).astype(jnp.int32)
    steps = jnp.where(attends, -(-(first + tokens - base) // block_kv), 0)
    chunks = jnp.stack([first // TMA_ROWS, own_start, own_end, base // TMA_ROWS, steps, inside,
                        before], axis=-1)
    return jnp.where(exact, chunks, tiles).astype(jnp.int32)


def chunked(mask: AttentionMask, config: MosaicConfig, head_dim: int, variant: MaskVariant):
    """The mask's document chunks (runs.py) where the forward takes them, else None: the plain
    O buffer their partial stores need fits beside 128-key tiles up to head dim 128, and key
    splits store whole tiles only."""
    if (mask.doc_runs is None or config.rows != runs.CHUNK or head_dim > 128
            or variant != MaskVariant() or config.splits > 1):
        return None
    return mask.doc_runs


def persistent_work(items):
    """[B, P] int32 for the persistent forward, read as one list of B x P: the codes
    (work_block) of the row blocks that store anything, in the grid's order (row blocks from the
    last, batch row after batch row), then -1 for the rest; program w takes the (w // heads)-th
    block's head w % heads. items: programs(). A scan and a scatter (a sort took ten kernels on
    a GPU); built with the mask (Schedule), not in each call. [B, P] so that kvax-dist shards it
    like the mask: under shard_map each device builds and reads its own."""
    b, p = items.shape[:2]
    live = (items[..., 2] > items[..., 1])[:, ::-1].reshape(-1)  # [B x row blocks reversed]
    seen = jnp.cumsum(live, dtype=jnp.int32)  # live blocks up to and including each
    index = jnp.arange(b * p, dtype=jnp.int32)
    slot = jnp.where(live, seen - 1, seen[-1] + index - seen)  # a stable partition
    order = jnp.zeros((b * p,), jnp.int32).at[slot].set(jnp.where(live, index, -1),
                                                         unique_indices=True)
    return order.reshape(b, p)


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True, eq=False)
class Schedule:
    """What the forward's kernel reads besides Q, K and V, for one mask and one tile shape,
    built once with the mask (create_attention_mask, `schedule`) so that each call only reads
    it: the tables and the kernels' copies of the layout. In a model these were built once per
    step anyway (XLA merges or hoists them across layers), but a call that gets its mask as an
    argument built them every time: eight small kernels before its own on a GPU for the tables,
    three for the layout (docs/bench/h200x2-2026-11-27-mask-layouts/). A JAX pytree whose
    arrays lead with [B, rows] (the layouts with [B, 1]: one per query shard), sharded like the
    mask's."""

    items: jax.Array  # programs(): [B, P, 7]
    work: jax.Array  # persistent_work(items): [B, P]
    slots: jax.Array | None  # lse_slots() [B, T] where the document chunks are taken, else None
    # kernel_layouts() of the ids the mask was built from, each with a [B, 1] lead
    layouts: tuple[jax.Array, jax.Array, jax.Array, jax.Array]
    tokens: int  # the programs' rows (MosaicConfig.tokens)
    block_kv: int  # keys per tile (MosaicConfig.block_kv)
    block_q: int  # rows per consumer (MosaicConfig.block_q)
    rank_rule: bool = False  # the layouts are rank_layouts' (MosaicConfig.rank_rule)

    def tree_flatten(self):
        return (self.items, self.work, self.slots, self.layouts), (
            self.tokens, self.block_kv, self.block_q, self.rank_rule)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

    def fits(self, config: MosaicConfig, doc_runs) -> bool:
        """Whether a call with this config (and these document chunks, or None) reads these
        tables and layouts."""
        return (config.tokens == self.tokens and config.block_kv == self.block_kv
                and config.block_q == self.block_q and config.pack == 1
                and config.rank_rule == self.rank_rule
                and (doc_runs is not None) == (self.slots is not None))


def kernel_layouts(q_pos, q_seg, kv_pos, kv_seg, *, pad_id: int, config: MosaicConfig,
                   variant: MaskVariant):
    """(q_lay, k_lay, k_pads, q_pads): the layout as the kernel reads it (tiled_layout, or
    rank_layouts with config.rank_rule), past the tokens by a chunk (a chunk's rows and keys may
    run up to one past them), and the padding windows of each key tile and each consumer's rows
    (padding_windows; the rows' are read when the forward stores Q for the backward)."""
    rows, block_kv = config.rows, config.block_kv
    t_pad, s_pad = round_up(q_pos.shape[1], rows), round_up(kv_pos.shape[1], block_kv)
    if config.rank_rule:
        lays = rank_layouts(q_pos, q_seg, kv_pos, kv_seg, t_pad + rows, s_pad + rows,
                            pad_id=pad_id, variant=variant)
    else:
        lays = (tiled_layout(q_pos, q_seg, t_pad + rows, pad_id),
                tiled_layout(kv_pos, kv_seg, s_pad + rows, pad_id))
    return (*lays,
            padding_windows(kv_seg, pad_id, s_pad + rows, block_kv),
            padding_windows(q_seg, pad_id, t_pad + rows, config.block_q // config.pack))


def schedule(mask: AttentionMask, q_pos, q_seg, kv_pos, kv_seg, *, pad_id: int,
             config: MosaicConfig = MosaicConfig(persistent=True, rank_rule=True)
             ) -> Schedule | None:
    """The Schedule of choose_config's tiles for training-length rows (two consumers of 64 rows,
    128-key tiles: head dims up to 128), or of `config`'s, for a mask and the layout it was
    built from, or None where the mask's blocks do not take them."""
    if (mask.kind != "fwd" or mask.row_block % config.rows or mask.col_block % config.block_kv
            or supported((mask.row_block, mask.col_block))):
        return None
    doc_runs = mask.doc_runs if mask.variant == MaskVariant() else None
    t, s_len = mask.query_len, mask.kv_len
    items = programs(mask, config, t, s_len, doc_runs=doc_runs)
    slots = None if doc_runs is None else lse_slots(items, t, config.tokens)
    config = dataclasses.replace(config, rank_rule=bool(config.rank_rule))
    layouts = tuple(x[:, None] for x in kernel_layouts(q_pos, q_seg, kv_pos, kv_seg,
                                                       pad_id=pad_id, config=config,
                                                       variant=mask.variant))
    return Schedule(items, persistent_work(items), slots, layouts, config.tokens,
                    config.block_kv, config.block_q, config.rank_rule)


def work_block(code, num_items: int):
    """(batch row, row block) of a persistent_work code (in a kernel or outside one)."""
    return lax.div(code, num_items), num_items - 1 - lax.rem(code, num_items)


def split_keys(items, splits: int, block_kv: int):
    """[B, P, 7] program rows (programs()) -> [B, P x splits, 8]: program p's key tiles cut into
    `splits` runs of equal length (the last ones shorter or empty), run j in row p x splits + j
    with its first key, tiles and fully visible range moved to the run, and j appended."""
    first8, own_start, own_end, k08, steps, f_lo, f_hi = (items[..., i:i + 1] for i in range(7))
    j = jnp.arange(splits, dtype=jnp.int32)
    per = -(-steps // splits)
    start = jnp.minimum(per * j, steps)
    count = jnp.minimum(start + per, steps) - start
    lo = jnp.clip(f_lo - start, 0, count)
    hi = jnp.clip(f_hi - start, lo, count)
    shape = start.shape
    cols = [jnp.broadcast_to(x, shape) for x in (first8, own_start, own_end)]
    cols += [k08 + start * (block_kv // TMA_ROWS), count, lo, hi, jnp.broadcast_to(j, shape)]
    out = jnp.stack(cols, axis=-1).astype(jnp.int32)
    return out.reshape(items.shape[0], -1, 8)


def combine_splits(out, lse):
    """The key splits' partial results weighed together: out [S, B, T, N, H] (each split's output
    normalised over its own keys) and lse [S, B, N, T] (natural log, -inf where a split saw no
    key) -> (output [B, T, N, H] in out's dtype, logsumexp [B, N, T], -inf where no split saw a
    key; those rows' output is 0)."""
    top = jnp.max(lse, axis=0)
    top = jnp.where(top == -jnp.inf, 0.0, top)
    weight = jnp.exp(lse - top)  # 0 for a split that saw nothing
    total = jnp.sum(weight, axis=0)
    seen = total > 0
    total = jnp.where(seen, total, 1.0)
    combined = jnp.einsum("sbnt,sbtnh->btnh", weight / total, out.astype(jnp.float32))
    return combined.astype(out.dtype), jnp.where(seen, top + jnp.log(total), -jnp.inf)


def lse_slots(items, t: int, rows: int):
    """[B, T] int32: where the kernel left each token's logsumexp, program m's `rows` tokens
    being slots [m x rows, (m + 1) x rows) (programs' own rows partition the tokens, in
    order)."""
    first, own_start, own_end = items[..., 0] * TMA_ROWS, items[..., 1], items[..., 2]
    m = jnp.arange(items.shape[1], dtype=jnp.int32)
    marks = jnp.full((items.shape[0], t), -1, jnp.int32)
    marks = jax.vmap(lambda mk, s, e: mk.at[jnp.where(e > s, s, t)].max(m, mode="drop"))(
        marks, own_start, own_end)
    owner = jnp.maximum(lax.cummax(marks, axis=1), 0)
    start = jnp.take_along_axis(first, owner, axis=1)
    return owner * rows + jnp.arange(t, dtype=jnp.int32) - start


def forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, mask: AttentionMask, *,
            variant: MaskVariant, pad_id: int, config: MosaicConfig | None = None,
            logits_soft_cap: float | None = None, sinks=None, store_query: bool = False):
    """(output [B, T, N, H] in q's dtype, logsumexp [B, N, T] float32 natural log); sinks [N] or
    None; logits_soft_cap c turns the scaled logits x into c * tanh(x / c). store_query=True
    appends q with its padding rows zeroed (for mosaic_bwd, which then needs no copy of its
    own): each consumer stores the Q tile it loaded, so the copy costs no extra read."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    b, t, n, h = q.shape
    s_len, num_kv = k.shape[1], k.shape[2]
    group = n // num_kv
    dtype = q.dtype
    config = config or choose_config(mask, h, group, sinks is not None, t, batch=b, heads=n,
                                     keys=s_len)
    block_q, block_kv, stages, rows = config.block_q, config.block_kv, config.stages, config.rows
    pack, tokens, splits = config.pack, config.tokens, config.splits
    tq = block_q // pack  # tokens per consumer (of each of the pack heads)
    if group % pack or tq % TMA_ROWS or (pack > 1 and sinks is not None):
        raise NotImplementedError(
            f"MosaicConfig(pack={pack}) needs a whole number of packs per kv group ({group} "
            f"query heads per kv head), whole 8-row groups of tokens per consumer "
            f"(block_q={block_q}) and no sinks")
    if config.persistent and (pack > 1 or splits > 1 or config.overlap
                              or h > PERSISTENT_HEAD_DIM):
        raise NotImplementedError(
            f"the persistent Mosaic forward takes one query head per program, no key splits, "
            f"not the overlapped order, and head dims up to {PERSISTENT_HEAD_DIM} (two Q tiles "
            f"per consumer), "
            f"got pack={pack}, splits={splits}, overlap={config.overlap}, head dim {h}")
    if splits < 1 or (splits > 1 and sinks is not None):
        raise NotImplementedError(f"MosaicConfig(splits={splits}) needs splits >= 1, and no "
                                  f"sinks with more than one")
    if mask.row_block % rows or mask.col_block % block_kv:
        raise NotImplementedError(
            f"the Mosaic forward needs a mask whose blocks are multiples of {rows}x{block_kv}, got "
            f"{mask.row_block}x{mask.col_block}")
    doc_runs = chunked(mask, config, h, variant)
    if config.rank_rule is None:  # the rank rule where the mask brings its layouts
        ranked = dataclasses.replace(config, rank_rule=True)
        config = dataclasses.replace(config, rank_rule=mask.schedule is not None
                                     and mask.schedule.fits(ranked, doc_runs))
    # the tables: the mask's schedule where it fits this call, else built here
    built = mask.schedule if mask.schedule is not None and mask.schedule.fits(
        config, doc_runs) else None
    items = (built.items if built is not None
             else programs(mask, config, t, s_len, doc_runs=doc_runs))
    slots = items.shape[1] * tokens  # the logsumexp's slots per split
    if splits > 1:
        items = split_keys(items, splits, block_kv)
    num_items = items.shape[1]
    persistent = config.persistent
    heads = n // pack
    total = heads * num_items * b
    workers = min(total, device_sms())  # persistent: one program per SM
    rounds = -(-total // workers)
    work = ((built.work if built is not None else persistent_work(items)).reshape(-1)
            if persistent else jnp.zeros((1,), jnp.int32))

    # V's padding rows must be 0 where a product reads them (P = 0 times NaN is NaN): the
    # consumers zero them in shared memory in the masked tiles that hold some (a tile holding
    # padding is never fully visible); the overlapped order zeroes them in a copy first
    if config.overlap:
        v = jnp.where((kv_seg != pad_id)[:, :, None, None], v, jnp.zeros((), v.dtype))
    q, k, v = for_tma(q), for_tma(k), for_tma(v)
    # the layouts (and padding windows) the kernel reads: the mask's, built with it, where its
    # schedule fits; else built here from the call's
    if built is not None:
        q_lay, k_lay, k_pads, q_pads = (x[:, 0] for x in built.layouts)
    else:
        q_lay, k_lay, k_pads, q_pads = kernel_layouts(q_pos, q_seg, kv_pos, kv_seg,
                                                      pad_id=pad_id, config=config,
                                                      variant=variant)
    if pack > 1:  # each program's rows in its consumers' order: per consumer, head by head
        r = jnp.arange(rows, dtype=jnp.int32)
        offsets = (r // block_q) * tq + r % tq
        rows_at = (items[..., :1] * TMA_ROWS + offsets).reshape(b, 1, num_items * rows)
        q_lay = jnp.take_along_axis(
            q_lay, jnp.broadcast_to(rows_at, (b, q_lay.shape[1], num_items * rows)), axis=2)
    # the padding windows only where the kernel reads them (else a placeholder)
    unread = jnp.zeros((b, 1), jnp.int32)
    k_pads = unread if config.overlap else k_pads
    q_pads = q_pads if store_query else unread
    cap = logits_soft_cap
    qk_scale = logit_factor(scale, cap)
    fixed_m = fixed_weights(config, cap, dtype)
    sink_logits = jnp.zeros((n,), jnp.float32) if sinks is None else sinks.astype(jnp.float32)
    factors = jnp.concatenate([qk_scale.reshape(1), sink_logits * LOG2E])

    row_layout = plgpu.Layout.WGMMA.reduce(1)
    col_layout = plgpu.Layout.WGMMA.reduce(0)

    def kernel(q_ref, k_ref, v_ref, qlay_ref, klay_ref, kpads_ref, qpads_ref, items_ref,
               factors_ref, work_ref, out_ref, lse_ref, qout_ref, scoped):
        wg = lax.axis_index("wg")
        (qo_smem2, k_smem, v_smem, lse_smem2, klay_smem, o_plain2), loaded, freed, schedule = scoped
        q_plain = None
        if persistent:  # two Q buffers per consumer, also viewed untiled (the partial stores')
            qo_smem2, q_plain = qo_smem2
        k_ready, v_ready, q_ready, lay_ready = loaded
        k_free, v_free = freed

        def sync():
            plgpu.barrier_arrive(schedule)
            plgpu.barrier_wait(schedule)

        def load_q(batch, start, head0, dst, arrived):
            """A consumer's Q: tq rows from token `start` of each of the program's heads."""
            for j in range(pack):
                plgpu.copy_gmem_to_smem(q_ref.at[batch, pl.ds(start, tq), head0 + j],
                                        dst.at[pl.ds(j * tq, tq)], arrived)

        def one_program(batch, head0, item, consumer: bool, live=True, base=None, parity=None,
                        first_round=None, next_program=None, info=None, factor=None):
            """A consumer's (consumer) or the producer's part of one program: query heads
            [head0, head0 + pack), row block `item`, batch row `batch`. Persistent: `live` (the
            worker has a program this round), base (the key/value tiles the worker's earlier
            programs took through the ring); for a consumer also parity (the round's Q
            buffer), first_round, next_program (live, batch, head0, item, its first token
            block) whose Q this one loads into the other buffer, info (the program's table
            entries, already loaded) and factor (the logits' factor, already loaded)."""
            # the program's tokens [first, first + tokens) (it stores [own_start, own_end) of
            # them), its key tiles from k0 on (`steps` of them), [f_lo, f_hi) of those fully
            # visible
            first8, own_start, own_end, k08, steps, f_lo, f_hi = (
                info if info is not None else (items_ref[batch, item, i] for i in range(7)))
            first, k0 = first8 * TMA_ROWS, k08 * TMA_ROWS
            live_item = (own_end > own_start) & live
            # with key splits, each output and logsumexp in its split's slot (tiles: program m's
            # logsumexp slots are its tokens)
            split = (items_ref[batch, item, 7],) if splits > 1 else ()

            def ring(i):  # the key/value slot of tile i (the ring goes on across programs)
                return lax.rem(i if base is None else base + i, stages)

            def key_start(i):
                return k0 + i * block_kv

            if consumer:
                @pl.when(live_item)
                def _consumer():
                    with jax.named_scope("prologue"):
                        lse_smem = lse_smem2.at[wg]
                        q_start = first + wg * tq

                        def row_rules():
                            """The rows' (positions, ids), with rank_rule (lo, hi, ids)."""
                            return load_layout(
                                qlay_ref, batch,
                                q_start if pack == 1 else item * rows + wg * block_q, block_q,
                                row_layout, (0, 1, 2) if config.rank_rule else (0, 1))

                        if parity is not None:  # persistent: issued first, so that they are
                            # in flight through the waits below (h200-2026-11-28-prefetch)
                            *q_rule_r, q_seg_r = row_rules()
                        if parity is None:
                            qo_smem, q_here = qo_smem2.at[wg], q_ready.at[wg]
                            load_q(batch, q_start, head0, qo_smem, q_here)
                        else:  # Q in the round's buffer; the next program's into the other
                            qo_smem, q_here = qo_smem2.at[parity, wg], q_ready.at[2 * parity + wg]

                            pl.when(first_round)(
                                lambda: load_q(batch, q_start, head0, qo_smem, q_here))

                            # the last program's stores have read the other buffer and lse's
                            with jax.named_scope("store_read"):
                                plgpu.wait_smem_to_gmem(0, wait_read_only=True)
                            n_live, n_batch, n_head0, _, n_first8 = next_program

                            @pl.when(n_live)
                            def _():
                                load_q(n_batch, n_first8 * TMA_ROWS + wg * tq, n_head0,
                                       qo_smem2.at[1 - parity, wg],
                                       q_ready.at[2 * (1 - parity) + wg])
                        if parity is None:  # (the grid's order, as measured before)
                            *q_rule_r, q_seg_r = row_rules()
                        c = factors_ref[0] if factor is None else factor
                        with jax.named_scope("q_wait"):
                            plgpu.barrier_wait(q_here)
                        if store_query:  # the tile, its padding rows zeroed, back out
                            # (programs whose rows overlap store the same values)
                            @pl.when(qpads_ref[batch, q_start // TMA_ROWS] != 0)
                            def _():
                                zero_padding_rows(qo_smem, q_seg_r, pad_id)

                            for j in range(pack):
                                plgpu.copy_smem_to_gmem(
                                    qo_smem.at[pl.ds(j * tq, tq)],
                                    qout_ref.at[batch, pl.ds(q_start, tq), head0 + j])
                        if cap is None:  # online_softmax needs a positive factor: the sign
                            # goes into Q
                            @pl.when(c < 0)
                            def _():
                                if store_query:
                                    plgpu.wait_smem_to_gmem(0, wait_read_only=True)
                                qo_smem[...] = -plgpu.load(qo_smem, layout=plgpu.Layout.WGMMA)
                                plgpu.commit_smem()

                            # a scale of 0 becomes 1e-30: logits of ~1e-28, so the same uniform
                            # weights
                            c = jnp.maximum(jnp.where(c < 0, -c, c), 1e-30)
                        # with fixed_m, m_i is each row's largest weight on a masked tile
                        m_i = plgpu.layout_cast(jnp.full(
                            (block_q,), -jnp.inf if fixed_m is None else 0.0, jnp.float32),
                            row_layout)
                        l_i = plgpu.layout_cast(jnp.full((block_q,), 0.0, jnp.float32), row_layout)
                        acc = None if config.overlap else plgpu.layout_cast(  # overlap: O in an ACC
                            jnp.full((block_q, h), 0.0, jnp.float32), plgpu.Layout.WGMMA)

                        @pl.when(steps > 0)
                        @jax.named_scope("first_key")
                        def _():
                            plgpu.barrier_wait(k_ready.at[ring(0)])

                        if config.overlap:  # warpgroup 0 has the first turn
                            pl.when(wg == 1)(lambda: plgpu.barrier_arrive(schedule.at[0]))
                        else:  # warpgroup 1 starts a hand-over behind
                            with jax.named_scope("meet"):
                                pl.when(wg == 1)(sync)

                    def key_layout(i, slot):
                        """The key tile's positions and segment ids (with rank_rule its ranks) in
                        the logits' column layout."""
                        rows = (0,) if config.rank_rule else (0, 1)
                        if config.layout_by_tma:
                            return tuple(plgpu.load(klay_smem.at[slot, r], layout=col_layout)
                                         for r in rows)
                        return load_layout(klay_ref, batch, key_start(i), block_kv, col_layout,
                                           rows)

                    def online_softmax(slot, s, m_i, masked: bool, k_layout):
                        """(the new row max, the old rows' factor, p) for tile scores s (raw
                        QK^T). The row maxima are taken before the logits' factor f > 0 (c made
                        positive above), so that p's exponent s * f - m is one FMA per element."""
                        s, f = (s, c) if cap is None else (jnp.tanh(s * c), cap * LOG2E)
                        if config.layout_by_tma:
                            plgpu.barrier_wait(lay_ready.at[slot])
                            k_layout = key_layout(None, slot) if masked else None
                        shape = (block_q, block_kv)
                        if masked and config.rank_rule:
                            (rank_c,), (lo_r, hi_r) = k_layout, q_rule_r
                            ok = in_intervals(lax.broadcast_in_dim(rank_c, shape, [1]),
                                              lax.broadcast_in_dim(lo_r, shape, [0]),
                                              lax.broadcast_in_dim(hi_r, shape, [0]))
                            s = jnp.where(ok, s, -jnp.inf)
                        elif masked:
                            k_pos_c, k_seg_c = k_layout
                            ok = variant.element_rule(
                                lax.broadcast_in_dim(q_rule_r[0], shape, [0]),
                                lax.broadcast_in_dim(q_seg_r, shape, [0]),
                                lax.broadcast_in_dim(k_pos_c, shape, [1]),
                                lax.broadcast_in_dim(k_seg_c, shape, [1]), pad_id)
                            s = jnp.where(ok, s, -jnp.inf)
                        if fixed_m is not None:  # a masked row's top weight; no rescaling
                            p = jnp.exp2(s * f - fixed_m)
                            return (jnp.maximum(m_i, p.max(axis=1)) if masked else m_i), None, p
                        m_new = jnp.maximum(m_i, s.max(axis=1) * f)
                        m_use = jnp.where(m_new == -jnp.inf, 0.0, m_new) if masked else m_new
                        alpha = jnp.exp2(m_i - m_use)
                        p = jnp.exp2(s * f - lax.broadcast_in_dim(m_use, s.shape, [0]))
                        return m_new, alpha, p

                    def row_sums(l_i, alpha, p):
                        """l_i rescaled by alpha (None: nothing to rescale) plus the tile's row
                        sums."""
                        return (l_i if alpha is None else l_i * alpha) + p.sum(axis=1)

                    def early_layout(i, slot, masked: bool):
                        """A masked tile's layout by global loads, issued before its QK^T."""
                        return key_layout(i, slot) if masked and not config.layout_by_tma else None

                    def qk(slot, after_issue=sync, wait_n=0):
                        """S = Q K^T of the slot's tile; after_issue (the turn's hand-over) runs
                        while it is in flight, and S is read once at most wait_n products are."""
                        def qk_scope(acc_ref):
                            plgpu.wgmma(acc_ref, qo_smem, k_smem.at[slot].transpose((1, 0)))
                            after_issue()
                            return plgpu.wgmma_accumulator_load(acc_ref, wait_n=wait_n)

                        return pl.run_scoped(qk_scope, plgpu.ACC((block_q, block_kv), jnp.float32))

                    def wait_next_key(i):
                        @pl.when(i + 1 < steps)
                        def _():
                            plgpu.barrier_wait(k_ready.at[ring(i + 1)])

                    def step(i, carry, masked: bool):
                        acc, m_i, l_i = carry
                        slot = ring(i)
                        k_layout = early_layout(i, slot, masked)
                        has_padding = kpads_ref[batch, key_start(i) // TMA_ROWS] if masked else None
                        s = qk(slot)
                        plgpu.barrier_arrive(k_free.at[slot])
                        m_new, alpha, p = online_softmax(slot, s, m_i, masked, k_layout)
                        if alpha is not None:
                            acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])
                        l_i = row_sums(l_i, alpha, p)
                        p16 = p.astype(dtype)
                        acc, l_i, m_new, p16 = lax.optimization_barrier((acc, l_i, m_new, p16))
                        plgpu.barrier_arrive(schedule)
                        plgpu.barrier_wait(v_ready.at[slot])
                        if masked:
                            @pl.when(has_padding != 0)
                            def _():
                                (seg_r,) = load_layout(klay_ref, batch, key_start(i), block_kv,
                                                       row_layout, (1,))
                                zero_padding_rows(v_smem.at[slot], seg_r, pad_id)

                        plgpu.barrier_wait(schedule)

                        def pv_scope(acc_ref):
                            plgpu.wgmma(acc_ref, p16, v_smem.at[slot])
                            wait_next_key(i)

                        acc = pl.run_state(pv_scope)(plgpu.ACC.init(acc))
                        plgpu.barrier_arrive(v_free.at[slot])
                        return acc, m_new, l_i

                    def my_turn():  # overlap: the warpgroups issue their products in turns
                        plgpu.barrier_wait(schedule.at[wg])

                    def pass_turn():
                        plgpu.barrier_arrive(schedule.at[1 - wg])

                    def overlapped(m_i, l_i):
                        """FA3's order inside a warpgroup: tile i's QK^T and tile i-1's PV are
                        issued together in this warpgroup's turn, and tile i's softmax runs while
                        that PV (and the other warpgroup's products) are in flight; O is rescaled
                        after the PV lands. Only the issuing takes turns, so the two softmaxes may
                        overlap. Tile 0 comes first alone, as a masked tile."""

                        def first():
                            k_layout = early_layout(0, 0, True)
                            my_turn()
                            s = qk(0, pass_turn)
                            plgpu.barrier_arrive(k_free.at[0])
                            m_new, alpha, p = online_softmax(0, s, m_i, True, k_layout)
                            p16 = p.astype(dtype)
                            wait_next_key(0)
                            return m_new, row_sums(l_i, alpha, p), p16

                        def nothing():
                            return m_i, l_i, plgpu.layout_cast(
                                jnp.full((block_q, block_kv), 0.0, dtype), plgpu.Layout.WGMMA)

                        head_carry = lax.cond(steps > 0, first, nothing)

                        def with_output(o_ref):
                            def step_o(i, carry, masked: bool):
                                m_i, l_i, p_prev = carry
                                slot, prev = lax.rem(i, stages), lax.rem(i + stages - 1, stages)
                                k_layout = early_layout(i, slot, masked)
                                plgpu.barrier_wait(v_ready.at[prev])
                                my_turn()

                                def pv_and_pass():
                                    plgpu.wgmma(o_ref, p_prev, v_smem.at[prev])
                                    pass_turn()

                                s = qk(slot, pv_and_pass, wait_n=1)  # S lands, the PV may still run
                                plgpu.barrier_arrive(k_free.at[slot])
                                m_new, alpha, p = online_softmax(slot, s, m_i, masked, k_layout)
                                l_i = row_sums(l_i, alpha, p)
                                # the softmax is done here, before waiting for the PV, not after
                                # it; P becomes the PV's operand registers only once the previous
                                # PV has read its own (else ptxas serialises every wgmma)
                                m_new, alpha, l_i, p = lax.optimization_barrier(
                                    (m_new, alpha, l_i, p))
                                plgpu.wgmma_wait(0)
                                p16 = p.astype(dtype)
                                plgpu.barrier_arrive(v_free.at[prev])
                                o_ref[...] = o_ref[...] * lax.broadcast_in_dim(
                                    alpha, (block_q, h), [0])
                                wait_next_key(i)
                                return m_new, l_i, p16

                            one = jnp.int32(1)
                            a, b = jnp.maximum(f_lo, one), jnp.maximum(f_hi, one)
                            m_i, l_i, p_last = masked_full_masked(
                                one, a, b, jnp.maximum(steps, one),
                                lambda i, c_: step_o(i, c_, True),
                                lambda i, c_: step_o(i, c_, False), head_carry)

                            @pl.when(steps > 0)
                            def _():
                                last = lax.rem(steps - 1, stages)
                                plgpu.barrier_wait(v_ready.at[last])
                                plgpu.wgmma(o_ref, p_last, v_smem.at[last])
                                plgpu.wgmma_wait(0)
                                plgpu.barrier_arrive(v_free.at[last])

                            return o_ref[...], m_i, l_i

                        return pl.run_scoped(with_output, plgpu.ACC((block_q, h), jnp.float32))

                    with jax.named_scope("loop"):
                        if config.overlap:
                            acc, m_i, l_i = overlapped(m_i, l_i)
                        else:
                            acc, m_i, l_i = masked_full_masked(
                                jnp.int32(0), f_lo, f_hi, steps,
                                lambda i, c_: step(i, c_, True),
                                lambda i, c_: step(i, c_, False), (acc, m_i, l_i))
                            pl.when(wg == 0)(sync)

                    with jax.named_scope("epilogue"):
                        live = l_i > 0.0
                        top = m_i  # with fixed_m: each row's largest weight (0 for a dead row)
                        if fixed_m is not None:
                            m_i = plgpu.layout_cast(jnp.full((block_q,), fixed_m, jnp.float32),
                                                    row_layout)
                        if sinks is not None:  # the head's sink logit joins live rows' denominators
                            sink = factors_ref[1 + head0]  # pack is 1
                            m_f = jnp.where(live, jnp.maximum(m_i, sink), m_i)
                            alpha = jnp.where(live, jnp.exp2(m_i - m_f), 1.0)
                            l_i = jnp.where(live, l_i * alpha + jnp.exp2(sink - m_f), l_i)
                            acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])
                            m_i = m_f
                        l_safe = jnp.where(live, l_i, 1.0)
                        l_div = l_safe  # the output's divisor
                        if fixed_m is not None and sinks is None:
                            # a row whose weights are all one key's (its top one, from a masked
                            # tile: a row that sees one key never has a fully visible tile) got
                            # that weight rounded to P's dtype in its PV product
                            l_div = jnp.where(l_safe == top, top.astype(dtype).astype(jnp.float32),
                                              l_safe)
                        acc = acc * lax.broadcast_in_dim(1.0 / l_div, acc.shape, [0])
                        lse_smem[...] = jnp.where(live, (m_i + jnp.log2(l_safe)) * (1.0 / LOG2E),
                                                  -jnp.inf)
                        # the logsumexp in the program's slot (gathered into token order after
                        # the kernel)
                        def store_lse():
                            slot = q_start if splits > 1 else item * tokens + wg * tq
                            for j in range(pack):
                                plgpu.copy_smem_to_gmem(
                                    lse_smem.at[pl.ds(j * tq, tq)],
                                    lse_ref.at[split + (batch, head0 + j, pl.ds(slot, tq))])

                        # the tokens of ours this consumer stores: [lo_r, hi_r) of its tq
                        lo_r = jnp.clip(own_start - q_start, 0, tq)
                        hi_r = jnp.clip(own_end - q_start, lo_r, tq)
                        whole = (lo_r == 0) & (hi_r == tq)

                        @pl.when(whole)
                        def _():
                            if store_query:
                                plgpu.wait_smem_to_gmem(0, wait_read_only=True)
                            qo_smem[...] = acc.astype(dtype)
                            plgpu.commit_smem()
                            for j in range(pack):
                                plgpu.copy_smem_to_gmem(
                                    qo_smem.at[pl.ds(j * tq, tq)],
                                    out_ref.at[split + (batch, pl.ds(q_start, tq), head0 + j)])
                            store_lse()

                        if doc_runs is not None:  # a chunk's first and last rows: only its
                            # document's
                            @pl.when(~whole)
                            def _():
                                if q_plain is None:
                                    o_plain = o_plain2.at[wg]
                                else:  # the round's Q buffer, untiled (its last QK^T is done)
                                    o_plain = q_plain.at[parity, wg]
                                    if store_query:
                                        plgpu.wait_smem_to_gmem(0, wait_read_only=True)
                                o_plain[...] = acc.astype(dtype)
                                plgpu.commit_smem()
                                store_lse()
                                g = TMA_ROWS
                                # lo_r's group's end and hi_r's group's start
                                up = jnp.minimum(lo_r + (g - 1) - lax.rem(lo_r + (g - 1), g), hi_r)
                                down = jnp.maximum(hi_r - lax.rem(hi_r, g), up)
                                for j in range(pack):
                                    out_j = out_ref.at[batch, :, head0 + j]
                                    for i in range(tq // g):  # whole 8-row groups
                                        plgpu.copy_smem_to_gmem(
                                            o_plain.at[pl.ds(j * tq + g * i, g)],
                                            out_j.at[pl.ds(q_start + g * i, g)],
                                            predicate=(lo_r <= g * i) & (g * i + g <= hi_r))
                                    for i in range(g - 1):  # the partial groups row by row
                                        for r, end in ((lo_r + i, up), (down + i, hi_r)):
                                            plgpu.copy_smem_to_gmem(
                                                o_plain.at[pl.ds(j * tq + r, 1)],
                                                out_j.at[pl.ds(q_start + r, 1)],
                                                predicate=r < end)

                        if not persistent:  # (persistent: once, after the last program)
                            with jax.named_scope("store_wait"):
                                plgpu.wait_smem_to_gmem(0)

            else:
                @pl.when(live_item)
                def _producer():
                    with jax.named_scope("producer"):
                        kv_head = lax.div(head0, jnp.int32(group))

                        def when(wait, f):  # wait: a Python bool, or traced (persistent)
                            if not isinstance(wait, bool):
                                pl.when(wait)(f)
                            elif wait:
                                f()

                        def issue(i, slot, wait):
                            tiles = (batch, pl.ds(key_start(i), block_kv), kv_head)
                            when(wait, lambda: plgpu.barrier_wait(k_free.at[slot]))
                            plgpu.copy_gmem_to_smem(k_ref.at[tiles], k_smem.at[slot],
                                                    k_ready.at[slot])
                            when(wait, lambda: plgpu.barrier_wait(v_free.at[slot]))
                            plgpu.copy_gmem_to_smem(v_ref.at[tiles], v_smem.at[slot],
                                                    v_ready.at[slot])
                            if config.layout_by_tma:
                                plgpu.copy_gmem_to_smem(
                                    klay_ref.at[batch, :, pl.ds(key_start(i), block_kv)],
                                    klay_smem.at[slot], lay_ready.at[slot])

                        if base is None:
                            for i in range(stages):
                                pl.when(i < steps)(lambda i=i: issue(i, i, False))

                            @pl.loop(0, jnp.maximum(steps - stages, 0))
                            def _(i):
                                issue(i + stages, lax.rem(i, stages), True)
                        else:  # a slot's first use in the worker's ring waits for nothing
                            @pl.loop(0, steps)
                            def _(i):
                                issue(i, ring(i), base + i >= stages)

        def each_program(consumer: bool):
            """This warpgroup's part of the grid's program, or persistent, of each program the
            worker takes: the live ones (work_ref) in turns, every other round from the other
            end, the key/value ring and the Q buffers going on across them."""
            if not persistent:
                one_program(lax.axis_index("batch"), lax.axis_index("heads") * pack,
                            num_items - 1 - lax.axis_index("q_seq"), consumer)  # heavier first
                return
            worker = lax.axis_index("workers")

            def round_index(r):  # the work list's index of round r
                lane = jnp.where(lax.rem(r, 2) == 0, worker, workers - 1 - worker)
                return r * workers + lane

            def round_code(r):  # (the work list's index, its code) of round r
                w = round_index(r)
                return w, work_ref[jnp.minimum(lax.div(w, heads), b * num_items - 1)]

            def decode(w, code):  # (live, batch, head0, item) of a round's code
                batch, item = work_block(jnp.maximum(code, 0), num_items)
                return (w < total) & (code >= 0), batch, lax.rem(w, heads) * pack, item

            if consumer:  # each table load a round or more before it is read (below)
                factor = factors_ref[0]  # once, not in each program's prologue

                def program_ahead(w, code):  # a round's program and its first token block
                    live, batch, head0, item = decode(w, code)
                    return live, batch, head0, item, items_ref[batch, item, 0]

                def table(program):  # a program's 7 table entries
                    _, batch, _, item, first8 = program
                    return (first8,) + tuple(items_ref[batch, item, i] for i in range(1, 7))

                def one_round_ahead(r, carry):
                    """Round r's program, from what earlier rounds loaded: its program and
                    table, the next one's program and first token block (for its Q), and round
                    r + 2's code. Before it, the loads for later rounds, so that they arrive
                    while it runs: round r + 3's code, r + 2's program and first block and
                    r + 1's table (docs/bench/h200-2026-11-28-prefetch)."""
                    base, now, info, nxt, code2 = carry
                    code3 = round_code(r + 3)[1]
                    info_next = table(nxt)
                    after = program_ahead(round_index(r + 2), code2)
                    live, batch, head0, item = now
                    one_program(batch, head0, item, consumer, live, base, lax.rem(r, 2), r == 0,
                                nxt, info, factor)
                    return (base + jnp.where(live, info[4], 0), tuple(nxt[:4]), info_next,
                            after, code3)

                first = program_ahead(*round_code(0))
                lax.fori_loop(0, rounds, one_round_ahead,
                              (jnp.int32(0), first[:4], table(first),
                               program_ahead(*round_code(1)), round_code(2)[1]))
                return

            def one_round(r, base):  # the producer's
                live, batch, head0, item = decode(*round_code(r))
                one_program(batch, head0, item, consumer, live, base)
                return base + jnp.where(live, items_ref[batch, item, 4], 0)

            lax.fori_loop(0, rounds, one_round, jnp.int32(0))

        @pl.when(wg < 2)
        def _consumers():
            plgpu.set_max_registers(232, action="increase")
            each_program(True)
            if persistent:
                with jax.named_scope("store_wait"):
                    plgpu.wait_smem_to_gmem(0)

        @pl.when(wg == 2)
        def _producer():
            plgpu.set_max_registers(40, action="decrease")
            each_program(False)

    def entry(*refs):
        # inputs, then out, lse and with store_query the zeroed q
        qout_ref = refs[12] if store_query else None
        tiled = (plgpu.TilingTransform((8, 64)), plgpu.SwizzleTransform(128))
        # the consumers' Q (then O) tiles; persistent: two per consumer, also viewed untiled
        qo = (plgpu.RefUnion(plgpu.SMEM((2, 2, block_q, h), dtype, transforms=tiled),
                             plgpu.SMEM((2, 2, block_q, h), dtype)) if persistent
              else plgpu.SMEM((2, block_q, h), dtype, transforms=tiled))
        smem = [
            qo,
            plgpu.SMEM((stages, block_kv, h), dtype, transforms=tiled),
            plgpu.SMEM((stages, block_kv, h), dtype, transforms=tiled),
            plgpu.SMEM((2, block_q), jnp.float32),
            plgpu.SMEM((stages, 2, block_kv), jnp.int32) if config.layout_by_tma else None,
            # plain O for the chunks' partial stores (persistent: the Q buffers' untiled view)
            plgpu.SMEM((2, block_q, h), dtype) if doc_runs is not None and not persistent
            else None,
        ]
        loaded = (plgpu.Barrier(num_barriers=stages), plgpu.Barrier(num_barriers=stages),
                  # a Q tile: pack copies; persistent: a barrier per buffer
                  plgpu.Barrier(num_arrivals=pack, num_barriers=4 if persistent else 2),
                  plgpu.Barrier(num_barriers=stages) if config.layout_by_tma else None)
        freed = (plgpu.Barrier(num_arrivals=2, num_barriers=stages),) * 2
        pl.run_scoped(
            lambda *scoped: kernel(*refs[:12], qout_ref, scoped),
            smem, loaded, freed,
            # the hand-overs: a rendezvous of both consumers, or with overlap one turn each
            plgpu.Barrier(num_barriers=2) if config.overlap else plgpu.Barrier(num_arrivals=2),
            collective_axes="wg")

    per_split = (splits,) if splits > 1 else ()  # a leading axis for the splits' slots
    prewarm.watch()  # compile the kernel as soon as the step's lowering has it
    results = plgpu.kernel(
        entry,
        out_type=(jax.ShapeDtypeStruct(per_split + q.shape, dtype),
                  jax.ShapeDtypeStruct(per_split + (b, n, slots), jnp.float32))
        + ((jax.ShapeDtypeStruct(q.shape, dtype),) if store_query else ()),
        grid=(workers,) if persistent else (n // pack, num_items, b),
        grid_names=("workers",) if persistent else ("heads", "q_seq", "batch"),
        num_threads=3,
        thread_name="wg",
        compiler_params=plgpu.CompilerParams(approx_math=True),
        kernel_name=prewarm.KERNEL_PREFIX + "forward",
    )(q, k, v, q_lay, k_lay, k_pads, q_pads, items, factors, work)
    out, lse = results[0][..., :t, :, :], results[1]
    if splits > 1:
        out, lse = combine_splits(out, lse[..., :t])
    elif doc_runs is None:  # program m's slot is tokens [m * tokens, (m + 1) * tokens)
        lse = lse[:, :, :t]
    else:
        token_slots = built.slots if built is not None else lse_slots(items, t, tokens)
        lse = jnp.take_along_axis(lse, token_slots[:, None], axis=2)
    return (out, lse) + ((results[2][:, :t],) if store_query else ())
