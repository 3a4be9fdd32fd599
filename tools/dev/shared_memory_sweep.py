"""Every block pair, dtype and head dim the Triton kernels take, compiled for sm_90 on CPU at the
stages the launchers choose (triton_common.forward_tiles / backward_tiles, num_stages fitted to
an H100's shared memory): does any kernel still ask for more than an H100/H200 has, and how far
above the compiled kernels is the model (triton_common's *_shared_memory)?

    python tools/dev/shared_memory_sweep.py --stages 3 8 --jobs 2 > sweep.txt

One line per kernel: pass, dtype, head dims, (query block, kv block, num_stages asked), the
stages taken, the compiled kernel's shared memory, the model's, and OVER where the kernel is
past the limit. About 2-4 s a kernel on one core (Triton's own cache makes reruns fast).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "packages", "kvax-core", "tests"))

BLOCKS = (16, 32, 64, 128, 256)
HEADS = (("bfloat16", 64, 64), ("bfloat16", 128, 128), ("bfloat16", 256, 256),
         ("float16", 192, 128), ("float32", 64, 64), ("float32", 128, 128),
         ("float32", 256, 256))


def one(case):
    from test_kernels_compile import (H100_SHARED_BYTES, KERNELS, compile_for_hopper,
                                      launch_constants, shared_model)

    from kvax.utils import FlashAttentionParamsConfig

    kind, dtype, h, hv, q_block, kv_block, stages = case
    params = FlashAttentionParamsConfig(q_block, kv_block, 8, stages)
    try:
        consts, taken = launch_constants(kind, dtype, h, hv, params)
    except ValueError as err:  # not even one stage fits
        return f"{kind} {dtype} {h}/{hv} ({q_block}, {kv_block}, {stages}) refused: {err}"
    model = shared_model(kind, dtype, h, hv, params, taken)
    shared = compile_for_hopper(KERNELS[kind], dtype, consts, 8, taken).metadata.shared
    flag = " OVER" if shared > H100_SHARED_BYTES else ""
    flag += " UNDER-MODEL" if shared > model else ""
    return (f"{kind} {dtype} {h}/{hv} ({q_block}, {kv_block}, {stages}) stages {taken} "
            f"shared {shared} model {model} ({model / shared:.2f}x){flag}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stages", type=int, nargs="+", default=[3, 8])
    p.add_argument("--jobs", type=int, default=1)
    args = p.parse_args(argv)
    cases = [(kind, *head, q, kv, st) for kind, head, q, kv, st in itertools.product(
        ("fwd", "bwd"), HEADS, BLOCKS, BLOCKS, args.stages)]
    bad = 0
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        for line in pool.map(one, cases):
            bad += "OVER" in line or "UNDER-MODEL" in line
            print(line, flush=True)
    print(f"{len(cases)} kernels, {bad} over the limit or above the model")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
