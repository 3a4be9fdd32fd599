"""One correctness suite, run on every backend: the pure-JAX path (everywhere) and the Triton
kernels (GPU only). Every output and gradient is checked against kvax-testing's float64 reference
with the baseline-tied tolerance."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kvax_core_cases import BACKENDS, SMALL

from kvax._src.attention import backends, blockwise
from kvax.ops import create_attention_mask, flash_attention
from kvax.utils import FlashAttentionParamsConfig
from kvax_testing import (assert_one_key_rows_exact, check_attention, mask_terms, packed_batch,
                          reference_attention, soft_cap)


@dataclasses.dataclass(frozen=True)
class Case:
    kv_len: int
    q_len: int | None = None
    heads: tuple[int, int] = (4, 2)  # (N, K)
    head_dim: int = 64
    value_head_dim: int | None = None
    dtype: str = "bfloat16"
    layout: tuple = ()  # extra packed_layout arguments as (name, value) pairs
    batch: int = 2

    def packed(self, seed):
        """This case's random packed batch (NaN and Inf in its padding)."""
        n, k = self.heads
        return packed_batch(seed, batch=self.batch, kv_len=self.kv_len, q_len=self.q_len,
                            num_heads=n, num_kv_heads=k, head_dim=self.head_dim,
                            value_head_dim=self.value_head_dim, dtype=self.dtype,
                            poison_padding=True, **dict(self.layout))

    @property
    def id(self):
        n, k = self.heads
        t = self.kv_len if self.q_len is None else self.q_len
        extra = "-".join(f"{v}" for _, v in self.layout)
        return (f"B{self.batch}-T{t}-S{self.kv_len}-N{n}-K{k}-H{self.head_dim}"
                f"-Hv{self.value_head_dim or self.head_dim}-{self.dtype}"
                + (f"-{extra}" if extra else ""))


CASES = [
    Case(257),
    Case(257, dtype="float32"),
    Case(257, dtype="float16", heads=(4, 4)),
    Case(300, q_len=77, heads=(6, 2), layout=(("segment_ids", "reused"),)),
    Case(130, q_len=1, heads=(4, 1)),  # decode, MQA
    Case(200, head_dim=96, value_head_dim=40, layout=(("positions", "zeros"),)),
    Case(190, head_dim=32, heads=(8, 2), layout=(("segment_ids", "large"), ("num_docs", (6, 12)))),
    Case(100, batch=1, layout=(("pad_tokens", 0), ("num_docs", 1), ("positions", "global"))),
]


MASK_ARGS = ("is_causal", "local_window_size")


def attention_fn(params, *, backend, scale, sequential=False, **variant):
    mask_variant = {k: v for k, v in variant.items() if k in MASK_ARGS}

    def fn(q, k, v, *layout, **sinks):
        masks = create_attention_mask(*layout, fwd_params=params, bwd_params=params,
                                      calc_bwd_mask=True, **mask_variant)
        return flash_attention(q, k, v, *layout, mask=masks, scale=scale, fwd_params=params,
                               bwd_params=params, assume_sequential_positions=sequential,
                               backend=backend, **variant, **sinks)
    return jax.jit(fn)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_reference(case, backend):
    seed = int(np.random.SeedSequence().entropy % 2**31)  # fresh inputs every run
    batch = case.packed(seed)
    scale = case.head_dim ** -0.5
    report = check_attention(attention_fn(SMALL, backend=backend, scale=scale), batch,
                             scale=scale, seed=seed)
    assert report.ok, f"seed={seed}\n{report}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [-0.3, 0.0])
