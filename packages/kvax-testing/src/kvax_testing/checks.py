"""Check an attention function's output and vjp against the dense reference.

The tolerance is tied to a baseline: against the float64 reference, the function's error may be at
most `factor` (2) times the error of the same math done plainly in the input dtype, plus rounding
noise. Rows with nothing to attend must give exactly 0 output and 0 gradient, and keys/values no
query attends must get exactly 0 gradient.

One more term, for float32 softmax arithmetic: a flash-attention kernel keeps its softmax in float32
whatever the input dtype and subtracts a running row maximum (or a stored logsumexp) from logits of
magnitude L, so its probabilities carry a relative error of a few float32 roundings of L, where the
plain computation, which subtracts the final maximum once from the same logits, keeps fewer of
them. With 16-bit inputs the plain computation's own rounding dwarfs this; with float32 inputs and
large logits (L ~ 40) it does not: measured on the CPU path, 2.3-5x the plain float32 error, growing
with L. So the bound adds SOFTMAX_ROUNDINGS x 2^-24 x L x max|reference|, with L the largest
|scaled logit| among allowed pairs: 5e-6 relative at L = 40, far under any 16-bit baseline and
under TF32 products (~1e-3), which the check still catches.

And one for dq and dk: a flash-attention backward forms dS = P (dP - delta) from two float32 dot
products summed in different orders, so where they cancel it keeps their roundings, where the
plain computation's autodiff may cancel exactly (rows that see one key: its dq and dk are exactly 0,
and so was its baseline). The bound adds CANCELLATION_ROUNDINGS x 2^-24 x the terms' magnitude
before they cancel (_cancellation_terms).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from kvax_testing.batches import PackedBatch
from kvax_testing.reference import (DEFAULT_MASK_TERMS, MaskTerm, _softmax, reference_attention,
                                    reference_logits, reference_mask)

AttentionFn = Callable[..., jax.Array]

# Rounding noise added to the bound, in units of the reference's largest magnitude.
# Half an ulp of the output dtype at the largest magnitude (outputs are rounded to it) for 16-bit
# types; a few float32 ulps for float32.
NOISE = {"float32": 8 * 2.0**-23, "float16": 2.0**-11, "bfloat16": 2.0**-8, "float64": 1e-12}
# float32 roundings of the logits' magnitude that a running-maximum softmax keeps (module doc).
SOFTMAX_ROUNDINGS = 2
# float32 roundings of dS's terms before they cancel that dq and dk may keep (_cancellation_terms;
# a flash-attention backward measured 0.3 of one in the test of seed 5658's layout)
CANCELLATION_ROUNDINGS = 8
F32_UNIT_ROUNDOFF = 2.0**-24


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One compared tensor: the worst element and the bound it had to meet."""

    name: str
    error: float  # max |got - want| against the float64 reference
    baseline: float  # max |plain - want| of the plain computation in the input dtype
    bound: float
    index: tuple[int, ...]  # where the worst element is
    got: float
    want: float
    problem: str = ""  # set when the tensor fails: why

    @property
    def ok(self) -> bool:
        return not self.problem

    def __str__(self) -> str:
        status, relation = ("ok  ", "<=") if self.ok else ("FAIL", ">" if self.error > self.bound
                                                             else "<=")
        text = (
            f"{status} {self.name:>6}: error {self.error:.3e} {relation} bound {self.bound:.3e} "
            f"(baseline {self.baseline:.3e}); worst at {self.index}: got {self.got:.6g}, "
            f"want {self.want:.6g}"
        )
        return text if self.ok else f"{text}  <- {self.problem}"


@dataclasses.dataclass(frozen=True)
class CheckReport:
    comparisons: tuple[Comparison, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.comparisons)

    def __str__(self) -> str:
        return "\n".join(str(c) for c in self.comparisons)

    def assert_ok(self) -> None:
        if not self.ok:
            raise AssertionError("attention check failed:\n" + str(self))


