"""Kernel parameters and their per-device defaults.

No device is probed at import time: defaults are a pure function of the device kind, which callers
read when they need it (and tests pass in explicitly).
"""

from __future__ import annotations

import dataclasses

PADDING_SEGMENT_ID = -1
MAX_HEAD_DIM = 256

_POW2_BLOCKS = (16, 32, 64, 128, 256)


@dataclasses.dataclass(frozen=True)
class FlashAttentionParamsConfig:
    """Parameters of a flash-attention Triton kernel (validated when built).

    Forward: query tiles of `query_block_size` rows visit key tiles of `kv_block_size` columns.
    Backward (Kvax's convention): the dK/dV kernel holds `kv_block_size` keys and visits query
    tiles of `query_block_size`; the dQ kernel holds `kv_block_size` queries and visits key tiles of
    `query_block_size`. Larger blocks can be faster but need more registers. `num_stages` is
    the deepest software pipeline the kernels may take: where that many stages of the tiles
    would not fit the GPU's shared memory, they take as many as fit (on Hopper chosen ahead,
    triton_common.fit_stages; on every GPU from the built kernel, triton_launch), which changes
    the speed, never the result.
    """

    query_block_size: int = 64
    kv_block_size: int = 64
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self):
        for name in ("query_block_size", "kv_block_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value not in _POW2_BLOCKS:
                raise ValueError(f"{name} must be one of {_POW2_BLOCKS}, got {value!r}")
        if self.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"num_warps must be 1, 2, 4, 8 or 16, got {self.num_warps!r}")
        if not isinstance(self.num_stages, int) or not 1 <= self.num_stages <= 8:
            raise ValueError(f"num_stages must be an int in [1, 8], got {self.num_stages!r}")

    @property
    def dq_blocks(self) -> tuple[int, int]:
        """(query tile, key tile) of the dQ kernel under the backward convention."""
        return self.kv_block_size, self.query_block_size


_HOPPER = ("H100", "H200", "H800", "H20", "GH200")


def is_hopper(device_kind: str) -> bool:
    return any(name in device_kind for name in _HOPPER)


# Shared memory one program (thread block) may take, by compute capability: what an SM has, less
# what the driver keeps per block (NVIDIA's architecture traits: cccl's cuda/__device/arch_traits.h)
SHARED_MEMORY_BY_CAPABILITY = {70: 98304, 75: 65536, 80: 166912, 86: 101376, 89: 101376,
                               90: 232448, 100: 232448, 103: 232448, 110: 232448, 120: 101376}


def capability_shared_memory(capability: int | None) -> int | None:
    """Shared memory one program may take on GPUs of this compute capability (89 for 8.9): the
    table's entry, else the least entry of its major version (12.1 takes 12.0's), which may be
    less than the GPU has but never more; None where the major version is unknown."""
    if capability in SHARED_MEMORY_BY_CAPABILITY:
        return SHARED_MEMORY_BY_CAPABILITY[capability]
    same_major = [v for k, v in SHARED_MEMORY_BY_CAPABILITY.items()
                  if capability is not None and k // 10 == capability // 10]
    return min(same_major, default=None)


def shared_memory_bytes(device_kind: str, capability: int | None = None) -> int | None:
    """Shared memory one program may use: by compute capability where given and known
    (capability_shared_memory), else by device kind (Hopper, A100); None: unknown, not checked."""
    found = capability_shared_memory(capability)
    if found is None and is_hopper(device_kind):
        found = SHARED_MEMORY_BY_CAPABILITY[90]
    elif found is None and ("A100" in device_kind or "A800" in device_kind):
        found = SHARED_MEMORY_BY_CAPABILITY[80]
    return found


def default_params(device_kind: str, *, backward: bool) -> FlashAttentionParamsConfig:
    """Default kernel parameters for a device kind (as `jax.Device.device_kind` spells it): those
    of the backend "auto" picks there (attention/backends.py). Hopper: forward 128x128, backward
    64x128, 8 warps, 3 stages; anything else, the CPU included: 64x64, 4 warps, 3 stages."""
    from kvax._src.attention import backends

    return backends.default_params(device_kind, backward=backward)


def current_device_kind() -> str:
    """The kind of JAX's default device (call at run time, never at import time)."""
    import jax

    return jax.devices()[0].device_kind


def current_compute_capability() -> int | None:
    """The compute capability of JAX's default device as an int (89 for "8.9"); None off CUDA."""
    import jax

    value = getattr(jax.devices()[0], "compute_capability", None)
    try:
        major, minor = str(value).split(".")
        return int(major) * 10 + int(minor)
    except ValueError:
        return None
