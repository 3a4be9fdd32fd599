"""Redraw the benchmark's plots from several runs' results.json files (and memory-sweep logs).

    python tools/plot_results.py OUT_DIR RUN1/results.json RUN2/results.json SWEEP.log ...

Timings: where two files measured the same implementation at the same length, the later file
wins. Memory sweeps: per implementation, the later file wins; a .log file is a memory sweep's
printed steps (for runs cut short before they saved).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def merge(paths):
    """(timing results with one row per implementation and length, merged memory sweep)."""
    rows, workloads, sweep = {}, {}, {}
    for path in paths:
        if path.endswith(".log"):
            with open(path) as f:
                sweep.update(bench.sweep_from_log(f.read()))
            continue
        with open(path) as f:
            for res in json.load(f)["results"]:
                if "memory_sweep" in res:
                    sweep.update(res["memory_sweep"])
                elif "workload" in res:
                    length = res["workload"]["seq_len"]
                    workloads[length] = res["workload"]
                    for row in res["rows"]:
                        if row.get("skipped") and (row["impl"], length) in rows:
                            continue  # a measurement beats a later skip
                        rows[row["impl"], length] = row
    timing = [dict(workload=w, rows=[r for (_, n), r in rows.items() if n == length])
              for length, w in sorted(workloads.items())]
    return timing, sweep


def main():
    out_dir, paths = sys.argv[1], sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    timing, sweep = merge(paths)
    if timing:
        bench.plot(timing, out_dir)
    if sweep:
        bench.plot_memory_sweep([dict(memory_sweep=sweep)], out_dir)
        with open(os.path.join(out_dir, "memory_sweep.json"), "w") as f:
            json.dump(dict(sources=paths, memory_sweep=sweep), f, indent=1)


if __name__ == "__main__":
    main()
