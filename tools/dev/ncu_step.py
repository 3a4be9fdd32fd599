"""One forward+backward of ours and of JAX peers on one benchmark row, each run once after
compiling, for Nsight Compute to profile the kernels (no timing here):

    XLA_FLAGS=--xla_gpu_autotune_level=0 ncu --clock-control none --section SpeedOfLight \
        --section WarpStateStats ... -o OUT/prof \
        python3 tools/dev/ncu_step.py --doc-median 1100 --ids shuffled --which ours,fa3

Every kernel is profiled: on the H100 the process died at once when ncu was given a
--kernel-name filter, or the InstructionStats or SourceCounters sections
(docs/bench/h100-2026-11-24-profile). On 2026-11-28 it died (segmentation fault) after the
inputs' kernels with the sections above and with a short --metrics list alike
(docs/bench/h100-2026-11-28-clocks); tools/dev/clocks.py splits a gap into cycles and clock
without ncu. --which takes "ours" (deterministic), "ours-nondet" and the JAX peers' names.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench import jax_step_once  # noqa: E402
from workloads import add_row_args, row_from_args  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    add_row_args(p)
    p.add_argument("--which", default="ours,fa3", help="ours and peers' names, in turn")
    args = p.parse_args()
    w = row_from_args(args)
    for which in args.which.split(","):
        print(which, w.name, f"{jax_step_once(which, w):.2f} GiB", flush=True)


if __name__ == "__main__":
    main()
