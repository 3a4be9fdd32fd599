import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kvax_testing import (PADDING_SEGMENT_ID, check_attention, packed_batch, reference_attention,
                          reference_mask)


def correct(q, k, v, *layout, scale=0.25):
    return reference_attention(q, k, v, *layout, scale=scale, dtype=jnp.float32)[0].astype(q.dtype)


def wrong_scale(q, k, v, *layout):
    return correct(q, k, v, *layout, scale=0.25 * 1.05)


def dropped_boundary(q, k, v, qp, qs, kp, ks):
    # Treat every real token as one document: attention leaks across document boundaries.
    qs = jnp.where(qs == PADDING_SEGMENT_ID, qs, 0)
    ks = jnp.where(ks == PADDING_SEGMENT_ID, ks, 0)
    return correct(q, k, v, qp, qs, kp, ks)


def leaky_padding(q, k, v, qp, qs, kp, ks):
    out = correct(q, k, v, qp, qs, kp, ks)
    return out + 1e-3 * (qs == PADDING_SEGMENT_ID)[:, :, None, None]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_checker_passes_the_reference(dtype):
    batch = packed_batch(21, kv_len=65, num_docs=3, pad_tokens=7, head_dim=16, dtype=dtype)
    report = check_attention(correct, batch, scale=0.25)
    assert report.ok, str(report)
    # 16-bit inputs: also the rows that see one key, bitwise (causal documents have them)
    one_key = {"1-key"} if dtype == "bfloat16" else set()
    assert {c.name for c in report.comparisons} == {"out", "dq", "dk", "dv"} | one_key


@pytest.mark.parametrize("bug", [wrong_scale, dropped_boundary, leaky_padding])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_checker_catches_planted_bugs(bug, dtype):
    batch = packed_batch(22, kv_len=65, num_docs=3, pad_tokens=7, head_dim=16, dtype=dtype)
    report = check_attention(bug, batch, scale=0.25)
    assert not report.ok
    assert "FAIL" in str(report)
    with pytest.raises(AssertionError, match="attention check failed"):
        report.assert_ok()


def test_checker_reports_worst_element():
    batch = packed_batch(23, batch=1, kv_len=30, num_docs=1, pad_tokens=0, head_dim=8,
                         num_heads=2, num_kv_heads=1)

    def one_bad_element(q, k, v, *layout):
        return correct(q, k, v, *layout).at[0, 17, 1, 3].add(0.5)

    report = check_attention(one_bad_element, batch, scale=0.25, grads=False)
    (out,) = report.comparisons
    assert not out.ok and out.index == (0, 17, 1, 3)


SINKS = jnp.asarray([0.4, -1.0, 1.5, -jnp.inf], jnp.float32)


def with_sinks(q, k, v, *layout, sinks, shift=0.0, lse_shift=0.0):
    out, lse = reference_attention(q, k, v, *layout, scale=0.25, dtype=jnp.float32,
                                   sinks=sinks + shift)
    return out.astype(q.dtype), lse.transpose(0, 2, 1) + lse_shift


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_checker_sinks_and_residual(dtype):
    """The reference with sinks passes (and dsinks and lse are compared); a sink off by 0.02, or a
    logsumexp off by 1e-3, fails, in bfloat16 too (their plain computation is float32's)."""
    batch = packed_batch(24, kv_len=97, num_docs=3, pad_tokens=9, head_dim=16, dtype=dtype)
    good = check_attention(with_sinks, batch, scale=0.25, sinks=SINKS, residual=True)
    assert good.ok, str(good)
    assert {c.name for c in good.comparisons} == {"out", "lse", "dq", "dk", "dv", "dsinks"}
    for bug in (dict(shift=0.02), dict(lse_shift=1e-3)):
        bad = check_attention(lambda *a, **kw: with_sinks(*a, **kw, **bug), batch, scale=0.25,
                              sinks=SINKS, residual=True)
        assert not bad.ok, f"{bug}\n{bad}"


