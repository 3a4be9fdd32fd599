"""Randomised checks of the public API over the whole option space, one case per seed.

    python tools/dev/fuzz.py variants --seeds 0:100   # flash_attention vs the float64 reference
    python tools/dev/fuzz.py mosaic --seeds 0:100     # the same over the Hopper kernels' cases
    python tools/dev/fuzz.py jax_nn --seeds 0:100     # kvax.nn vs jax.nn (implementation="xla")
    python tools/dev/fuzz.py sharded --seeds 0:100    # 8 fake CPU devices vs one device
    python tools/dev/fuzz.py sharded --platform gpu   # the machine's GPUs (up to 8) vs one
    python tools/dev/fuzz.py sharded_mosaic --platform gpu   # the Hopper kernels' cases, sharded
    python tools/dev/fuzz.py variants --seeds 0:60 --jobs 6   # seeds shared by 6 processes
    python tools/dev/fuzz.py variants --seeds 0:60 --time-limit 100   # no new case after 100 s

Each seed draws one case: lengths (odd ones, T < S), heads (GQA/MQA), head dim, dtype, causality,
windows, soft cap, sinks, the returned logsumexp, id styles, positions, block sizes, padding
poisoned with NaN/Inf; for `sharded` also the mesh (data x context x model), kv heads sharded or
replicated and the permutation. `variants` runs whatever backend "auto" picks, so on a GPU it
fuzzes the kernels (the CPU path elsewhere), mostly the Triton ones; `mosaic` draws the cases
the Hopper backend takes, at lengths up to 3000, and `sharded_mosaic` those cases on a mesh
against the float64 reference (`sharded` compares float32 head dim 16 with one device). On a
GPU the `ok` lines of these three name the kernels that ran. With 16-bit inputs and no sinks
the check also demands that rows that see one key return that key's value bitwise, which the
tensor-wide bound can miss. Prints a line per case (a failing one says enough to rerun it
alone with --seeds N:N+1) and a summary; exits 1 if any case failed. Interrupted (Ctrl-C, or
SIGTERM or SIGINT from `timeout`), it still prints the summary, the running cases counted as
cut short, not as passed (`gpu_fuzz` in tools/gpu_env.sh runs it so on the GPU machine). The
suite's tests are fixed cases; this is for a change that deserves more: 100 seeds take 5-15
minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

SKIPPED = "skipped"  # a case this machine cannot run


class Passed(str):
    """What a case that passed returns to have its `ok` line say something (the kernels)."""


def meshes(devices: int) -> list[tuple[int, int, int]]:
    """Every (data, context, model) shape of `devices` devices (8: 10 shapes; 2: 3)."""
    return [(d, c, devices // (d * c)) for d in range(1, devices + 1) if devices % d == 0
            for c in range(1, devices // d + 1) if (devices // d) % c == 0]


def variants_case(seed: int) -> str | None:
    """flash_attention (its masks built for the case) against kvax-testing's check: output,
    logsumexp and gradients within the baseline-tied bound, empty rows exactly 0."""
    import jax.numpy as jnp

    from kvax_testing import packed_batch

    r = np.random.default_rng(seed)  # each case its own generator: a failing seed reruns alone
    kv_len = int(r.integers(1, 300))
    q_len = None if r.random() < 0.6 else int(r.integers(1, kv_len + 1))
    k_heads = int(r.choice([1, 2, 3]))
    n_heads = k_heads * int(r.choice([1, 2, 4]))
    h = int(r.choice([8, 16, 24, 40, 64, 128]))
    dtype = str(r.choice(["float32", "bfloat16", "float16"]))
    is_causal = bool(r.random() < 0.6)
    window = None
    if r.random() < 0.5:
        window = (int(r.integers(0, 40)) if r.random() < 0.4
                  else (int(r.integers(0, 50)), int(r.integers(0, 50))))
    cap = float(r.choice([5.0, 20.0, 50.0])) if r.random() < 0.3 else None
    sinks = (jnp.asarray(r.normal(size=n_heads), jnp.float32) if r.random() < 0.3 else None)
    residual = bool(r.random() < 0.3)
    ids = str(r.choice(["sequential", "shuffled", "large", "reused"]))
    positions = str(r.choice(["per_document", "per_document", "global", "zeros"]))
    blocks = [(16, 16), (32, 64), (64, 32), (64, 64), (128, 128)][int(r.integers(0, 5))]
    batch = packed_batch(seed, batch=int(r.integers(1, 3)), kv_len=kv_len, q_len=q_len,
                         num_heads=n_heads, num_kv_heads=k_heads, head_dim=h, dtype=dtype,
                         num_docs=(1, 6), pad_tokens=(0, min(40, kv_len - 1)), segment_ids=ids,
                         positions=positions, poison_padding=True)
    scale = float(h ** -0.5 * r.uniform(0.5, 2.0))
    return _check_case(seed, batch, scale=scale, blocks=blocks, is_causal=is_causal,
                       window=window, cap=cap, sinks=sinks, residual=residual,
                       shown=f"T={q_len} S={kv_len} N{n_heads}K{k_heads} H{h} {dtype} "
                             f"ids={ids} positions={positions} blocks={blocks}")


def mosaic_case(seed: int) -> str | None:
    """As variants_case, over what the Hopper backend takes (bfloat16/float16, head dims 64, 128
    and 256, the default blocks or multiples of 128x64) and at the lengths its paths need: up to
    3000 tokens, documents from a few long ones (the forward's document chunks) to many short
    ones (row-aligned tiles), few queries against many keys (key splits, packed heads). On a
    Hopper GPU the Mosaic backend's checks let "auto" pick its forward for each of these: on an
    H200 all 80 cases of session 60's logs that passed ran it, 23 of call 3's 43 with the Mosaic
    backward and the rest the Triton one (docs/bench/h200x2-2026-11-30-mosaic-fuzz). `variants`
    draws such a case (bfloat16/float16, head dim 64 or 128, 128x128 blocks) for 51 of seeds
    7100-8299. Elsewhere the case runs whatever "auto" picks."""
    import jax.numpy as jnp

    from kvax_testing import packed_batch

    r = np.random.default_rng(seed)
    kv_len = int(np.exp(r.uniform(np.log(100), np.log(3000))))
    q_len = None if r.random() < 0.75 else int(r.integers(1, min(kv_len, 130) + 1))
    k_heads = int(r.choice([1, 2]))
    n_heads = k_heads * int(r.choice([1, 2, 4, 8]))
    h = int(r.choice([64, 128, 128, 256]))
    dtype = str(r.choice(["bfloat16", "float16"]))
    batch_size = int(r.integers(1, 3))
    # the float64 reference holds [B, N, T, S] arrays: at most 3e7 elements (240 MB) each
    while batch_size * n_heads * (q_len or kv_len) * kv_len > 3e7 and n_heads > k_heads:
        n_heads //= 2
    if batch_size * n_heads * (q_len or kv_len) * kv_len > 3e7:
        batch_size = 1
    is_causal = bool(r.random() < 0.7)
    window = None
    if r.random() < 0.3:
        window = (int(r.integers(0, 600)) if r.random() < 0.4
                  else (int(r.integers(0, 600)), int(r.integers(0, 300))))
    cap = float(r.choice([5.0, 20.0, 30.0, 50.0])) if r.random() < 0.3 else None
    sinks = (jnp.asarray(r.normal(size=n_heads), jnp.float32) if r.random() < 0.3 else None)
    residual = bool(r.random() < 0.3)
    ids = str(r.choice(["sequential", "shuffled", "large", "reused"]))
    positions = str(r.choice(["per_document"] * 3 + ["global", "zeros"]))
    blocks = [None, None, None, (128, 128), (256, 64), (128, 64)][int(r.integers(0, 6))]
    docs = (1, 4) if r.random() < 0.5 else (max(1, kv_len // 300), max(2, kv_len // 40))
    batch = packed_batch(seed, batch=batch_size, kv_len=kv_len, q_len=q_len, num_heads=n_heads,
                         num_kv_heads=k_heads, head_dim=h, dtype=dtype, num_docs=docs,
                         pad_tokens=(0, min(300, kv_len - 1)), segment_ids=ids,
                         positions=positions, poison_padding=True)
    scale = float(h ** -0.5 * r.uniform(0.5, 2.0))
    return _check_case(seed, batch, scale=scale, blocks=blocks, is_causal=is_causal,
                       window=window, cap=cap, sinks=sinks, residual=residual,
                       shown=f"B{batch_size} T={q_len} S={kv_len} N{n_heads}K{k_heads} H{h} "
                             f"{dtype} docs={docs} ids={ids} positions={positions} "
                             f"blocks={blocks}")


def _check_case(seed: int, batch, *, scale: float, blocks, is_causal: bool, window, cap,
                sinks, residual: bool, shown: str) -> str | None:
    """flash_attention on `batch`, its masks built for the variant (with `blocks` as (query,
    key) mask blocks, or the defaults if None), through kvax-testing's check; None if it
    passed, else what to show."""
    import jax

    from kvax.ops import create_attention_mask, flash_attention
    from kvax.utils import FlashAttentionParamsConfig

    params = {}
    if blocks is not None:
        config = FlashAttentionParamsConfig(query_block_size=blocks[0], kv_block_size=blocks[1])
        params = dict(fwd_params=config, bwd_params=config)
    variant = dict(is_causal=is_causal, local_window_size=window)

    def attention(q, k, v, q_pos, q_seg, kv_pos, kv_seg, sinks=None):
        masks = create_attention_mask(q_pos, q_seg, kv_pos, kv_seg, calc_bwd_mask=True,
                                      **params, **variant)
        return flash_attention(q, k, v, q_pos, q_seg, kv_pos, kv_seg, mask=masks, scale=scale,
                               logits_soft_cap=cap, sinks=sinks, return_residual=residual,
                               **params, **variant)

    # "auto" runs the GPU kernels on a GPU: a soft cap there takes an approximate tanh
    return _checked(attention, batch, seed=seed, scale=scale, is_causal=is_causal,
                    window=window, cap=cap, sinks=sinks, residual=residual,
                    on_gpu=jax.default_backend() == "gpu",
                    shown=f"{shown} {variant} cap={cap} sinks={sinks is not None} "
                          f"residual={residual}")


def _checked(attention, batch, *, seed: int, scale: float, is_causal: bool, window, cap, sinks,
             residual: bool, on_gpu: bool, shown: str) -> str | None:
    """attention (jitted here) through kvax-testing's check against the float64 reference,
    with the kernels' logit error on a GPU, and there the kernels it lowers to (_kernels):
    None or Passed if it passed, else `shown` with the report."""
    import jax

    from kvax._src.attention.backends import kernel_logit_error
    from kvax_testing import check_attention, mask_terms, soft_cap

    dtype = str(batch.query.dtype)
    with _shown_on_error(shown):
        report = check_attention(jax.jit(attention), batch, scale=scale, seed=seed,
                                 mask_terms=mask_terms(is_causal, window),
                                 logits_fn=None if cap is None else soft_cap(cap), sinks=sinks,
                                 residual=residual,
                                 logit_error=kernel_logit_error(cap, dtype) if on_gpu else 0.0)
        kernels = _kernels(attention, batch, sinks) if on_gpu else ""
    if report.ok:
        return Passed(kernels) if kernels else None
    return f"{shown} {kernels}\n{report}"


@contextlib.contextmanager
def _shown_on_error(shown: str):
    """An error inside carries the case's description (a note one_case prints), so that a case
    that raises says what it was, as a failing one does."""
    try:
        yield
    except Exception as err:
        err.add_note(f"case: {shown}")
        raise


def _kernels(attention, batch, sinks) -> str:
    """The GPU kernels that attention's forward and backward lower to, by kind, as
    "[mosaic 2]" or "[mosaic 1, triton 2]" (jax-triton's and Mosaic GPU's custom calls)."""
    import jax
    import jax.numpy as jnp

    layout = [jnp.asarray(a) for a in batch.layout.arrays]

    def loss(q, k, v):
        out = attention(q, k, v, *layout, **({} if sinks is None else {"sinks": sinks}))
        return (out[0] if isinstance(out, tuple) else out).astype(jnp.float32).sum()

    args = [jnp.asarray(x) for x in (batch.query, batch.key, batch.value)]
    text = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(*args).as_text()
    counts = {kind: text.count(f"@{target}") for kind, target in
              (("mosaic", "mosaic_gpu"), ("triton", "triton_kernel_call"))}
    return "[" + ", ".join(f"{kind} {n}" for kind, n in counts.items() if n) + "]"


def _jax_nn_live_rows(t: int, s: int, batch: int, kw: dict) -> np.ndarray:
    """[B, T] rows with some key to attend under jax.nn's rules (top-left aligned)."""
    i, j = np.arange(t)[:, None], np.arange(s)[None, :]
    allowed = np.ones((t, s), bool)
    if kw.get("is_causal"):
        allowed &= j <= i
    if kw.get("local_window_size") is not None:
        window = kw["local_window_size"]
        left, right = (window, window) if isinstance(window, int) else window
        allowed &= (i - j <= left) & (j - i <= right)
    allowed = np.broadcast_to(allowed, (batch, t, s)).copy()
    if "query_seq_lengths" in kw:
        allowed &= np.arange(t)[None, :, None] < np.asarray(kw["query_seq_lengths"])[:, None, None]
    if "key_value_seq_lengths" in kw:
        allowed &= (np.arange(s)[None, None, :]
                    < np.asarray(kw["key_value_seq_lengths"])[:, None, None])
    return allowed.any(-1)


def jax_nn_case(seed: int) -> str | None:
    """kvax.nn.dot_product_attention against jax.nn.dot_product_attention(implementation="xla")
    in float32 on the rows with something to attend (ours exactly 0 elsewhere), and the
    gradients of a loss that reads those rows, relative to the step's largest gradient. Ours
    runs at the default precision (on a GPU, "auto" picks the float32 Triton kernels); jax.nn at
    "highest", since a GPU's default would give it TF32 products."""
    import jax
    import jax.numpy as jnp

    import kvax.nn

    r = np.random.default_rng(seed)
    b, s = int(r.integers(1, 3)), int(r.integers(1, 90))
    t = s if r.random() < 0.5 else int(r.integers(1, 90))
    k_heads = int(r.choice([1, 2]))
    n_heads, h = k_heads * int(r.choice([1, 2, 3])), int(r.choice([8, 16]))
    q = jnp.asarray(r.normal(size=(b, t, n_heads, h)), jnp.float32)
    k, v = (jnp.asarray(r.normal(size=(b, s, k_heads, h)), jnp.float32) for _ in range(2))
    kw = dict(is_causal=bool(r.random() < 0.5))
    if r.random() < 0.4:  # jax.nn takes an int (both sides) or (left, right)
        kw["local_window_size"] = (int(r.integers(0, 30)) if r.random() < 0.4
                                   else (int(r.integers(0, 30)), int(r.integers(0, 30))))
    if r.random() < 0.4:
        kw["query_seq_lengths"] = jnp.asarray(r.integers(0, t + 1, size=b), jnp.int32)
    if r.random() < 0.4:
        kw["key_value_seq_lengths"] = jnp.asarray(r.integers(0, s + 1, size=b), jnp.int32)
    if r.random() < 0.5:
        kw["scale"] = float(r.uniform(0.1, 1.0))
    live = jnp.asarray(_jax_nn_live_rows(t, s, b, kw))[..., None, None]

    def theirs(*args):
        return jnp.where(live, jax.nn.dot_product_attention(*args, implementation="xla", **kw), 0)

    def ours(*args):
        return kvax.nn.dot_product_attention(*args, **kw)

    def loss_grads(fn):
        return jax.grad(lambda *a: jnp.sum(fn(*a) ** 2), argnums=(0, 1, 2))(q, k, v)

    with jax.default_matmul_precision("highest"):  # jax.nn on a GPU: no TF32 products
        want, theirs_grads = np.asarray(theirs(q, k, v)), loss_grads(theirs)
    got = np.asarray(ours(q, k, v))
    out_err = float(np.abs(want - got).max()) if want.size else 0.0
    empty_rows = float(np.abs(np.where(np.asarray(live), 0, got)).max()) if got.size else 0.0
    grads = [theirs_grads, loss_grads(ours)]
    scale = max([float(np.abs(np.asarray(g)).max()) for g in grads[0] if g.size] + [1e-30])
    grad_err = max([float(np.abs(np.asarray(a) - np.asarray(c)).max())
                    for a, c in zip(*grads) if a.size] + [0.0]) / scale
    if out_err <= 2e-5 and empty_rows == 0 and grad_err <= 1e-5 and np.isfinite(got).all():
        return None
    shown = {name: np.asarray(x).tolist() if hasattr(x, "shape") else x for name, x in kw.items()}
    return (f"B{b} T{t} S{s} N{n_heads}K{k_heads} H{h} {shown}: output error {out_err:.2e}, "
            f"largest output on empty rows {empty_rows:.2e}, gradient error {grad_err:.2e} of "
            f"the largest gradient")


def _draw_mesh(r, platform: str):
    """The mesh and heads of a sharded case, drawn from r: ((data, context, model), the mesh of
    `platform`'s devices (up to 8), kv heads sharded over "model" or not, kv heads, query
    heads); None with fewer than 2 devices."""
    import jax

    from kvax_testing.mesh import fake_mesh

    devices = min(len(jax.devices(platform)), 8)
    if devices < 2:
        return None
    shapes = meshes(devices)
    d, c, m = shapes[int(r.integers(0, len(shapes)))]
    mesh = fake_mesh((d, c, m), ("data", "context", "model"), platform=platform)
    kv_sharded = bool(r.random() < 0.5)
    k_heads = m * int(r.integers(1, 3)) if kv_sharded else int(r.choice([1, 2]))
    n_heads = max(m, k_heads) * int(r.choice([1, 2]))
    if n_heads % k_heads:
        n_heads = k_heads * m
    return (d, c, m), mesh, kv_sharded, k_heads, n_heads


def _on_mesh(mesh, kv_sharded: bool, permute, variant: dict, options: dict):
    """flash_attention(q, k, v, qp, qs, kp, ks, sinks=None) on `mesh` as a user calls it there:
    attention_specs, the queries permuted (or not) for load balance, the mask built sharded for
    the variant with options' fwd_params and bwd_params, the result permuted back. `options`
    (the variant among them) go to flash_attention."""
    from kvax.ops import create_attention_mask, flash_attention
    from kvax.utils import (attention_specs, permute_tokens_context_parallelism,
                            unpermute_tokens_context_parallelism)

    kv_specs = ("data", None, "model" if kv_sharded else None, None)

    def call(q, k, v, qp, qs, kp, ks, sinks=None):
        with attention_specs(("data", "context", "model", None), kv_specs):
            if permute:
                q, k, v, qp, qs = permute_tokens_context_parallelism(
                    (q, k, v, qp, qs), strategy=permute, mesh=mesh)
            masks = create_attention_mask(qp, qs, kp, ks, fwd_params=options["fwd_params"],
                                          bwd_params=options["bwd_params"], calc_bwd_mask=True,
                                          mesh=mesh, **variant)
            result = flash_attention(q, k, v, qp, qs, kp, ks, mask=masks, mesh=mesh,
                                     sinks=sinks, permute_tokens_for_load_balance=permute,
                                     **options)
            if permute:
                result = unpermute_tokens_context_parallelism(result, strategy=permute,
                                                              mesh=mesh)
            return result

    return call


def sharded_case(seed: int, platform: str = "cpu") -> str | None:
    """flash_attention over a data x context x model mesh of `platform`'s devices
    (attention_specs, the mask built sharded, the tokens permuted or not) against one device:
    outputs and gradients."""
    import jax
    import jax.numpy as jnp

    from kvax.ops import flash_attention
    from kvax.utils import FlashAttentionParamsConfig
    from kvax_testing import packed_batch

    r = np.random.default_rng(seed)
    drawn = _draw_mesh(r, platform)
    if drawn is None:
        return SKIPPED
    (d, c, m), mesh, kv_sharded, k_heads, n_heads = drawn
    kv_len = 32 * c * int(r.integers(1, 4)) + (0 if c > 1 else int(r.integers(0, 15)))
    blocks = [(16, 16), (16, 32), (32, 16)][int(r.integers(0, 3))]
    params = FlashAttentionParamsConfig(query_block_size=blocks[0], kv_block_size=blocks[1])
    variant = dict(is_causal=bool(r.random() < 0.6),
                   local_window_size=None if r.random() < 0.5 else (int(r.integers(0, 30)),
                                                                    int(r.integers(0, 30))))
    cap = 5.0 if r.random() < 0.3 else None
    sinks = jnp.asarray(r.normal(size=n_heads), jnp.float32) if r.random() < 0.3 else None
    residual = bool(r.random() < 0.3)
    permute = [False, True, "striped"][int(r.integers(0, 3))] if c > 1 else False
    batch = packed_batch(seed, batch=2 * d, kv_len=kv_len, num_heads=n_heads,
                         num_kv_heads=k_heads, head_dim=16, num_docs=(1, 6), pad_tokens=(0, 12),
                         dtype="float32",
                         segment_ids=str(r.choice(["sequential", "shuffled", "reused"])))
    qp, qs, kp, ks = (jnp.asarray(a) for a in batch.layout.arrays)
    options = dict(scale=0.3, fwd_params=params, bwd_params=params, logits_soft_cap=cap,
                   return_residual=residual, **variant)

    def single(q, k, v, sinks):
        return flash_attention(q, k, v, qp, qs, kp, ks, sinks=sinks, **options)

    on_mesh = _on_mesh(mesh, kv_sharded, permute, variant, options)

    def sharded(q, k, v, sinks):
        return on_mesh(q, k, v, qp, qs, kp, ks, sinks=sinks)

    args = tuple(jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    with_sinks = sinks is not None
    args = args + ((sinks,) if with_sinks else ())

    def bind(fn):
        return fn if with_sinks else (lambda q, k, v: fn(q, k, v, None))

    want, want_vjp = jax.vjp(bind(single), *args)
    got, got_vjp = jax.vjp(jax.jit(bind(sharded)), *args)
    wants, gots = (want, got) if residual else ((want,), (got,))
    rng = np.random.default_rng(seed + 3)
    cots = tuple(jnp.asarray(rng.standard_normal(w.shape), w.dtype) for w in wants)
    # on an Explicit mesh a cotangent carries its output's sharding in its type
    got_cots = tuple(jax.device_put(x, g.sharding) for x, g in zip(cots, gots))

    def error(a, w):
        """(max |a - w|, max finite |w|); equal infinities (empty rows' -inf) count as 0, NaN
        anywhere in a makes the error NaN, which fails."""
        a, w = np.asarray(a), np.asarray(w)
        with np.errstate(invalid="ignore"):  # inf - inf where both are -inf, masked out
            diff = np.where(a == w, 0.0, np.abs(a - w))
        return float(diff.max()), float(np.abs(np.where(np.isfinite(w), w, 0.0)).max())

    problems = []
    for name, a, w in zip(("out", "lse"), gots, wants):
        err, size = error(a, w)
        if not err <= 2e-5 * (1 + size):
            problems.append(f"{name} {err:.2e}")
    got_grads = got_vjp(got_cots if residual else got_cots[0])
    want_grads = want_vjp(cots if residual else cots[0])
    for name, a, w in zip(("dq", "dk", "dv", "dsinks"), got_grads, want_grads):
        err, size = error(a, w)
        if not err <= 1e-4 * (1 + size):
            problems.append(f"{name} {err:.2e}")
    if not problems:
        return None
    return (f"mesh {d}x{c}x{m} N{n_heads}K{k_heads} kv heads sharded={kv_sharded} S={kv_len} "
            f"blocks={blocks} {variant} cap={cap} sinks={with_sinks} residual={residual} "
            f"permute={permute}: {', '.join(problems)}")


def sharded_mosaic_case(seed: int, platform: str = "cpu") -> str | None:
    """`sharded`'s meshes and permutations over the Hopper kernels' cases: bfloat16/float16,
    head dims 64, 128 and 256, 128x128 forward blocks, dK/dV blocks of 128 or 64 keys (at 64
    and 128 the Mosaic backward takes 128, the Triton one 64; at 256 its channel split takes
    both), either dQ mode, checked against kvax-testing's float64 reference with its
    baseline-tied bound. On Hopper GPUs each shard runs the Mosaic forward;
    `sharded` (float32, head dim 16) reaches only the Triton kernels there."""
    import jax.numpy as jnp

    from kvax.utils import FlashAttentionParamsConfig
    from kvax_testing import packed_batch

    r = np.random.default_rng(seed)
    drawn = _draw_mesh(r, platform)
    if drawn is None:
        return SKIPPED
    (d, c, m), mesh, kv_sharded, k_heads, n_heads = drawn
    h = int(r.choice([64, 128, 128, 256]))
    dtype = str(r.choice(["bfloat16", "float16"]))
    kv_len = 256 * c * int(r.integers(1, 4))
    fwd = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)
    bwd = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=int(r.choice([128, 64])))
    deterministic = bool(r.random() < 0.7)
    is_causal = bool(r.random() < 0.7)
    window = None if r.random() < 0.6 else (int(r.integers(0, 300)), int(r.integers(0, 100)))
    cap = float(r.choice([5.0, 30.0])) if r.random() < 0.3 else None
    sinks = jnp.asarray(r.normal(size=n_heads), jnp.float32) if r.random() < 0.3 else None
    residual = bool(r.random() < 0.3)
    permute = [False, True, "striped"][int(r.integers(0, 3))] if c > 1 else False
    docs = (1, 4) if r.random() < 0.5 else (2, max(3, kv_len // 60))
    batch = packed_batch(seed, batch=d * int(r.integers(1, 3)), kv_len=kv_len,
                         num_heads=n_heads, num_kv_heads=k_heads, head_dim=h, dtype=dtype,
                         num_docs=docs, pad_tokens=(0, 200),
                         segment_ids=str(r.choice(["sequential", "shuffled", "reused"])),
                         poison_padding=True)
    scale = float(h ** -0.5 * r.uniform(0.5, 2.0))
    variant = dict(is_causal=is_causal, local_window_size=window)
    options = dict(scale=scale, fwd_params=fwd, bwd_params=bwd, deterministic=deterministic,
                   logits_soft_cap=cap, return_residual=residual, **variant)
    sharded = _on_mesh(mesh, kv_sharded, permute, variant, options)

    return _checked(sharded, batch, seed=seed, scale=scale, is_causal=is_causal, window=window,
                    cap=cap, sinks=sinks, residual=residual, on_gpu=platform == "gpu",
                    shown=f"mesh {d}x{c}x{m} N{n_heads}K{k_heads} H{h} {dtype} kv heads "
                          f"sharded={kv_sharded} S={kv_len} docs={docs} dkdv keys="
                          f"{bwd.kv_block_size} deterministic={deterministic} {variant} "
                          f"cap={cap} sinks={sinks is not None} residual={residual} "
                          f"permute={permute}")


CASES = {"variants": variants_case, "mosaic": mosaic_case, "jax_nn": jax_nn_case,
         "sharded": sharded_case, "sharded_mosaic": sharded_mosaic_case}


def stop_once(signum, frame) -> None:
    """SIGINT/SIGTERM handler: one KeyboardInterrupt, the signals ignored from then on. `timeout`
    signals fuzz.py and then its whole process group, so a parent gets two, and the second
    must not interrupt its own stopping of the children (it did, and the summary was lost)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def in_processes(args) -> int:
    """main() over args.jobs child processes, each a contiguous share of the seeds: their lines
    echoed as they come, then one summary of all of them. Interrupted (SIGINT or SIGTERM, as
    `timeout` sends), it stops the children, waits a few seconds for their last lines and still
    prints the summary: the cases that finished, and those cut short, which count as neither."""
    first, stop = (int(x) for x in args.seeds.split(":"))
    bounds = np.linspace(first, stop, min(args.jobs, stop - first) + 1).round().astype(int)
    counts = {"ok": 0, "FAIL": 0, "skip": 0, "cut": 0}
    lock, t0, children, summed = threading.Lock(), time.time(), [], set()

    def run(a: int, b: int) -> int:
        child = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), args.mode, "--seeds", f"{a}:{b}",
             "--platform", args.platform, "--time-limit", str(args.time_limit)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with lock:
            children.append(child)
        for line in child.stdout:
            word = line.split(" ", 1)[0]
            with lock:
                if word in counts and " seed " in line:
                    counts[word] += 1
                if line.startswith(f"{args.mode}: seeds "):  # its own summary: its cut counted
                    summed.add(child.pid)
                print(line, end="", flush=True)
        return child.wait()

    pool = concurrent.futures.ThreadPoolExecutor(len(bounds) - 1)
    runs = [pool.submit(run, a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    interrupted, killed = False, []
    try:
        for r in runs:
            r.result()
    except KeyboardInterrupt:
        interrupted = True
        with lock:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGINT)  # each reports the seed it was on
        deadline = time.time() + 5
        for child in list(children):
            try:
                child.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                child.kill()  # busy outside Python (a compile), or slow to exit after its
                killed.append(child.pid)  # summary (JAX's teardown)
        for r in runs:
            r.result()
    pool.shutdown()
    # 1: a case failed, which it printed. A child our signal stopped exits 0 or 1 too, or dies
    # of it if it came before the child's handler; one we killed is not a crash either.
    stopped = (0, 1, -signal.SIGINT, -signal.SIGTERM) if interrupted else (0, 1)
    crashed = sum(child.returncode not in stopped and child.pid not in killed
                  for child in children)
    # a child killed before its summary was running a case, whose seed goes unnamed
    cuts = counts["cut"] + sum(pid not in summed for pid in killed)
    cut = (f", interrupted: {cuts} case{'s' * (cuts != 1)} cut short" if interrupted else "")
    print(f"{args.mode}: seeds {args.seeds} in {len(runs)} processes, {counts['ok']} passed, "
          f"{counts['FAIL'] + crashed} failed, {counts['skip']} skipped (sharded: fewer than 2 "
          f"devices){cut}, {time.time() - t0:.0f} s", flush=True)
    return 1 if counts["FAIL"] or crashed else 0


def one_case(mode: str, seed: int, options: dict, counts: dict) -> None:
    """Runs and reports one seed's case, adding it to counts (ran, failed, skipped)."""
    import jax

    start = time.time()
    try:
        problem = CASES[mode](seed, **options)
    except Exception as err:  # an error is a finding too: report it and go on
        notes = "".join(f"\n  {note}" for note in getattr(err, "__notes__", ()))
        problem = f"{type(err).__name__}: {str(err)[:600]}{notes}"
    # Every case has shapes of its own, and eager calls keep each shape's executable for the
    # process's life (kvax's mask builder and op, as jax's own functions do). On CPU each kept
    # about 800 memory maps a jax_nn case: after 89 cases LLVM could map no more (the kernel's
    # limit of 65530), and the run died. Cleared, the maps stay at ~480.
    jax.clear_caches()
    counts["ran"] += 1
    if problem == SKIPPED:
        counts["skipped"] += 1
        print(f"skip {mode} seed {seed}", flush=True)
    elif problem and not isinstance(problem, Passed):
        counts["failed"] += 1
        print(f"FAIL {mode} seed {seed}: {problem}", flush=True)
    else:  # a line per case, so that a run cut short still shows what it checked
        note = f" {problem}" if problem else ""
        print(f"ok   {mode} seed {seed} ({time.time() - start:.1f} s){note}", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=sorted(CASES))
    p.add_argument("--seeds", default="0:20", help="START:STOP, one case per seed")
    p.add_argument("--platform", default="cpu", choices=["cpu", "gpu"],
                   help="sharded: the devices the meshes are made of (cpu: 8 fake ones)")
    p.add_argument("--jobs", type=int, default=1,
                   help="processes, each taking a share of the seeds (on a GPU most of a case's "
                        "time is compiling its kernels on the host, which runs side by side)")
    p.add_argument("--time-limit", type=float, default=0,
                   help="seconds after which no new case starts (each process's own clock); the "
                        "summary then counts the cases that ran. 0: none")
    args = p.parse_args(argv)
    if argv is None:  # a run from the shell: stopped once, by Ctrl-C or `timeout`'s signal
        signal.signal(signal.SIGINT, stop_once)
        signal.signal(signal.SIGTERM, stop_once)
    if args.jobs > 1:
        return in_processes(args)
    if args.mode.startswith("sharded") and args.platform == "cpu" and "jax" not in sys.modules:
        os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")  # before JAX starts

    options = {"platform": args.platform} if args.mode.startswith("sharded") else {}
    first, stop = (int(x) for x in args.seeds.split(":"))
    counts = {"ran": 0, "failed": 0, "skipped": 0}
    t0, running, cut = time.time(), None, ""
    try:
        for seed in range(first, stop):
            if args.time_limit and time.time() - t0 > args.time_limit:
                print(f"stop {args.mode}: --time-limit {args.time_limit:g} s reached before "
                      f"seed {seed}", flush=True)
                break
            running = seed
            one_case(args.mode, seed, options, counts)
            running = None
    except KeyboardInterrupt:  # a case cut short is neither passed nor failed
        if running is not None:
            print(f"cut {args.mode} seed {running}: interrupted", flush=True)
        cut = f", interrupted{'' if running is None else ': 1 case cut short'}"
    failed, skipped = counts["failed"], counts["skipped"]
    print(f"{args.mode}: seeds {args.seeds}, {counts['ran'] - failed - skipped} passed, "
          f"{failed} failed, {skipped} skipped (sharded: fewer than 2 devices){cut}, "
          f"{time.time() - t0:.0f} s", flush=True)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
