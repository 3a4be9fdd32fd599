"""One forward of ours on the log-normal row, for ncu (no timing)."""
import os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
import jax, jax.numpy as jnp
from kvax.ops import create_attention_mask, flash_attention
from workloads import Workload, shapes
w = Workload(65536, num_pad_tokens=1000, doc_median=1100, ids="shuffled")
q_shape, kv_shape, _ = shapes(w)
keys = jax.random.split(jax.random.key(0), 3)
q, k, v = (jax.random.normal(kk, s, jnp.bfloat16) for kk, s in zip(keys, (q_shape, kv_shape, kv_shape)))
pos, seg = (jnp.asarray(x) for x in w.layout())
m = jax.jit(lambda p, s: create_attention_mask(p, s, p, s))(pos, seg)
f = jax.jit(lambda q, k, v, m: flash_attention(q, k, v, pos, seg, pos, seg, mask=m, scale=w.head_dim ** -0.5))
jax.block_until_ready(f(q, k, v, m))
print("done", flush=True)
