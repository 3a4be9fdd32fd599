"""Input checks, run before anything is built or launched.

ValueError for malformed input (naming the argument, with expected and actual values),
NotImplementedError for valid input that we do not support.
Legend: B batch, T query length, S kv length, N query heads, K kv heads, H head dim, Hv value dim.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from kvax._src.config import MAX_HEAD_DIM, FlashAttentionParamsConfig

FLOAT_DTYPES = (jnp.bfloat16, jnp.float16, jnp.float32)
_INT32 = np.iinfo(np.int32)


def _shape(x) -> tuple[int, ...]:
    return tuple(getattr(x, "shape", np.shape(x)))


def _dtype(x):
    return jnp.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)


def check_layout_arrays(query_positions, query_segment_ids, kv_positions, kv_segment_ids,
                        *, batch: int | None = None, q_len: int | None = None,
                        kv_len: int | None = None) -> tuple[int, int, int]:
    """Positions and segment ids: integer [B, T] and [B, S]. Returns (B, T, S)."""
    named = {"query_positions": query_positions, "query_segment_ids": query_segment_ids,
             "kv_positions": kv_positions, "kv_segment_ids": kv_segment_ids}
    for name, x in named.items():
        if len(_shape(x)) != 2:
            raise ValueError(f"{name} must have shape (batch, seq_len), got shape {_shape(x)}")
        check_int32_values(name, x)
    b, t = _shape(query_positions)
    s = _shape(kv_positions)[1]
    batch = b if batch is None else batch
    q_len = t if q_len is None else q_len
    kv_len = s if kv_len is None else kv_len
    for name, want in (("query_positions", (batch, q_len)), ("query_segment_ids", (batch, q_len)),
                       ("kv_positions", (batch, kv_len)), ("kv_segment_ids", (batch, kv_len))):
        if _shape(named[name]) != want:
            raise ValueError(f"{name} must have shape {want} (batch, "
                             f"{'query' if 'query' in name else 'kv'}_seq_len), "
                             f"got {_shape(named[name])}")
    return batch, q_len, kv_len


def _fits_int32(dtype) -> bool:
    """Every value of the dtype fits int32 (int8/16/32, uint8/16); uint32 and 64-bit do not."""
    info = np.iinfo(dtype)
    return info.min >= _INT32.min and info.max <= _INT32.max


def check_int32_values(name: str, x) -> None:
    """Positions and segment ids are computed in int32. Narrower integer types are accepted as they
    are; wider ones (int64, uint32, uint64) only when their values are known to fit: a concrete
    array is checked, a traced one (under jit) is an error, since a silent cast would merge ids
    (5 and 2**32 + 5), turn 0xFFFFFFFF into padding or reorder positions past 2**31."""
    dtype = _dtype(x)
    if not jnp.issubdtype(dtype, jnp.integer):
        raise ValueError(f"{name} must be an integer array (int32), got dtype {dtype}")
    if _fits_int32(dtype):
        return
    if isinstance(x, jax.core.Tracer):
        raise ValueError(
            f"{name} has dtype {dtype}, wider than int32, and is traced (under jit), so its "
            f"values cannot be checked: cast it to int32 yourself where the values are known to "
            f"lie in [{_INT32.min}, {_INT32.max}]")
    values = np.asarray(x)
    if values.size and (values.min() < _INT32.min or values.max() > _INT32.max):
        raise ValueError(
            f"{name} has dtype {dtype} with values in [{values.min()}, {values.max()}], outside "
            f"int32's [{_INT32.min}, {_INT32.max}]: positions and segment ids are int32 "
            f"(relabel segment ids, e.g. by order of appearance in the row)")


def check_qkv(query, key, value) -> None:
    qs, ks, vs = _shape(query), _shape(key), _shape(value)
    for name, shape in (("query", qs), ("key", ks), ("value", vs)):
        if len(shape) != 4:
            raise ValueError(f"{name} must have rank 4 (batch, seq_len, heads, head_dim), "
                             f"got shape {shape}")
    qd, kd, vd = _dtype(query), _dtype(key), _dtype(value)
    if qd not in [jnp.dtype(d) for d in FLOAT_DTYPES]:
        raise ValueError(f"query dtype must be one of bfloat16, float16, float32, got {qd}")
    if kd != qd or vd != qd:
        raise ValueError(f"query, key and value must share one dtype, got query={qd}, key={kd}, "
                         f"value={vd}")
    b, t, n, h = qs
    if ks[0] != b or vs[0] != b:
        raise ValueError(f"batch size differs: query {b}, key {ks[0]}, value {vs[0]}")
    if ks[1] != vs[1]:
        raise ValueError(f"key and value lengths differ: key {ks}, value {vs}")
    if ks[2] != vs[2]:
        raise ValueError(f"key and value head counts differ: key {ks}, value {vs}")
    if ks[3] != h:
        raise ValueError(f"key head_dim must equal query head_dim {h}, got key shape {ks}")
    if t == 0 or ks[1] == 0 or min(n, ks[2], h, vs[3]) == 0:
        raise ValueError(f"empty dimension: query {qs}, key {ks}, value {vs}")
    if n % ks[2]:
        raise ValueError(f"query heads must be a multiple of kv heads (N % K == 0), got "
                         f"N={n}, K={ks[2]}")


def check_head_dims_supported(query, value) -> None:
    h, hv = _shape(query)[3], _shape(value)[3]
    if h > MAX_HEAD_DIM or hv > MAX_HEAD_DIM:
        raise NotImplementedError(
            f"head_dim up to {MAX_HEAD_DIM} is supported by the Triton kernels, got query/key "
            f"head_dim={h}, value head_dim={hv}; pass backend='xla' for the pure-JAX path")


def check_scale(scale):
    """A Python number or a scalar float array, traced or not (jax.nn.dot_product_attention takes
    both); concrete values must be finite. Returned as it came; attention casts it to float32."""
    if isinstance(scale, (bool, str, bytes)) or scale is None:
        raise ValueError(f"scale must be a finite number or a scalar float array, got {scale!r}")
    if isinstance(scale, (int, float, np.number)):
        if not math.isfinite(float(scale)):
            raise ValueError(f"scale must be finite, got scale={float(scale)}")
        return float(scale)
    shape, dtype = _shape(scale), _dtype(scale)
    if shape not in ((), (1,)) or not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"scale must be a Python number or a scalar float array, got an array "
                         f"of shape {shape} and dtype {dtype}")
    if not isinstance(scale, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(scale))):
        raise ValueError(f"scale must be finite, got scale={np.asarray(scale)}")
    return jnp.reshape(scale, ())


def check_soft_cap(logits_soft_cap) -> float | None:
    """None (off) or a positive, finite Python number (static: it shapes the kernels)."""
    if logits_soft_cap is None:
        return None
    number = isinstance(logits_soft_cap, (int, float, np.number))
    if (isinstance(logits_soft_cap, bool) or not number
            or not math.isfinite(float(logits_soft_cap)) or float(logits_soft_cap) <= 0):
        raise ValueError(f"logits_soft_cap must be None or a positive finite number, got "
                         f"{logits_soft_cap!r}")
    return float(logits_soft_cap)


def check_flag(name: str, value) -> bool:
    """A static Python bool (numpy's too); a traced or array value is a ValueError."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_params(name: str, params) -> None:
    if params is not None and not isinstance(params, FlashAttentionParamsConfig):
        raise ValueError(f"{name} must be a FlashAttentionParamsConfig or None, got "
                         f"{type(params).__name__}")


def check_sinks(sinks, num_heads: int):
    """None, or a float array [N] (one logit per query head), traced or not."""
    if sinks is None:
        return None
    shape, dtype = _shape(sinks), _dtype(sinks)
    if shape != (num_heads,) or dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"sinks must be a float array of shape (num_heads,) = ({num_heads},), "
                         f"got shape {shape} and dtype {dtype}")
    if not isinstance(sinks, jax.core.Tracer):
        values = np.asarray(sinks, np.float32)
        if np.any(np.isnan(values) | np.isposinf(values)):
            raise ValueError(f"sinks must be finite or -inf (which turns a head's sink off), got "
                             f"{values}")
    return jnp.asarray(sinks)
