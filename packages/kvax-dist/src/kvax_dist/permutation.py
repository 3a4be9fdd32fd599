"""Load-balancing token permutation for causal context parallelism (Llama 3).

The sequence is cut into 2 x cp chunks; shard i holds chunks i and 2cp-1-i, so every shard gets
one early (cheap) and one late (expensive) chunk of the causal mask.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kvax_dist.specs import context_size


def chunk_order(num_shards: int) -> np.ndarray:
    """Chunk indices in permuted order: [0, 2cp-1, 1, 2cp-2, ...] for 2cp chunks."""
    order = []
    for i in range(num_shards):
        order += [i, 2 * num_shards - 1 - i]
    return np.asarray(order)


def reorder_chunks(x: jax.Array, order: np.ndarray, axis: int = 1) -> jax.Array:
    """Split `axis` into len(order) equal chunks and put chunk order[j] at position j."""
    chunks = len(order)
    length = x.shape[axis]
    if length % chunks:
        raise ValueError(f"sequence length {length} must be divisible by 2 x context size = "
                         f"{chunks} to permute tokens for load balance")
    shape = x.shape[:axis] + (chunks, length // chunks) + x.shape[axis + 1:]
    return jnp.take(x.reshape(shape), order, axis=axis).reshape(x.shape)


def permute(x: jax.Array, num_shards: int) -> jax.Array:
    return reorder_chunks(x, chunk_order(num_shards))


def unpermute(x: jax.Array, num_shards: int) -> jax.Array:
    return reorder_chunks(x, np.argsort(chunk_order(num_shards)))


def _apply(inputs, fn, mesh):
    num_shards = context_size(mesh)
    single = not isinstance(inputs, (tuple, list))
    arrays = (inputs,) if single else tuple(inputs)
    lengths = {a.shape[:2] for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"inputs must share (batch, seq_len), got {sorted(lengths)}")
    out = tuple(fn(a, num_shards) for a in arrays)
    return out[0] if single else out


def permute_tokens_context_parallelism(inputs, mesh=None):
    """Permute a tensor or a tuple of tensors along axis 1 for load balance (see module doc)."""
    return _apply(inputs, permute, mesh)


def unpermute_tokens_context_parallelism(inputs, mesh=None):
    """Undo permute_tokens_context_parallelism along axis 1."""
    return _apply(inputs, unpermute, mesh)
