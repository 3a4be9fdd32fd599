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
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from kvax_testing.batches import PackedBatch
from kvax_testing.reference import (DEFAULT_MASK_TERMS, MaskTerm, reference_attention,
                                    reference_logits, reference_mask)

AttentionFn = Callable[..., jax.Array]

# Rounding noise added to the bound, in units of the reference's largest magnitude.
# Half an ulp of the output dtype at the largest magnitude (outputs are rounded to it) for 16-bit
# types; a few float32 ulps for float32.
NOISE = {"float32": 8 * 2.0**-23, "float16": 2.0**-11, "bfloat16": 2.0**-8, "float64": 1e-12}
# float32 roundings of the logits' magnitude that a running-maximum softmax keeps (module doc).
SOFTMAX_ROUNDINGS = 2
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
             exact_zero=None) -> Comparison:
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    plain = np.asarray(plain, np.float64)
    if got.shape != want.shape:
        return Comparison(name, np.inf, 0.0, 0.0, (), np.nan, np.nan,
                          f"shape {got.shape}, expected {want.shape}")
    diff = np.abs(got - want)
    diff = np.where(np.isfinite(got), diff, np.inf)
    baseline = float(np.max(np.abs(plain - want), initial=0.0))
    scale = float(np.max(np.abs(want), initial=0.0))
    softmax = SOFTMAX_ROUNDINGS * F32_UNIT_ROUNDOFF * logit_magnitude
    bound = factor * baseline + (noise + softmax) * max(scale, 1e-3)
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
) -> CheckReport:
    """Compare `attention_fn` with the reference on `batch`; return a report (see .assert_ok()).

    `attention_fn(query, key, value, query_positions, query_segment_ids, kv_positions,
    kv_segment_ids)` returns the output [B, T, N, Hv] in the inputs' dtype; `scale` must be the
    scale it uses; `mask_terms` and `logits_fn` give the reference the same variant (see
    kvax_testing.mask_terms and soft_cap). Its vjp (with respect to query, key and value only) is checked with a random
    cotangent when grads=True (drawn from `seed`, or the `cotangent` given).
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

    def ref_fn(dt):
        def f(q_, k_, v_):
            return reference_attention(q_, k_, v_, *layout, scale=scale, dtype=dt,
                                       mask_terms=mask_terms, logits_fn=logits_fn)[0]
        return f

    with jax.enable_x64(True):
        want_out, want_vjp = jax.vjp(ref_fn(jnp.float64), clean_q, clean_k, clean_v)
        want_grads = want_vjp(cotangent.astype(jnp.float64)) if grads else ()
        want_out, want_grads = np.asarray(want_out), [np.asarray(g) for g in want_grads]
        logits = reference_logits(clean_q.astype(jnp.float64), clean_k.astype(jnp.float64),
                                  scale)  # [B, N, T, S]
        logit_magnitude = float(np.max(np.abs(logits), where=allowed[:, None], initial=0.0))
    plain_out, plain_vjp = jax.vjp(ref_fn(dtype), clean_q, clean_k, clean_v)
    plain_grads = plain_vjp(cotangent) if grads else ()

    def f(q_, k_, v_):
        return attention_fn(q_, k_, v_, *layout)

    if grads:
        got_out, got_vjp = jax.vjp(f, q, k, v)
        got_grads = got_vjp(cotangent)
    else:
        got_out, got_grads = f(q, k, v), ()

    noise = NOISE[dtype.name]
    dead_q = ~_broadcast_rows(q_live, out_shape)
    results = [
        _compare("out", got_out, want_out, plain_out, factor=factor, noise=noise,
                 logit_magnitude=logit_magnitude, exact_zero=dead_q)
    ]
    if got_out.dtype != dtype:
        results.append(Comparison("out", 0, 0, 0, (), 0, 0, f"dtype {got_out.dtype}, want {dtype}"))
    zero_masks = (
        ~_broadcast_rows(q_live, q.shape),
        ~_broadcast_rows(kv_live, k.shape),
        ~_broadcast_rows(kv_live, v.shape),
    )
    for name, got, want, plain, zero, x in zip(
        ("dq", "dk", "dv"), got_grads, want_grads, plain_grads, zero_masks, (q, k, v)
    ):
        results.append(_compare(name, got, want, plain, factor=factor, noise=noise,
                                logit_magnitude=logit_magnitude, exact_zero=zero))
        if got.dtype != x.dtype:
            results.append(Comparison(name, 0, 0, 0, (), 0, 0, f"dtype {got.dtype}, want {x.dtype}"))
    return CheckReport(tuple(results))


def assert_attention_close(attention_fn: AttentionFn, batch: PackedBatch, **kwargs) -> CheckReport:
    """check_attention(...).assert_ok(), returning the report for printing."""
    report = check_attention(attention_fn, batch, **kwargs)
    report.assert_ok()
    return report
