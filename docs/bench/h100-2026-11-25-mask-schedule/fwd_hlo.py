"""The optimized HLO of the public forward (log-normal row, layout and masks as arguments)."""
import os, sys
sys.path.insert(0, "tools")
import jax, jax.numpy as jnp
from workloads import Workload, inputs
import kvax
w = Workload(65536, num_pad_tokens=1000, doc_median=1100, ids="shuffled")
q, k, v, pos, seg = inputs(w)
q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
pos, seg = jnp.asarray(pos), jnp.asarray(seg)
masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)
def fwd(q, k, v, layout):
    pos, seg, masks = layout
    return kvax.ops.flash_attention(q, k, v, pos, seg, pos, seg, mask=masks, scale=128 ** -0.5)
txt = jax.jit(fwd).lower(q, k, v, (pos, seg, masks)).compile().as_text()
open(os.environ["OUT"] + "/fwd.hlo.txt", "w").write(txt)
print(len(txt))