def test_declared_logit_error_widens_only_the_logsumexp():
    """A logsumexp off by 1e-3 fails, and passes once the call declares logits up to 1.5e-3 off
    (an approximate tanh's), the other results' bounds unchanged; it still fails at 5e-4
    declared, and a sink off by 0.02 (its logsumexp by about as much) still fails at 1.5e-3."""
    batch = packed_batch(25, kv_len=97, num_docs=3, pad_tokens=9, head_dim=16, dtype="bfloat16")

    def off(**bug):
        return lambda *a, **kw: with_sinks(*a, **kw, **bug)

    def check(fn, logit_error):
        return check_attention(fn, batch, scale=0.25, sinks=SINKS, residual=True,
                               logit_error=logit_error)

    assert not check(off(lse_shift=1e-3), 0.0).ok
    assert not check(off(lse_shift=1e-3), 5e-4).ok
    passed = check(off(lse_shift=1e-3), 1.5e-3)
    assert passed.ok, str(passed)
    strict = check(off(lse_shift=1e-3), 0.0)
    for before, after in zip(strict.comparisons, passed.comparisons):
        assert (after.bound > before.bound) == (after.name == "lse"), (before, after)
    failed = check(off(shift=0.02), 1.5e-3)
    assert "lse" in {c.name for c in failed.comparisons if not c.ok}, str(failed)


def tf32(x):
    """x (float32) rounded to TF32's 10 mantissa bits, as a GPU's TF32 products read it."""
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    return jax.lax.bitcast_convert_type((bits + 0x1000) & jnp.uint32(0xFFFFE000), jnp.float32)


def flash_backward(scale=0.25, dq_error=0.0, tf32_dp=False):
    """The reference's forward in float32 with a flash-attention backward: delta = dO . O and
    dP = dO V^T as two float32 sums in different orders, dS = P (dP - delta); dq_error is added
    to every element of dq, tf32_dp takes dP from TF32 operands (planted bugs)."""
    @jax.custom_vjp
    def attend(q, k, v, *layout):
        return reference_attention(q, k, v, *layout, scale=scale, dtype=jnp.float32)[0]

    def forward(q, k, v, *layout):
        out, lse = reference_attention(q, k, v, *layout, scale=scale, dtype=jnp.float32)
        return out, (q, k, v, layout, out, lse)

    def backward(res, d_out):
        q, k_kv, v_kv, layout, out, lse = res
        group = q.shape[2] // k_kv.shape[2]
        k, v = (jnp.repeat(x, group, axis=2) for x in (k_kv, v_kv))
        allowed = reference_mask(*layout)[:, None]
        logits = jnp.einsum("btnh,bsnh->bnts", q, k) * scale
        live = jnp.isfinite(lse)[..., None]
        p = jnp.where(allowed & live, jnp.exp(logits - jnp.where(live, lse[..., None], 0)), 0)
        d_p = (jnp.einsum("btnh,bsnh->bnts", tf32(d_out), tf32(v)) if tf32_dp
               else jnp.einsum("btnh,bsnh->bnts", d_out, v))
        delta = jnp.sum(d_out * out, axis=-1).transpose(0, 2, 1)[..., None]  # [B, N, T, 1]
        d_s = p * (d_p - delta)
        dq = scale * jnp.einsum("bnts,bsnh->btnh", d_s, k) + dq_error
        dk = scale * jnp.einsum("bnts,btnh->bsnh", d_s, q)
        dv = jnp.einsum("bnts,btnh->bsnh", p, d_out)
        dk, dv = (x.reshape(*k_kv.shape[:3], group, x.shape[-1]).sum(3) for x in (dk, dv))
        return (dq, dk, dv) + tuple(None for _ in layout)

    attend.defvjp(forward, backward)
    return attend