def test_negative_and_zero_scale(backend, scale):
    """scale only has to be finite: a negative one reverses the weights, 0 makes them uniform
    over what each query may attend."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = packed_batch(seed, kv_len=150, num_docs=3, pad_tokens=9, poison_padding=True)
    report = check_attention(attention_fn(SMALL, backend=backend, scale=scale), batch,
                             scale=scale, seed=seed)
    assert report.ok, f"seed={seed}\n{report}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequential_positions(backend):
    batch = packed_batch(11, kv_len=150, num_docs=3, pad_tokens=9, positions="global",
                         poison_padding=True)
    report = check_attention(attention_fn(SMALL, backend=backend, scale=0.125, sequential=True),
                             batch, scale=0.125)
    assert report.ok, str(report)


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_params_and_no_mask(backend):
    """No params, no mask: defaults for the device, mask built inside, backward masks too."""
    batch = packed_batch(12, kv_len=200, num_docs=2, pad_tokens=13)

    def fn(q, k, v, *layout):
        return flash_attention(q, k, v, *layout, scale=0.125, backend=backend)

    report = check_attention(jax.jit(fn), batch, scale=0.125)
    assert report.ok, str(report)


@pytest.mark.parametrize("backend", BACKENDS)
def test_padding_rows_exact_zero_under_grad(backend):
    batch = packed_batch(13, batch=1, kv_len=96, num_docs=2, pad_tokens=40, poison_padding=True)
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    pad = batch.layout.query_segment_ids == -1

    def loss(q, k, v):
        return attention_fn(SMALL, backend=backend, scale=0.1)(q, k, v, *layout).astype(
            jnp.float32).sum()

    out = attention_fn(SMALL, backend=backend, scale=0.1)(batch.query, batch.key, batch.value,
                                                          *layout)
    assert np.all(np.asarray(out, np.float32)[pad] == 0)
    grads = jax.grad(loss, argnums=(0, 1, 2))(batch.query, batch.key, batch.value)
    for g in grads:
        g = np.asarray(g, np.float32)
        assert np.all(np.isfinite(g))
        assert np.all(g[pad] == 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_deterministic_reruns(backend):
    batch = packed_batch(14, kv_len=180, num_docs=3, pad_tokens=5)
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    fn = attention_fn(SMALL, backend=backend, scale=0.1)

    def step(q, k, v):
        out, vjp = jax.vjp(lambda *x: fn(*x, *layout), q, k, v)
        return (out, *vjp(jnp.ones_like(out)))

    first = step(batch.query, batch.key, batch.value)
    second = step(batch.query, batch.key, batch.value)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


def test_remat_names_and_transforms():
    """Output and logsumexp are tagged for remat; grad works under jit, checkpoint and vmap."""
    batch = packed_batch(15, kv_len=64, num_docs=2, pad_tokens=4, dtype="float32")
    layout = [jnp.asarray(a) for a in batch.layout.arrays]

    def loss(q, k, v):
        out = flash_attention(q, k, v, *layout, scale=0.2, fwd_params=SMALL, bwd_params=SMALL)
        return jnp.sum(out ** 2)

    policy = jax.checkpoint_policies.save_only_these_names("attention_outputs")
    jaxpr = str(jax.make_jaxpr(jax.grad(jax.checkpoint(loss, policy=policy)))(
        batch.query, batch.key, batch.value))
    assert "attention_outputs" in jaxpr
    g1 = jax.jit(jax.grad(jax.checkpoint(loss, policy=policy)))(batch.query, batch.key,
                                                                 batch.value)
    g2 = jax.grad(loss)(batch.query, batch.key, batch.value)
    np.testing.assert_allclose(g1, g2, rtol=1e-6, atol=1e-6)

    def per_example(q, k, v, *lay):
        add = lambda x: x[None]
        return flash_attention(add(q), add(k), add(v), *map(add, lay), scale=0.2,
                               fwd_params=SMALL, bwd_params=SMALL)[0]

    vmapped = jax.vmap(per_example)(batch.query, batch.key, batch.value, *layout)
    direct = flash_attention(batch.query, batch.key, batch.value, *layout, scale=0.2,
                             fwd_params=SMALL, bwd_params=SMALL)
    np.testing.assert_allclose(vmapped, direct, rtol=1e-6, atol=1e-6)


def test_forward_mask_only_builds_backward_masks():
    batch = packed_batch(16, kv_len=120, num_docs=3, pad_tokens=7, dtype="float32")

    def fn(q, k, v, *layout):
        masks = create_attention_mask(*layout, fwd_params=SMALL)  # no calc_bwd_mask
        return flash_attention(q, k, v, *layout, mask=masks, scale=0.2, bwd_params=SMALL)

    assert check_attention(jax.jit(fn), batch, scale=0.2).ok


def test_mask_reused_across_layers_under_scan():
    batch = packed_batch(17, kv_len=96, num_docs=3, pad_tokens=6, dtype="float32")
    layout = [jnp.asarray(a) for a in batch.layout.arrays]

    @jax.jit
    def model(x):
        masks = create_attention_mask(*layout, fwd_params=SMALL, bwd_params=SMALL,
                                      calc_bwd_mask=True)

        def layer(h, _):
            return flash_attention(h, h[:, :, :2], h[:, :, :2], *layout, mask=masks,
                                   scale=0.3), None

        return jax.lax.scan(layer, x, None, length=3)[0]

    out = model(batch.query)
    grads = jax.grad(lambda x: model(x).sum())(batch.query)
    assert out.shape == batch.query.shape and np.all(np.isfinite(np.asarray(grads)))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,h,hv", [("bfloat16", 128, 128), ("bfloat16", 192, 128),
                                        ("bfloat16", 256, 256), ("float16", 128, 64),
                                        ("float32", 256, 192)])
def test_head_dims_with_device_defaults(dtype, h, hv):
    """The device's default blocks (128x128 on Hopper) with every head dim up to 256: the
    launchers split mask blocks into smaller tiles where a dtype or head dim needs it."""
    batch = packed_batch(int(np.random.SeedSequence().entropy % 2**31), batch=1, kv_len=333,
                         num_heads=4, num_kv_heads=2, head_dim=h, value_head_dim=hv,
                         dtype=dtype, num_docs=3, pad_tokens=21, poison_padding=True)
    scale = h ** -0.5

    def fn(q, k, v, *layout):
        return flash_attention(q, k, v, *layout, scale=scale, backend="triton")

    report = check_attention(jax.jit(fn), batch, scale=scale)
    assert report.ok, str(report)


@pytest.mark.gpu
@pytest.mark.parametrize("blocks,stages", [((128, 64), 3), ((256, 64), 3), ((128, 128), 3),
                                           ((128, 128), 8)])
@pytest.mark.parametrize("backend", ["triton", "auto"])
def test_large_blocks_fit_shared_memory(blocks, stages, backend):
    """Mask and kernel blocks beyond the defaults, the same params for both passes, at head dim
    128 in bfloat16: the kernels take the stages that fit shared memory (a 128x64 backward at 3
    stages asked an H200 for 232960 of its 232448 bytes and failed at launch, in session 60's
    mosaic fuzz)."""
    batch = packed_batch(int(np.random.SeedSequence().entropy % 2**31), batch=1, kv_len=701,
                         num_heads=2, num_kv_heads=1, head_dim=128, dtype="bfloat16",
                         num_docs=(2, 4), pad_tokens=(1, 40), poison_padding=True)
    params = FlashAttentionParamsConfig(*blocks, num_warps=8, num_stages=stages)
    scale = 128 ** -0.5

    def fn(q, k, v, *layout):
        masks = create_attention_mask(*layout, fwd_params=params, bwd_params=params,
                                      calc_bwd_mask=True)
        return flash_attention(q, k, v, *layout, mask=masks, scale=scale, fwd_params=params,
                               bwd_params=params, backend=backend)

    report = check_attention(jax.jit(fn), batch, scale=scale)
    assert report.ok, f"{blocks} {stages}\n{report}"


def play_gpu_with_shared_memory(monkeypatch, limit: int) -> None:
    """This GPU's compute capability given `limit` bytes of shared memory a program, with
    Hopper's model ahead of the build set aside (triton_common.fit_stages, which reads the same
    table), as on the non-Hopper GPUs such a limit stands for."""
    from kvax._src import config
    from kvax._src.attention import triton_common

    capability = config.current_compute_capability()
    monkeypatch.setitem(config.SHARED_MEMORY_BY_CAPABILITY, capability, limit)
    monkeypatch.setattr(triton_common, "fit_stages", lambda need, stages, *args: stages)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,h", [("bfloat16", 128), ("bfloat16", 256), ("float32", 64),
                                     ("float32", 128)])
def test_builds_over_shared_memory_take_fewer_stages(monkeypatch, dtype, h):
    """This GPU made to look like one with 99 KiB a program (RTX 30/40/50, A10, L4, L40S: its
    compute capability's entry set to 101376 bytes): the defaults off Hopper (64x64, 4 warps, 3
    stages) take the smaller tiles the launchers choose there, and each kernel whose build is
    over the limit is built again with fewer stages (triton_launch.fitted), with the right
    result. Before, the backward at head dim 128 failed at launch on those GPUs (107520 bytes
    at 3 stages on 8.6)."""
    from kvax._src.attention import triton_launch

    play_gpu_with_shared_memory(monkeypatch, 101376)
    monkeypatch.setattr(triton_launch, "refitted", [])
    # The refits are counted: the lowering waits for the backward's build in the thread that
    # lowers it ahead however long a crowded host takes (30 workers: over WAIT_S, 120 s, so
    # both built and refitted it, session 63).
    monkeypatch.setattr(triton_launch, "WAIT_S", 3600.0)
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = packed_batch(seed, batch=1, kv_len=611 + h // 64, num_heads=4, num_kv_heads=2,
                         head_dim=h, dtype=dtype, num_docs=(2, 4), pad_tokens=(1, 30),
                         poison_padding=True)
    params = FlashAttentionParamsConfig(64, 64, num_warps=4, num_stages=3)
    scale = h ** -0.5

    def fn(q, k, v, *layout):
        return flash_attention(q, k, v, *layout, scale=scale, fwd_params=params,
                               bwd_params=params, backend="triton")

    report = check_attention(jax.jit(fn), batch, scale=scale, seed=seed)
    assert report.ok, f"seed={seed}\n{report}"
    if (dtype, h) in (("bfloat16", 128), ("float32", 64)):  # over at 3 stages on sm_86 and 90
        assert [stages for name, asked, stages in triton_launch.refitted
                if name == "_bwd_kernel" and asked == 3] in ([2], [1])


@pytest.mark.gpu
def test_a_build_over_shared_memory_at_one_stage_is_an_error(monkeypatch):
    """Where a kernel takes more shared memory than the GPU gives a program even at one stage
    (the limit lowered to 12288 bytes here, under the 18432 that a forward of 8 KiB tiles takes
    at one stage, built for sm_90 on CPU), the lowering raises a ValueError naming the kernel,
    its bytes and the limit, before anything launches."""
    play_gpu_with_shared_memory(monkeypatch, 12288)
    batch = packed_batch(int(np.random.SeedSequence().entropy % 2**31), batch=1, kv_len=300,
                         num_heads=2, num_kv_heads=1, head_dim=128, dtype="bfloat16",
                         num_docs=2)
    # kernels are built once per process for any shape: 2 warps, which no other test asks for
    params = FlashAttentionParamsConfig(64, 64, num_warps=2, num_stages=3)

    def fn(q, k, v, *layout):
        return flash_attention(q, k, v, *layout, fwd_params=params, backend="triton")

    with pytest.raises(ValueError, match=r"_fwd_kernel .* needs \d+ bytes of shared memory at 1 "
                                         r"stage.*may take 12288: pass smaller"):
        jax.jit(fn).lower(batch.query, batch.key, batch.value, *batch.layout.arrays)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_large_logits(backend):
    """float32 with logits up to ~100 (queries x4 and x10): the checker's float32 softmax term
    (kvax_testing.checks) is the justified bound; bf16 and f16 keep the plain 2x bound."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    rng = np.random.default_rng(seed)
    for boost in (4.0, 10.0):
        batch = packed_batch(seed, batch=1, kv_len=int(rng.integers(200, 300)), num_heads=4,
                             num_kv_heads=2, head_dim=64, dtype="float32", num_docs=(1, 3),
                             pad_tokens=(0, 20), poison_padding=True)
        batch = dataclasses.replace(batch, query=batch.query * np.float32(boost))
        scale = float(rng.uniform(0.2, 0.5))
        report = check_attention(attention_fn(SMALL, backend=backend, scale=scale), batch,
                                 scale=scale, seed=seed)
        assert report.ok, f"seed={seed} boost={boost}\n{report}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_cotangent_read_at_one_precision(backend):
    """One-token documents: each row attends only itself, so P = 1, dP = delta and the exact dQ
    is 0. With an op after the attention (`out * 1.5`), XLA's excess precision used to hand delta
    an unrounded float32 cotangent and dP the bfloat16 one: dQ came out at 5e-3 to 3e-2."""
    t = 257
    seg = jnp.arange(t, dtype=jnp.int32)[None]
    pos = jnp.zeros((1, t), jnp.int32)
    rng = np.random.default_rng(3)
    q, k, v = (jnp.asarray(rng.standard_normal((1, t, 4, 64)), jnp.bfloat16) for _ in range(3))
    cot = jnp.asarray(rng.standard_normal((1, t, 4, 64)), jnp.bfloat16)

    def f(q, k, v):
        return flash_attention(q, k, v, pos, seg, pos, seg, scale=0.125, fwd_params=SMALL,
                               bwd_params=SMALL, backend=backend) * 1.5

    losses = (lambda q, k, v: jnp.sum(f(q, k, v).astype(jnp.float32) * cot),
              lambda q, k, v: jnp.sum(jnp.tanh(f(q, k, v).astype(jnp.float32))))
    for loss in losses:
        dq = np.asarray(jax.jit(jax.grad(loss))(q, k, v), np.float32)
        assert np.max(np.abs(dq)) < 1e-4, np.max(np.abs(dq))


