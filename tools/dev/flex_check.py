"""Why does torch.compile(flex_attention) fail on the GPU machine? Runs one small FlexAttention
call in this process and prints the Triton cache settings torch and Triton see, and the whole
traceback on failure.

    source tools/gpu_env.sh && python3 tools/dev/flex_check.py
"""

import os
import traceback

import torch
import triton
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def main():
    print("torch", torch.__version__, "triton", triton.__version__, triton.__file__)
    for key in ("HOME", "TRITON_HOME", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "USER"):
        print(f"{key}={os.environ.get(key)!r}")
    print("knobs.cache.dir", repr(triton.knobs.cache.dir),
          "home", repr(triton.knobs.cache.home_dir), "manager", triton.knobs.cache.manager_class)
    q = torch.randn(1, 4, 1024, 64, device="cuda", dtype=torch.bfloat16)

    def causal(b, h, qi, ki):
        return qi >= ki

    mask = create_block_mask(causal, 1, None, 1024, 1024, device="cuda")
    try:
        out = torch.compile(flex_attention)(q, q, q, block_mask=mask)
        torch.cuda.synchronize()
        print("flex ok", tuple(out.shape))
    except Exception:
        traceback.print_exc()
        print("knobs.cache.dir after failure", repr(triton.knobs.cache.dir),
              "env", repr(os.environ.get("TRITON_CACHE_DIR")))


if __name__ == "__main__":
    main()
