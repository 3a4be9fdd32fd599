"""attention_specs and the mesh: where the sharding of query and key/value comes from.

Specs have 4 entries, (batch, sequence, heads, head_dim), each None, a mesh axis name or a tuple
of names (several axes for one dimension, as FSDP/HSDP batch sharding does).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any, Sequence

import jax

Spec = tuple[Any, Any, Any, Any]


@dataclasses.dataclass(frozen=True)
class AttentionSpecs:
    query_specs: Spec
    kv_specs: Spec

    @property
    def batch(self):
        return self.query_specs[0]

    @property
    def context(self):
        """The mesh axis (or axes) the query sequence is sharded over, or None."""
        return self.query_specs[1]


_state = threading.local()


def _stack() -> list[AttentionSpecs]:
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


def mesh_axes(entry) -> tuple[str, ...]:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def validate_specs(query_specs: Sequence, kv_specs: Sequence) -> AttentionSpecs:
    for name, spec in (("query_specs", query_specs), ("kv_specs", kv_specs)):
        if not isinstance(spec, (tuple, list)) or len(spec) != 4:
            raise ValueError(f"{name} must have 4 entries (batch, sequence, heads, head_dim), "
                             f"got {spec!r}")
    query_specs, kv_specs = tuple(query_specs), tuple(kv_specs)
    if mesh_axes(query_specs[0]) != mesh_axes(kv_specs[0]):
        raise ValueError(f"query_specs and kv_specs must shard batch alike, got "
                         f"{query_specs[0]!r} and {kv_specs[0]!r}")
    if mesh_axes(query_specs[3]) != mesh_axes(kv_specs[3]):
        raise ValueError(f"query_specs and kv_specs must shard head_dim alike, got "
                         f"{query_specs[3]!r} and {kv_specs[3]!r}")
    if query_specs[3] is not None:
        raise NotImplementedError(f"sharding head_dim is not supported, got {query_specs[3]!r}")
    if kv_specs[1] is not None:
        raise NotImplementedError(
            f"sharding the key/value sequence (ring attention) is not supported, got kv_specs"
            f"[1]={kv_specs[1]!r}: shard the query sequence; keys and values are all-gathered")
    return AttentionSpecs(query_specs, kv_specs)


@contextlib.contextmanager
def attention_specs(query_specs: Sequence, kv_specs: Sequence):
    """Context manager: the sharding of query (B, T, N, H) and key/value (B, S, K, H) tensors.

    Inside it, kvax's create_attention_mask, flash_attention and the permutation helpers run
    sharded over the mesh (given as mesh=, set with jax.set_mesh, or entered with `with mesh:`).
    """
    _stack().append(validate_specs(query_specs, kv_specs))
    try:
        yield
    finally:
        _stack().pop()


def specs_active() -> bool:
    return bool(_stack())


def get_attention_specs() -> AttentionSpecs:
    if not _stack():
        raise ValueError("no attention specs: wrap the call in kvax.utils.attention_specs("
                         "query_specs=..., kv_specs=...)")
    return _stack()[-1]


def resolve_mesh(mesh=None) -> jax.sharding.Mesh:
    """mesh=, else the mesh of jax.set_mesh, else the legacy `with mesh:` context."""
    if mesh is not None:
        return mesh
    try:
        current = jax.sharding.get_mesh()  # jax.set_mesh, outside jit
    except ValueError:  # inside jit: the abstract mesh of jax.set_mesh, which shard_map takes
        current = jax.sharding.get_abstract_mesh()
    if current is not None and not current.empty:
        return current
    from jax._src import mesh as mesh_lib

    legacy = mesh_lib.thread_resources.env.physical_mesh
    if not legacy.empty:
        return legacy
    raise ValueError("no mesh: pass mesh=, call jax.set_mesh(mesh), or enter `with mesh:`")


def explicit_axes(mesh) -> bool:
    """The mesh has Explicit axes (what jax.make_mesh gives): arrays carry their sharding in their
    type, and reshaping or shard_map needs it resharded to match."""
    return any(t == jax.sharding.AxisType.Explicit for t in mesh.axis_types)


def axis_size(mesh: jax.sharding.Mesh, entry) -> int:
    size = 1
    for axis in mesh_axes(entry):
        size *= mesh.shape[axis]
    return size


def check_axes(mesh: jax.sharding.Mesh, specs: AttentionSpecs) -> None:
    for name, spec in (("query_specs", specs.query_specs), ("kv_specs", specs.kv_specs)):
        for entry in spec:
            for axis in mesh_axes(entry):
                if axis not in mesh.shape:
                    raise ValueError(f"{name} names mesh axis {axis!r}, but the mesh has axes "
                                     f"{tuple(mesh.axis_names)}")


def context_size(mesh=None) -> int:
    """Number of shards of the query sequence under the active specs."""
    specs = get_attention_specs()
    mesh = resolve_mesh(mesh)
    check_axes(mesh, specs)
    return axis_size(mesh, specs.context)