@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_scale_and_its_gradient(backend):
    """scale = 1 / sqrt(head_dim) under jit (the downstream guide's code) equals a Python float,
    and the gradient with respect to the scale matches the float64 reference's."""
    batch = packed_batch(21, batch=2, kv_len=150, num_heads=4, num_kv_heads=2, head_dim=32,
                         num_docs=(2, 4), pad_tokens=(0, 9), dtype="float32")
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))

    @jax.jit
    def traced(q, k, v):
        scale = 1.0 / jnp.sqrt(q.shape[-1])
        return flash_attention(q, k, v, *layout, scale=scale, fwd_params=SMALL,
                               bwd_params=SMALL, backend=backend)

    static = attention_fn(SMALL, backend=backend, scale=32 ** -0.5)(q, k, v, *layout)
    np.testing.assert_array_equal(np.asarray(traced(q, k, v)), np.asarray(static))

    cot = jnp.asarray(np.random.default_rng(2).standard_normal(static.shape), jnp.float32)

    def loss(scale, impl):
        if impl == "ours":
            out = flash_attention(q, k, v, *layout, scale=scale, fwd_params=SMALL,
                                  bwd_params=SMALL, backend=backend)
        else:
            out = reference_attention(q, k, v, *layout, scale=scale, dtype=jnp.float64)[0]
        return jnp.sum(out * cot)

    got = jax.jit(jax.grad(lambda s: loss(s, "ours")))(jnp.float32(0.3))
    with jax.enable_x64(True):
        want = jax.grad(lambda s: loss(s, "ref"))(jnp.float64(0.3))
    np.testing.assert_allclose(float(got), float(want), rtol=1e-4)

    # NaN in padding queries stays out of the scale's gradient too
    pad = (batch.layout.query_segment_ids == -1)[:, :, None, None]
    q = jnp.where(pad, jnp.nan, q)
    assert np.any(pad) and np.isfinite(float(jax.jit(jax.grad(lambda s: loss(s, "ours")))(
        jnp.float32(0.3))))


