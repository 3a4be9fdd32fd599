# Session 60: the Triton kernels built for sm_80 (an A100) on CPU, at 1-3 stages, against the
# shared-memory model (run from the repository root; output in sm80.txt). The "taken" column is
# what the model would have chosen had it applied to an A100; since this run it applies to
# Hopper only.
import sys
sys.path.insert(0, "packages/kvax-core/tests")
import triton
from triton.backends.compiler import GPUTarget
import test_kernels_compile as tkc
from kvax.utils import FlashAttentionParamsConfig
from kvax._src.attention import triton_common as tc
A100 = "NVIDIA A100-SXM4-80GB"
orig = triton.compile
def compile80(src, target=None, options=None):
    return orig(src, target=GPUTarget("cuda", 80, 32), options=options)
tkc.triton.compile = compile80
tkc.H100 = A100
for kind in ("fwd", "bwd"):
  for dtype, h in [("bfloat16", 64), ("bfloat16", 128), ("bfloat16", 256), ("float32", 128), ("float32", 256)]:
    for blocks in [(64, 64), (128, 64), (64, 128), (128, 128)]:
      p = FlashAttentionParamsConfig(*blocks, 4, 3)
      consts, st = tkc.launch_constants(kind, dtype, h, h, p)
      model = tkc.shared_model(kind, dtype, h, h, p, st)
      sh = {}
      for s in sorted({st, 3, 2, 1}):
          sh[s] = tkc.compile_for_hopper(tkc.KERNELS[kind], dtype, consts, 4, s).metadata.shared
      print(kind, dtype, h, blocks, "taken", st, "model", model, "actual by stages", sh, flush=True)
