"""How many blocks the block mask visits against the exact minimum (blocks holding at least one
allowed query-key pair), on log-normal document lengths and the id styles pipelines produce.

    python tools/mask_tightness.py [--seq-len 65536] [--medians 150 300 600 1000]

Runs on CPU (mask construction only). Blocks are the Hopper defaults: forward 128x128, dQ 128x64,
dK/dV 128 keys x 64 queries. Also the forward's useful share of the pairs it computes (allowed
pairs / (visited blocks x 128 x 128)) beside that of a varlen kernel such as FlashAttention-3's,
whose tiles start at each document's first token (so it visits fewer blocks where documents
start mid-tile; causal documents of contiguous tokens), and that of the Hopper forward's
programs (the documents' chunks of runs.py where a row takes them, else the row-aligned tiles)
with the share of its tiles that take the element rule, and the same useful share with 4 query
heads per program (MosaicConfig.pack: chunks of 32 tokens), and with each 64-row half of a
row-aligned program (a consumer warpgroup's rows) visiting only the key tiles its own rows
meet (not done by the kernels: a lead, what it would save). Prints a table and writes
OUT/mask_tightness.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import PADDING_SEGMENT_ID, Workload  # noqa: E402


def exact_blocks(pos, seg, row_block, col_block, transpose=False) -> int:
    """Block pairs (query block, key block) holding an allowed pair, for one row of T == S
    tokens: per document, each query block meets the key blocks from the document's first key
    block to the last key at or before its latest query position."""
    pairs = set()
    for d in np.unique(seg[seg != PADDING_SEGMENT_ID]):
        idx = np.flatnonzero(seg == d)
        p = pos[idx]
        order = np.argsort(p, kind="stable")
        idx_by_pos, p_sorted = idx[order], p[order]
        for qb in np.unique(idx // row_block if not transpose else idx // col_block):
            size = row_block if not transpose else col_block
            q_in = idx[(idx // size) == qb]
            latest = pos[q_in].max()
            keys = idx_by_pos[: np.searchsorted(p_sorted, latest, side="right")]
            kb = np.unique(keys // (col_block if not transpose else row_block))
            pairs.update((int(qb), int(k)) for k in kb)
    return len(pairs)


def document_aligned_blocks(runs, row_block, col_block) -> int:
    """Blocks a causal varlen kernel visits for documents at runs [(start, end)]
    (Workload.runs): each document's query tiles start at its first token, and query tile i
    meets the key tiles up to its last row."""
    total = 0
    for start, end in runs:
        length = end - start
        last_rows = np.minimum(np.arange(1, -(-length // row_block) + 1) * row_block, length)
        total += int(np.sum((last_rows - 1) // col_block + 1))
    return total


def measure(w: Workload) -> dict:
    import jax.numpy as jnp

    from kvax.ops import create_attention_mask
    from kvax.utils import default_params

    pos, seg = w.layout()
    fwd_p = default_params("NVIDIA H100 80GB HBM3", backward=False)
    bwd_p = default_params("NVIDIA H100 80GB HBM3", backward=True)
    masks = create_attention_mask(jnp.asarray(pos), jnp.asarray(seg), jnp.asarray(pos),
                                  jnp.asarray(seg), fwd_params=fwd_p, bwd_params=bwd_p,
                                  calc_bwd_mask=True)
    out = dict(workload=w.name, documents=w.documents())
    for m in masks:
        visited = int(np.count_nonzero(m.block_classes(0)))
        if m.kind == "dkdv":  # rows are key blocks: count (query block, key block) pairs
            minimum = exact_blocks(pos[0], seg[0], m.col_block, m.row_block)
        else:
            minimum = exact_blocks(pos[0], seg[0], m.row_block, m.col_block)
        out[m.kind] = dict(visited=visited, minimum=minimum, ratio=visited / max(minimum, 1))
    tile = masks[0].row_block * masks[0].col_block
    out["fwd"]["useful"] = w.allowed_pairs() / (out["fwd"]["visited"] * tile)
    aligned = document_aligned_blocks(w.runs(0), masks[0].row_block, masks[0].col_block)
    out["fwd"]["useful_document_aligned"] = w.allowed_pairs() / (aligned * tile)
    out["fwd"].update(hopper_programs(masks[0], w.seq_len))
    out["fwd"]["useful_hopper"] = w.allowed_pairs() / (out["fwd"]["hopper_tiles"] * tile)
    packed = hopper_programs(masks[0], w.seq_len, pack=4)
    out["fwd"]["useful_hopper_packed4"] = w.allowed_pairs() / (packed["hopper_tiles"] * tile / 4)
    half = masks[0].row_block // 2
    out["fwd"]["useful_halves"] = w.allowed_pairs() / (
        exact_blocks(pos[0], seg[0], half, masks[0].col_block) * half * masks[0].col_block)
    return out


def hopper_programs(mask, length: int, pack: int = 1) -> dict:
    """What the Hopper forward's programs visit on batch row 0 (mosaic_fwd.programs: the
    documents' chunks where the row takes them, else the mask's row-aligned tiles): 128x128
    tiles (with pack > 1 each covers that many heads), how many of them take the element rule,
    and whether the row took the chunks."""
    from kvax._src.attention import mosaic_fwd

    config = mosaic_fwd.MosaicConfig(pack=pack)
    items = np.asarray(mosaic_fwd.programs(mask, config, length, length,
                                           doc_runs=mask.doc_runs))[0]
    tiles = np.asarray(mosaic_fwd.programs(mask, config, length, length))[0]
    live = items[:, 2] > items[:, 1]
    steps, f_lo, f_hi = items[live, 4], items[live, 5], items[live, 6]
    chunked = not np.array_equal(items[:len(tiles)], tiles)
    return dict(hopper_tiles=int(steps.sum()), hopper_masked=int((steps - (f_hi - f_lo)).sum()),
                hopper_chunks=chunked)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--medians", type=int, nargs="+", default=[150, 300, 600, 1000])
    p.add_argument("--out", default="bench-out")
    args = p.parse_args(argv)
    rows = []
    print(f"{'workload':<58} {'docs':>5}  {'fwd visited/min':>16} {'dq':>14} {'dkdv':>14}"
          f"  fwd useful (varlen)  Hopper forward: useful, masked tiles (chunks?), 4 heads packed;"
          f" 64-row halves")
    for median in args.medians:
        for ids in ("sequential", "shuffled", "large"):
            r = measure(Workload(args.seq_len, num_pad_tokens=1000, ids=ids,
                                 doc_median=median))
            rows.append(r)
            cells = [f"{r[k]['visited']}/{r[k]['minimum']} ({r[k]['ratio']:.2f})"
                     for k in ("fwd", "dq", "dkdv")]
            print(f"{r['workload']:<58} {r['documents']:>5}  {cells[0]:>16} {cells[1]:>14} "
                  f"{cells[2]:>14}  {r['fwd']['useful']:.3f} "
                  f"({r['fwd']['useful_document_aligned']:.3f})        "
                  f"{r['fwd']['useful_hopper']:.3f}, "
                  f"{r['fwd']['hopper_masked'] / r['fwd']['hopper_tiles']:.2f} "
                  f"({'yes' if r['fwd']['hopper_chunks'] else 'no'}), "
                  f"{r['fwd']['useful_hopper_packed4']:.3f}; {r['fwd']['useful_halves']:.3f}",
                  flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "mask_tightness.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
