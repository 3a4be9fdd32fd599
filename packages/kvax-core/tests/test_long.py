"""GPU only: long sequences and tensors past 2^31 elements, checked on whole documents.

Documents are independent, so the output and gradients of one document can be checked against the
dense reference on that document alone, even when the whole row is far too long for it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kvax.ops import create_attention_mask, flash_attention
from kvax_testing import check_attention
from kvax_testing.batches import PackedBatch, PackedLayout

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def documents(seq_len, doc_len, pad, first_doc_len=None):
    """One long first document (if asked), then documents of doc_len, then padding."""
    real = seq_len - pad
    seg = np.full((1, seq_len), -1, np.int32)
    pos = np.zeros((1, seq_len), np.int32)
    first = first_doc_len or 0
    seg[0, :first], pos[0, :first] = 0, np.arange(first)
    rest = np.arange(real - first)
    seg[0, first:real] = 1 + rest // doc_len
    pos[0, first:real] = rest % doc_len
    return pos, seg


def random_qkv(seed, seq_len, n, k, h, dtype=jnp.bfloat16):
    keys = jax.random.split(jax.random.key(seed), 3)
    q = jax.random.normal(keys[0], (1, seq_len, n, h), dtype)
    kk = jax.random.normal(keys[1], (1, seq_len, k, h), dtype)
    v = jax.random.normal(keys[2], (1, seq_len, k, h), dtype)
    return q, kk, v


def check_document(q, k, v, pos, seg, lo, hi, out, grads, cotangent, scale):
    """Compare rows [lo, hi) of out and grads with the reference run on that document alone."""
    sl = slice(lo, hi)
    doc = PackedBatch(np.asarray(q[:, sl]), np.asarray(k[:, sl]), np.asarray(v[:, sl]),
                      PackedLayout(pos[:, sl], seg[:, sl], pos[:, sl], seg[:, sl]))
    cached = dict(out=out[:, sl], dq=grads[0][:, sl], dk=grads[1][:, sl], dv=grads[2][:, sl])

    def replay(*_):  # the big run's results for this document, with its cotangent
        @jax.custom_vjp
        def f(q_, k_, v_):
            return cached["out"]

        f.defvjp(lambda *a: (cached["out"], None),
                 lambda _, g: (cached["dq"], cached["dk"], cached["dv"]))
        return f(*_[:3])

    # check_attention draws its own cotangent from the seed; use the one the big run used
    report = check_attention(replay, doc, scale=scale, seed=0, cotangent=cotangent[:, sl])
    assert report.ok, str(report)


@pytest.mark.parametrize("seq_len", [131072])
def test_long_sequence(seq_len):
    # a 64k-token document, then 4k-token ones (checkable against the dense reference), padding
    doc_len, pad, first = 4096, 3000, 65536
    pos, seg = documents(seq_len, doc_len, pad, first_doc_len=first)
    q, k, v = random_qkv(1, seq_len, 8, 2, 128)
    scale = 128 ** -0.5
    masks = create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)
    fn = jax.jit(lambda q, k, v: flash_attention(q, k, v, pos, seg, pos, seg, mask=masks,
                                                 scale=scale))
    out, vjp = jax.vjp(fn, q, k, v)
    cotangent = jax.random.normal(jax.random.key(9), out.shape, out.dtype)
    grads = vjp(cotangent)
    # the last full document: rows far into the sequence
    lo = first + ((seq_len - pad - first) // doc_len - 1) * doc_len
    assert lo > 100_000
    check_document(q, k, v, pos, seg, lo, lo + doc_len, out, grads, cotangent, scale)
    pad_rows = np.asarray(seg[0] == -1)
    assert np.all(np.asarray(out[0, pad_rows], np.float32) == 0)
    for g in grads:
        assert np.all(np.asarray(g[0, pad_rows], np.float32) == 0)


def test_tensor_past_2_pow_31_elements():
    seq_len, n, h = 262144, 64, 128  # query: 2^31 elements
    doc_len = 2048
    pos, seg = documents(seq_len, doc_len, pad=0)
    q, k, v = random_qkv(2, seq_len, n, 8, h)
    assert q.size >= 2**31
    scale = h ** -0.5
    fn = jax.jit(lambda q, k, v: flash_attention(q, k, v, pos, seg, pos, seg, scale=scale))
    out, vjp = jax.vjp(fn, q, k, v)
    cotangent = jax.random.normal(jax.random.key(10), out.shape, out.dtype)
    grads = vjp(cotangent)
    lo = seq_len - doc_len  # the last document: element offsets past 2^31
    assert lo * n * h >= 2**31 - n * h * doc_len
    check_document(q, k, v, pos, seg, lo, seq_len, out, grads, cotangent, scale)
