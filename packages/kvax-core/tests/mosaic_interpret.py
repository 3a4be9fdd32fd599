"""Our Mosaic GPU kernels (forward and backward) run on CPU by jax's GPU interpret mode
(warpgroups as threads, shared memory, TMA and barriers simulated): their logic tested
without a GPU.

jax 0.11.2's interpreter lacks six things the kernels use. `interpreted()` stands in for them
while it is active, and restores everything after:
- `pl.run_state` on WGMMA accumulators (one or a tuple): scoped accumulators, set first, read
  after;
- `copy_smem_to_gmem` with a predicate: the copy under `pl.when`;
- `copy_smem_to_gmem` adding into global memory (the backward's dQ, `reduction_op="add"`):
  a read, add and write under one lock;
- one `RefUnion` member written and another read (the backward's dQ share, stored tiled and
  sent flat): the interpreter keeps the members apart, so the adding copy reads the flat view
  from its first member's bytes (mosaic_bwd.DQ_TILE tiles);
- `wgmma` with its A operand in registers (P V, dV, dK): the product from that value;
- a barrier phase that no thread waits for before the kernel ends is an error at deallocation
  there. The hardware does not mind, and our producer never waits for the consumers' last
  "free" arrivals, so it is allowed here.

These touch jax's private modules, pinned by the lock; another jax may need this file changed.
The interpreter checks semantics, not speed, registers or shared-memory limits (the lowering
tests do those). It has no timeout: a kernel whose warpgroups deadlock hangs the test. Inline
Mosaic GPU code (`plgpu.inline_mgpu`) is refused. Call the kernels eagerly: inside an outer jit
the simulated warpgroups' computations sometimes never ran on a 2-core machine (a hang).
"""

from __future__ import annotations

import contextlib
import threading

import jax
import jax.experimental.pallas as pl
import jax.experimental.pallas.mosaic_gpu as plgpu
import numpy as np
from jax._src.pallas.mosaic_gpu.interpret import gpu_callbacks
from jax._src.pallas.mosaic_gpu.interpret import shared_memory as simulated
from jax._src.state import primitives as state_primitives
from kvax._src.attention.mosaic_bwd import DQ_TILE


def _run_state(body):
    def run(init):  # init: plgpu.ACC.init(array), or a tuple of them
        inits, tree = jax.tree.flatten(init, is_leaf=lambda x: hasattr(x, "_init"))

        def scoped(*accs):
            for acc, first in zip(accs, inits):
                state_primitives.ref_set(acc, (), first._init)
            body(jax.tree.unflatten(tree, accs))
            return jax.tree.unflatten(tree, [acc[...] for acc in accs])

        return pl.run_scoped(scoped, *(plgpu.ACC(x.shape, x.dtype) for x in inits))

    return run


def _predicated_copy(copy):
    def copy_when(src, dst, *args, predicate=None, **kwargs):
        if predicate is None:
            return copy(src, dst, *args, **kwargs)
        pl.when(predicate)(lambda: copy(src, dst, *args, **kwargs))

    return copy_when


_UNIONS = {}  # a RefUnion member's allocation key -> its first member's (while interpreted)


def _tag_ref_union(real):
    def tag(token, member_keys_as_array, alias_group_idxs):
        keys = [gpu_callbacks.HostAllocationKey.from_array(k) for k in member_keys_as_array]
        _UNIONS.update((key, keys[0]) for key in keys)
        return real(token, member_keys_as_array, alias_group_idxs=alias_group_idxs)

    return tag