def test_checker_allows_the_rounding_of_cancelled_terms():
    """Rows that each see one key (documents of one token) have dq = dk = 0 exactly, and the
    plain computation's autodiff gets that exactly. A flash-attention backward keeps the float32
    rounding of dP - delta there (fuzz.py variants, seed 5658, on a GPU: 3e-7 against a bound
    of 1e-9). The checker allows that rounding of the terms before they cancel, and still
    fails a dq off by 1e-4, and dP from TF32 operands on longer documents."""
    batch = packed_batch(5658, batch=1, kv_len=40, num_docs=(40, 40), pad_tokens=0,
                         head_dim=24, num_heads=4, num_kv_heads=2, dtype="float32")
    assert len(set(batch.layout.arrays[1][0].tolist())) == 40  # one token a document
    good = check_attention(flash_backward(), batch, scale=0.25)
    assert good.ok, str(good)
    errors = {c.name: c.error for c in good.comparisons}
    assert errors["dq"] > 0 or errors["dk"] > 0, errors  # the rounding this test is about
    bad = check_attention(flash_backward(dq_error=1e-4), batch, scale=0.25)
    assert [c.name for c in bad.comparisons if not c.ok] == ["dq"], str(bad)
    # on documents of many tokens dP in TF32 still fails dq and dk
    batch = packed_batch(21, kv_len=65, num_docs=3, pad_tokens=7, head_dim=16, dtype="float32")
    assert check_attention(flash_backward(), batch, scale=0.25).ok
    bad = check_attention(flash_backward(tf32_dp=True), batch, scale=0.25)
    assert {c.name for c in bad.comparisons if not c.ok} == {"dq", "dk"}, str(bad)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_one_key_rows_exact_passes_the_reference_and_catches_an_ulp(dtype):
    """The reference's output (rounded to the inputs' dtype) passes: its one-key rows are the
    values. One ulp added to one output element of such a row fails, naming the element; a
    layout where no row sees one key (bidirectional documents of 2+ tokens) is refused."""
    from kvax_testing import assert_one_key_rows_exact, mask_terms

    batch = packed_batch(31, batch=2, kv_len=90, num_docs=(10, 20), pad_tokens=5, head_dim=16,
                         num_heads=4, num_kv_heads=2, dtype=dtype, segment_ids="shuffled")
    out = correct(batch.query, batch.key, batch.value, *batch.layout.arrays)
    compared = assert_one_key_rows_exact(out, batch)
    assert compared >= 20 * 4  # every document's first token, each head
    allowed = np.asarray(reference_mask(*batch.layout.arrays))
    b, t = (int(x[0]) for x in np.nonzero(allowed.sum(axis=2) == 1))
    bumped = out.at[b, t, 3, 5].set(jnp.nextafter(out[b, t, 3, 5], jnp.asarray(np.inf, out.dtype)))
    with pytest.raises(AssertionError, match=rf"worst at \({b}, {t}, 3, 5\)"):
        assert_one_key_rows_exact(bumped, batch)
    # check_attention makes the same demand for 16-bit inputs (its tensor-wide bound alone
    # passes the ulp), unless told not to
    def bumped_fn(q, k, v, *layout):
        out = correct(q, k, v, *layout)
        up = jnp.nextafter(out, jnp.asarray(np.inf, out.dtype))
        return jnp.where(jnp.asarray(allowed.sum(axis=2) == 1)[:, :, None, None], up, out)

    report = check_attention(bumped_fn, batch, scale=0.25, grads=False)
    assert [c.name for c in report.comparisons if not c.ok] == ["1-key"], str(report)
    assert check_attention(bumped_fn, batch, scale=0.25, grads=False,
                           exact_one_key_rows=False).ok
    with pytest.raises(AssertionError, match="no row sees exactly one key"):
        wide = packed_batch(32, kv_len=40, num_docs=1, pad_tokens=0, head_dim=8, dtype=dtype)
        assert_one_key_rows_exact(wide.query, wide, mask_terms(is_causal=False))
