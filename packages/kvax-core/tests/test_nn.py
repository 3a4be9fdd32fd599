"""kvax.nn: dot_product_attention against jax.nn.dot_product_attention(implementation="xla") on
every row that has something to attend (outputs, logsumexp and gradients), and make_attention_fn
inside a flax.nnx model trained side by side with nnx's own attention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kvax_core_cases import BACKENDS

import kvax
from kvax.nn import dot_product_attention, make_attention_fn


def _inputs(seed, b, t, s, n, k, h, dtype=jnp.float32):
    keys = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(keys[0], (b, t, n, h), dtype)
    kk = jax.random.normal(keys[1], (b, s, k, h), dtype)
    v = jax.random.normal(keys[2], (b, s, k, h), dtype)
    return q, kk, v


def _segment_mask(q_seg, kv_seg, pad):
    """jax.nn's dense boolean mask [B, 1, T, S] for segment ids with padding id `pad`."""
    same = (q_seg[:, :, None] == kv_seg[:, None, :]) & (q_seg[:, :, None] != pad)
    return same[:, None]


def _assert_matches_jax_nn(ours_fn, theirs_fn, args, live_rows, *, residual=False, rtol=2e-5):
    """Outputs (and logsumexp) equal on live rows; gradients equal with a cotangent that is zero
    on dead rows (whose outputs the two libraries define differently)."""
    live = jnp.asarray(live_rows)[..., None]  # [B, T, 1]
    ours, ours_vjp = jax.vjp(ours_fn, *args)
    with jax.default_matmul_precision("highest"):  # jax.nn on a GPU: no TF32 products
        theirs, theirs_vjp = jax.vjp(theirs_fn, *args)
    out_o, lse_o = ours if residual else (ours, None)
    out_t, lse_t = theirs if residual else (theirs, None)
    np.testing.assert_allclose(np.where(live[..., None], out_o, 0),
                               np.where(live[..., None], out_t, 0), rtol=rtol, atol=rtol)
    assert np.all(np.asarray(out_o)[~np.asarray(live_rows)] == 0)
    rng = np.random.default_rng(0)
    cot = jnp.where(live[..., None], rng.standard_normal(out_o.shape), 0).astype(out_o.dtype)
    if residual:
        np.testing.assert_allclose(np.where(live, lse_o, 0), np.where(live, lse_t, 0),
                                   rtol=rtol, atol=rtol)
        assert np.all(np.isneginf(np.asarray(lse_o)[~np.asarray(live_rows)]))
        # jax.nn's logsumexp carries no gradient (ours does: test_attention checks it against
        # the float64 reference), so only the output's cotangent is compared here
        cot = (cot, jnp.zeros_like(lse_o))
    with jax.default_matmul_precision("highest"):
        theirs_grads = theirs_vjp(cot)
    for name, a, b in zip(("dq", "dk", "dv"), ours_vjp(cot), theirs_grads):
        np.testing.assert_allclose(a, b, rtol=10 * rtol, atol=10 * rtol, err_msg=name)