def _as_tiles(x):
    """A tiled shared-memory array's bytes in order: its last two axes in DQ_TILE x DQ_TILE
    tiles, row-major over the tiles and within each (plgpu.TilingTransform), flattened."""
    *lead, rows, cols = x.shape
    tile = DQ_TILE
    x = x.reshape(*lead, rows // tile, tile, cols // tile, tile)
    return np.moveaxis(x, -2, -3).reshape(*lead, rows * cols)


class _AddingCopy(gpu_callbacks.AsyncCopySmemToGmemTask):
    """A TMA store that adds to global memory (the backward's dQ): its read, add and write
    hold one lock, as the hardware's reduction is atomic per element. The interpreter keeps a
    RefUnion's members apart, so a source that is the union's flat view (the backward's dQ
    share) is read from the bytes of its first member, tiled as mosaic_bwd tiles it."""

    lock = threading.Lock()

    def __call__(self, tma_thread_id):
        memory = gpu_callbacks._get_shared_memory()
        src, info = self.src_allocation_key, self.logging_info
        first = _UNIONS.get(src, src)
        if first == src:
            val, _, _ = memory.get_buffer_content(src, self.src_access, self.thread,
                                                  logging_info=info)
        else:
            tiled, _, _ = memory.get_buffer_content(first, memory.access(first, ()),
                                                    self.thread, logging_info=info)
            flat = _as_tiles(tiled).reshape(memory.buffer_shape_and_dtype(src).shape)
            val = flat[self.src_access.range]
        shape = memory.buffer_shape_and_dtype(self.dst_allocation_key).shape
        store = gpu_callbacks._clip_store_to_shape(self.dst_access, val, tuple(shape))
        if store is None:
            return
        access, val = store
        with self.lock:
            old, _, _ = memory.get_buffer_content(self.dst_allocation_key, access, self.thread,
                                                  logging_info=info)
            memory.store_buffer_content(self.dst_allocation_key, access, old + val,
                                        self.thread, logging_info=info)


def _reducing_copy(real):
    @gpu_callbacks.fail_on_exception
    def adding(*, token, mesh_location, thread, src_allocation_key_as_array, src_transforms,
               dst_allocation_key_as_array, dst_transforms, source_info=None, **_):
        memory = gpu_callbacks._get_shared_memory()
        src, dst = (gpu_callbacks.HostAllocationKey.from_array(key)
                    for key in (src_allocation_key_as_array, dst_allocation_key_as_array))
        src_transforms, dst_transforms = (
            jax.tree.map(int, gpu_callbacks._remove_noop_transforms(t))
            for t in (src_transforms, dst_transforms))
        memory.execute_async_task(_AddingCopy(
            mesh_location=mesh_location, thread=thread, src_allocation_key=src,
            src_access=memory.access(src, src_transforms), dst_allocation_key=dst,
            dst_access=memory.access(dst, dst_transforms), source_info=source_info))
        return token

    def copy(**kwargs):
        if kwargs.get("reduction_op") is None:
            return real(**kwargs)
        if kwargs["reduction_op"] != "add" or kwargs.get("predicate") is not None:
            raise NotImplementedError(f"reduction_op {kwargs['reduction_op']!r}")
        return adding(**kwargs)

    return copy


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
    """Pallas Mosaic GPU kernels traced inside run in GPU interpret mode, on the CPU device
    (also where a GPU is the default one)."""
    patches = [(pl, "run_state", _run_state),
               (plgpu, "copy_smem_to_gmem", _predicated_copy(plgpu.copy_smem_to_gmem)),
               (gpu_callbacks, "wgmma", _wgmma(gpu_callbacks.wgmma)),
               (gpu_callbacks, "copy_smem_to_gmem",
                _reducing_copy(gpu_callbacks.copy_smem_to_gmem)),
               (gpu_callbacks, "_tag_ref_union", _tag_ref_union(gpu_callbacks._tag_ref_union)),
               (simulated.Barrier, "deallocate", _deallocate)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, value in patches:
            setattr(owner, name, value)
        with (jax.default_device(jax.devices("cpu")[0]),
              plgpu.force_gpu_interpret_mode(plgpu.InterpretGPUParams())):
            yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)
        _UNIONS.clear()  # allocation keys may be reused later
