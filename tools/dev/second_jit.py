"""A second jit of the same step in the same process: what its first call costs once the first
jit's has compiled (an eval step beside the training step, a step built again after
jax.clear_caches). first_call.py's step, in one fresh process with empty kernel caches.

    python tools/dev/second_jit.py --doc-median 1100 [--as-before]

--as-before runs without mosaic_cache.py's hooks, as before it: our Mosaic modules keep the
names Mosaic GPU gives them (a count of the modules lowered in the process), so the second
jit's kernels have other hashes and jaxlib compiles them again, and Pallas lowers them again.
Prints one line per jit: first call (lower, XLA), the Mosaic kernels compiled ahead and read
from disk by then, and the modules whose lowering was reused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from first_call import (  # noqa: E402
    cold_env, kernel_counts, training_step, workload_of, workload_parser)
from workloads import Workload  # noqa: E402


def child(workload: dict, as_before: bool) -> list[dict]:
    import jax
    from kvax._src.attention import mosaic_cache

    if as_before:
        mosaic_cache._installed = True  # never installs the hooks
    rows = []
    for name in ("first jit", "second jit"):
        step, args, _ = training_step(Workload(**workload))
        t0 = time.perf_counter()
        lowered = step.lower(*args)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        t3 = time.perf_counter()
        rows.append(dict(jit=name, first_call_s=t3 - t0, lower_s=t1 - t0, xla_compile_s=t2 - t1,
                         **kernel_counts()))
    return rows


def main(argv=None):
    p = workload_parser(__doc__)
    p.add_argument("--as-before", action="store_true")
    args = p.parse_args(argv)
    switch = ["--as-before"] if args.as_before else []
    if args.child:
        print(json.dumps(child(json.loads(args.child), args.as_before)))
        return
    workload = workload_of(args)
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(workload), *switch],
                         env=cold_env(tempfile.mkdtemp(prefix="kvax-cache-")),
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr[-3000:])
    names = "as before" if args.as_before else "kvax's hooks"
    for row in json.loads(out.stdout.splitlines()[-1]):
        print(f"{row['jit']:>10} ({names}): first call {row['first_call_s']:.1f} s (lower "
              f"{row['lower_s']:.1f}, XLA {row['xla_compile_s']:.1f}); Mosaic kernels compiled "
              f"ahead {row['kernels_compiled']}, read from disk {row['kernels_loaded']}; "
              f"lowerings reused {row['lowerings_reused']}")


if __name__ == "__main__":
    main()
