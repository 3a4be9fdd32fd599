"""Per-call times of our Hopper forward (one or more MosaicConfigs, spike_mosaic.py's names) and
FlashAttention-3's on benchmark rows, with the GPU's SM clock and power logged beside them: how
much each kernel's calls spread, and whether the spread follows the clock (the spike's medians
of 10 calls read ratios that moved by 5-10% between rounds and machines).

Three passes per row: single calls of each kernel in turn (every other turn in reverse), then
bursts of 10 calls of one kernel in turn, each waited for, then bursts of 10 queued calls with one
wait (recorded as a tenth of the burst: the host's work per call hidden behind the GPU's).
nvidia-smi samples every 20 ms; each single call is matched with the samples taken while it ran.
Writes every call to OUT/calls-ROW.txt (pass, turn, kernel, call in burst, start time, ms) and
the samples to OUT/smi.csv, and prints the summaries.

    python tools/dev/per_call.py --out DIR [--rows 0,1] [--configs 64x128x2] [--turns 40] \
        [--bursts 10] [--public]

Rows are spike_mosaic.py's (0: 8 documents, 1: log-normal, 2: short, 3: 16 documents at 128k,
4: one causal document, 5: one bidirectional 16k document). Needs a Hopper GPU and
flash-attn3-jax. Our kernels close over the layout and the mask (spike_mosaic.kernels), so XLA
folds the tables the forward builds from them into constants: these are the kernel's calls (and
the logsumexp's gather), not the public API's, whose tables take about 10 more small kernels a call
(tools/bench.py times those).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import spike_mosaic  # noqa: E402

SMI_FIELDS = "timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active"


def kernels(row: int, params, configs, public: bool = False):
    """(workload, inputs, {config: our forward with it, "fa3": FA3's varlen forward}), jitted;
    with public, also "api": kvax.ops.flash_attention with the layout and masks as arguments
    (as tools/bench.py times it), "apic": the same call closed over them, and "fa3a": FA3
    with the same arguments passed and unused (their own cost)."""
    w = spike_mosaic.ROWS[row]
    (q, k, v, pos, seg), fns = spike_mosaic.kernels(w, configs, params)
    ours = {text: fns[text] for text in configs}
    fa3 = spike_mosaic.fa3_forward(w, pos, seg)
    peers = {"fa3": fa3}
    if public:
        import jax

        import kvax

        masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True,
                                               is_causal=w.causal)

        def call(q, k, v, pos, seg, masks):
            return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                            scale=w.head_dim ** -0.5, is_causal=w.causal)

        api = jax.jit(call)
        ours["api"] = lambda q, k, v: api(q, k, v, pos, seg, masks)
        # closed over the layout and the masks: XLA folds what the call builds from them
        ours["apic"] = jax.jit(lambda q, k, v: call(q, k, v, pos, seg, masks))
        # FA3 handed the same arguments, unused: what passing them costs
        carried = jax.jit(lambda q, k, v, pos, seg, masks: fa3(q, k, v), keep_unused=True)
        peers["fa3a"] = lambda q, k, v: carried(q, k, v, pos, seg, masks)
    return w, (q, k, v), {**ours, **peers}


def timed_calls(fns, args, turns: int, bursts: int):
    """[(pass, turn, kernel, call in burst, start time, ms)] for both passes."""
    import jax

    calls = []
    for name in fns:  # compiled and warm before any timing
        for _ in range(5):
            jax.block_until_ready(fns[name](*args))
    for mode, rounds, reps in (("alternate", turns, 1), ("bursts", bursts, 10)):
        for i in range(rounds):
            for name in (list(fns) if i % 2 == 0 else list(fns)[::-1]):
                for j in range(reps):
                    start = time.time()
                    jax.block_until_ready(fns[name](*args))
                    calls.append((mode, i, name, j, start, (time.time() - start) * 1e3))
    # 10 calls queued before one wait, as a training step queues its layers: the host's work of
    # a call (its arguments, the launch) overlaps the previous call's kernels; a tenth of each
    # burst's time is recorded as one call
    for i in range(bursts):
        for name in (list(fns) if i % 2 == 0 else list(fns)[::-1]):
            start = time.time()
            jax.block_until_ready([fns[name](*args) for _ in range(10)])
            calls.append(("queued", i, name, 0, start, (time.time() - start) * 1e2))
    return calls


def smi_rows(path: str):
    """(values, reasons) of nvidia-smi's csv (a timestamp, numeric fields, the throttle reasons
    last; other lines skipped): values [n, 1 + fields] float (the time, then each field's number
    without its unit) and each sample's throttle reasons' bitmask. tools/dev/clocks.py reads
    its samples here too."""
    values, seen = [], []
    for line in open(path):
        parts = [x.strip() for x in line.split(",")]
        try:
            when = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            values.append([when, *(float(x.split()[0]) for x in parts[1:-1])])
            seen.append(parts[-1])
        except (ValueError, IndexError):
            continue
    width = max((len(v) for v in values), default=1)
    return np.array(values, np.float64).reshape(-1, width), np.array(seen, object)


@contextlib.contextmanager
def smi_log(path: str, fields: str):
    """nvidia-smi writing `fields` of the GPU to the csv at path every 20 ms while the block
    runs (read back with smi_rows)."""
    with open(path, "w") as smi_file:
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
                                "-lms", "20"], stdout=smi_file)
        try:
            yield
        finally:
            smi.terminate()


def smi_samples(path: str):
    """[(time, SM MHz, W)] from nvidia-smi's csv."""
    return [tuple(row[:3]) for row in smi_rows(path)[0].tolist()]


def summarise(label: str, calls, samples) -> None:
    names = list(dict.fromkeys(c[2] for c in calls))  # the kernels in their first turn's order
    for mode in ("alternate", "bursts", "queued"):
        for name in names:
            ms = [c[5] for c in calls if c[0] == mode and c[2] == name]
            if not ms:
                continue
            print(f"{label} {mode:<9} {name:<4} calls {len(ms):3d}  min {min(ms):6.2f}  p10 "
                  f"{np.percentile(ms, 10):6.2f}  median {statistics.median(ms):6.2f}  p90 "
                  f"{np.percentile(ms, 90):6.2f}  max {max(ms):6.2f} ms", flush=True)
    for name in names:
        bursts = {}
        for c in calls:
            if c[0] == "bursts" and c[2] == name:
                bursts.setdefault(c[1], []).append(c[5])
        print(f"{label} {name:<4} bursts' medians: "
              + " ".join(f"{statistics.median(b):.2f}" for b in bursts.values()), flush=True)
        matched = []
        for c in calls:
            if c[0] == "alternate" and c[2] == name:
                start, end = c[4] - 0.01, c[4] + c[5] / 1e3 + 0.01
                during = [s for s in samples if start <= s[0] <= end]
                if during:
                    matched.append((c[5], np.mean([s[1] for s in during]),
                                    np.mean([s[2] for s in during])))
        if len(matched) > 3:
            a = np.array(matched)
            corr = ("the clock did not move" if np.std(a[:, 1]) == 0 else
                    f"corr(ms, MHz) {np.corrcoef(a[:, 0], a[:, 1])[0, 1]:.2f}")
            print(f"{label} {name:<4} single calls with clock samples {len(a)}: {corr}, median "
                  f"{np.median(a[:, 1]):.0f} MHz {np.median(a[:, 2]):.0f} W", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--rows", default="0,1")
    p.add_argument("--configs", default="64x128x2", help="our kernels, spike_mosaic.py's names")
    p.add_argument("--turns", type=int, default=40)
    p.add_argument("--bursts", type=int, default=10)
    p.add_argument("--public", action="store_true",
                   help="also the public call (\"api\"), closed over the layout and masks "
                        "(\"apic\"), and FA3 given them as unused arguments (\"fa3a\")")
    args = p.parse_args(argv)
    import jax

    from kvax.utils import default_params

    os.makedirs(args.out, exist_ok=True)
    params = default_params(jax.devices()[0].device_kind, backward=False)
    print("device", jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
    smi_path = os.path.join(args.out, "smi.csv")
    runs = []
    with smi_log(smi_path, SMI_FIELDS):
        for row in (int(r) for r in args.rows.split(",")):
            w, inputs, fns = kernels(row, params, args.configs.split(","), args.public)
            calls = timed_calls(fns, inputs, args.turns, args.bursts)
            with open(os.path.join(args.out, f"calls-{w.name}.txt"), "w") as f:
                f.writelines("%s %d %s %d %.4f %.3f\n" % c for c in calls)
            runs.append((w.name, calls))
    samples = smi_samples(smi_path)
    for name, calls in runs:
        summarise(name, calls, samples)


if __name__ == "__main__":
    main()
