import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kvax_testing import PADDING_SEGMENT_ID, packed_batch, packed_layout, reference_attention


def naive_attention(q, k, v, q_pos, q_seg, kv_pos, kv_seg, scale):
    """The rule written as loops in float64."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    B, T, N, _ = q.shape
    S, K, Hv = k.shape[1], k.shape[2], v.shape[3]
    out = np.zeros((B, T, N, Hv))
    lse = np.full((B, N, T), -np.inf)
    for b in range(B):
        for n in range(N):
            kh = n // (N // K)
            for t in range(T):
                cols = [s for s in range(S)
                        if q_seg[b, t] == kv_seg[b, s] != PADDING_SEGMENT_ID
                        and q_pos[b, t] >= kv_pos[b, s]]
                if not cols:
                    continue
                logits = np.array([scale * q[b, t, n] @ k[b, s, kh] for s in cols])
                m = logits.max()
                w = np.exp(logits - m)
                out[b, t, n] = (w[:, None] * v[b, cols, kh]).sum(0) / w.sum()
                lse[b, n, t] = m + np.log(w.sum())
    return out, lse


@pytest.mark.parametrize("style", ["sequential", "shuffled", "large", "reused"])
@pytest.mark.parametrize("positions", ["per_document", "global", "zeros"])
def test_reference_matches_naive_loop(style, positions):
    seed = abs(hash((style, positions))) % 10_000
    batch = packed_batch(seed, batch=2, kv_len=23, q_len=17, num_heads=4, num_kv_heads=2,
                         head_dim=8, value_head_dim=5, num_docs=(1, 4), pad_tokens=(0, 5),
                         segment_ids=style, positions=positions)
    args = (batch.query, batch.key, batch.value, *batch.layout.arrays)
    want_out, want_lse = naive_attention(*args, scale=0.3)
    with jax.enable_x64(True):
        out, lse = reference_attention(*args, scale=0.3, dtype=jnp.float64)
    np.testing.assert_allclose(np.asarray(out), want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.isinf(np.asarray(lse)), np.isinf(want_lse))
    finite = np.isfinite(want_lse)
    np.testing.assert_allclose(np.asarray(lse)[finite], want_lse[finite], rtol=1e-12)


def test_padding_rows_are_zero_and_gradients_finite():
    batch = packed_batch(3, batch=1, kv_len=40, pad_tokens=10, num_docs=2, head_dim=8)
    layout = batch.layout.arrays

    def loss(q, k, v):
        return reference_attention(q, k, v, *layout)[0].sum()

    out, lse = reference_attention(batch.query, batch.key, batch.value, *layout)
    pad = batch.layout.query_segment_ids == PADDING_SEGMENT_ID
    assert pad.sum() == 10
    assert np.all(np.asarray(out)[pad] == 0)
    assert np.all(np.isneginf(np.asarray(lse)[:, :, pad[0]]))
    grads = jax.grad(loss, argnums=(0, 1, 2))(batch.query, batch.key, batch.value)
    for g in grads:
        assert np.all(np.isfinite(np.asarray(g)))
    assert np.all(np.asarray(grads[0])[pad] == 0)


def test_layout_properties():
    lay = packed_layout(11, batch=3, kv_len=301, q_len=37, num_docs=(2, 6), pad_tokens=(3, 9),
                        segment_ids="shuffled")
    assert lay.query_positions.shape == (3, 37) and lay.kv_positions.shape == (3, 301)
    np.testing.assert_array_equal(lay.query_segment_ids, lay.kv_segment_ids[:, -37:])
    for row in lay.kv_segment_ids:
        pad = row == PADDING_SEGMENT_ID
        assert 3 <= pad.sum() <= 9 and np.all(pad[-pad.sum():])  # padding at the end
        real = row[~pad]
        assert 2 <= len(np.unique(real)) <= 6
    reused = packed_layout(1, batch=1, kv_len=100, num_docs=3, pad_tokens=0, segment_ids="reused")
    ids = reused.kv_segment_ids[0]
    changes = ids[np.flatnonzero(np.diff(ids)) + 1]
    assert ids[0] == changes[-1]  # A B A


@pytest.mark.parametrize("variant", [dict(), dict(is_causal=False), dict(local_window_size=3),
                                     dict(is_causal=False, local_window_size=(4, 2)),
                                     dict(local_window_size=(0, 5)),
                                     dict(is_causal=False, local_window_size=(2, 0))],
                         ids=lambda v: "-".join(f"{k}={v[k]}" for k in v) or "default")
def test_allowed_pairs_counts_exactly(variant):
    from kvax_testing import mask_terms, reference_mask

    lay = packed_layout(5, batch=2, kv_len=50, q_len=20, num_docs=(1, 4), pad_tokens=(0, 6),
                        segment_ids="reused")
    want = int(np.asarray(reference_mask(*lay.arrays, mask_terms=mask_terms(**variant))).sum())
    assert lay.allowed_pairs(**variant) == want