VARIANT_CASES = [
    (dict(is_causal=False), CASES[0]),
    (dict(local_window_size=17), CASES[3]),
    (dict(is_causal=False, local_window_size=(9, 4)), CASES[5]),
    (dict(is_causal=False, local_window_size=(0, 12)), CASES[6]),
    (dict(local_window_size=(30, 0)), Case(333, dtype="float32", layout=(("num_docs", 2),))),
    (dict(logits_soft_cap=5.0), CASES[0]),
    (dict(logits_soft_cap=2.0, local_window_size=(40, 0)), CASES[1]),
    (dict(logits_soft_cap=3.0, is_causal=False), CASES[4]),
    (dict(sinks=True), CASES[0]),
    (dict(sinks=True, local_window_size=(20, 0)), CASES[1]),
    (dict(sinks=True, logits_soft_cap=4.0), CASES[3]),
    (dict(return_residual=True), CASES[2]),
    (dict(return_residual=True, sinks=True), CASES[6]),
    (dict(return_residual=True, is_causal=False, local_window_size=8), CASES[1]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("variant,case", VARIANT_CASES,
                         ids=[f"{'-'.join(f'{k}={v[k]}' for k in v)}-{c.id}"
                              for v, c in VARIANT_CASES])
def test_variants_match_reference(variant, case, backend):
    """Bidirectional attention, sliding windows (with and without causality), logit
    soft-capping, attention sinks and the returned logsumexp: outputs and gradients (the sinks'
    and through the logsumexp too) against the float64 reference with the same rule."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = case.packed(seed)
    scale = case.head_dim ** -0.5
    variant = dict(variant)
    sinks = None
    if variant.pop("sinks", False):  # around the logits' size, one head's sink switched off
        sinks = np.random.default_rng(seed).normal(0.5, 1.5, case.heads[0]).astype(np.float32)
        sinks[-1] = -np.inf
    cap = variant.get("logits_soft_cap")
    report = check_attention(attention_fn(SMALL, backend=backend, scale=scale, **variant), batch,
                             scale=scale, seed=seed,
                             mask_terms=mask_terms(**{k: v for k, v in variant.items()
                                                      if k in MASK_ARGS}),
                             logits_fn=None if cap is None else soft_cap(cap), sinks=sinks,
                             residual=variant.get("return_residual", False),
                             logit_error=(0.0 if backend == "xla" else
                                          backends.kernel_logit_error(cap, case.dtype)))
    assert report.ok, f"seed={seed}\n{report}"


def test_kernel_logit_error_is_the_approximate_tanh_of_16_bit_caps():
    """The logit error the kernels declare (the checks' allowance on the logsumexp): c times
    tanh.approx.f32's relative error for 16-bit inputs, none for float32 (libdevice's tanh) or
    without a cap."""
    assert backends.kernel_logit_error(5.0, "bfloat16") == 5.0 * 2.0**-10.98
    assert backends.kernel_logit_error(30.0, jnp.float16) == 30.0 * 2.0**-10.98
    assert backends.kernel_logit_error(5.0, "float32") == 0.0
    assert backends.kernel_logit_error(None, "bfloat16") == 0.0


def test_capped_reference_keeps_every_weight_normal():
    """With the fixed reference every weight p = exp2(logit - m), logits in [-f, f], its row sum
    over 2^24 keys and its products with values 2^-22 <= |v| <= 2^40 are normal float32
    numbers; 16-bit inputs (whose P is rounded), uncapped calls and caps past 55 keep running
    row maxima."""
    tiny, big = np.finfo(np.float32).tiny, np.finfo(np.float32).max
    for cap in [0.1, 5.0, 30.0, 50.0, 55.0]:
        m = blockwise.capped_reference(cap, jnp.float32)
        f = cap * blockwise.LOG2E
        assert 2.0 ** (-f - m) * 2.0 ** -22 >= tiny
        assert 2.0 ** (f - m) * 2.0 ** 24 * 2.0 ** 40 < big
    assert blockwise.capped_reference(30.0, jnp.float32) == 24.0  # the Triton forward's float32 P
    assert blockwise.capped_reference(56.0, jnp.float32) is None
    assert blockwise.capped_reference(30.0, jnp.bfloat16) is None
    assert blockwise.capped_reference(30.0, jnp.float16) is None
    assert blockwise.capped_reference(None, jnp.float32) is None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,cap", [("bfloat16", None), ("bfloat16", 5.0), ("bfloat16", 30.0),
                                       ("float16", 30.0)])
def test_rows_that_see_one_key_return_its_value(dtype, cap, backend):
    """Causal documents of 1-12 tokens: each document's first token sees only itself, so its
    output is its value, bitwise, with or without a soft cap (the capped 16-bit forwards once
    skipped the row maxima and were off there by a rounding of P: fuzz seed 5812)."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = packed_batch(seed, batch=2, kv_len=211, num_heads=4, num_kv_heads=2, dtype=dtype,
                         poison_padding=True, num_docs=(20, 40), pad_tokens=(5, 20),
                         segment_ids="shuffled")
    fn = attention_fn(SMALL, backend=backend, scale=0.3, logits_soft_cap=cap)
    out = fn(batch.query, batch.key, batch.value, *batch.layout.arrays)
    assert assert_one_key_rows_exact(out, batch, mask_terms()) >= 20 * 4, f"seed={seed}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,cap", [("bfloat16", 30.0), ("bfloat16", 70.0), ("float32", 50.0),
                                       ("float16", 30.0)])
