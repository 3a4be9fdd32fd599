# The Triton kernels' defaults (64x64, 4 warps, 3 stages) as the launchers now tile them for a GPU
# of this compute capability, built on CPU at each stage count; shared memory against its limit.
import sys
sys.path.insert(0, "packages/kvax-core/tests")
import test_kernels_compile as tkc
from kvax._src.config import SHARED_MEMORY_BY_CAPABILITY
from kvax.utils import FlashAttentionParamsConfig
cc = int(sys.argv[1])
limit = SHARED_MEMORY_BY_CAPABILITY[cc]
p = FlashAttentionParamsConfig(64, 64, 4, 3)
for kind in ("fwd", "bwd"):
    for dtype, h in [("bfloat16", 64), ("bfloat16", 128), ("bfloat16", 256), ("float32", 64),
                     ("float32", 128), ("float32", 256)]:
        consts, st = tkc.launch_constants(kind, dtype, h, h, p, "a GPU", cc)
        tiles = {k: v for k, v in consts.items() if "BLOCK" in k and "H" not in k}
        sh = {s: tkc.compile_for_hopper(tkc.KERNELS[kind], dtype, consts, 4, s, cc).metadata.shared
              for s in range(st, 0, -1)}
        taken = max([s for s in sh if sh[s] <= limit], default=None)
        print(f"sm_{cc} {kind} {dtype} h{h} {tiles} asked {st}: {sh} limit {limit} taken {taken}",
              flush=True)
