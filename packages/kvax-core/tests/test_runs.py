"""The Hopper forward's programs: document chunks (runs.py) where a row's layout allows them,
row-aligned tiles of the block mask elsewhere, checked pair by pair against the reference rule on
random layouts. The kernels themselves run on a GPU (test_mosaic.py); what is checked here is
what makes them exact: every token is stored by exactly one program, every key a stored row may
attend lies in its program's key tiles, and the tiles it skips the rule on hold allowed pairs
only."""

import jax.numpy as jnp
import numpy as np
import pytest

from kvax._src.attention import mosaic_fwd, runs
from kvax._src.attention.mask import build_masks
from kvax._src.attention.variant import MaskVariant
from kvax.utils import PADDING_SEGMENT_ID, FlashAttentionParamsConfig
from kvax_testing import packed_layout, reference_mask

FWD = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)


def _programs(arrays, block_kv=128, fwd=FWD, variant=MaskVariant(), pack=1):
    (mask,) = build_masks(*map(jnp.asarray, arrays), fwd_params=fwd, bwd_params=None,
                          skip_pad_tokens=True, variant=variant)
    config = mosaic_fwd.MosaicConfig(block_kv=block_kv, pack=pack)
    t, s = arrays[0].shape[1], arrays[2].shape[1]
    return mask, np.asarray(mosaic_fwd.programs(mask, config, t, s, mask.doc_runs))


def _row_aligned(mask, items, t, s, block_kv, pack):
    """Per batch row, whether its programs are the block mask's row-aligned tiles."""
    config = mosaic_fwd.MosaicConfig(block_kv=block_kv, pack=pack)
    tiles = np.asarray(mosaic_fwd.programs(mask, config, t, s))
    n = tiles.shape[1]
    return [bool(np.array_equal(row[:n], tile) and not np.any(row[n:, 2] > row[n:, 1]))
            for row, tile in zip(items, tiles)]


def _one_run_each(items, segment_ids):
    """Per batch row, whether each program stores tokens of one run (one segment id) only, as
    document chunks do (row-aligned tiles may too, where no document starts inside one)."""
    return [all(len(set(seg[start:end].tolist())) <= 1 for start, end in row[:, 1:3])
            for row, seg in zip(items, segment_ids)]


def _check(arrays, items, block_kv, rows=128):
    t = arrays[0].shape[1]
    allowed = np.asarray(reference_mask(*arrays))  # [B, T, S]
    for b, row in enumerate(items):
        stored = np.zeros(t, np.int32)
        for first8, own_start, own_end, k08, steps, f_lo, f_hi in row:
            first, k0 = 8 * first8, 8 * k08
            own = np.arange(max(own_start, 0), min(own_end, t))
            if own.size == 0:
                continue
            assert first <= own[0] and own[-1] < first + rows
            stored[own] += 1
            keys = np.arange(k0, k0 + steps * block_kv)
            outside = np.ones(allowed.shape[2], bool)
            outside[keys[keys < allowed.shape[2]]] = False
            assert not allowed[b][np.ix_(own, outside)].any(), "an allowed key is skipped"
            assert 0 <= f_lo <= f_hi <= steps
            full = np.arange(k0 + f_lo * block_kv, k0 + f_hi * block_kv)
            assert allowed[b][np.ix_(own, full)].all(), "a tile without the rule is not full"
        assert np.all(stored == 1), f"row {b}: tokens stored {set(stored.tolist())} times"


