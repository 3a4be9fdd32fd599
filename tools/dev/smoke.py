"""GPU smoke check: one small call through the kernels, printing every launch's parameters and,
on failure, the whole chain of causes (Triton's compile errors hide behind JAX's).

    source tools/gpu_env.sh && TRITON_FRONT_END_DEBUGGING=1 python3 tools/dev/smoke.py
"""

import traceback

import jax
import jax_triton as jt
import triton

from kvax.ops import flash_attention
from kvax_testing import check_attention, packed_batch

_triton_call = jt.triton_call


def traced_triton_call(*args, **kwargs):
    shown = {k: v for k, v in kwargs.items() if k != "out_shape"}
    print("launch", kwargs.get("name"), shown, [getattr(a, "shape", a) for a in args])
    return _triton_call(*args, **kwargs)


def main():
    print("triton", triton.__version__, triton.__file__)
    jt.triton_call = traced_triton_call  # kvax launches through jax_triton.triton_call
    batch = packed_batch(0, kv_len=257, dtype="bfloat16")
    fn = jax.jit(lambda q, k, v, *lay: flash_attention(q, k, v, *lay, scale=0.125,
                                                       backend="triton"))
    try:
        print(check_attention(fn, batch, scale=0.125))
    except Exception as err:
        traceback.print_exc(limit=-12)
        while err is not None:
            print("----", type(err).__name__, str(err)[-800:])
            err = err.__cause__ or err.__context__


if __name__ == "__main__":
    main()
