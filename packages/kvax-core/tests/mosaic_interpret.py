"""Our Mosaic GPU forward kernel run on CPU by jax's GPU interpret mode (warpgroups as threads,
shared memory, TMA and barriers simulated): its logic tested without a GPU.

jax 0.11.2's interpreter lacks four things the kernel uses. `interpreted()` stands in for them
while it is active, and restores everything after:
- `pl.run_state` on a WGMMA accumulator: a scoped accumulator, set first, read after;
- `copy_smem_to_gmem` with a predicate: the copy under `pl.when`;
- `wgmma` with its A operand in registers (P V): the product from that value;
- a barrier phase that no thread waits for before the kernel ends is an error at deallocation
  there. The hardware does not mind, and our producer never waits for the consumers' last
  "free" arrivals, so it is allowed here.

These touch jax's private modules, pinned by the lock; another jax may need this file changed.
The interpreter checks semantics, not speed, registers or shared-memory limits (the lowering
tests do those). It has no timeout: a kernel whose warpgroups deadlock hangs the test.
Inline Mosaic GPU code (`plgpu.inline_mgpu`) is refused.
"""

from __future__ import annotations

import contextlib

import jax
import jax.experimental.pallas as pl
import jax.experimental.pallas.mosaic_gpu as plgpu
import numpy as np
from jax._src.pallas.mosaic_gpu.interpret import gpu_callbacks
from jax._src.pallas.mosaic_gpu.interpret import shared_memory as simulated
from jax._src.state import primitives as state_primitives


def _run_state(body):
    def run(init):  # init: plgpu.ACC.init(array)
        def scoped(acc):
            state_primitives.ref_set(acc, (), init._init)
            body(acc)
            return acc[...]

        return pl.run_scoped(scoped, plgpu.ACC(init.shape, init.dtype))

    return run


def _predicated_copy(copy):
    def copy_when(src, dst, *args, predicate=None, **kwargs):
        if predicate is None:
            return copy(src, dst, *args, **kwargs)
        pl.when(predicate)(lambda: copy(src, dst, *args, **kwargs))

    return copy_when


def _wgmma(real):
    key_shape = gpu_callbacks.HostAllocationKey.shape_and_dtype().shape

    @gpu_callbacks.fail_on_exception
    def from_value(*, token, mesh_location, thread, acc_allocation_key_as_array, acc_transforms,
                   a_allocation_key_as_array, a_transforms, b_allocation_key_as_array,
                   b_transforms, source_info=None):
        del a_transforms
        memory = gpu_callbacks._get_shared_memory()
        info = simulated.GPULoggingInfo(mesh_location, thread, source_info)
        keys, ranges = [], []
        for key, transforms in ((b_allocation_key_as_array, b_transforms),
                                (acc_allocation_key_as_array, acc_transforms)):
            key = gpu_callbacks.HostAllocationKey.from_array(key)
            transforms = jax.tree.map(int, gpu_callbacks._remove_noop_transforms(transforms))
            keys.append(key)
            ranges.append(memory.access(key, transforms))
        b, acc = (memory.get_buffer_content(k, r, thread, logging_info=info)[0]
                  for k, r in zip(keys, ranges))
        product = np.matmul(np.asarray(a_allocation_key_as_array), b, dtype=acc.dtype)
        memory.store_buffer_content(keys[1], ranges[1], acc + product, thread,
                                    logging_info=info)
        return token

    def wgmma(**kwargs):  # A is a buffer's key (int32), or the operand's value
        a = np.asarray(kwargs["a_allocation_key_as_array"])
        if a.shape == key_shape and a.dtype.kind in "iu":
            return real(**kwargs)
        return from_value(**kwargs)

    return wgmma


def _deallocate(self):
    with self.cv:
        self.ref_count -= 1
        if self.ref_count > 0:
            return
        if self.arrivals_count != 0:
            raise ValueError(f"Barrier deallocated with {self.arrivals_count} arrivals pending.")


@contextlib.contextmanager
def interpreted():
    """Pallas Mosaic GPU kernels traced inside run in GPU interpret mode, on CPU."""
    patches = [(pl, "run_state", _run_state),
               (plgpu, "copy_smem_to_gmem", _predicated_copy(plgpu.copy_smem_to_gmem)),
               (gpu_callbacks, "wgmma", _wgmma(gpu_callbacks.wgmma)),
               (simulated.Barrier, "deallocate", _deallocate)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, value in patches:
            setattr(owner, name, value)
        with plgpu.force_gpu_interpret_mode(plgpu.InterpretGPUParams()):
            yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
