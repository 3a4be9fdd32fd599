"""Every sharded layout equals the single-device result, outputs and gradients, on a fake 8-device
CPU mesh (kvax-testing's plugin sets the devices). On GPUs the same tests run through the
kernels."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kvax.ops import create_attention_mask, flash_attention
from kvax.utils import (
    FlashAttentionParamsConfig,
    attention_specs,
    permute_tokens_context_parallelism,
    unpermute_tokens_context_parallelism,
)
from kvax_testing import packed_batch
from kvax_testing.mesh import fake_mesh as cpu_mesh

P16 = FlashAttentionParamsConfig(query_block_size=16, kv_block_size=16)

def layouts(devices: int) -> dict:
    """name: (mesh shape, axis names, query_specs, kv_specs, (N, K)) for a device count (8 fake
    CPU devices in CI; 2 or 4 GPUs on the GPU machine, where some axes shrink to size 1)."""
    half = devices // 2
    return {
        "dp": ((devices,), ("data",), ("data", None, None, None), ("data", None, None, None),
               (4, 2)),
        "cp": ((devices,), ("context",), (None, "context", None, None), (None, None, None, None),
               (4, 2)),
        "dp-x-cp": ((2, half), ("data", "context"), ("data", "context", None, None),
                    ("data", None, None, None), (4, 2)),
        "dp-x-tp": ((2, half), ("data", "model"), ("data", None, "model", None),
                    ("data", None, "model", None), (2 * half, half)),
        "dp-x-tp-kv-replicated": ((2, half), ("data", "model"), ("data", None, "model", None),
                                  ("data", None, None, None), (2 * half, max(1, half // 2))),
        "hsdp-x-cp": ((max(1, devices // 4), min(2, half), 2), ("dp", "fsdp", "context"),
                      (("dp", "fsdp"), "context", None, None), (("dp", "fsdp"), None, None, None),
                      (4, 1)),
    }


LAYOUTS = layouts(8)


def run(layout, batch, permute, use_mask=True, mesh=None, fake_mesh=None, devices=8):
    """The original README's usage; the legacy `with mesh:` unless a mesh is set outside."""
    shape, names, q_specs, kv_specs, _ = layouts(devices)[layout]
    legacy = mesh is None
    mesh = fake_mesh(shape, names) if legacy else mesh
    qp, qs, kp, ks = (jnp.asarray(a) for a in batch.layout.arrays)

    def sharded(q, k, v):
        import contextlib

        with (mesh if legacy else contextlib.nullcontext()), \
                attention_specs(query_specs=q_specs, kv_specs=kv_specs):
            if permute:
                q, k, v, qp_, qs_ = permute_tokens_context_parallelism((q, k, v, qp, qs),
                                                                       strategy=permute)
            else:
                qp_, qs_ = qp, qs
            masks = (create_attention_mask(qp_, qs_, kp, ks, fwd_params=P16, bwd_params=P16,
                                           calc_bwd_mask=True) if use_mask else None)
            out = flash_attention(q, k, v, qp_, qs_, kp, ks, mask=masks, scale=0.3,
                                  fwd_params=P16, bwd_params=P16,
                                  permute_tokens_for_load_balance=permute)
            return unpermute_tokens_context_parallelism(out, strategy=permute) if permute else out

    return jax.jit(sharded)


def single(batch):
    layout = [jnp.asarray(a) for a in batch.layout.arrays]

    def fn(q, k, v):
        return flash_attention(q, k, v, *layout, scale=0.3, fwd_params=P16, bwd_params=P16)
    return fn


def assert_same(batch, sharded_fn):
    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    want, want_vjp = jax.vjp(single(batch), q, k, v)
    got, got_vjp = jax.vjp(sharded_fn, q, k, v)
    cot = jnp.asarray(np.random.default_rng(1).standard_normal(want.shape), want.dtype)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5, rtol=2e-5)
    # on an Explicit mesh the cotangent carries the output's sharding in its type
    for name, a, b in zip("qkv", got_vjp(jax.device_put(cot, got.sharding)), want_vjp(cot)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=5e-5, rtol=5e-5,
                                   err_msg=f"d{name}")