CASES = {
    "causal-gqa": dict(t=33, s=33, heads=(4, 2), kw=dict(is_causal=True)),
    "causal-top-left-T<S-lengths": dict(
        t=21, s=40, heads=(4, 1),
        kw=dict(is_causal=True, query_seq_lengths=[21, 15], key_value_seq_lengths=[40, 9])),
    "window-bidirectional": dict(t=37, s=37, heads=(2, 2), kw=dict(local_window_size=(3, 2))),
    "window-causal-int": dict(t=50, s=50, heads=(4, 2), kw=dict(is_causal=True,
                                                                 local_window_size=7)),
    "residual-lengths": dict(t=29, s=29, heads=(4, 2),
                             kw=dict(is_causal=True, return_residual=True,
                                     query_seq_lengths=[29, 11], key_value_seq_lengths=[29, 11])),
    "scale": dict(t=16, s=24, heads=(2, 1), kw=dict(scale=0.37)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(CASES))
def test_equals_jax_nn(name, backend):
    case = CASES[name]
    t, s, (n, k), kw = case["t"], case["s"], case["heads"], case["kw"]
    args = _inputs(len(name), 2, t, s, n, k, 32)
    live = np.ones((2, t), bool)
    if "query_seq_lengths" in kw:
        live &= np.arange(t)[None] < np.asarray(kw["query_seq_lengths"])[:, None]
    if "key_value_seq_lengths" in kw:
        live &= np.asarray(kw["key_value_seq_lengths"])[:, None] > 0
    kw = {key: jnp.asarray(v) if isinstance(v, list) else v for key, v in kw.items()}
    _assert_matches_jax_nn(
        jax.jit(lambda *a: dot_product_attention(*a, implementation=backend, **kw)),
        jax.jit(lambda *a: jax.nn.dot_product_attention(*a, implementation="xla", **kw)),
        args, live, residual=kw.get("return_residual", False))


@pytest.mark.parametrize("backend", BACKENDS)
def test_unbatched_and_bf16(backend):
    q, k, v = (x[0] for x in _inputs(3, 1, 40, 40, 4, 2, 64, jnp.bfloat16))
    ours = dot_product_attention(q, k, v, is_causal=True, implementation=backend)
    with jax.default_matmul_precision("highest"):
        theirs = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
    assert ours.shape == theirs.shape == q.shape and ours.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(ours, np.float32), np.asarray(theirs, np.float32),
                               atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pad_id", [-1, 0], ids=["kvax-padding", "maxtext-padding"])
def test_segment_ids_equal_jax_nn_with_dense_mask(pad_id, backend):
    """Packed documents through segment ids (MaxText's convention pad=0 too, with a real
    document numbered -1, which Kvax's own padding id must not swallow) and restarted positions
    equal jax.nn with the dense mask they stand for."""
    t = 45
    doc = -1 if pad_id == 0 else 4
    seg = np.array([[3] * 10 + [doc] * 14 + [7] * 15 + [pad_id] * 6,
                    [5] * 30 + [2] * 12 + [pad_id] * 3])
    pos = np.concatenate([np.arange(10), np.arange(14), np.arange(21)])[None].repeat(2, 0)
    pos[1] = np.concatenate([np.arange(30), np.arange(15)])
    live = seg != pad_id
    causal = pos[:, :, None] >= pos[:, None, :]
    dense = _segment_mask(jnp.asarray(seg), jnp.asarray(seg), pad_id) & causal[:, None]
    args = _inputs(4, 2, t, t, 4, 2, 32)
    _assert_matches_jax_nn(
        jax.jit(lambda *a: dot_product_attention(
            *a, query_segment_ids=seg, query_positions=pos, is_causal=True,
            padding_segment_id=pad_id, implementation=backend)),
        jax.jit(lambda *a: jax.nn.dot_product_attention(*a, mask=dense, implementation="xla")),
        args, live)


def test_unsigned_segment_ids_with_padding_id():
    """uint8 segment ids with padding 0 (MaxText-style): Kvax's padding id -1 must not wrap to
    255 and turn padding into a document."""
    q, k, v = _inputs(8, 1, 12, 12, 2, 1, 16)
    seg = np.array([[1] * 5 + [2] * 4 + [0] * 3], np.uint8)
    out = dot_product_attention(q, k, v, is_causal=True, query_segment_ids=seg,
                                padding_segment_id=0)
    assert np.all(np.asarray(out)[0, 9:] == 0)
    want = dot_product_attention(q, k, v, is_causal=True, query_segment_ids=seg.astype(np.int32),
                                 padding_segment_id=0)
    np.testing.assert_array_equal(out, want)


def test_errors_name_the_argument():
    q, k, v = _inputs(5, 2, 8, 12, 2, 1, 16)
    with pytest.raises(NotImplementedError, match="query_segment_ids"):
        dot_product_attention(q, k, v, mask=jnp.ones((2, 1, 8, 12), bool))
    with pytest.raises(NotImplementedError, match="dense bias"):
        dot_product_attention(q, k, v, bias=jnp.zeros((2, 1, 8, 12)))
    with pytest.raises(ValueError, match="all be"):
        dot_product_attention(q[0], k, v)
    with pytest.raises(ValueError, match="query_segment_ids was given without kv_segment_ids"):
        dot_product_attention(q, k, v, query_segment_ids=jnp.zeros((2, 8), jnp.int32))
    with pytest.raises(ValueError, match=r"query_seq_lengths must be .* shape \(2,\)"):
        dot_product_attention(q, k, v, query_seq_lengths=jnp.array([3]))
    with pytest.raises(NotImplementedError, match="implementation='cudnn' is jax.nn's"):
        dot_product_attention(q, k, v, implementation="cudnn")
    with pytest.raises(ValueError, match=r"implementation must be one of \(.*'xla', 'auto'\) "
                                         r"or None, got 'flash'"):
        dot_product_attention(q, k, v, implementation="flash")
    with pytest.raises(ValueError, match=r"sinks must be .* \(2,\)"):
        dot_product_attention(q, k, v, sinks=jnp.zeros(3))
    with pytest.raises(ValueError, match="deterministic must be True or False, got 'yes'"):
        dot_product_attention(q, k, v, deterministic="yes")


def test_deterministic_false_is_a_permission():
    """Where no faster backward exists (here the pure-JAX path) deterministic=False changes
    nothing; the Flax factory takes it as deterministic_backward (nnx's deterministic is
    dropout's)."""
    q, k, v = _inputs(6, 1, 9, 9, 2, 1, 16)
    want = dot_product_attention(q, k, v, is_causal=True)
    got = dot_product_attention(q, k, v, is_causal=True, deterministic=False)
    np.testing.assert_array_equal(got, want)
    fn = make_attention_fn(deterministic_backward=False)
    np.testing.assert_array_equal(fn(q, k, v, is_causal=True, deterministic=True), want)


FLAX_RUNS = [
    pytest.param("xla", "float32", 32, True, 1e-5, id="xla"),
    pytest.param("xla", "bfloat16", 256, True, 3e-2, id="xla-bf16"),
    pytest.param("triton", "float32", 32, True, 1e-5, id="triton", marks=pytest.mark.gpu),
    # the Hopper kernels (forward and backward, its dQ in fixed point or with
    # deterministic_backward=False in float32) take 16-bit inputs and head dims 64/128/256: a bf16
    # model of head dim 64
    pytest.param("mosaic", "bfloat16", 256, True, 3e-2, id="mosaic", marks=pytest.mark.gpu),
    pytest.param("mosaic", "bfloat16", 256, False, 3e-2, id="mosaic-nondeterministic",
                 marks=pytest.mark.gpu),
]


@pytest.mark.parametrize("implementation,dtype,d,deterministic,rtol", FLAX_RUNS)
def test_flax_nnx_model_trains_like_nnx_attention(implementation, dtype, d, deterministic, rtol):
    """Two identical nnx models on packed documents with padding, one with Kvax's attention_fn
    and one with nnx's own attention and the equivalent dense mask: the same losses and
    parameters over a few SGD steps (in bf16 both models compute in bf16, so within bf16's
    rounding)."""
    nnx = pytest.importorskip("flax.nnx")

    b, t = 2, 24
    seg = jnp.asarray([[0] * 9 + [1] * 11 + [-1] * 4, [4] * 20 + [5] * 4])
    pos = jnp.asarray([list(range(9)) + list(range(15)), list(range(20)) + list(range(4))])
    live = seg != -1
    dense = (_segment_mask(seg, seg, -1)
             & (pos[:, :, None] >= pos[:, None, :])[:, None])

    class Block(nnx.Module):
        def __init__(self, attention_fn, rngs):
            self.attn = nnx.MultiHeadAttention(num_heads=4, num_kv_heads=2, in_features=d,
                                               qkv_features=d, decode=False, rngs=rngs,
                                               attention_fn=attention_fn, dtype=dtype)
            self.head = nnx.Linear(d, 1, rngs=rngs)

        def __call__(self, x, mask=None):
            return self.head(self.attn(x, mask=mask))[..., 0]

    x = jax.random.normal(jax.random.key(0), (b, t, d))
    y = jax.random.normal(jax.random.key(1), (b, t))
    ours = Block(make_attention_fn(query_segment_ids=seg, query_positions=pos, is_causal=True,
                                   implementation=implementation,
                                   deterministic_backward=deterministic), nnx.Rngs(0))
    theirs = Block(nnx.dot_product_attention, nnx.Rngs(0))

    def loss_fn(model, mask):
        err = jnp.where(live, model(x, mask=mask) - y, 0.0)
        return jnp.sum(err ** 2) / jnp.sum(live)

    losses = {"ours": [], "theirs": []}
    with jax.default_matmul_precision("highest"):  # no TF32 products on a GPU (both models)
        for name, model, mask in (("ours", ours, None), ("theirs", theirs, dense)):
            optimizer = nnx.Optimizer(model, __import__("optax").sgd(3.2 / d), wrt=nnx.Param)
            for _ in range(4):
                loss, grads = nnx.value_and_grad(loss_fn)(model, mask)
                optimizer.update(model, grads)
                losses[name].append(float(loss))
    np.testing.assert_allclose(losses["ours"], losses["theirs"], rtol=rtol)
    assert losses["ours"][-1] < losses["ours"][0]
    for a, b_ in zip(jax.tree.leaves(nnx.state(ours, nnx.Param)),
                     jax.tree.leaves(nnx.state(theirs, nnx.Param))):
        np.testing.assert_allclose(a, b_, rtol=10 * rtol, atol=rtol)


def test_flax_attention_fn_refuses_what_it_cannot_do():
    q, k, v = _inputs(6, 1, 8, 8, 2, 2, 16)
    fn = make_attention_fn(query_segment_ids=jnp.zeros((1, 8), jnp.int32))
    with pytest.raises(NotImplementedError, match="dense mask"):
        fn(q, k, v, mask=jnp.ones((1, 1, 8, 8), bool))
    with pytest.raises(NotImplementedError, match="dropout"):
        fn(q, k, v, dropout_rate=0.1, deterministic=False)
    with pytest.raises(NotImplementedError, match="RoPE"):
        fn(q, k, v, input_positions=jnp.zeros((1, 8), jnp.int32))
    with pytest.raises(TypeError, match="new_flag"):
        fn(q, k, v, new_flag=True)
    with pytest.raises(ValueError, match="is_causal=False"):
        make_attention_fn(is_causal=False)(q, k, v, is_causal=True)
    with pytest.raises(ValueError, match="masks= needs"):
        make_attention_fn(masks=object())
    with pytest.raises(NotImplementedError, match="implementation='cudnn' is jax.nn's"):
        make_attention_fn(implementation="cudnn")  # when made, not at the model's first call
    with pytest.raises(ValueError, match="implementation must be one of"):
        make_attention_fn(implementation="Mosaic")


def test_flax_attention_fn_with_prebuilt_masks():
    """Masks built once per step by create_attention_mask, reused by the attention_fn."""
    q, k, v = _inputs(7, 1, 40, 40, 4, 2, 16)
    seg = jnp.asarray([[0] * 25 + [1] * 15])
    pos = jnp.asarray([list(range(25)) + list(range(15))])
    masks = kvax.ops.create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)
    fn = make_attention_fn(masks=masks, query_positions=pos, query_segment_ids=seg,
                           kv_positions=pos, kv_segment_ids=seg)
    want = dot_product_attention(q, k, v, query_segment_ids=seg, query_positions=pos,
                                 is_causal=True)
    np.testing.assert_allclose(fn(q, k, v, is_causal=True), want, rtol=1e-6, atol=1e-6)
