"""Where a cold first call's XLA compile goes: first_call.py's step in a fresh process under
jax's profiler (host tracer only, no Python tracer), then the compile's named C++ ranges
(XLA's passes, Mosaic GPU's "Compile" of each kernel, ptxas) summed by name.

    python tools/dev/compile_profile.py --doc-median 1100 --backend auto --out OUT
    python tools/dev/compile_profile.py --doc-median 1100 --backend triton --out OUT
    python tools/dev/compile_profile.py --doc-median 1100 --mask-apart   # the masks' own call
    python tools/dev/compile_profile.py --doc-median 1100 --warm   # a second process, profiled

Each run is a fresh process with empty kernel caches (as first_call.py's cold one); with --warm
a first such process fills them unprofiled and a second one, profiled, finds them. Prints the
lower / XLA / first-run seconds, then the ranges over --min-ms by phase (inputs, lower, xla,
first_run), longest first: name, thread, count, total and longest milliseconds; writes
OUT/compile_profile_BACKEND[_SWITCHES].json with every range over 1 ms and its start.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from first_call import cold_env, training_step, workload_of, workload_parser  # noqa: E402
from workloads import Workload  # noqa: E402


def ranges(trace_dir: str, min_ms: float = 1.0) -> list[dict]:
    """Every named host range of the profile jax wrote under trace_dir (its latest) at least
    min_ms long, as dicts (name, thread, duration in ms, the phase it started in: lower, xla or
    first_run, from the child's "phase:" annotations, and its start in ms from the
    lowering's). Python frames ("$...") are not traced, so none appear."""
    from jax._src.profiler import ProfileData

    xplane = max(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True))
    events = [(event, line.name) for plane in ProfileData.from_file(xplane).planes
              for line in plane.lines for event in line.events]
    phases = [(event.start_ns, event.start_ns + event.duration_ns, event.name[6:])
              for event, _ in events if event.name.startswith("phase:")]

    def phase(start_ns):
        return next((name for lo, hi, name in phases if lo <= start_ns < hi), "other")

    origin = min((lo for lo, _, _ in phases), default=0)
    return [dict(name=event.name, thread=thread, ms=event.duration_ns / 1e6,
                 phase=phase(event.start_ns), start_ms=(event.start_ns - origin) / 1e6)
            for event, thread in events
            if event.duration_ns >= min_ms * 1e6 and not event.name.startswith(("$", "phase:"))]


def summary(rows: list[dict]) -> list[dict]:
    """Ranges summed by (phase, name, thread family): count, total and longest ms, by phase and
    then longest first."""
    groups = collections.defaultdict(list)
    for row in rows:
        groups[(row["phase"], row["name"], row["thread"].split("/")[0])].append(row["ms"])
    order = {"inputs": 0, "lower": 1, "xla": 2, "first_run": 3}
    return sorted((dict(phase=phase, name=name, thread=thread, count=len(ms), total_ms=sum(ms),
                        max_ms=max(ms)) for (phase, name, thread), ms in groups.items()),
                  key=lambda g: (order.get(g["phase"], 3), -g["total_ms"]))


def child(workload: dict, backend: str, trace_dir: str, forward_only: bool = False,
          mask_apart: bool = False) -> dict:
    import jax

    import kvax.ops  # noqa: F401

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    options.host_tracer_level = 2
    jax.profiler.start_trace(trace_dir, profiler_options=options)
    with jax.profiler.TraceAnnotation("phase:inputs"):  # and with mask_apart the masks' call
        step, args, mask_s = training_step(Workload(**workload), backend,
                                           forward_only=forward_only, mask_apart=mask_apart)
    t0 = time.perf_counter()
    with jax.profiler.TraceAnnotation("phase:lower"):
        lowered = step.lower(*args)
    t1 = time.perf_counter()
    with jax.profiler.TraceAnnotation("phase:xla"):
        compiled = lowered.compile()
    t2 = time.perf_counter()
    with jax.profiler.TraceAnnotation("phase:first_run"):
        jax.block_until_ready(compiled(*args))
    t3 = time.perf_counter()
    jax.profiler.stop_trace()
    from kvax._src.attention import prewarm
    return dict(lower_s=t1 - t0, xla_compile_s=t2 - t1, first_run_s=t3 - t2, mask_s=mask_s,
                compiled_ahead=len(prewarm.compiled), ranges=ranges(trace_dir))


def main(argv=None):
    p = workload_parser(__doc__)
    p.add_argument("--trace-dir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--backend", default="auto")
    p.add_argument("--forward-only", action="store_true", help="a forward step only")
    p.add_argument("--mask-apart", action="store_true",
                   help="the masks built by a jitted call of their own first (phase inputs)")
    p.add_argument("--warm", action="store_true",
                   help="profile a second process, after a cold one filled the kernel caches")
    p.add_argument("--min-ms", type=float, default=50.0, help="print ranges this long or longer")
    p.add_argument("--out", default="bench-out")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child), args.backend, args.trace_dir,
                               args.forward_only, args.mask_apart)))
        return
    workload = workload_of(args)
    scratch = tempfile.mkdtemp(prefix="kvax-compile-")
    env = cold_env(scratch)
    switches = [flag for flag, on in (("--forward-only", args.forward_only),
                                      ("--mask-apart", args.mask_apart)) if on]
    for i in range(1 + args.warm):  # with --warm the first process only fills the caches
        out = subprocess.run([sys.executable, __file__, "--child", json.dumps(workload),
                              "--backend", args.backend, "--trace-dir",
                              os.path.join(scratch, f"trace{i}"), *switches],
                             env=env, capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
    switches += ["--warm"] if args.warm else []
    result = json.loads(out.stdout.splitlines()[-1])
    print(f"{args.backend}{''.join(' ' + flag for flag in switches)}: masks apart "
          f"{result['mask_s']:.2f} s, lower {result['lower_s']:.2f} s, "
          f"XLA {result['xla_compile_s']:.2f} s,"
          f" first run {result['first_run_s']:.2f} s; kernels compiled ahead: "
          f"{result['compiled_ahead']} (KVAX_PREWARM={os.environ.get('KVAX_PREWARM', '1')})")
    groups = summary(result["ranges"])
    for g in groups:
        if g["total_ms"] >= args.min_ms:
            print(f"{g['phase']:9s} {g['total_ms']:9.1f} ms {g['count']:5d}x "
                  f"(longest {g['max_ms']:8.1f})  "
                  f"{g['thread'][:28]:28s} {g['name'][:90]}")
    os.makedirs(args.out, exist_ok=True)
    name = "_".join([args.backend] + [flag[2:].replace("-", "_") for flag in switches])
    with open(os.path.join(args.out, f"compile_profile_{name}.json"), "w") as f:
        json.dump(dict(workload=workload, **result, summary=groups), f, indent=1)


if __name__ == "__main__":
    main()
