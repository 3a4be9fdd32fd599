"""Fake multi-device CPU meshes, for testing sharded code on a machine without accelerators."""

from __future__ import annotations

import math
from typing import Sequence

import jax


class FakeDevicesError(RuntimeError):
    """Raised when fake CPU devices are asked for after JAX has started its backends."""


def _backends_started() -> bool:
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def set_fake_cpu_devices(count: int) -> None:
    """Give the CPU backend `count` devices. Call before JAX runs anything, or it raises."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count=}")
    if _backends_started():
        have = len(jax.devices("cpu"))
        if have == count:
            return
        raise FakeDevicesError(
            f"cannot give JAX {count} fake CPU devices: its backends already started with "
            f"{have}. Set them before any JAX computation (kvax-testing's pytest plugin does "
            "this in pytest_configure; outside pytest call set_fake_cpu_devices first)."
        )
    jax.config.update("jax_num_cpu_devices", count)


def fake_mesh(shape: Sequence[int], axis_names: Sequence[str], *, explicit: bool | None = None,
              platform: str = "cpu") -> jax.sharding.Mesh:
    """A mesh of CPU devices of the given shape, e.g. fake_mesh((2, 4), ("data", "context")).

    Axes are of the types jax.make_mesh gives by default (Explicit in JAX 0.11), so tests see the
    meshes users make; explicit=False asks for Auto axes (as jax.sharding.Mesh makes them),
    explicit=True for Explicit ones. platform="gpu" builds the same mesh from real GPUs, so one
    sharded suite runs on both."""
    if len(shape) != len(axis_names):
        raise ValueError(f"shape {tuple(shape)} and axis_names {tuple(axis_names)} differ in rank")
    need = math.prod(shape)
    devices = jax.devices(platform)
    if len(devices) < need:
        raise FakeDevicesError(
            f"a mesh of shape {tuple(shape)} needs {need} {platform} devices, JAX has "
            f"{len(devices)}; "
            "set kvax_fake_devices (pytest ini or --kvax-fake-devices) or call set_fake_cpu_devices"
        )
    kwargs = {}
    if explicit is not None:
        kind = jax.sharding.AxisType.Explicit if explicit else jax.sharding.AxisType.Auto
        kwargs["axis_types"] = (kind,) * len(shape)
    return jax.make_mesh(tuple(shape), tuple(axis_names), devices=devices[:need], **kwargs)
