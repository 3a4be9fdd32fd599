"""The loops of a kernel's SASS (`cuobjdump -sass`), with each loop's instruction count and its
most common opcodes: how we compare a step of our kernels with a peer's, instruction by
instruction (docs/bench/h100-2026-11-24-fwd-sass).

    python tools/dev/sass_loops.py KERNEL.sass [--min 100] [--function SUBSTRING]
        [--count LDL,STL,BAR]

A loop is the span from a backward branch's target to the branch (nested loops show once per
level). Our Mosaic kernels' SASS: MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_TO=DIR on the GPU machine,
then `ptxas -arch=sm_90a -O3 DIR/entry_0.ptx -o k.cubin` and `cuobjdump -sass k.cubin`. A peer's:
`cuobjdump -sass` of its shared library, cut to one `Function :` section.
"""

from __future__ import annotations

import argparse
import collections
import re

_INSTRUCTION = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);")


def instructions(path: str, function: str | None = None) -> list[tuple[int, str]]:
    """(address, text) of each instruction; with function, only the first `Function :` section
    whose name contains it."""
    found, keep = [], function is None
    with open(path) as f:
        for line in f:
            if "Function :" in line:
                if found and function is not None and keep:
                    break
                keep = function is None or function in line
                continue
            m = _INSTRUCTION.match(line)
            if m and keep:
                found.append((int(m.group(1), 16), m.group(2).strip()))
    return found


def opcode(text: str) -> str:
    """The opcode without its predicate and modifiers: `@!P0 FSEL.FTZ ...` -> `FSEL`."""
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]


def loops(code: list[tuple[int, str]]) -> list[tuple[int, int]]:
    """(first, last) indices of each backward branch's span, in the order of the branches."""
    index = {address: i for i, (address, _) in enumerate(code)}
    spans = []
    for i, (address, text) in enumerate(code):
        if opcode(text) != "BRA":
            continue
        found = re.search(r"0x([0-9a-f]+)", text.split("BRA", 1)[1])
        target = int(found.group(1), 16) if found else None
        if target is not None and target <= address and target in index:
            spans.append((index[target], i))
    return spans


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("sass")
    p.add_argument("--min", type=int, default=100, help="the smallest loop shown, instructions")
    p.add_argument("--function", default=None, help="a substring of the kernel's name")
    p.add_argument("--top", type=int, default=16, help="opcodes shown per loop")
    p.add_argument("--count", default="",
                   help="opcodes always counted per loop, e.g. LDL,STL,BAR (spills, barriers)")
    args = p.parse_args(argv)
    code = instructions(args.sass, args.function)
    print(f"{len(code)} instructions")
    for first, last in loops(code):
        if last - first + 1 < args.min:
            continue
        counts = collections.Counter(opcode(text) for _, text in code[first:last + 1])
        mix = ", ".join(f"{k} {v}" for k, v in counts.most_common(args.top))
        asked = "".join(f"; {op} {counts[op]}" for op in args.count.split(",") if op)
        print(f"{code[first][0]:#07x}-{code[last][0]:#07x}: {last - first + 1} instructions; "
              f"{mix}{asked}")


if __name__ == "__main__":
    main()
