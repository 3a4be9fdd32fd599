"""tools/mask_tightness.py on CPU: the varlen block count by hand, and one workload measured."""

import numpy as np

import mask_tightness
from workloads import PADDING_SEGMENT_ID, Workload


def test_document_aligned_blocks_by_hand():
    # 200 tokens: query tiles of rows 0-127 (1 key tile) and 128-199 (2); 100 tokens: 1; padding
    seg = np.array([7] * 200 + [3] * 100 + [PADDING_SEGMENT_ID] * 20)
    assert mask_tightness.document_aligned_blocks(seg, 128, 128) == 4
    assert mask_tightness.document_aligned_blocks(seg, 128, 64) == 2 + 4 + 2


def test_measure_small_workload():
    r = mask_tightness.measure(Workload(4096, num_pad_tokens=100, doc_median=300, ids="shuffled"))
    for kind in ("fwd", "dq", "dkdv"):
        assert r[kind]["visited"] >= r[kind]["minimum"] > 0
    assert 0 < r["fwd"]["useful"] <= r["fwd"]["useful_document_aligned"] <= 1
