"""GPU smoke check: one small call through the kernels, printing the root cause of any failure."""
import traceback

import triton

import jax
import jax.numpy as jnp

from kvax.ops import flash_attention
from kvax_testing import check_attention, packed_batch

print('triton', triton.__version__, triton.__file__)
import jax_triton as jt
_call = jt.triton_call
def _traced_call(*args, **kw):
    print("triton_call", kw.get("name"), {k: v for k, v in kw.items() if k not in ("out_shape",)},
          [getattr(a, "shape", a) for a in args])
    return _call(*args, **kw)
jt.triton_call = _traced_call
batch = packed_batch(0, kv_len=257, dtype="bfloat16")
try:
    fn = jax.jit(lambda q, k, v, *lay: flash_attention(q, k, v, *lay, scale=0.125, backend="triton"))
    print(check_attention(fn, batch, scale=0.125))
except Exception as err:
    traceback.print_exc(limit=-12)
    e = err
    while e is not None:
        print("----", type(e).__name__, str(e)[-800:])
        e = e.__cause__ or e.__context__
