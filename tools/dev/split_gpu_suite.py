"""Split the GPU suite into parts of about equal time, for device calls of at most 10 minutes.

    python tools/dev/split_gpu_suite.py --parts 3 --out docs/bench/<dir> [pytest paths...]

Collects the tests marked `gpu` (on CPU, where they are skipped but still collected), reads each
test's time from the latest report under docs/gpu/ that ran it (the pytest plugin's tables),
gives tests no report has timed the median time, and deals them longest first to the part with
the least time so far. Writes tests-1.txt ... tests-N.txt (one test id a line, longest first),
for `mapfile -t TESTS < tests-1.txt; pytest ... "${TESTS[@]}"`, and prints each part's total.
Times are one worker's; at -n 30 on 32 cores the suite ran about 1.25x faster than at 16
(session 55), so a part of T seconds takes about T / 24 s of the call when it is not the
longest test that decides.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROW = re.compile(r"^\| `(?P<test>[^`]+)` \| (?P<outcome>\w+) \| (?P<seconds>[\d.]+)s \|")
DATE = re.compile(r"^- date: (?P<date>\S+)")


def report_times(paths: list[str]) -> dict[str, float]:
    """Each test's time in the latest report (by its date line) that ran it."""
    dated = []
    for path in paths:
        with open(path) as f:
            lines = f.read().splitlines()
        date = next((m["date"] for m in map(DATE.match, lines) if m), "")
        rows = {m["test"]: float(m["seconds"]) for m in map(ROW.match, lines)
                if m and m["outcome"] != "skipped"}
        dated.append((date, rows))
    times: dict[str, float] = {}
    for _, rows in sorted(dated, key=lambda d: d[0]):
        times.update(rows)
    return times


def split(tests: list[str], times: dict[str, float], parts: int) -> list[list[str]]:
    """Longest first, each test to the part with the least time so far."""
    default = statistics.median(times.values()) if times else 60.0
    cost = {t: times.get(t, default) for t in tests}
    out: list[list[str]] = [[] for _ in range(parts)]
    totals = [0.0] * parts
    for test in sorted(tests, key=lambda t: (-cost[t], t)):
        i = totals.index(min(totals))
        out[i].append(test)
        totals[i] += cost[test]
    return out


def collect(paths: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "--collect-only", "-q",
                           *paths], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if "::" in line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["packages/kvax-core/tests"])
    parser.add_argument("--parts", type=int, default=3)
    parser.add_argument("--out", required=True, help="folder for tests-1.txt ... tests-N.txt")
    args = parser.parse_args()
    tests = collect(args.paths)
    times = report_times(sorted(glob.glob(os.path.join(ROOT, "docs", "gpu", "*.md"))))
    os.makedirs(args.out, exist_ok=True)
    for i, part in enumerate(split(tests, times, args.parts), 1):
        with open(os.path.join(args.out, f"tests-{i}.txt"), "w") as f:
            f.write("".join(t + "\n" for t in part))
        known = sum(t in times for t in part)
        total = sum(times.get(t, 0.0) for t in part)
        print(f"tests-{i}.txt: {len(part)} tests, {known} timed, {total:.0f} s timed")


if __name__ == "__main__":
    main()
