"""Probe: a 2-block cluster sums two int32 tiles (dQ's fixed-point shares) in the first block's
shared memory (the second block adds its tile there with plgpu.async_store_smem(atomic="add"),
which completes on the first block's barrier), then one TMA reduce-add: does it lower for
sm_90a with jax 0.11's Mosaic GPU? (CPU only: lowering, no run.)"""

import jax
import jax.numpy as jnp
import jax.experimental.pallas as pl
import jax.experimental.pallas.mosaic_gpu as plgpu

M, N = 64, 128


def body(x_ref, out_ref, mine, staged, added, loaded):
    c = jax.lax.axis_index("c")
    plgpu.copy_gmem_to_smem(x_ref.at[c], mine, loaded)
    plgpu.barrier_wait(loaded)
    x = plgpu.load(mine.at[:, :], layout=plgpu.Layout.WGMMA)

    @pl.when(c == 0)
    def _():
        mine[...] = x  # block 0's own share, staged
        plgpu.commit_smem()
        plgpu.barrier_arrive(staged)  # cluster barrier: block 1 may add now

    @pl.when(c == 1)
    def _():
        plgpu.barrier_arrive(staged)
        plgpu.barrier_wait(staged)
        plgpu.async_store_smem(x, mine, added, cluster_idx=0, cluster_dim="c", atomic="add")

    @pl.when(c == 0)
    def _():
        plgpu.barrier_wait(staged)
        plgpu.barrier_wait(added)  # block 1's add has landed in our shared memory
        plgpu.copy_smem_to_gmem(mine, out_ref, reduction_op="add")
        plgpu.wait_smem_to_gmem(0)


def run(x):
    return plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct((M, N), jnp.int32),
        scratch_types=[plgpu.SMEM((M, N), jnp.int32),
                       plgpu.ClusterBarrier(collective_axes=("c",)), plgpu.Barrier(),
                       plgpu.Barrier()],
        grid=(1,), grid_names=("g",), cluster=(2,), cluster_names=("c",))(x)


x = jnp.zeros((2, M, N), jnp.int32)
text = jax.jit(run).trace(x).lower(lowering_platforms=("cuda",)).as_text()
print("lowered:", len(text), "characters; mosaic_gpu calls", text.count("mosaic_gpu"))