@pytest.mark.parametrize("layout,chunked", [
    (dict(segment_ids="shuffled", num_docs=(2, 3)), True),
    (dict(segment_ids="large", num_docs=(1, 3), positions="global"), True),
    (dict(num_docs=1, pad_tokens=0), True),
    (dict(segment_ids="reused", num_docs=(5, 9)), False),
    (dict(num_docs=(2, 6), positions="zeros"), False),
    (dict(num_docs=(4, 6)), True),  # mostly more than fit one head per program's chunks
    (dict(num_docs=(15, 30)), True),  # mostly more documents than the mask's chunks
])
@pytest.mark.parametrize("block_kv", [128, 64])
@pytest.mark.parametrize("pack", [1, 2, 4, 8])
def test_programs_store_every_token_once_and_skip_nothing_allowed(layout, chunked, block_kv,
                                                                  pack):
    """Chunks where the mask has them and they fit (max_chunks: fewer with one head per
    program), the row-aligned tiles elsewhere; pack heads per program store tokens//pack rows
    of each head."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    arrays = packed_layout(seed, batch=3, kv_len=1500 + seed % 97, **layout).arrays
    mask, items = _programs(arrays, block_kv, pack=pack)
    is_chunked = np.asarray(mask.doc_runs)[:, 0, 2] >= 0
    t = arrays[1].shape[1]
    needed = [_chunks_needed(row) for row in arrays[1]]
    assert is_chunked.tolist() == [chunked and n <= runs.max_chunks(t) for n in needed], seed
    takes = [c and (pack > 1 or n <= runs.max_chunks(t, 8)) for c, n in zip(is_chunked, needed)]
    aligned = _row_aligned(mask, items, t, t, block_kv, pack)
    one_run = _one_run_each(items, arrays[1])
    assert all(one_run[b] if c else aligned[b] for b, c in enumerate(takes)), f"seed={seed}"
    _check(arrays, items, block_kv, rows=128 // pack)


def _chunks_needed(segment_ids):
    """Chunks a row's runs (padding's included) take, each from its first token rounded down to
    runs.ALIGN: a row whose documents need more than max_chunks keeps the row-aligned tiles."""
    starts = np.flatnonzero(np.r_[True, segment_ids[1:] != segment_ids[:-1]])
    ends = np.r_[starts[1:], segment_ids.size]
    return int(sum(-(-(e - (s - s % runs.ALIGN)) // runs.CHUNK) for s, e in zip(starts, ends)))


def test_chunks_start_at_each_document():
    """Documents at 0, 300 and 305 (not multiples of 8), padding from 1000: the chunks start on
    the 8-row group of each document's first token and store from that token on; the padding's
    chunks attend nothing."""
    t = 1100
    seg = np.full((1, t), PADDING_SEGMENT_ID, np.int32)
    seg[0, :300], seg[0, 300:305], seg[0, 305:1000] = 7, 3, 9
    pos = np.zeros((1, t), np.int32)
    for s, e in [(0, 300), (300, 305), (305, 1000)]:
        pos[0, s:e] = np.arange(e - s)
    arrays = (pos, seg, pos, seg)
    mask, items = _programs(arrays)
    chunks = np.asarray(mask.doc_runs)[0]
    live = chunks[chunks[:, 2] > chunks[:, 1]]
    assert [tuple(c) for c in live[:5]] == [(0, 0, 128, 0), (128, 128, 256, 0),
                                           (256, 256, 300, 0), (296, 300, 305, 300),
                                           (304, 305, 432, 305)]
    assert np.all(live[live[:, 1] >= 1000][:, 3] == -1)  # padding: no keys
    assert np.all(items[0][items[0][:, 1] >= 1000][:, 4] == 0)
    # the third document's second chunk: its first key tile holds the second document's keys
    second = items[0][(items[0][:, 0] == (304 + 128) // 8)][0]
    assert tuple(second[3:]) == (304 // 8, 2, 1, 1)
    _check(arrays, items, 128)


def test_only_plain_causal_self_attention_gets_chunks():
    arrays = packed_layout(5, batch=1, kv_len=600, num_docs=3).arrays
    for variant in (MaskVariant(False), MaskVariant(True, (50, 0))):
        mask, items = _programs(arrays, variant=variant)
        assert mask.doc_runs is None and items.shape[1] == -(-600 // 128)
    cross = packed_layout(5, batch=1, kv_len=600, q_len=300, num_docs=3).arrays
    (mask,) = build_masks(*map(jnp.asarray, cross), fwd_params=FWD, bwd_params=None,
                          skip_pad_tokens=True)
    assert mask.doc_runs is None
    assert runs.max_chunks(65536) == 512 + 256
    assert runs.max_chunks(65536, 8) == 512 + 64


@pytest.mark.parametrize("pack", [1, 4])
def test_logsumexp_slots_follow_the_stored_rows(pack):
    arrays = packed_layout(11, batch=2, kv_len=900, num_docs=(3, 6), segment_ids="shuffled").arrays
    _, items = _programs(arrays, pack=pack)
    tokens = 128 // pack
    slots = np.asarray(mosaic_fwd.lse_slots(jnp.asarray(items), 900, tokens))
    for b in range(2):
        for t in range(900):
            m, r = divmod(int(slots[b, t]), tokens)
            first8, own_start, own_end = items[b, m, :3]
            assert own_start <= t < own_end and 8 * first8 + r == t
