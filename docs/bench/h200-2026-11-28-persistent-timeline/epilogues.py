"""The persistent forward's epilogue and prologue cycles by what each consumer stores: its
whole 64 rows, part of them (a document chunk's first or last rows), or none. Reads call 4's
saved stamps (no GPU); run from the repository root."""
import os
import sys

import numpy as np

sys.path.insert(0, "tools/dev")
sys.path.insert(0, "tools")
import profile_timeline as pt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
for row in (1, 0, 2):
    saved = np.load(os.path.join(HERE, "timeline", f"row{row}-64x128x2p.npz"))
    names = {str(n): i for i, n in enumerate(saved["names"])}
    items, buf = saved["items"], saved["buffer"]
    taken = pt.persistent_programs(items[None], saved["work"], len(buf) // (3 * 64 * 4),
                                   int(saved["heads"]))
    kinds = {}
    for blk, wg, index, (_, item), phases in pt.persistent_records(buf, names, 64, taken):
        if index == 0:  # each block's first program loads its Q in its prologue
            continue
        first = items[item, 0] * 8 + wg * 64  # this consumer's 64 rows
        own_start, own_end = items[item, 1], items[item, 2]
        kind = ("whole" if own_start <= first and own_end >= first + 64 else
                "none" if own_end <= first or own_start >= first + 64 else "partial")
        kinds.setdefault(kind, []).append([phases[p] for p in ("epilogue", "prologue", "gap")])
    for kind, cycles in kinds.items():
        med = np.median(np.array(cycles), axis=0)
        print(f"row {row} {kind:8s} {len(cycles):5d} consumer programs, median cycles: epilogue "
              f"{med[0]:.0f}, prologue {med[1]:.0f}, gap {med[2]:.0f}")