# permutation applies to context-parallel layouts only
CASES = [(name, False) for name in LAYOUTS] + [
    (name, True) for name, spec in LAYOUTS.items() if spec[2][1] is not None] + [
    ("cp", "striped"), ("dp-x-cp", "striped")]
CASE_IDS = [f"{n}-{'in-order' if p is False else 'chunks' if p is True else p}" for n, p in CASES]


@pytest.mark.parametrize("layout,permute", CASES, ids=CASE_IDS)
def test_layout_equals_single_device(layout, permute, fake_mesh, mesh_device_count):
    devices = min(mesh_device_count, 8)
    if devices < 2 or devices % 2:
        pytest.skip(f"sharded layouts need an even number of devices, have {devices}")
    shape, names, q_specs, _, (n, k) = layouts(devices)[layout]
    batch = packed_batch(hash((layout, permute)) % 1000, batch=8 if "dp" in layout else 2,
                         kv_len=128, num_heads=n, num_kv_heads=k, head_dim=16,
                         num_docs=(2, 5), pad_tokens=(0, 30), dtype="float32",
                         poison_padding=False)
    assert_same(batch, run(layout, batch, permute, fake_mesh=fake_mesh, devices=devices))


def test_set_mesh_and_mask_built_inside(fake_mesh, mesh_device_count):
    batch = packed_batch(5, batch=2, kv_len=96, num_heads=4, num_kv_heads=2, head_dim=16,
                         num_docs=3, pad_tokens=9, dtype="float32")
    devices = min(mesh_device_count, 8)
    mesh = fake_mesh((2, devices // 2), ("data", "context"))
    with jax.set_mesh(mesh):
        assert_same(batch, run("dp-x-cp", batch, permute=True, use_mask=False, mesh=mesh,
                               devices=devices))


def test_errors_before_lowering():
    """Raised before anything is lowered, so CPU devices serve on any machine."""
    fake_mesh = cpu_mesh
    batch = packed_batch(6, batch=2, kv_len=96, num_heads=4, num_kv_heads=2, head_dim=16)
    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    mesh = fake_mesh((2, 4), ("data", "context"))
    with pytest.raises(ValueError, match="no attention specs"):
        flash_attention(q, k, v, *layout, mesh=mesh)
    with pytest.raises(ValueError, match="must have 4 entries"):
        with attention_specs(("data", "context"), ("data", None, None, None)):
            pass
    with pytest.raises(ValueError, match="shard batch alike"):
        with attention_specs(("data", None, None, None), (None, None, None, None)):
            pass
    with pytest.raises(NotImplementedError, match="key/value sequence"):
        with attention_specs(("data", "context", None, None), ("data", "context", None, None)):
            pass
    with attention_specs(("data", "nope", None, None), ("data", None, None, None)):
        with pytest.raises(ValueError, match="names mesh axis 'nope'"):
            flash_attention(q, k, v, *layout, mesh=mesh)
        with pytest.raises(ValueError, match="no mesh"):
            flash_attention(q, k, v, *layout)
    with attention_specs(("data", "context", None, None), ("data", None, None, None)):
        with pytest.raises(ValueError, match="divisible by 2 x context size"):
            flash_attention(q[:, :60], k[:, :60], v[:, :60], *(a[:, :60] for a in layout),
                            mesh=mesh)
        with pytest.raises(ValueError, match="divisible by 2 x context size"):
            permute_tokens_context_parallelism(q[:, :60], mesh=mesh)
    with attention_specs((None, None, "context", None), (None, None, "context", None)):
        with pytest.raises(ValueError, match="query heads 4 must be divisible|kv heads 2 must be"):
            flash_attention(q, k, v, *layout, mesh=fake_mesh((8,), ("context",)))


def test_permutation_round_trip_and_balance():
    mesh = cpu_mesh((4,), ("context",))
    x = jnp.arange(2 * 16).reshape(2, 16)
    with attention_specs((None, "context", None, None), (None, None, None, None)):
        striped = permute_tokens_context_parallelism(x, mesh=mesh, strategy="striped")
        np.testing.assert_array_equal(striped[0, :4], [0, 4, 8, 12])  # shard 0: every 4th
        np.testing.assert_array_equal(
            unpermute_tokens_context_parallelism(striped, mesh=mesh, strategy="striped"), x)
        with pytest.raises(ValueError, match="strategy must be"):
            permute_tokens_context_parallelism(x, mesh=mesh, strategy="zigzag")
    with attention_specs((None, "context", None, None), (None, None, None, None)):
        perm = permute_tokens_context_parallelism(x, mesh=mesh)
        np.testing.assert_array_equal(perm[0, :4], [0, 1, 14, 15])  # shard 0: chunks 0 and 7
        a, b = unpermute_tokens_context_parallelism((perm, perm + 1), mesh=mesh)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, x + 1)


@pytest.mark.parametrize("explicit", [True, False], ids=["explicit-axes", "auto-axes"])
@pytest.mark.parametrize("how", ["mesh-arg", "set-mesh", "legacy-with"])
@pytest.mark.parametrize("jit", [True, False], ids=["jit", "eager"])
def test_mesh_kinds_and_how_they_are_given(explicit, how, jit, fake_mesh, mesh_device_count):
    """The README's context-parallel usage on the meshes users make (jax.make_mesh: Explicit
    axes) and on Auto ones, with the mesh given as mesh=, by jax.set_mesh or `with mesh:`."""
    import contextlib
    import warnings

    devices = min(mesh_device_count, 8)
    mesh = fake_mesh((2, devices // 2), ("data", "context"), explicit=explicit)
    batch = packed_batch(9, batch=2, kv_len=64, num_heads=4, num_kv_heads=2, head_dim=16,
                         num_docs=(2, 4), pad_tokens=(0, 7), dtype="float32")
    qp, qs, kp, ks = (jnp.asarray(a) for a in batch.layout.arrays)
    arg = {"mesh": mesh} if how == "mesh-arg" else {}
    # jax.set_mesh(mesh) sets the mesh as soon as it is called: build only the one asked for
    context = {"mesh-arg": contextlib.nullcontext, "set-mesh": lambda: jax.set_mesh(mesh),
               "legacy-with": lambda: mesh}[how]()

    def sharded(q, k, v):
        with attention_specs(("data", "context", None, None), ("data", None, None, None)):
            q, k, v, qp_, qs_ = permute_tokens_context_parallelism((q, k, v, qp, qs),
                                                                   strategy="striped", **arg)
            masks = create_attention_mask(qp_, qs_, kp, ks, fwd_params=P16, bwd_params=P16,
                                          calc_bwd_mask=True, **arg)
            out = flash_attention(q, k, v, qp_, qs_, kp, ks, mask=masks, scale=0.3,
                                  fwd_params=P16, bwd_params=P16,
                                  permute_tokens_for_load_balance="striped", **arg)
            return unpermute_tokens_context_parallelism(out, strategy="striped", **arg)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # `with mesh:` is deprecated
        with context:
            assert_same(batch, jax.jit(sharded) if jit else sharded)


def test_forward_schedule_is_sharded_like_the_mask(fake_mesh, mesh_device_count, monkeypatch):
    """On a Hopper GPU (pretended on CPU) a mask with the Hopper forward's blocks carries its
    schedule (kvax-core's Schedule: tables and the kernel's copies of the layout, queries local
    and keys whole); on a data x context mesh each device builds its own, and
    the sharded arrays are each device's local schedule in place, as the mask's bounds are: the
    forward inside shard_map reads the one built from its own rows."""
    from kvax._src.attention import api
    from kvax.extend import create_attention_mask_local

    monkeypatch.setattr(api, "wants_schedule", lambda: True)

    devices = min(mesh_device_count, 8)
    if devices < 2 or devices % 2:
        pytest.skip(f"a data x context mesh needs an even number of devices, have {devices}")
    cp = devices // 2
    mesh = fake_mesh((2, cp), ("data", "context"))
    p128 = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)
    batch = packed_batch(13, batch=2, kv_len=256 * cp, num_heads=2, num_kv_heads=1, head_dim=16,
                         num_docs=(3, 9), pad_tokens=(0, 40), dtype="float32")
    qp, qs, kp, ks = (jnp.asarray(a) for a in batch.layout.arrays)
    with attention_specs(("data", "context", None, None), ("data", None, None, None)):
        (mask,) = create_attention_mask(qp, qs, kp, ks, fwd_params=p128, mesh=mesh)
    local_t = 256
    for b in range(2):
        for c in range(cp):
            rows = slice(c * local_t, (c + 1) * local_t)
            (local,) = create_attention_mask_local(qp[b:b + 1, rows], qs[b:b + 1, rows],
                                                   kp[b:b + 1], ks[b:b + 1], p128)
            named = [("items", local.schedule.items, mask.schedule.items),
                     ("work", local.schedule.work, mask.schedule.work)]
            named += [(f"layouts[{i}]", x, y) for i, (x, y) in enumerate(
                zip(local.schedule.layouts, mask.schedule.layouts))]
            for name, want, got in named:
                width = want.shape[1]
                got = np.asarray(got)[b:b + 1, c * width:(c + 1) * width]
                np.testing.assert_array_equal(got, want, err_msg=f"{name} of shard {b}, {c}")
    assert mask.schedule.work.shape == (2, cp * local.schedule.work.shape[1])


def test_eager_calls_with_a_mesh_compile_once(fake_mesh, mesh_device_count):
    """Outside jit, repeated calls of the same shapes (forward and vjp) compile nothing new."""
    devices = min(mesh_device_count, 8)
    mesh = fake_mesh((2, devices // 2), ("data", "context"))
    batch = packed_batch(10, batch=2, kv_len=64, num_heads=4, num_kv_heads=2, head_dim=16,
                         num_docs=3, pad_tokens=5, dtype="float32")
    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda event, *_, **__: compiles.append(event)
        if event == "/jax/core/compile/backend_compile_duration" else None)

    def step():
        with attention_specs(("data", "context", None, None), ("data", None, None, None)):
            masks = create_attention_mask(*layout, fwd_params=P16, bwd_params=P16,
                                          calc_bwd_mask=True, mesh=mesh)
            out, vjp = jax.vjp(lambda *x: flash_attention(
                *x, *layout, mask=masks, scale=0.3, fwd_params=P16, bwd_params=P16,
                mesh=mesh), q, k, v)
            return out, vjp(jnp.ones_like(out))

    step()
    first = len(compiles)
    step()
    assert first > 0 and len(compiles) == first, compiles[first:]


def test_downstream_guide_direct_usage(pytestconfig, mesh_device_count):
    """The downstream integration guide's "Direct Kvax Usage", as written there (jax.sharding.Mesh,
    `with mesh, attention_specs(...)`, keywords, scale = 1 / sqrt(head_dim)), inside a jitted
    layer; the same answer as one device."""
    import warnings

    batch_size, seq_len, head_dim = 8, 64, 32
    q, k, v = (jnp.asarray(np.random.default_rng(i).standard_normal(
        (batch_size, seq_len, 4, head_dim)), jnp.float32) for i in range(3))
    positions = jnp.arange(seq_len)[None, :].repeat(batch_size, axis=0)
    segment_ids = jnp.zeros((batch_size, seq_len), dtype=jnp.int32)
    platform = pytestconfig.getoption("--kvax-mesh-platform")  # real GPUs on the GPU machine
    mesh = jax.sharding.Mesh(np.array(jax.devices(platform)[:min(mesh_device_count, 8)]),
                             ("data",))

    @jax.jit
    def layer(q, k, v):
        scale = 1.0 / jnp.sqrt(head_dim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # `with mesh:` is deprecated
            with mesh, attention_specs(query_specs=("data", None, None, None),
                                       kv_specs=("data", None, None, None)):
                mask = create_attention_mask(positions, segment_ids, positions, segment_ids,
                                             calc_bwd_mask=True, skip_pad_tokens=True)
                return flash_attention(query=q, key=k, value=v, query_positions=positions,
                                       query_segment_ids=segment_ids, kv_positions=positions,
                                       kv_segment_ids=segment_ids, mask=mask, scale=scale)

    want = flash_attention(q, k, v, positions, segment_ids, positions, segment_ids,
                           scale=head_dim ** -0.5)
    np.testing.assert_allclose(np.asarray(layer(q, k, v)), np.asarray(want), atol=2e-5, rtol=2e-5)


def test_wide_integer_layout_on_a_mesh(fake_mesh, mesh_device_count):
    """uint32 and int64 ids whose values fit work sharded as on one device; ones that do not fit
    raise before anything is built."""
    devices = min(mesh_device_count, 8)
    mesh = fake_mesh((2, devices // 2), ("data", "context"))
    batch = packed_batch(12, batch=2, kv_len=64, num_heads=4, num_kv_heads=2, head_dim=16,
                         num_docs=3, pad_tokens=5, dtype="float32")
    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    qp, qs, kp, ks = batch.layout.arrays
    want = flash_attention(q, k, v, qp, qs, kp, ks, scale=0.3, fwd_params=P16, bwd_params=P16)
    wide_qs, wide_ks = (np.where(x < 0, 2**31 - 1, x).astype(np.uint32) for x in (qs, ks))
    with attention_specs(("data", "context", None, None), ("data", None, None, None)):
        got = flash_attention(q, k, v, qp.astype(np.int64), np.where(qs < 0, -1, qs), kp,
                              np.asarray(ks, np.int64), scale=0.3, fwd_params=P16,
                              bwd_params=P16, mesh=mesh, permute_tokens_for_load_balance=False)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5, rtol=2e-5)
        masks = create_attention_mask(qp, wide_qs, kp, wide_ks, fwd_params=P16, mesh=mesh)
        assert masks[0].lower_bounds.shape[0] == 2
        with pytest.raises(ValueError, match="query_segment_ids has dtype uint32"):
            flash_attention(q, k, v, qp, np.full(qs.shape, 2**32 - 1, np.uint32), kp, ks,
                            mesh=mesh)


@pytest.mark.parametrize("permute", ["striped", True], ids=["striped", "chunks"])
@pytest.mark.parametrize("variant", [dict(is_causal=False), dict(local_window_size=(9, 3)),
                                     dict(is_causal=False, local_window_size=5)],
                         ids=["bidirectional", "window", "bidirectional-window"])
def test_variants_sharded_equal_single_device(variant, permute, fake_mesh, mesh_device_count):
    """Bidirectional and windowed attention under context parallelism with both permutations
    (and data parallelism): outputs and gradients equal one device's."""
    devices = min(mesh_device_count, 8)
    mesh = fake_mesh((2, devices // 2), ("data", "context"))
    batch = packed_batch(13, batch=2, kv_len=96, num_heads=4, num_kv_heads=2, head_dim=16,
                         num_docs=(2, 4), pad_tokens=(0, 9), dtype="float32")
    qp, qs, kp, ks = (jnp.asarray(a) for a in batch.layout.arrays)

    def single_fn(q, k, v):
        return flash_attention(q, k, v, qp, qs, kp, ks, scale=0.3, fwd_params=P16,
                               bwd_params=P16, **variant)

    def sharded(q, k, v):
        with attention_specs(("data", "context", None, None), ("data", None, None, None)):
            q, k, v, qp_, qs_ = permute_tokens_context_parallelism((q, k, v, qp, qs),
                                                                   strategy=permute, mesh=mesh)
            masks = create_attention_mask(qp_, qs_, kp, ks, fwd_params=P16, bwd_params=P16,
                                          calc_bwd_mask=True, mesh=mesh, **variant)
            out = flash_attention(q, k, v, qp_, qs_, kp, ks, mask=masks, scale=0.3,
                                  fwd_params=P16, bwd_params=P16, mesh=mesh,
                                  permute_tokens_for_load_balance=permute, **variant)
            return unpermute_tokens_context_parallelism(out, strategy=permute, mesh=mesh)

    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    want, want_vjp = jax.vjp(single_fn, q, k, v)
    got, got_vjp = jax.vjp(jax.jit(sharded), q, k, v)
    cot = jnp.asarray(np.random.default_rng(2).standard_normal(want.shape), want.dtype)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-5, rtol=2e-5)
    for name, a, b in zip("qkv", got_vjp(jax.device_put(cot, got.sharding)), want_vjp(cot)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=5e-5, rtol=5e-5,
                                   err_msg=f"d{name}")


@pytest.mark.parametrize("permute", ["striped", True], ids=["striped", "chunks"])
def test_sinks_and_residual_sharded_equal_single_device(permute, fake_mesh, mesh_device_count):
    """Sinks, soft-capping and the returned logsumexp under data x context x tensor parallelism:
    output, logsumexp and the gradients of q, k, v and the sinks (summed over the data and
    context shards by shard_map's transpose) equal one device's."""
    devices = min(mesh_device_count, 8)
    shape = (2, 2, 2) if devices >= 8 else (1, max(1, devices // 2), 2)
    mesh = fake_mesh(shape, ("data", "context", "model"))
    batch = packed_batch(17, batch=2, kv_len=96, num_heads=4, num_kv_heads=2, head_dim=16,
                         num_docs=(2, 4), pad_tokens=(0, 9), dtype="float32")
    qp, qs, kp, ks = (jnp.asarray(a) for a in batch.layout.arrays)
    sinks = jnp.asarray([0.5, -1.0, 2.0, -jnp.inf], jnp.float32)
    options = dict(scale=0.3, fwd_params=P16, bwd_params=P16, logits_soft_cap=4.0,
                   return_residual=True)

    def single_fn(q, k, v, sinks):
        return flash_attention(q, k, v, qp, qs, kp, ks, sinks=sinks, **options)

    def sharded(q, k, v, sinks):
        with attention_specs(("data", "context", "model", None), ("data", None, "model", None)):
            q, k, v, qp_, qs_ = permute_tokens_context_parallelism((q, k, v, qp, qs),
                                                                   strategy=permute, mesh=mesh)
            out, lse = flash_attention(q, k, v, qp_, qs_, kp, ks, mesh=mesh, sinks=sinks,
                                       permute_tokens_for_load_balance=permute, **options)
            return unpermute_tokens_context_parallelism((out, lse), strategy=permute, mesh=mesh)

    args = (*(jnp.asarray(x) for x in (batch.query, batch.key, batch.value)), sinks)
    want, want_vjp = jax.vjp(single_fn, *args)
    got, got_vjp = jax.vjp(jax.jit(sharded), *args)
    rng = np.random.default_rng(3)
    cots = tuple(jnp.asarray(rng.standard_normal(w.shape), w.dtype) for w in want)
    for name, a, b in zip(("out", "lse"), got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=2e-5,
                                   err_msg=name)
    got_grads = got_vjp(tuple(jax.device_put(c, g.sharding) for c, g in zip(cots, got)))
    for name, a, b in zip(("dq", "dk", "dv", "dsinks"), got_grads, want_vjp(cots)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=5e-5, rtol=5e-5,
                                   err_msg=name)


def test_kvax_nn_runs_sharded_under_attention_specs(fake_mesh, mesh_device_count):
    """kvax.nn.dot_product_attention inside attention_specs runs through kvax-dist (sharded
    output) and equals the single-device call, logsumexp included."""
    import kvax.nn

    devices = min(mesh_device_count, 8)
    mesh = fake_mesh((2, devices // 2), ("data", "context"))
    batch = packed_batch(19, batch=2, kv_len=64, num_heads=4, num_kv_heads=2, head_dim=16,
                         num_docs=(2, 3), pad_tokens=(0, 5), dtype="float32")
    _, qs, _, _ = (jnp.asarray(a) for a in batch.layout.arrays)
    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))

    def call(q, k, v):
        return kvax.nn.dot_product_attention(q, k, v, is_causal=True, query_segment_ids=qs,
                                             return_residual=True)

    want = call(q, k, v)
    with jax.set_mesh(mesh), attention_specs(("data", "context", None, None),
                                             ("data", None, None, None)):
        got = jax.jit(call)(q, k, v)
    assert "context" in str(got[0].sharding.spec)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("permute,deterministic,dkdv_keys,head_dim", [
    (False, True, 64, 128), ("striped", True, 64, 128), ("striped", True, 128, 128),
    ("striped", False, 128, 128), ("striped", True, 128, 256), (False, False, 64, 256)],
    ids=["in-order", "striped", "striped-fixed-point", "striped-nondeterministic",
         "striped-fixed-point-256", "in-order-nondeterministic-256"])
def test_hopper_tiles_under_context_parallelism(permute, deterministic, dkdv_keys, head_dim,
                                               fake_mesh, mesh_device_count):
    """bf16, 128x128 forward blocks: on Hopper GPUs each shard's "auto" runs the Mosaic forward.
    At head dim 128 with 128x64 dK/dV blocks the Mosaic backward runs, its dQ in fixed point or
    (deterministic=False) float32; 64x64 blocks keep the Triton backward. At head dim 256 both
    take the Mosaic backward's channel split (elsewhere the kernels or the pure-JAX path).
    Checked against kvax-testing's float64 reference with the baseline-tied tolerance, NaN and
    Inf in the padding."""
    from kvax_testing import check_attention

    devices = min(mesh_device_count, 8)
    if devices < 2 or devices % 2:
        pytest.skip(f"context parallelism here needs an even number of devices, have {devices}")
    fwd = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)
    bwd = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=dkdv_keys)
    batch = packed_batch(31 + bool(permute), batch=1, kv_len=256 * devices, num_heads=4,
                         num_kv_heads=2, head_dim=head_dim, num_docs=(3, 7),
                         pad_tokens=(40, 90), dtype="bfloat16", poison_padding=True)
    mesh = fake_mesh((devices,), ("context",))

    def sharded(q, k, v, qp, qs, kp, ks):
        with mesh, attention_specs(query_specs=(None, "context", None, None),
                                   kv_specs=(None, None, None, None)):
            if permute:
                q, k, v, qp, qs = permute_tokens_context_parallelism((q, k, v, qp, qs),
                                                                     strategy=permute)
            masks = create_attention_mask(qp, qs, kp, ks, fwd_params=fwd, bwd_params=bwd,
                                          calc_bwd_mask=True)
            out = flash_attention(q, k, v, qp, qs, kp, ks, mask=masks, scale=head_dim ** -0.5,
                                  fwd_params=fwd, bwd_params=bwd, deterministic=deterministic,
                                  permute_tokens_for_load_balance=permute)
            return unpermute_tokens_context_parallelism(out, strategy=permute) if permute else out

    report = check_attention(jax.jit(sharded), batch, scale=head_dim ** -0.5, seed=3)
    assert report.ok, str(report)


def test_backward_lowered_ahead_inside_the_mesh(fake_mesh, mesh_device_count, monkeypatch):
    """The Triton backend lowers each call's backward ahead in a thread, from the residuals'
    shapes (kvax.triton_launch.lower_ahead); under context parallelism those are the shards'.
    The thread's lowering succeeds from inside the sharded call and the gradients equal one
    device's. On GPUs "auto" runs Triton's kernels here (16x16 blocks, float32); on CPU the
    pure-JAX backend stands in for them."""
    from kvax._src.attention import backends, triton_launch

    devices = min(mesh_device_count, 8)
    if devices < 2 or devices % 2:
        pytest.skip(f"sharded layouts need an even number of devices, have {devices}")
    if jax.default_backend() == "cpu":
        monkeypatch.setattr(backends.XlaBackend, "lowers_backward_ahead", True)
    monkeypatch.setattr(triton_launch, "_ahead", set())
    monkeypatch.setattr(triton_launch, "_threads", [])
    monkeypatch.setattr(triton_launch, "ahead_errors", [])
    monkeypatch.delenv("KVAX_PREWARM", raising=False)
    batch = packed_batch(21, batch=2, kv_len=96, num_heads=4, num_kv_heads=2, head_dim=16,
                         num_docs=3, pad_tokens=9, dtype="float32")
    assert_same(batch, run("dp-x-cp", batch, "striped", fake_mesh=fake_mesh, devices=devices))
    for thread in triton_launch._threads:
        thread.join()
    # one device's backward (the reference) and the shards' (another query length); on GPUs
    # each Triton launch is also built ahead (build_ahead: a description of the launch as text)
    backward = [about for about in triton_launch._ahead if isinstance(about, tuple)]
    assert [about[0] for about in backward] == ["backward", "backward"]
    assert triton_launch.ahead_errors == []
