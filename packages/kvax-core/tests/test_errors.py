"""Every bad input raises a clear error naming the argument, before anything is built or
launched."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kvax.ops import create_attention_mask, flash_attention
from kvax.utils import FlashAttentionParamsConfig

B, T, S, N, K, H = 2, 40, 48, 4, 2, 16
P16 = FlashAttentionParamsConfig(query_block_size=16, kv_block_size=16)


def args(**over):
    a = dict(
        query=jnp.ones((B, T, N, H), jnp.bfloat16), key=jnp.ones((B, S, K, H), jnp.bfloat16),
        value=jnp.ones((B, S, K, H), jnp.bfloat16),
        query_positions=jnp.zeros((B, T), jnp.int32),
        query_segment_ids=jnp.zeros((B, T), jnp.int32),
        kv_positions=jnp.zeros((B, S), jnp.int32), kv_segment_ids=jnp.zeros((B, S), jnp.int32),
    )
    a.update(over)
    return a


BAD = [
    (dict(query=jnp.ones((B, T, N), jnp.bfloat16)), ValueError,
     r"query must have rank 4.*\(2, 40, 4\)"),
    (dict(key=jnp.ones((B, S, K, H), jnp.float32)), ValueError, "share one dtype.*key=float32"),
    (dict(query=jnp.ones((B, T, N, H), jnp.int32)), ValueError, "query dtype must be one of"),
    (dict(query=jnp.ones((B, T, 3, H), jnp.bfloat16)), ValueError, r"N % K == 0.*N=3, K=2"),
    (dict(key=jnp.ones((B, S, K, 8), jnp.bfloat16)), ValueError,
     "key head_dim must equal query head_dim 16"),
    (dict(value=jnp.ones((B, S + 1, K, H), jnp.bfloat16)), ValueError,
     "key and value lengths differ"),
    (dict(key=jnp.ones((1, S, K, H), jnp.bfloat16), value=jnp.ones((1, S, K, H), jnp.bfloat16)),
     ValueError, "batch size differs: query 2, key 1"),
    (dict(query_positions=jnp.zeros((B, T + 1), jnp.int32)), ValueError,
     r"query_positions must have shape \(2, 40\).*got \(2, 41\)"),
    (dict(kv_segment_ids=jnp.zeros((B, S), jnp.float32)), ValueError,
     "kv_segment_ids must be an integer array.*float32"),
    (dict(query_segment_ids=jnp.zeros((B,), jnp.int32)), ValueError,
     r"query_segment_ids must have shape \(batch, seq_len\), got shape \(2,\)"),
]


@pytest.mark.parametrize("over,err,match", BAD, ids=[m.split(" ")[0] for _, _, m in BAD])
def test_bad_inputs(over, err, match):
    with pytest.raises(err, match=match):
        flash_attention(**args(**over))


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), "0.1", jnp.ones(3)])
def test_scale_must_be_finite_static(scale):
    with pytest.raises(ValueError, match="scale must be"):
        flash_attention(**args(), scale=scale)


def test_mask_built_for_other_call():
    a = args()
    masks = create_attention_mask(a["query_positions"], a["query_segment_ids"], a["kv_positions"],
                                  a["kv_segment_ids"], fwd_params=P16)
    other = FlashAttentionParamsConfig(query_block_size=32, kv_block_size=16)
    with pytest.raises(ValueError,
                       match=r"built with fwd_params .* \(16, 16\), but the call uses \(32, 16\)"):
        flash_attention(**a, mask=masks, fwd_params=other)
    short = args(query=jnp.ones((B, T - 8, N, H), jnp.bfloat16),
                 query_positions=jnp.zeros((B, T - 8), jnp.int32),
                 query_segment_ids=jnp.zeros((B, T - 8), jnp.int32))
    with pytest.raises(ValueError,
                       match="built for query_len=40, kv_len=48, but the call has query_len=32"):
        flash_attention(**short, mask=masks)
    with pytest.raises(ValueError, match="mask must be what create_attention_mask returned"):
        flash_attention(**a, mask=(np.zeros(3),))


def test_unsupported_cases():
    with pytest.raises(NotImplementedError, match="bias is not supported"):
        flash_attention(**args(), bias=jnp.zeros((B, N, T, S)))
    with pytest.raises(NotImplementedError, match="backend='triton' needs a CUDA GPU"):
        flash_attention(**args(), backend="triton")
    with pytest.raises(ValueError, match="backend must be one of"):
        flash_attention(**args(), backend="cuda")
    with pytest.raises(ValueError, match="query_block_size must be one of"):
        FlashAttentionParamsConfig(query_block_size=48)
    with pytest.raises(ValueError, match="fwd_params must be a FlashAttentionParamsConfig"):
        flash_attention(**args(), fwd_params={"query_block_size": 64})


def test_head_dim_limit_message():
    from kvax._src.attention import validate

    with pytest.raises(NotImplementedError, match="head_dim up to 256.*backend='xla'"):
        validate.check_head_dims_supported(jnp.ones((1, 1, 1, 320)), jnp.ones((1, 1, 1, 64)))


def test_imports_without_gpu_and_dist_helpers():
    import kvax
    from kvax.utils import PADDING_SEGMENT_ID, attention_specs  # via kvax-dist
    from kvax_testing import PADDING_SEGMENT_ID as REF_PAD

    assert PADDING_SEGMENT_ID == REF_PAD == -1
    assert callable(attention_specs) and kvax.__version__


WIDE = [
    ("kv_segment_ids", np.array([[5, 2**32 + 5] * (S // 2)] * B, np.int64), "int64.*4294967301"),
    ("query_segment_ids", np.full((B, T), 0xFFFFFFFF, np.uint32), "uint32.*4294967295"),
    ("query_positions", np.full((B, T), 2**31, np.int64), "int64.*2147483648"),
    ("kv_positions", np.full((B, S), 2**40, np.uint64), "uint64"),
]


@pytest.mark.parametrize("name,value,match", WIDE, ids=[w[0] for w in WIDE])
def test_wide_integers_that_do_not_fit_raise(name, value, match):
    """ids 5 and 2**32 + 5 would merge, 0xFFFFFFFF would become padding: never cast silently."""
    with pytest.raises(ValueError, match=f"{name} has dtype {match}.*outside int32"):
        flash_attention(**args(**{name: value}))
    a = args(**{name: value})
    layout = [a[n] for n in ("query_positions", "query_segment_ids", "kv_positions",
                             "kv_segment_ids")]
    with pytest.raises(ValueError, match=f"{name} has dtype"):
        create_attention_mask(*layout)


def test_integer_types_that_fit_are_taken():
    """Narrow types as they are; wide ones whose concrete values fit; the same answer as int32."""
    want = flash_attention(**args(), fwd_params=P16, bwd_params=P16)
    for dtype in (np.int8, np.int16, np.uint8, np.uint16, np.int64, np.uint32):
        layout = {n: np.zeros(args()[n].shape, dtype) for n in
                  ("query_positions", "query_segment_ids", "kv_positions", "kv_segment_ids")}
        got = flash_attention(**args(**layout), fwd_params=P16, bwd_params=P16)
        np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


def test_wide_integers_under_jit_raise():
    """Under jit the values are unknown: a dtype wider than int32 is an error."""
    a = args()

    @jax.jit
    def call(seg):
        return flash_attention(**{**a, "kv_segment_ids": seg})

    with pytest.raises(ValueError, match="kv_segment_ids has dtype uint32.*traced"):
        call(jnp.zeros((B, S), jnp.uint32))
    with jax.enable_x64(True):
        with pytest.raises(ValueError, match="kv_segment_ids has dtype int64.*traced"):
            call(jnp.zeros((B, S), jnp.int64))


def test_scale_as_a_scalar_array():
    a = args()
    want = flash_attention(**a, scale=0.25)
    for scale in (jnp.float32(0.25), jnp.asarray([0.25], jnp.bfloat16), np.float64(0.25)):
        np.testing.assert_array_equal(np.asarray(flash_attention(**a, scale=scale), np.float32),
                                      np.asarray(want, np.float32))
    with pytest.raises(ValueError, match=r"scale must be a Python number or a scalar float "
                                         r"array, got an array of shape \(\) and dtype int32"):
        flash_attention(**a, scale=jnp.int32(1))


def test_star_import_and_mask_legend():
    namespace = {}
    exec("from kvax import *", namespace)
    assert {"ops", "utils"} <= set(namespace)
    a = args()
    (mask,) = create_attention_mask(a["query_positions"], a["query_segment_ids"],
                                    a["kv_positions"], a["kv_segment_ids"], fwd_params=P16)
    assert "'░░' visited with the element mask" in mask.format()


def test_variant_arguments_and_masks_built_for_another_variant():
    a = args()
    layout = [a[n] for n in ("query_positions", "query_segment_ids", "kv_positions",
                             "kv_segment_ids")]
    masks = create_attention_mask(*layout, fwd_params=P16, local_window_size=8)
    with pytest.raises(ValueError, match=r"mask was built for is_causal=True, local_window_size="
                                         r"\(8, 8\), but the call asks for is_causal=True, "
                                         r"local_window_size=None"):
        flash_attention(**a, mask=masks, fwd_params=P16)
    with pytest.raises(ValueError, match="is_causal=False"):
        flash_attention(**a, mask=masks, fwd_params=P16, is_causal=False, local_window_size=8)
    for bad in (-1, (3,), (1, 2, 3), 2.5, (1, "2"), 2**31, 2**30, (0, 2**30)):
        with pytest.raises(ValueError, match="local_window_size must be"):
            flash_attention(**a, local_window_size=bad)
    with pytest.raises(ValueError, match="is_causal must be True or False"):
        flash_attention(**a, is_causal="yes")
    far = np.full((B, S), 2**30 + 1, np.int32)
    with pytest.raises(ValueError, match=r"kv_positions must lie in \[-2\*\*30, 2\*\*30\]"):
        flash_attention(**args(kv_positions=far), local_window_size=4)
    flash_attention(**args(kv_positions=far))  # without a window any int32 position is fine


@pytest.mark.parametrize("cap", [0.0, -1.0, float("inf"), "5", True, jnp.float32(5.0)])
def test_soft_cap_must_be_a_positive_number(cap):
    with pytest.raises(ValueError, match="logits_soft_cap must be None or a positive finite"):
        flash_attention(**args(), logits_soft_cap=cap)


def test_sinks_and_residual_arguments():
    with pytest.raises(ValueError, match=r"sinks must be a float array of shape \(num_heads,\) "
                                         r"= \(4,\), got shape \(2,\)"):
        flash_attention(**args(), sinks=jnp.zeros(2))
    with pytest.raises(ValueError, match="got shape \\(4,\\) and dtype int32"):
        flash_attention(**args(), sinks=jnp.zeros(4, jnp.int32))
    with pytest.raises(ValueError, match="sinks must be finite or -inf"):
        flash_attention(**args(), sinks=jnp.array([0.0, jnp.inf, 0.0, 0.0]))
    out, lse = flash_attention(**args(), return_residual=True)
    assert lse.shape == (B, T, N) and lse.dtype == jnp.float32


def test_backend_registry_falls_through():
    """A registered backend that refuses (NotImplementedError) lets "auto" fall through to the
    next; named explicitly, its refusal reaches the caller."""
    from kvax.extend import Backend, backend_names, register_backend
    from kvax._src.attention import backends

    class Refuses(Backend):
        name = "refuses"

        def check(self, query, key, value, *, platform):
            raise NotImplementedError("refuses: never runs")

    register_backend(Refuses(), priority=100)
    try:
        assert backend_names()[0] == "refuses" and backend_names()[-1] == "auto"
        qkv = (args()[n] for n in ("query", "key", "value"))
        assert backends.resolve("auto", *qkv, fwd_params=FlashAttentionParamsConfig()) == "xla"
        flash_attention(**args())  # auto: runs on xla
        with pytest.raises(NotImplementedError, match="never runs"):
            flash_attention(**args(), backend="refuses")
    finally:
        backends._REGISTRY.pop("refuses")


def test_kvax_core_never_imports_kvax_dist_by_name():
    """kvax-core finds kvax-dist only through the entry point (kvax/_src/sharded.py), and
    kvax-dist reaches kvax-core only through public modules (kvax.extend, kvax.ops,
    kvax.utils): no import cycle, no private surface."""
    import pathlib
    import re

    import kvax
    import kvax_dist

    core = pathlib.Path(kvax.__file__).parent
    for path in core.rglob("*.py"):
        assert not re.search(r"^\s*(import|from)\s+kvax_dist", path.read_text(), re.M), path
    for path in pathlib.Path(kvax_dist.__file__).parent.rglob("*.py"):
        assert "kvax._src" not in path.read_text(), path
