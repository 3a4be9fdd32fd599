# The public forward chained (tools/bench.py --layers), lowered for CUDA on CPU with a Hopper GPU
# pretended: python chain_hlo.py LAYERS prints the StableHLO ops by kind, then the kernel calls.
import re, collections, sys
sys.path[:0] = ["tools"]
import jax, jax.numpy as jnp, numpy as np
from unittest import mock
from kvax._src.attention import api, backends
import kvax._src.config as cfg
from kvax.ops import create_attention_mask, flash_attention
from kvax.utils import FlashAttentionParamsConfig
from workloads import Workload, inputs
w = Workload(8192, num_pad_tokens=300, doc_median=190, num_heads=8, num_kv_heads=2)
q, k, v, pos, seg = inputs(w)
q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
pos, seg = jnp.asarray(pos), jnp.asarray(seg)
fp = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)
bp = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=128)
with mock.patch.object(api, "wants_schedule", lambda: True), \
     mock.patch.object(backends, "_platform", lambda: "gpu"), \
     mock.patch("kvax._src.config.current_device_kind", lambda: "NVIDIA H100 80GB HBM3"):
    masks = create_attention_mask(pos, seg, pos, seg, fwd_params=fp, bwd_params=bp, calc_bwd_mask=True)
    def chain(q, k, v, masks, pos, seg):
        for _ in range(int(sys.argv[1])):
            q = flash_attention(q, k, v, pos, seg, pos, seg, mask=masks, scale=0.1, fwd_params=fp, bwd_params=bp, backend="mosaic")
        return q
    text = jax.jit(chain).trace(q, k, v, masks, pos, seg).lower(lowering_platforms=("cuda",)).as_text()
ops = collections.Counter(re.findall(r"= (?:\"?)(stablehlo\.[a-z_]+|func\.call|call @\w+)", text))
print(sys.argv[1], "layers:", dict(ops))
for line in text.splitlines():
    if "custom_call" in line: print(line[:300])
