"""Load-balancing token permutations for causal context parallelism.

"chunks" (the default, Llama 3 and the original Kvax): the sequence is cut into 2 x cp chunks;
shard i holds chunks i and 2cp-1-i, so every shard gets one early (cheap) and one late
(expensive) chunk of one causal sequence. With packed documents a chunk's cost depends on where
the documents fall, and shards can differ by several times (measured: 3.4x on 4 H200s, 512k
tokens in 16 documents).
"striped" (an addition): shard i holds tokens i, i+cp, i+2cp, ...; every shard sees every part of
every document, so the work is balanced for any document layout, at the cost of cp partly
visible key blocks per query block on each document's diagonal instead of one.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

from kvax_dist.specs import context_size, explicit_axes, resolve_mesh


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
    size = length // chunks
    # static slices, not a gather: their transposes are sharding-friendly on Explicit meshes
    parts = [jax.lax.slice_in_dim(x, int(i) * size, (int(i) + 1) * size, axis=axis)
             for i in order]
    return jnp.concatenate(parts, axis=axis)


STRATEGIES = ("chunks", "striped")


def check_strategy(strategy) -> str:
    """True means the default ("chunks"); False has no strategy and is handled by the caller."""
    if strategy is True:
        return "chunks"
    if strategy not in STRATEGIES:
        raise ValueError(f"load-balance strategy must be True, False or one of {STRATEGIES}, "
                         f"got {strategy!r}")
    return strategy


def _stripe(x: jax.Array, rows: int, cols: int) -> jax.Array:
    """View axis 1 as [rows, cols] and transpose it to [cols, rows]."""
    shape = x.shape[:1] + (rows, cols) + x.shape[2:]
    return jnp.swapaxes(x.reshape(shape), 1, 2).reshape(x.shape)


def _check_striped(x, num_shards):
    if x.shape[1] % num_shards:
        raise ValueError(f"sequence length {x.shape[1]} must be divisible by the context size "
                         f"{num_shards} to stripe tokens")


def permute(x: jax.Array, num_shards: int, strategy="chunks") -> jax.Array:
    if check_strategy(strategy) == "striped":
        _check_striped(x, num_shards)
        return _stripe(x, x.shape[1] // num_shards, num_shards)
    return reorder_chunks(x, chunk_order(num_shards))


def unpermute(x: jax.Array, num_shards: int, strategy="chunks") -> jax.Array:
    if check_strategy(strategy) == "striped":
        _check_striped(x, num_shards)
        return _stripe(x, num_shards, x.shape[1] // num_shards)
    return reorder_chunks(x, np.argsort(chunk_order(num_shards)))


def _along_sequence(fn, x, mesh):
    """fn(x) for a reordering of axis 1. On a mesh with Explicit axes an array sharded along the
    sequence cannot be gathered in place: it is resharded whole along axis 1 first, and its
    sharding restored after (the reordering moves tokens between shards either way)."""
    if not explicit_axes(mesh):
        return fn(x)
    spec = tuple(jax.typeof(x).sharding.spec)
    spec += (None,) * (x.ndim - len(spec))
    if spec[1] is None:
        return fn(x)
    whole = NamedSharding(mesh, P(spec[0], None, *spec[2:]))
    return jax.sharding.reshard(fn(jax.sharding.reshard(x, whole)), NamedSharding(mesh, P(*spec)))


def _apply(inputs, fn, mesh, strategy):
    num_shards = context_size(mesh)
    mesh = resolve_mesh(mesh)
    single = not isinstance(inputs, (tuple, list))
    arrays = (inputs,) if single else tuple(inputs)
    lengths = {a.shape[:2] for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"inputs must share (batch, seq_len), got {sorted(lengths)}")
    reorder = _reorder(fn, mesh, mesh.axis_types, num_shards, strategy)
    out = tuple(reorder(a) for a in arrays)
    return out[0] if single else out


@functools.lru_cache(maxsize=64)
def _reorder(fn, mesh, axis_types, num_shards, strategy):
    """fn as a jitted op whose vjp is the inverse reordering (a permutation's transpose is its
    inverse). Jitted: eager calls compile once. The explicit vjp: JAX 0.11's eager transpose of
    the resharded reshapes fails on Explicit meshes. axis_types is part of the cache key since
    meshes that differ only in them compare equal."""
    inverse = {permute: unpermute, unpermute: permute}[fn]
    forward, backward = (
        jax.jit(lambda x, f=f: _along_sequence(lambda y: f(y, num_shards, strategy), x, mesh))
        for f in (fn, inverse))

    @jax.custom_vjp
    def reorder(x):
        return forward(x)

    reorder.defvjp(lambda x: (forward(x), None), lambda _, ct: (backward(ct),))
    return reorder


def permute_tokens_context_parallelism(inputs, mesh=None, *, strategy="chunks"):
    """Permute a tensor or a tuple of tensors along axis 1 for load balance (see module doc).
    Pass the same strategy as flash_attention's permute_tokens_for_load_balance."""
    return _apply(inputs, permute, mesh, check_strategy(strategy))


def unpermute_tokens_context_parallelism(inputs, mesh=None, *, strategy="chunks"):
    """Undo permute_tokens_context_parallelism (same strategy) along axis 1."""
    return _apply(inputs, unpermute, mesh, check_strategy(strategy))
