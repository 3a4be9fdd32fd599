"""tools/mask_tightness.py on CPU: the varlen block count by hand, and one workload measured."""

import numpy as np

import mask_tightness
from workloads import PADDING_SEGMENT_ID, Workload


def test_document_aligned_blocks_by_hand():
    # 200 tokens: query tiles of rows 0-127 (1 key tile) and 128-199 (2); 100 tokens: 1
    runs = [(0, 200), (200, 300)]
    assert mask_tightness.document_aligned_blocks(runs, 128, 128) == 4
    assert mask_tightness.document_aligned_blocks(runs, 128, 64) == 2 + 4 + 2


def test_document_aligned_blocks_of_a_workload_skip_padding():
    w = Workload(1000, 3, 100)
    _, seg = w.layout()
    assert np.count_nonzero(seg[0] == PADDING_SEGMENT_ID) == 100
    runs = w.runs(0)
    assert sum(e - s for s, e in runs) == 900
    assert mask_tightness.document_aligned_blocks(runs, 128, 128) == sum(
        n * (n + 1) // 2 for n in (-(-(e - s) // 128) for s, e in runs))


def test_measure_small_workload():
    r = mask_tightness.measure(Workload(4096, num_pad_tokens=100, doc_median=300, ids="shuffled"))
    for kind in ("fwd", "dq", "dkdv"):
        assert r[kind]["visited"] >= r[kind]["minimum"] > 0
    assert 0 < r["fwd"]["useful"] <= r["fwd"]["useful_document_aligned"] <= 1
    assert 0 < r["fwd"]["hopper_masked"] <= r["fwd"]["hopper_tiles"]
    assert r["fwd"]["useful"] < r["fwd"]["useful_halves"] <= 1  # halves skip what they miss


def test_hopper_programs_take_chunks_on_few_documents():
    """On a row of few long documents the Hopper forward's chunks compute fewer pairs than the
    row-aligned tiles, with fewer tiles under the element rule."""
    r = mask_tightness.measure(Workload(16384, num_pad_tokens=300, doc_median=3000,
                                        ids="shuffled"))
    assert r["fwd"]["hopper_chunks"]
    assert r["fwd"]["useful"] < r["fwd"]["useful_hopper"] <= r["fwd"]["useful_document_aligned"]


def test_packed_heads_compute_fewer_pairs_on_short_documents():
    """Short documents: the mask's chunks are there, one head per program keeps the row-aligned
    tiles (too many chunks), four heads per program take the chunks split in 32-token programs
    and compute fewer pairs."""
    r = mask_tightness.measure(Workload(8192, num_pad_tokens=100, doc_median=190,
                                        ids="shuffled"))
    assert not r["fwd"]["hopper_chunks"]
    assert r["fwd"]["useful_hopper"] < r["fwd"]["useful_hopper_packed4"] <= 1
