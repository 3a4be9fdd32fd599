"""One forward through the public API on the log-normal 64k row, for Nsight Compute (no timing).
Run from the repository root on the GPU machine after `source tools/gpu_env.sh`."""
import os
import sys

sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from kvax.ops import create_attention_mask, flash_attention  # noqa: E402
from workloads import Workload, shapes  # noqa: E402

w = Workload(65536, num_pad_tokens=1000, doc_median=1100, ids="shuffled")
q_shape, kv_shape, _ = shapes(w)
keys = jax.random.split(jax.random.key(0), 3)
q, k, v = (jax.random.normal(key, shape, jnp.bfloat16)
           for key, shape in zip(keys, (q_shape, kv_shape, kv_shape)))
pos, seg = (jnp.asarray(x) for x in w.layout())
masks = jax.jit(lambda p, s: create_attention_mask(p, s, p, s))(pos, seg)
forward = jax.jit(lambda q, k, v, m: flash_attention(q, k, v, pos, seg, pos, seg, mask=m,
                                                     scale=w.head_dim ** -0.5))
jax.block_until_ready(forward(q, k, v, masks))
print("done", flush=True)
