"""Stable orders of int32 rows by several keys, as sorts that XLA gives to CUB on a GPU.

XLA's GPU compiler replaces a sort by CUB's radix sort (one library call, nothing to compile)
only for a plain comparison of one key, alone or with one array of values, the key unsigned
where there are values, and on a Hopper GPU where CUB is the faster: for 32-bit keys, one row of
more than about 22k elements. Any other sort is XLA's own: the key ranks' sort of a 64k-token row
by three keys compiled to several kernels (0.25-0.43 s of LLVM in every new step's compile), and
the ranks took 0.35-0.45 ms to build with it, 0.28 ms this way, compiling in 0.26-0.33 s instead
of 0.74-0.90 s (H200, docs/bench/h200-2026-11-29-cub-sorts/). So a row is ordered here by one
stable pass per key, the least significant first, each pass a (uint32 key, index) pair sorted
over the whole batch flattened into one row, and a last pass by batch row where there are several.
Stability makes the passes compose: equal keys keep the order the earlier passes gave them.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

_SIGN = 0x80000000


def unsigned(x):
    """int32 -> uint32 in the same order (the sign bit flipped), the key type CUB's pair sort
    takes."""
    return lax.bitcast_convert_type(x.astype(jnp.int32), jnp.uint32) ^ jnp.uint32(_SIGN)


def row_order(*keys):
    """Each row's indices in the stable lexicographic order of its keys: int32 [B, N] arrays,
    the most significant first; ties keep their index order. [B, N] int32."""
    b, n = keys[0].shape
    flat = [k.reshape(-1) for k in keys]
    passes = flat[::-1]  # least significant first
    if b > 1:
        passes.append(lax.broadcasted_iota(jnp.int32, (b, n), 0).reshape(-1))
    order = lax.iota(jnp.int32, b * n)
    for i, key in enumerate(passes):
        key = key if i == 0 else key[order]
        _, order = lax.sort((unsigned(key), order), num_keys=1, is_stable=True)
    return order.reshape(b, n) - (lax.broadcasted_iota(jnp.int32, (b, n), 0) * n)
