"""Redraw the benchmark's plots from one or more results.json files (e.g. runs of several sizes).

    python tools/plot_results.py OUT_DIR docs/bench/h100-2026-11-22/*.json
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def main():
    out_dir, paths = sys.argv[1], sys.argv[2:]
    results = []
    for path in paths:
        with open(path) as f:
            results += json.load(f)["results"]
    results.sort(key=lambda r: r["workload"]["seq_len"])
    os.makedirs(out_dir, exist_ok=True)
    bench.plot(results, out_dir)


if __name__ == "__main__":
    main()
