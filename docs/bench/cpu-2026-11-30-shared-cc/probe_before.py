# The Triton kernels' default configs (non-Hopper: 64x64, 4 warps, 3 stages; head dim 256 -> 2)
# built on CPU for several compute capabilities; shared memory against each one's per-block limit.
import sys
sys.path.insert(0, "packages/kvax-core/tests")
import triton
from triton.backends.compiler import GPUTarget
import test_kernels_compile as tkc
from kvax.utils import FlashAttentionParamsConfig
LIMIT = {80: 166912, 86: 101376, 89: 101376, 120: 101376}
orig = triton.compile
cc = int(sys.argv[1])
def compile_cc(src, target=None, options=None):
    return orig(src, target=GPUTarget("cuda", cc, 32), options=options)
tkc.triton.compile = compile_cc
tkc.H100 = "NVIDIA GeForce RTX 4090"
p = FlashAttentionParamsConfig(64, 64, 4, 3)
for kind in ("fwd", "bwd"):
    for dtype, h in [("bfloat16", 64), ("bfloat16", 128), ("bfloat16", 256), ("float32", 64),
                     ("float32", 128), ("float32", 256)]:
        consts, st = tkc.launch_constants(kind, dtype, h, h, p)
        sh = {s: tkc.compile_for_hopper(tkc.KERNELS[kind], dtype, consts, 4, s).metadata.shared
              for s in range(st, 0, -1)}
        over = "OVER" if sh[st] > LIMIT[cc] else ""
        print(f"sm_{cc} {kind} {dtype} h{h} stages {st}: {sh} limit {LIMIT[cc]} {over}", flush=True)
