"""Redraw the benchmark's plots from several runs' results.json files (and memory-sweep logs).

    python tools/plot_results.py OUT_DIR RUN1/results.json RUN2/results.json SWEEP.log ...
    python tools/plot_results.py --by-workload OUT_DIR RUN/results.json BENCH_STDOUT.txt ...

--by-workload: one group of bars per workload (layouts at one length side by side), TF/s of every
implementation, forward and forward+backward (workloads.png); a .txt file is bench.py's printed
tables (for runs whose results.json did not come back).

Timings: where two files measured the same implementation at the same length, the later file
wins. Memory sweeps: per implementation, the later file wins; a .log file is a memory sweep's
printed steps (for runs cut short before they saved).
"""

import json
import os
import re
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


TABLE_ROW = re.compile(r"^(\S.*?)\s{2,}([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


def rows_from_tables(text: str) -> dict:
    """{workload name: {impl: (fwd TF/s, fwd+bwd TF/s)}} from bench.py's printed tables (not
    the rounds' lines under them: `NAME ms ms ... | ms ms ...`)."""
    found, name = {}, None
    for line in text.splitlines():
        head = re.match(r"^(B\d+-S\d+-\S+): [\d,]+ allowed pairs", line)
        if head:
            name = head.group(1)
            continue
        if "|" in line:
            continue
        row = TABLE_ROW.match(line)
        if name and row and not line.startswith("implementation"):
            found.setdefault(name, {})[row.group(1).strip()] = (float(row.group(3)),
                                                                float(row.group(5)))
    return found


def by_workload(paths) -> dict:
    """{workload name: {impl: (fwd TF/s, fwd+bwd TF/s)}}; later files win."""
    found = {}
    for path in paths:
        with open(path) as f:
            text = f.read()
        if path.endswith(".txt"):
            parsed = rows_from_tables(text)
        else:
            parsed = {res["name"]: {r["impl"]: (r["fwd_tflops"], r["fwdbwd_tflops"])
                                    for r in res["rows"] if r.get("fwd_tflops")}
                      for res in json.loads(text)["results"] if "rows" in res}
        for name, impls in parsed.items():
            found.setdefault(name, {}).update(impls)
    return found


def plot_by_workload(found: dict, out_dir: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(found)
    impls = sorted({i for rows in found.values() for i in rows},
                   key=lambda i: (not i.startswith("kvax (ours)"), i))
    fig, axes = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True)
    width = 0.8 / len(impls)
    for ax, which, title in ((axes[0], 0, "forward"), (axes[1], 1, "forward + backward")):
        for j, impl in enumerate(impls):
            xs = [i + j * width for i, n in enumerate(names) if impl in found[n]]
            ys = [found[n][impl][which] for n in names if impl in found[n]]
            ax.bar(xs, ys, width, label=impl)
        ax.set(ylabel="TFLOP/s (useful pairs)", title=title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(ncol=3, fontsize=8)
    labels = [n.split("-N")[0].replace("B1-", "") + n.split("bfloat16")[-1] for n in names]
    axes[1].set_xticks([i + 0.4 - width / 2 for i in range(len(names))], labels, rotation=20,
                       ha="right", fontsize=8)
    path = os.path.join(out_dir, "workloads.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def main():
    if sys.argv[1] == "--by-workload":
        out_dir, paths = sys.argv[2], sys.argv[3:]
        os.makedirs(out_dir, exist_ok=True)
        print(f"plot written to {plot_by_workload(by_workload(paths), out_dir)}")
        return
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
