"""The Triton kernels' speed with the cubin kvax's build makes (Triton's ptxas, carried in the
launch) against the cubin jaxlib makes from the same PTX at the first launch (its own ptxas):
first_call.py's step (`--backend triton` by default) in fresh processes, the two kinds in turns,
each with its own kvax cache folder (the first process of each kind builds, the rest read).

    python tools/dev/cubin_ab.py --doc-median 1100 --rounds 3 [--calls 20]

Prints per process its first call (s) and the median of --calls calls after it (ms); a
forward+backward step by default, --forward-only for the forward alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from first_call import training_step, workload_of, workload_parser  # noqa: E402
from workloads import Workload  # noqa: E402

KINDS = ("kvax", "jaxlib")  # whose ptxas made the cubin the kernels run


def child(workload: dict, kind: str, backend: str, calls: int, forward_only: bool) -> dict:
    import jax

    from kvax._src.attention import triton_launch

    if kind == "jaxlib":  # no cubin from the build: jaxlib compiles the PTX at the first launch
        triton_launch.make_cubin = lambda *args: None
    step, args, _ = training_step(Workload(**workload), backend, forward_only=forward_only)
    t0 = time.perf_counter()
    jax.block_until_ready(step(*args))
    first = time.perf_counter() - t0
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        jax.block_until_ready(step(*args))
        times.append((time.perf_counter() - t) * 1e3)
    return dict(kind=kind, first_s=first, median_ms=statistics.median(times),
                images=len(triton_launch._images))


def main(argv=None):
    p = workload_parser(__doc__)
    p.add_argument("--kind", default=None, choices=KINDS, help=argparse.SUPPRESS)
    p.add_argument("--backend", default="triton")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--forward-only", action="store_true")
    args = p.parse_args(argv)
    workload = workload_of(args)
    if args.child:
        print(json.dumps(child(json.loads(args.child), args.kind, args.backend, args.calls,
                               args.forward_only)))
        return None
    folders = {kind: tempfile.mkdtemp(prefix=f"kvax-cubin-{kind}-") for kind in KINDS}
    rows = []
    for r in range(args.rounds):
        for kind in KINDS if r % 2 == 0 else KINDS[::-1]:
            env = dict(os.environ, KVAX_CACHE_DIR=folders[kind])
            out = subprocess.run([sys.executable, __file__, "--child", json.dumps(workload),
                                  "--kind", kind, "--backend", args.backend, "--calls",
                                  str(args.calls)] + ["--forward-only"] * args.forward_only,
                                 env=env, capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(out.stderr[-3000:])
            row = json.loads(out.stdout.splitlines()[-1])
            rows.append(row)
            print(f"round {r} {kind:>6}: first call {row['first_s']:.2f} s, median of "
                  f"{args.calls} {row['median_ms']:.3f} ms (kernels with kvax's cubin: "
                  f"{row['images']})", flush=True)
    for kind in KINDS:
        mine = [row["median_ms"] for row in rows if row["kind"] == kind]
        print(f"{kind:>6}: medians {min(mine):.3f}-{max(mine):.3f} ms", flush=True)
    return rows


if __name__ == "__main__":
    main()