def test_large_caps_with_saturated_logits(dtype, cap, backend):
    """Scores at 40 times the scale, of either sign, put most logits near +-c. Caps up to 55
    give the float32 Triton forward a fixed softmax reference (blockwise.capped_reference), and
    the Mosaic forward the same for bfloat16; the other 16-bit inputs and a cap of 70 keep
    running row maxima."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = Case(257, dtype=dtype).packed(seed)
    for sign in (40.0, -40.0):
        scale = sign * batch.query.shape[-1] ** -0.5
        report = check_attention(attention_fn(SMALL, backend=backend, scale=scale,
                                              logits_soft_cap=cap), batch, scale=scale,
                                 seed=seed, logits_fn=soft_cap(cap))
        assert report.ok, f"seed={seed} sign={sign}\n{report}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_logsumexp_merges_split_keys(backend):
    """The residual convention makes partial results composable (split-KV decoding, ring
    attention): attention over keys [K1; K2] equals the two partial outputs weighted by
    exp(lse_i - logaddexp(lse_1, lse_2)), rows with nothing to attend in a part included (-inf)."""
    batch = packed_batch(23, batch=2, kv_len=190, q_len=70, num_docs=(2, 4), pad_tokens=(0, 9),
                         dtype="float32")
    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    qp, qs, kp, ks = (jnp.asarray(a) for a in batch.layout.arrays)

    def attend(k_, v_, kp_, ks_):
        return flash_attention(q, k_, v_, qp, qs, kp_, ks_, scale=0.2, fwd_params=SMALL,
                               bwd_params=SMALL, backend=backend, return_residual=True)

    whole, whole_lse = attend(k, v, kp, ks)
    cut = 117
    out1, lse1 = attend(k[:, :cut], v[:, :cut], kp[:, :cut], ks[:, :cut])
    out2, lse2 = attend(k[:, cut:], v[:, cut:], kp[:, cut:], ks[:, cut:])
    lse = jnp.logaddexp(lse1, lse2)
    live = jnp.isfinite(lse)[..., None]
    w1 = jnp.where(live, jnp.exp(lse1 - jnp.where(live[..., 0], lse, 0.0))[..., None], 0.0)
    w2 = jnp.where(live, jnp.exp(lse2 - jnp.where(live[..., 0], lse, 0.0))[..., None], 0.0)
    assert bool(jnp.any(jnp.isneginf(lse1) & jnp.isfinite(lse2)))  # a part with nothing to attend
    np.testing.assert_allclose(w1 * out1 + w2 * out2, whole, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(np.where(live[..., 0], lse, 0), np.where(live[..., 0], whole_lse, 0),
                               atol=2e-5, rtol=2e-5)
    assert np.array_equal(np.isneginf(lse), np.isneginf(whole_lse))