def _compare(name, got, want, plain, *, factor, noise, logit_magnitude=0.0,
             exact_zero=None, magnitude=None, allowance=0.0) -> Comparison:
    """`magnitude` (default max |want|) is what the noise and softmax terms scale with;
    `allowance` is added to the bound as it is (an absolute error declared by the caller)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    plain = np.asarray(plain, np.float64)
    if got.shape != want.shape:
        return Comparison(name, np.inf, 0.0, 0.0, (), np.nan, np.nan,
                          f"shape {got.shape}, expected {want.shape}")
    diff = np.abs(got - want)
    diff = np.where(np.isfinite(got), diff, np.inf)
    baseline = float(np.max(np.abs(plain - want), initial=0.0))
    scale = float(np.max(np.abs(want), initial=0.0)) if magnitude is None else magnitude
    softmax = SOFTMAX_ROUNDINGS * F32_UNIT_ROUNDOFF * logit_magnitude
    bound = factor * baseline + (noise + softmax) * max(scale, 1e-3) + allowance
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
    error = float(diff[worst]) if diff.size else 0.0
    index = tuple(int(i) for i in worst)
    got_w = float(got[worst]) if diff.size else 0.0
    want_w = float(want[worst]) if diff.size else 0.0
    problem = ""
    if not np.all(np.isfinite(got)):
        problem = f"{int(np.sum(~np.isfinite(got)))} non-finite elements"
    elif error > bound:
        problem = f"error {error / max(baseline, 1e-30):.2f}x the baseline"
    elif exact_zero is not None:
        nonzero = np.argwhere((got != 0) & exact_zero)
        if len(nonzero):
            index = tuple(int(i) for i in nonzero[0])
            got_w, want_w = float(got[index]), 0.0
            problem = f"{len(nonzero)} elements that must be exactly 0 are not"
    return Comparison(name, error, baseline, bound, index, got_w, want_w, problem)


def _broadcast_rows(rows: np.ndarray, shape) -> np.ndarray:
    """[B, L] bool -> [B, L, X, Y] bool."""
    return np.broadcast_to(rows[:, :, None, None], shape)


def check_attention(
    attention_fn: AttentionFn,
    batch: PackedBatch,
    *,
    scale: float = 1.0,
    seed: int = 0,
    grads: bool = True,
    factor: float = 2.0,
    mask_terms: Sequence[MaskTerm] = DEFAULT_MASK_TERMS,
    logits_fn=None,
    cotangent=None,
    sinks=None,
    residual: bool = False,
    logit_error: float = 0.0,
    exact_one_key_rows: bool | None = None,
) -> CheckReport:
    """Compare `attention_fn` with the reference on `batch`; return a report (see .assert_ok()).

    `attention_fn(query, key, value, query_positions, query_segment_ids, kv_positions,
    kv_segment_ids)` returns the output [B, T, N, Hv] in the inputs' dtype; `scale` must be the
    scale it uses; `mask_terms` and `logits_fn` give the reference the same variant (see
    kvax_testing.mask_terms and soft_cap). Its vjp (with respect to query, key and value) is
    checked with a random cotangent when grads=True (drawn from `seed`, or the `cotangent` given).
    With `sinks` ([N] float), attention_fn is called with `sinks=` too and its gradient is
    checked ("dsinks"). With residual=True, attention_fn returns (output, logsumexp [B, T, N]);
    the logsumexp is checked ("lse": natural log, -inf on rows with nothing to attend, exactly)
    and the vjp gets a random cotangent for it as well. `logit_error`: the largest absolute error
    that attention_fn's logits carry by design beyond float32 rounding (an approximate tanh for a
    soft cap, say). The logsumexp, a float32 result held to the float32 computation, may move by
    that much more; the other results keep their bounds (a 16-bit plain computation rounds its
    logits more coarsely, and the sinks' gradient's bound is that of its 16-bit output).
    `exact_one_key_rows` (by default for 16-bit inputs without sinks): rows that see exactly
    one key must return its value bitwise ("1-key"; see assert_one_key_rows_exact).
    """
    dtype = jnp.dtype(batch.query.dtype)
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    allowed = np.asarray(reference_mask(*layout, mask_terms=mask_terms))  # [B, T, S]
    q_live = allowed.any(axis=2)  # [B, T]
    kv_live = allowed.any(axis=1)  # [B, S]

    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    # The reference sees clean inputs: what sits in rows nothing attends cannot matter.
    clean_q = jnp.where(_broadcast_rows(q_live, q.shape), q, 0)
    clean_k = jnp.where(_broadcast_rows(kv_live, k.shape), k, 0)
    clean_v = jnp.where(_broadcast_rows(kv_live, v.shape), v, 0)

    rng = np.random.default_rng(seed + 7919)
    out_shape = (*q.shape[:3], v.shape[3])
    if cotangent is None:
        cotangent = rng.standard_normal(out_shape, np.float32)
    cotangent = jnp.asarray(cotangent).astype(dtype)

    lse_cotangent = jnp.asarray(rng.standard_normal(q.shape[:3], np.float32))  # [B, T, N]
    primals = (q, k, v) if sinks is None else (q, k, v, jnp.asarray(sinks))
    clean = (clean_q, clean_k, clean_v, *primals[3:])

    def ref_fn(dt):
        def f(q_, k_, v_, *sinks_):
            out, lse = reference_attention(q_, k_, v_, *layout, scale=scale, dtype=dt,
                                           mask_terms=mask_terms, logits_fn=logits_fn,
                                           sinks=sinks_[0] if sinks_ else None)
            return (out, lse.transpose(0, 2, 1)) if residual else out
        return f

    def cotangents(dt, lse_dt):
        ct = cotangent.astype(dt)
        return (ct, lse_cotangent.astype(lse_dt)) if residual else ct

    def as_dtype(x, dt):
        return x.astype(dt) if jnp.issubdtype(x.dtype, jnp.floating) else x

    with jax.enable_x64(True):
        want, want_vjp = jax.vjp(ref_fn(jnp.float64), *[as_dtype(x, jnp.float64) for x in clean])
        want_grads = want_vjp(cotangents(jnp.float64, jnp.float64)) if grads else ()
        want = jax.tree.map(np.asarray, want)
        want_grads = [np.asarray(g) for g in want_grads]
        logits = reference_logits(clean_q.astype(jnp.float64), clean_k.astype(jnp.float64),
                                  scale)  # [B, N, T, S]
        logit_magnitude = float(np.max(np.abs(logits), where=allowed[:, None], initial=0.0))
        if grads:  # the float64 probabilities and logsumexp, for the gradients' noise terms
            sinks64 = clean[3].astype(jnp.float64) if sinks is not None else None
            probs, lse64 = (np.asarray(x) for x in _softmax(
                logits if logits_fn is None else logits_fn(logits), allowed[:, None],
                sinks=sinks64, dtype=jnp.float64))
    plain, plain_vjp = jax.vjp(ref_fn(dtype), *clean)
    plain_grads = plain_vjp(cotangents(dtype, dtype)) if grads else ()
    if residual or sinks is not None:
        # The logsumexp and the sinks' gradient are float32 results whatever the input dtype:
        # their plain computation is the float32 one (a 16-bit one would excuse any error).
        if dtype == jnp.float32:  # the plain computation above already is
            plain32, plain32_vjp = plain, plain_vjp
        else:
            plain32, plain32_vjp = jax.vjp(ref_fn(jnp.float32), *[as_dtype(x, jnp.float32)
                                                                  for x in clean])
        if residual:
            plain = (plain[0], plain32[1])
        if grads and sinks is not None:
            plain_grads = (*plain_grads[:3],
                           plain32_vjp(cotangents(jnp.float32, jnp.float32))[3])

    def f(q_, k_, v_, *sinks_):
        extra = {"sinks": sinks_[0]} if sinks_ else {}
        return attention_fn(q_, k_, v_, *layout, **extra)

    if grads:
        got, got_vjp = jax.vjp(f, *primals)
        got_grads = got_vjp(cotangents(dtype, jnp.float32))
    else:
        got, got_grads = f(*primals), ()
    (got_out, got_lse), (want_out, want_lse), (plain_out, plain_lse) = (
        x if residual else (x, None) for x in (got, want, plain))

    noise = NOISE[dtype.name]
    dead_q = ~_broadcast_rows(q_live, out_shape)
    results = [
        _compare("out", got_out, want_out, plain_out, factor=factor, noise=noise,
                 logit_magnitude=logit_magnitude, exact_zero=dead_q)
    ]
    if residual:
        results.append(_compare_lse(got_lse, want_lse, plain_lse, factor=factor,
                                    logit_magnitude=logit_magnitude, logit_error=logit_error))
    if got_out.dtype != dtype:
        results.append(Comparison("out", 0, 0, 0, (), 0, 0, f"dtype {got_out.dtype}, want {dtype}"))
    if exact_one_key_rows is None:
        exact_one_key_rows = dtype.itemsize == 2 and sinks is None
    one_key = _one_key_rows(got_out, v, allowed) if exact_one_key_rows else None
    if one_key is not None:
        results.append(one_key)
    zero_masks = (
        ~_broadcast_rows(q_live, q.shape),
        ~_broadcast_rows(kv_live, k.shape),
        ~_broadcast_rows(kv_live, v.shape),
    )
    # dq and dk: the float32 rounding of dS's terms before they cancel (_cancellation_terms)
    allowances = {}
    if grads:
        terms = _cancellation_terms(probs, clean, want_out, cotangent,
                                    lse_cotangent if residual else None, scale)
        allowances = {name: CANCELLATION_ROUNDINGS * F32_UNIT_ROUNDOFF * t
                      for name, t in zip(("dq", "dk"), terms)}
    sink_terms = None
    if sinks is not None:
        zero_masks += (np.zeros(np.shape(sinks), bool),)
        if grads:
            sink_terms = _sink_gradient_terms(want_out, lse64, clean[3],
                                              np.asarray(cotangent, np.float64))
    for name, got, want, plain, zero, x in zip(
        ("dq", "dk", "dv", "dsinks"), got_grads, want_grads, plain_grads, zero_masks, primals
    ):
        results.append(_compare(name, got, want, plain, factor=factor, noise=noise,
                                logit_magnitude=logit_magnitude, exact_zero=zero,
                                magnitude=sink_terms if name == "dsinks" else None,
                                allowance=allowances.get(name, 0.0)))
        if got.dtype != x.dtype:
            results.append(Comparison(name, 0, 0, 0, (), 0, 0,
                                      f"dtype {got.dtype}, want {x.dtype}"))
    return CheckReport(tuple(results))


def _cancellation_terms(probs, clean, want_out, cotangent, lse_cotangent,
                        scale) -> tuple[float, float]:
    """The magnitudes (dq, dk) that float32 rounding of dS's terms scales with, before they cancel.

    A flash-attention backward forms dS_ts = P_ts (dP_ts - delta_t) (minus the logsumexp's
    cotangent, with the residual) from dP_ts = dO_t . V_s and delta_t = dO_t . O_t, two float32
    dot products summed in different orders; where they cancel (a row that sees one key: P = 1,
    O = V, dS = 0 exactly, so dq and dk are 0) each keeps its own rounding, a few ulps of
    sum_h |dO_th V_sh| and of sum_h |dO_th O_th|. The plain computation's autodiff cancels such
    rows exactly, so its error (the baseline) can be 0 where a correct kernel's is not. This
    returns the largest |scale sum_s P_ts (D_ts + E_t) K_sh| over dq's elements, with D and E
    those sums of |products| (and E plus the logsumexp's |cotangent|), and the same over dk's
    (summed over each kv head's query heads). CANCELLATION_ROUNDINGS float32 roundings of
    these join dq's and dk's bounds: 5e-7 of the terms' magnitude, three orders under the error
    of TF32 products, which the check still catches. In float64 NumPy, from the reference's
    probabilities [B, N, T, S] and output (float64)."""
    q, k, v = (np.asarray(x, np.float64) for x in clean[:3])
    group = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
    do_abs = np.abs(np.asarray(cotangent, np.float64))
    d = np.einsum("btnh,bsnh->bnts", do_abs, np.abs(v), optimize=True)
    e = np.einsum("btnh,btnh->bnt", do_abs, np.abs(np.asarray(want_out, np.float64)))
    if lse_cotangent is not None:
        e = e + np.abs(np.asarray(lse_cotangent, np.float64)).transpose(0, 2, 1)
    a = probs * (d + e[..., None])
    dq = abs(float(scale)) * np.einsum("bnts,bsnh->btnh", a, np.abs(k), optimize=True)
    dk = abs(float(scale)) * np.einsum("bnts,btnh->bsnh", a, np.abs(q), optimize=True)
    dk = dk.reshape(*dk.shape[:2], dk.shape[2] // group, group, dk.shape[-1]).sum(axis=3)
    return float(np.max(dq, initial=0.0)), float(np.max(dk, initial=0.0))


def _sink_gradient_terms(out, lse, sinks, cotangent) -> float:
    """The magnitude the sinks' gradient's rounding noise scales with. It sums -p_sink * dO . O
    over rows, reading an output rounded to the input dtype: each element of O carries an
    independent rounding of up to half an ulp, so the noise is about a half ulp / sqrt(3) times
    the root sum of squares of the products p_sink * dO_d * O_d (per head; the worst head). Six
    such standard deviations are returned: neither the (cancelled) result nor the worst-case sum
    of every rounding, which would excuse a 1% error in the sinks. out [B, T, N, Hv] and lse
    [B, N, T]: the float64 reference's."""
    live = np.isfinite(lse)  # [B, N, T]
    p_sink = np.exp(np.asarray(sinks, np.float64)[None, :, None] - np.where(live, lse, 0.0))
    p_sink = np.where(live, p_sink, 0.0).transpose(0, 2, 1)[..., None]  # [B, T, N, 1]
    squares = np.square(p_sink * cotangent * out).sum(axis=(0, 1, 3))  # [N]
    return float(6.0 / np.sqrt(3.0) * np.sqrt(np.max(squares, initial=0.0)))


def _compare_lse(got, want, plain, *, factor, logit_magnitude, logit_error=0.0) -> Comparison:
    """The logsumexp: -inf exactly where the reference has it, else the baseline bound (its
    magnitude is the logits', so the noise is a float32 rounding of them) plus the logits'
    declared error: log sum exp moves by at most the largest change of a logit."""
    got, want, plain = (np.asarray(x, np.float64) for x in (got, want, plain))
    if got.shape != want.shape:
        return Comparison("lse", np.inf, 0.0, 0.0, (), np.nan, np.nan,
                          f"shape {got.shape}, expected {want.shape}")
    empty = np.isneginf(want)
    wrong = np.argwhere(empty != np.isneginf(got))
    if len(wrong):
        index = tuple(int(i) for i in wrong[0])
        return Comparison("lse", np.inf, 0.0, 0.0, index, float(got[index]), float(want[index]),
                          f"{len(wrong)} rows where -inf (nothing attended) does not match")
    live = ~empty
    fill = lambda x: np.where(live, x, 0.0)  # noqa: E731
    comparison = _compare("lse", fill(got), fill(want), fill(plain), factor=factor,
                          noise=NOISE["float32"], logit_magnitude=logit_magnitude,
                          allowance=logit_error)
    return comparison


def assert_attention_close(attention_fn: AttentionFn, batch: PackedBatch, **kwargs) -> CheckReport:
    """check_attention(...).assert_ok(), returning the report for printing."""
    report = check_attention(attention_fn, batch, **kwargs)
    report.assert_ok()
    return report


def _one_key_rows(output, value, allowed) -> Comparison | None:
    """Rows that see exactly one key (allowed [B, T, S] has one True) against that key's value,
    bitwise: "1-key", its error the largest difference there (bound 0); None if no row does."""
    b_idx, t_idx = np.nonzero(allowed.sum(axis=2) == 1)
    if not len(b_idx):
        return None
    s_idx = allowed[b_idx, t_idx].argmax(axis=1)
    got = np.asarray(jnp.asarray(output).astype(jnp.float32))[b_idx, t_idx]  # [rows, N, Hv]
    value = np.asarray(jnp.asarray(value).astype(jnp.float32))  # [B, S, K, Hv]
    want = np.repeat(value[b_idx, s_idx], got.shape[1] // value.shape[2], axis=1)
    diff = np.abs(got - want)
    diff = np.where(np.isnan(diff), np.inf, diff)
    i, n, h = np.unravel_index(int(np.argmax(diff)), diff.shape)
    where = (int(b_idx[i]), int(t_idx[i]), int(n), int(h))
    wrong = int(np.count_nonzero(diff))
    problem = (f"{wrong} of {got.size} outputs of the {len(b_idx)} rows that see one key differ "
               "from its value" if wrong else "")
    return Comparison("1-key", float(diff[i, n, h]), 0.0, 0.0, where, float(got[i, n, h]),
                      float(want[i, n, h]), problem)


def assert_one_key_rows_exact(output, batch: PackedBatch,
                              mask_terms: Sequence[MaskTerm] = DEFAULT_MASK_TERMS) -> int:
    """Each row that sees exactly one key (a causal document's first token, a one-token
    document) has that key's value as its output, bitwise: its only softmax weight is 1. For
    16-bit inputs, P V accumulated in float32 and no sinks, a softmax with running row maxima
    (the largest weight exactly 1) gives that, or one on a fixed reference that divides such
    rows by their weight rounded as P was (kvax's Mosaic forward, soft-capped); float32
    inputs may keep an ulp of their products or normalisation. check_attention's output bound
    is tied to the whole tensor's baseline, so it can miss a rounding on these rows that the
    plain computation does not make (a softmax without maxima whose weights are rounded to 16
    bits is off there by up to 2^-9 of v); it makes this check too for 16-bit inputs without
    sinks. output [B, T, N, Hv] (its first element if a tuple). Returns how many (row, head)
    outputs were compared; raises AssertionError naming the first wrong one, or if no row sees
    one key (the layout would test nothing)."""
    if isinstance(output, tuple):
        output = output[0]
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    allowed = np.asarray(reference_mask(*layout, mask_terms=mask_terms))  # [B, T, S]
    comparison = _one_key_rows(output, batch.value, allowed)
    if comparison is None:
        raise AssertionError("no row sees exactly one key: the layout tests nothing")
    if not comparison.ok:
        raise AssertionError(str(comparison))
    return int(np.count_nonzero(allowed.sum(axis=2) == 1)) * np.shape(output)[2]
