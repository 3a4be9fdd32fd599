"""CPU, no GPU: seconds to trace and lower (for CUDA) a jitted forward+backward step of L unrolled
attention layers through the public API, on a pretended H100 so that "auto" takes the Mosaic
kernels. This is the Python part of the Hopper kernels' first call; Mosaic GPU's compile to SASS
happens later, on the GPU.

    uv run python docs/bench/cpu-2026-11-27-lowering/lower_layers.py LAYERS [SEQ_LEN]
"""
import re
import sys
import time

sys.path.insert(0, "tools")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from workloads import Workload, inputs  # noqa: E402

from kvax._src import config  # noqa: E402
from kvax._src.attention import api, backends  # noqa: E402
from kvax.ops import create_attention_mask, flash_attention  # noqa: E402
from kvax.utils import FlashAttentionParamsConfig  # noqa: E402

backends._platform = lambda: "gpu"
config.current_device_kind = lambda: "NVIDIA H100 80GB HBM3"
api.wants_schedule = lambda: True  # the mask carries the forward's tables, as on an H100

layers = int(sys.argv[1])
seq = int(sys.argv[2]) if len(sys.argv) > 2 else 16384
w = Workload(seq_len=seq, doc_median=1100, num_pad_tokens=1000, ids="shuffled")
q, k, v, pos, seg = inputs(w)
q = jax.ShapeDtypeStruct(q.shape, jnp.bfloat16)
k = jax.ShapeDtypeStruct(k.shape, jnp.bfloat16)
pos, seg = jnp.asarray(pos), jnp.asarray(seg)
params = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)


def step(q, k, v):
    masks = create_attention_mask(pos, seg, pos, seg, fwd_params=params, bwd_params=params,
                                  calc_bwd_mask=True)

    def loss(q, k, v):
        x = q
        for _ in range(layers):
            x = flash_attention(x, k, v, pos, seg, pos, seg, mask=masks, fwd_params=params,
                                bwd_params=params, scale=0.1)
        return jnp.sum(x.astype(jnp.float32))

    return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)


t0 = time.perf_counter()
traced = jax.jit(step).trace(q, k, k)
t1 = time.perf_counter()
text = traced.lower(lowering_platforms=("cuda",)).as_text()
t2 = time.perf_counter()
calls = len(re.findall(r"custom_call @mosaic_gpu", text))
print(f"L={layers}: trace {t1 - t0:.2f} s, lower {t2 - t1:.2f} s; mosaic custom calls: {calls}, "
      f"text {len(text) / 1e6:.1f} MB")
