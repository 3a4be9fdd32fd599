import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kvax._src.attention import runs
from kvax.ops import AttentionMask, create_attention_mask
from kvax.utils import PADDING_SEGMENT_ID, FlashAttentionParamsConfig
from kvax_testing import packed_layout, reference_mask

P = FlashAttentionParamsConfig(query_block_size=32, kv_block_size=16)
BWD = FlashAttentionParamsConfig(query_block_size=16, kv_block_size=32)


def brute_force_blocks(allowed, row_block, col_block):
    """[T, S] allowed -> (any, all) per (query block, kv block), out-of-range counted as
    forbidden."""
    t, s = allowed.shape
    r, c = -(-t // row_block), -(-s // col_block)
    full = np.zeros((r * row_block, c * col_block), bool)
    full[:t, :s] = allowed
    blocks = full.reshape(r, row_block, c, col_block)
    return blocks.any(axis=(1, 3)), blocks.all(axis=(1, 3))


def check_mask(mask: AttentionMask, allowed: np.ndarray, b: int):
    classes = mask.block_classes(b)
    if mask.kind == "dkdv":
        any_, all_ = brute_force_blocks(allowed[b].T, mask.row_block, mask.col_block)
    else:
        any_, all_ = brute_force_blocks(allowed[b], mask.row_block, mask.col_block)
    assert classes.shape == any_.shape
    dropped = any_ & (classes == 0)
    assert not dropped.any(), (f"{mask.kind}: blocks with allowed pairs skipped at "
                               f"{np.argwhere(dropped)[:3]}")
    wrong_full = (classes == 2) & ~all_
    assert not wrong_full.any(), (f"{mask.kind}: partial blocks called full at "
                                  f"{np.argwhere(wrong_full)[:3]}")
    return classes, any_, all_


CASES = [
    dict(kv_len=301, num_docs=(1, 6), pad_tokens=(0, 70)),
    dict(kv_len=300, q_len=77, num_docs=(2, 9), segment_ids="reused"),
    dict(kv_len=257, num_docs=(3, 12), segment_ids="shuffled", positions="global"),
    dict(kv_len=200, num_docs=(1, 4), segment_ids="large", positions="zeros"),
    dict(kv_len=130, q_len=1, num_docs=(1, 3)),
    dict(kv_len=160, num_docs=(20, 40), pad_tokens=(0, 3)),  # many short documents per block
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mask_against_brute_force(case, seed):
    lay = packed_layout(100 * case + seed, batch=3, **CASES[case])
    allowed = np.asarray(reference_mask(*lay.arrays))
    masks = create_attention_mask(*lay.arrays, fwd_params=P, bwd_params=BWD, calc_bwd_mask=True)
    assert [m.kind for m in masks] == ["fwd", "dq", "dkdv"]
    for m in masks:
        for b in range(3):
            classes, any_, all_ = check_mask(m, allowed, b)
            # Tight for one or two documents a block, whatever the ids (they are relabelled by
            # appearance): a visited block that has no allowed pair may only sit between visited
            # blocks (the bounds are a range).
            few_docs = CASES[case].get("num_docs", (1, 1))[1] <= 6
            if few_docs and CASES[case].get("segment_ids") != "reused":
                lo, hi = np.asarray(m.lower_bounds)[b], np.asarray(m.upper_bounds)[b]
                for row in range(len(lo)):
                    if any_[row].any():
                        assert lo[row] == np.argmax(any_[row])
                        assert hi[row] == len(any_[row]) - np.argmax(any_[row][::-1])


def test_full_blocks_found_and_padding_skipped():
    # one long document and padding: blocks below the diagonal are full, padding blocks skipped
    t = 256
    seg = np.zeros((1, t), np.int32)
    seg[:, 200:] = PADDING_SEGMENT_ID
    pos = np.arange(t, dtype=np.int32)[None]
    (mask,) = create_attention_mask(pos, seg, pos, seg, fwd_params=P)
    classes = mask.block_classes()
    assert classes.shape == (8, 16)
    assert (classes[7] == 0).all()  # query rows 224..255: all padding
    # query rows 160..191: full below the diagonal, partial on it, nothing above
    assert (classes[5, :10] == 2).all() and (classes[5, 10:12] == 1).all()
    assert (classes[5, 12:] == 0).all()
    assert (classes[6, :12] == 1).all()  # rows 192..223 mix padding in: never full
    assert (classes[:, 13:] == 0).all()  # kv blocks 208.. are padding only


def test_skip_pad_tokens_false_visits_padding_blocks():
    lay = packed_layout(5, batch=1, kv_len=128, num_docs=2, pad_tokens=48)
    (skip,) = create_attention_mask(*lay.arrays, fwd_params=P, skip_pad_tokens=True)
    (keep,) = create_attention_mask(*lay.arrays, fwd_params=P, skip_pad_tokens=False)
    assert np.count_nonzero(keep.block_classes()) > np.count_nonzero(skip.block_classes())
    allowed = np.asarray(reference_mask(*lay.arrays))
    check_mask(keep, allowed, 0)


def test_mask_is_a_pytree_and_jits():
    lay = packed_layout(7, batch=2, kv_len=100, num_docs=3)
    build = jax.jit(lambda *a: create_attention_mask(*a, fwd_params=P, bwd_params=BWD,
                                                     calc_bwd_mask=True))
    masks = build(*lay.arrays)
    eager = create_attention_mask(*lay.arrays, fwd_params=P, bwd_params=BWD, calc_bwd_mask=True)
    for a, b in zip(masks, eager):
        assert isinstance(a, AttentionMask) and a.kind == b.kind
        for x, y in zip(a.flatten(), b.flatten()):
            np.testing.assert_array_equal(x, y)
    leaves, tree = jax.tree_util.tree_flatten(masks)
    # 4 bounds per mask, and the forward mask's document chunks (runs.py)
    assert len(leaves) == 13 and all(leaf.dtype == jnp.int32 for leaf in leaves)
    assert masks[0].doc_runs.shape == (2, runs.max_chunks(100), 4)
    assert jax.tree_util.tree_unflatten(tree, leaves)[0].params == P
    # memory: 4 int32 per row block per mask, O(S / block)
    assert masks[0].lower_bounds.shape == (2, -(-100 // 32))


def test_readable_printout():
    lay = packed_layout(8, batch=1, kv_len=512, num_docs=3, pad_tokens=64)
    (mask,) = create_attention_mask(*lay.arrays, fwd_params=P)
    text = mask.format()
    assert text.startswith("fwd mask, batch row 0: 16x32 blocks of 32x16")
    assert "██" in text and "░░" in text
    assert "AttentionMask(kind='fwd'" in repr(mask) and "[[" not in repr(mask)


def _relabelled(seg: np.ndarray, style: str, rng) -> np.ndarray:
    """The same documents under other ids: shuffled, large (up to int32's maximum) or negative."""
    ids = np.unique(seg[seg != PADDING_SEGMENT_ID])
    new = {"shuffled": rng.permutation(len(ids)) * 7 + 3,
           "large": np.iinfo(np.int32).max - rng.permutation(len(ids)),
           "negative": np.iinfo(np.int32).min + rng.permutation(len(ids))}[style]
    out = seg.copy()
    for old_id, new_id in zip(ids, new):
        out[seg == old_id] = new_id
    return out


@pytest.mark.parametrize("style", ["shuffled", "large", "negative"])
def test_visited_blocks_do_not_depend_on_labels(style):
    """Many short documents: the mask visits the same blocks whatever the ids are (it used to
    visit ~3x the blocks under shuffled or large ids), and stays exact."""
    lay = packed_layout(31, batch=2, kv_len=700, num_docs=(40, 60), pad_tokens=(0, 30))
    rng = np.random.default_rng(5)
    q_seg = _relabelled(lay.query_segment_ids, style, rng)
    kv_seg = q_seg.copy()  # T == S: the same tokens
    base = create_attention_mask(*lay.arrays, fwd_params=P, bwd_params=BWD, calc_bwd_mask=True)
    other_arrays = (lay.query_positions, q_seg, lay.kv_positions, kv_seg)
    other = create_attention_mask(*other_arrays, fwd_params=P, bwd_params=BWD,
                                  calc_bwd_mask=True)
    allowed = np.asarray(reference_mask(*other_arrays))
    for a, b in zip(base, other):
        for row in range(2):
            np.testing.assert_array_equal(a.block_classes(row), b.block_classes(row))
            check_mask(b, allowed, row)


def test_relabel_keeps_equality_across_queries_and_keys():
    from kvax._src.attention.mask import relabel_by_appearance

    kv = jnp.asarray([[9, 9, 4, 9, -1, 7]], jnp.int32)  # A B A: 9 comes back after 4
    q = jnp.asarray([[4, 9, 11, -1]], jnp.int32)  # 11 appears only among the queries
    q_lab, kv_lab = relabel_by_appearance(q, kv)
    np.testing.assert_array_equal(kv_lab, [[0, 0, 2, 0, -1, 5]])
    np.testing.assert_array_equal(q_lab, [[2, 0, 6 + 2, -1]])



@pytest.mark.parametrize("b,n", [(1, 257), (3, 257), (1, 30011), (2, 30011)])
def test_row_order_is_numpys_stable_lexsort(b, n):
    """lexsort.row_order (the masks' sorts): each row's stable order by several int32 keys,
    the extremes and repeats included, as numpy's lexsort gives it (its keys least significant
    first, ties by index). On a Hopper GPU rows of 30011 are sorted by CUB, the short ones by
    XLA."""
    from kvax._src.attention.lexsort import row_order

    rng = np.random.default_rng(11 + b)
    values = np.asarray([-2**31, -2**31 + 1, -7, -1, 0, 1, 5, 2**31 - 2, 2**31 - 1], np.int32)
    first, second = (rng.choice(values, (b, n)) for _ in range(2))
    got = np.asarray(jax.jit(row_order)(jnp.asarray(first), jnp.asarray(second)))
    for row in range(b):
        want = np.lexsort((np.arange(n), second[row], first[row]))
        np.testing.assert_array_equal(got[row], want)
    np.testing.assert_array_equal(np.asarray(row_order(jnp.asarray(first))),
                                  np.argsort(first, axis=1, kind="stable"))


def test_masks_sort_only_as_cub_takes_it():
    """XLA's GPU compiler hands a sort to CUB (no kernels of its own to compile) only for one
    uint32 key with one array of values, in one row: every sort a Hopper step's masks make
    (the ids' relabelling, the forward's key ranks) has that form, for several batch rows too."""
    from kvax._src.attention import mask as mask_module
    from kvax._src.config import PADDING_SEGMENT_ID as PAD

    layout = packed_layout(3, batch=2, kv_len=300, num_docs=(2, 5))
    pos, seg = jnp.asarray(layout.kv_positions), jnp.asarray(layout.kv_segment_ids)

    def masks(p, s):
        return mask_module.build_masks(p, s, p, s, fwd_params=P, bwd_params=BWD,
                                       skip_pad_tokens=True, schedule=False)

    from kvax._src.attention import mosaic_fwd

    def ranks(p, s):
        return mosaic_fwd.rank_layouts(p, s, p, s, 384, 384, pad_id=PAD,
                                       variant=mask_module.MaskVariant())

    for fn in (masks, ranks):
        text = jax.jit(fn).lower(pos, seg).as_text()
        sorts = re.findall(r'"stablehlo.sort"\(.*?\}\) : \(([^)]*)\)', text, re.DOTALL)
        assert sorts and len(sorts) == text.count('"stablehlo.sort"')
        for types in sorts:
            assert re.fullmatch(r"tensor<(\d+)xui32>, tensor<\1xi32>", types), types
        comparators = re.findall(r'"stablehlo.sort"\(.*?\}\) :', text, re.DOTALL)
        assert all(c.count("stablehlo.compare") == 1 for c in comparators)


VARIANTS = [dict(is_causal=False), dict(local_window_size=5), dict(local_window_size=(7, 0)),
            dict(is_causal=False, local_window_size=(3, 9)), dict(is_causal=False,
                                                                 local_window_size=0)]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(f"{k}={v[k]}" for k in v))
@pytest.mark.parametrize("case", [0, 1, 2, 5])
def test_variant_masks_against_brute_force(case, variant):
    """Bidirectional and windowed masks: never skip a block with an allowed pair, never call a
    partial block full (kvax_testing.mask_terms gives the element rule)."""
    from kvax_testing import mask_terms

    lay = packed_layout(700 + case, batch=2, **CASES[case])
    allowed = np.asarray(reference_mask(*lay.arrays, mask_terms=mask_terms(**variant)))
    masks = create_attention_mask(*lay.arrays, fwd_params=P, bwd_params=BWD, calc_bwd_mask=True,
                                  **variant)
    for m in masks:
        for b in range(2):
            check_mask(m, allowed, b)


def test_window_skips_blocks_outside_it():
    """One long document, a 40-token window: the visited blocks grow as S * W, not S^2."""
    t = 1024
    pos = np.arange(t, dtype=np.int32)[None]
    seg = np.zeros((1, t), np.int32)
    (causal,) = create_attention_mask(pos, seg, pos, seg, fwd_params=P)
    (window,) = create_attention_mask(pos, seg, pos, seg, fwd_params=P, local_window_size=(40, 0))
    visited = np.count_nonzero(window.block_classes())
    assert visited <= (t // 32) * (40 // 16 + 3)  # each 32-row block meets at most 5 key blocks
    assert visited * 5 < np.count_nonzero(causal.block_classes())
