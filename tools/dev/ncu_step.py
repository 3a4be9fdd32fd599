"""One forward+backward of ours and of JAX peers on one benchmark row, each run once after
compiling, for Nsight Compute to profile the kernels (no timing here):

    XLA_FLAGS=--xla_gpu_autotune_level=0 ncu --clock-control none --section SpeedOfLight \
        --section WarpStateStats ... -o OUT/prof \
        python3 tools/dev/ncu_step.py --doc-median 1100 --ids shuffled --which ours,fa3

Every kernel is profiled: on the H100 the process died at once when ncu was given a
--kernel-name filter, or the InstructionStats or SourceCounters sections
(docs/bench/h100-2026-11-24-profile).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench import jax_step_once  # noqa: E402
from workloads import Workload  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seq-len", type=int, default=65536)
    p.add_argument("--num-segments", type=int, default=8)
    p.add_argument("--num-pad-tokens", type=int, default=1000)
    p.add_argument("--doc-median", type=int, default=None)
    p.add_argument("--ids", default="sequential")
    p.add_argument("--which", default="ours,fa3", help="ours and peers' names, in turn")
    args = p.parse_args()
    w = Workload(args.seq_len, args.num_segments, args.num_pad_tokens, ids=args.ids,
                 doc_median=args.doc_median)
    for which in args.which.split(","):
        print(which, w.name, f"{jax_step_once(which, w):.2f} GiB", flush=True)


if __name__ == "__main__":
    main()
