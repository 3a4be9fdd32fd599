"""The Hopper backend ("mosaic": the Pallas Mosaic GPU forward and backward, its dQ summed in
fixed point by default or in float32 with deterministic=False, by channel halves at head dim
256; the Triton backward for the shapes the Mosaic one does not take).

On any machine: the kernels lower for CUDA (Mosaic GPU's own passes run here, so kernel errors
show in CI) for every variant, dtype, head dim and tile choice, and the backend refuses what it
cannot run. On a Hopper GPU: outputs, logsumexp and gradients against kvax-testing's float64
reference with the baseline-tied tolerance, NaN and Inf in the padding, and "auto" choosing it."""

import contextlib
import dataclasses
import re

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np
import pytest

from kvax._src.attention import api, backends, mosaic_bwd, mosaic_fwd
from kvax._src.attention.mask import build_masks
from kvax._src.attention.variant import MaskVariant
from kvax._src.attention.vjp import Options, _attention
from kvax._src.attention.vjp import attention as vjp_attention
from kvax._src.config import PADDING_SEGMENT_ID, current_device_kind, is_hopper
from kvax.ops import create_attention_mask, flash_attention
from kvax.utils import FlashAttentionParamsConfig
from kvax_testing import (assert_one_key_rows_exact, check_attention, mask_terms, packed_batch,
                          soft_cap)

FWD = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128, num_warps=8,
                                 num_stages=3)
BWD = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=64, num_warps=4, num_stages=2)
BWD128 = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=128, num_warps=8,
                                    num_stages=3)  # the Hopper default; the Mosaic backward's


def _one_document(t, s):
    """(q_pos, q_seg, kv_pos, kv_seg) of one document of t queries and s keys."""
    return (jnp.arange(t, dtype=jnp.int32)[None], jnp.zeros((1, t), jnp.int32),
            jnp.arange(s, dtype=jnp.int32)[None], jnp.zeros((1, s), jnp.int32))


def _lower(h, dtype, variant, config, *, cap=None, sinks=False, t=1000, s=1000):
    q = jnp.zeros((1, t, 4, h), dtype)
    k = jnp.zeros((1, s, 2, h), dtype)
    q_pos, q_seg, kv_pos, kv_seg = _one_document(t, s)
    params = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)
    (mask,) = build_masks(q_pos, q_seg, kv_pos, kv_seg, fwd_params=params, bwd_params=None,
                          skip_pad_tokens=True, variant=variant)
    sink_logits = jnp.zeros((4,), jnp.float32) if sinks else None

    def fn(q, k, v, scale):
        return mosaic_fwd.forward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, mask,
                                  variant=variant, pad_id=PADDING_SEGMENT_ID, config=config,
                                  logits_soft_cap=cap, sinks=sink_logits)

    return jax.jit(fn).trace(q, k, k, jnp.float32(0.1)).lower(lowering_platforms=("cuda",))


LOWERINGS = [
    (128, "bfloat16", MaskVariant(), None, {}),
    (128, "bfloat16", MaskVariant(), mosaic_fwd.MosaicConfig(layout_by_tma=True), {}),
    (64, "float16", MaskVariant(False), mosaic_fwd.MosaicConfig(block_kv=64, stages=3), {}),
    (256, "bfloat16", MaskVariant(True, (100, 0)), None, dict(sinks=True)),
    (128, "bfloat16", MaskVariant(False, (9, 4)), None, dict(cap=30.0, sinks=True, t=1, s=300)),
    (128, "bfloat16", MaskVariant(), mosaic_fwd.MosaicConfig(overlap=True), {}),
    # persistent (the default where it applies) with the tiles' layout by TMA, and without a cap
    (128, "bfloat16", MaskVariant(), mosaic_fwd.MosaicConfig(persistent=True,
                                                             layout_by_tma=True), {}),
    (64, "float16", MaskVariant(False, (9, 4)), mosaic_fwd.MosaicConfig(persistent=True),
     dict(cap=30.0, sinks=True)),
    (64, "float16", MaskVariant(False, (9, 4)),
     mosaic_fwd.MosaicConfig(overlap=True, layout_by_tma=True), dict(cap=30.0, sinks=True)),
    # two query heads per program: chosen for 40 queries, asked for on a document's chunks
    (64, "float16", MaskVariant(), None, dict(t=40)),
    (128, "bfloat16", MaskVariant(), mosaic_fwd.MosaicConfig(pack=2), {}),
    (128, "bfloat16", MaskVariant(False), mosaic_fwd.MosaicConfig(pack=2, overlap=True),
     dict(cap=30.0)),
    # the keys split: chosen for 16 queries against 4096 keys, asked for with packed heads
    (128, "bfloat16", MaskVariant(), None, dict(t=16, s=4096)),
    (64, "float16", MaskVariant(False, (9, 4)), mosaic_fwd.MosaicConfig(pack=2, splits=3),
     dict(cap=30.0, t=300, s=2000)),
    # the rank rule asked for (by default where the mask's schedule brings its layouts)
    (128, "bfloat16", MaskVariant(), mosaic_fwd.MosaicConfig(persistent=True, rank_rule=True),
     {}),
    (64, "float16", MaskVariant(False, (9, 4)),
     mosaic_fwd.MosaicConfig(layout_by_tma=True, rank_rule=True), dict(cap=30.0, sinks=True)),
    (128, "bfloat16", MaskVariant(True, (100, 0)),
     mosaic_fwd.MosaicConfig(pack=2, splits=3, rank_rule=True), dict(t=40, s=2000)),
]


@pytest.mark.parametrize("h,dtype,variant,config,extra", LOWERINGS)
def test_forward_lowers_for_cuda(h, dtype, variant, config, extra):
    """One Mosaic GPU kernel per call, and its shared memory fits an H100 (the lowering checks
    the budget and raises past it)."""
    text = _lower(h, jnp.dtype(dtype), variant, config, **extra).as_text()
    assert re.findall(r"stablehlo.custom_call @(\w+)", text) == ["mosaic_gpu_v2"]
    _assert_hardware_tanh(text, extra)


@pytest.mark.parametrize("h,t,ranks", [(128, 1000, True), (256, 1000, False), (128, 40, False)],
                         ids=["fits", "head-dim-256", "packed"])
def test_forward_takes_the_rank_rule_where_the_mask_brings_its_layouts(h, t, ranks):
    """MosaicConfig.rank_rule=None, the default: the rank rule where the mask's schedule fits
    the call (its rank layouts go into the kernel: queries' (lo, hi, id), [B, 3, T']), the ids
    and positions where the call builds its own layouts (head dim 256's 64-key tiles, packed
    heads for 40 queries: [B, 2, T'])."""
    q_pos, q_seg, kv_pos, kv_seg = _one_document(t, 1000)
    (mask,) = build_masks(q_pos, q_seg, kv_pos, kv_seg, fwd_params=FWD, bwd_params=None,
                          skip_pad_tokens=True, schedule=True)
    assert mask.schedule is not None and mask.schedule.rank_rule
    q = jnp.zeros((1, t, 4, h), jnp.bfloat16)
    k = jnp.zeros((1, 1000, 2, h), jnp.bfloat16)

    def fn(q, k, v):
        return mosaic_fwd.forward(q, k, v, 0.1, q_pos, q_seg, kv_pos, kv_seg, mask,
                                  variant=MaskVariant(), pad_id=PADDING_SEGMENT_ID)

    text = jax.jit(fn).trace(q, k, k).lower(lowering_platforms=("cuda",)).as_text()
    (call,) = [line for line in text.splitlines() if "custom_call @mosaic_gpu" in line]
    query_layouts = re.findall(r"tensor<1x([23])x\d+xi32>", call)
    assert query_layouts[0] == ("3" if ranks else "2"), query_layouts


def _assert_hardware_tanh(text, extra):
    """A soft cap brings the hardware's tanh (approximate math), none without a cap."""
    found = set(re.findall(r"tanh[\w.]*", text))
    assert found == ({"tanh", "tanh.approx.f32"} if extra.get("cap") else set())


def test_tiles_follow_the_head_dim_and_the_mask():
    mask = build_masks(*(jnp.zeros((1, 256), jnp.int32),) * 4, fwd_params=FWD, bwd_params=None,
                       skip_pad_tokens=True)[0]
    assert mosaic_fwd.choose_config(mask, 128).block_kv == 128
    assert mosaic_fwd.choose_config(mask, 256).block_kv == 64  # two 128-key stages do not fit
    # query heads per program: only for fewer queries than a program's rows, never with sinks
    assert mosaic_fwd.choose_config(mask, 128, 4, False, 127).pack == 4
    assert mosaic_fwd.choose_config(mask, 128, 4, False, 128).pack == 1
    assert mosaic_fwd.choose_config(mask, 128, 4, True, 1).pack == 1
    assert mosaic_fwd.choose_config(mask, 128, 6, False, 1).pack == 2
    assert [mosaic_fwd.pack_heads(g) for g in (1, 2, 3, 4, 8, 12, 16)] == [1, 2, 1, 4, 8, 4, 8]
    assert mosaic_fwd.supported((128, 128)) is None
    assert mosaic_fwd.supported((256, 64)) is None
    assert "128x64" in mosaic_fwd.supported((64, 128))
    assert "128x64" in mosaic_fwd.supported((128, 32))
    # keys split where fewer queries than keys leave SMs idle (132 here: no GPU reports fewer)
    assert mosaic_fwd.device_sms() == 132

    def splits(b, n, t, s, sinks=False):
        return mosaic_fwd.choose_config(mask, 128, 4, sinks, t, batch=b, heads=n, keys=s).splits

    assert splits(1, 32, 1, 65536) == 16  # 8 programs of 4 heads: 128 of 512 tiles / 16
    assert splits(8, 32, 1, 16384) == 2  # 64 programs
    assert splits(1, 32, 128, 65536) == 4  # 32 programs, one head each
    assert splits(8, 32, 128, 16384) == 1  # 256 programs fill the SMs
    assert splits(1, 32, 1, 65536, sinks=True) == 1
    assert splits(1, 8, 1, 768) == 1  # 6 key tiles: too few to share
    assert splits(1, 8, 2048, 2048) == 1  # as many queries as keys (training): never


def test_persistent_where_one_head_per_program_and_no_splits():
    """choose_config makes the forward persistent unless it packs heads or splits keys, or the
    head dim needs two Q tiles per consumer beyond shared memory."""
    mask = build_masks(*(jnp.zeros((1, 4096), jnp.int32),) * 4, fwd_params=FWD, bwd_params=None,
                       skip_pad_tokens=True)[0]

    def chosen(h, t, s=4096, group=4):
        return mosaic_fwd.choose_config(mask, h, group, False, t, batch=1, heads=32, keys=s)

    assert chosen(128, 4096).persistent and chosen(64, 4096).persistent
    assert not chosen(256, 4096).persistent
    assert chosen(128, 16).pack > 1 and not chosen(128, 16).persistent
    assert chosen(128, 128, 65536).splits > 1 and not chosen(128, 128, 65536).persistent
    assert not mosaic_fwd.MosaicConfig().persistent  # asked for explicitly otherwise


def test_persistent_work_lists_the_live_programs_in_the_grids_order():
    """The persistent forward's work: the code of each row block that stores rows once, in the
    plain grid's order (row blocks from the last, batch row after batch row), then -1 for the
    blocks that store nothing; program w, its block's head w % heads, so the programs run in the
    grid's order (a row block's heads, then the next block)."""
    rng = np.random.default_rng(5)
    b, p, heads = 2, 7, 3
    own_start = rng.integers(0, 50, (b, p))
    own_end = own_start + rng.integers(0, 2, (b, p)) * rng.integers(1, 50, (b, p))
    items = np.zeros((b, p, 7), np.int32)
    items[..., 1], items[..., 2] = own_start, own_end
    work = np.asarray(mosaic_fwd.persistent_work(jnp.asarray(items)))
    assert work.shape == (b, p)
    work = work.reshape(-1)
    want = [(batch, head, item) for batch in range(b) for item in range(p - 1, -1, -1)
            for head in range(heads) if own_end[batch, item] > own_start[batch, item]]
    count = int(np.sum(work >= 0))
    assert 0 < count < b * p and np.all(work[count:] == -1)
    blocks = [tuple(int(x) for x in mosaic_fwd.work_block(jnp.int32(code), p))
              for code in work[:count]]
    got = [(blocks[w // heads][0], w % heads, blocks[w // heads][1]) for w in range(count * heads)]
    assert got == want


@pytest.mark.parametrize("scanned", [False, True], ids=["unrolled", "scanned"])
def test_forward_tables_are_built_once_for_every_layer(scanned):
    """Where the mask carries no schedule, the Mosaic forward builds its programs' table, work
    list and logsumexp slots from it in XLA before its kernel. In a model every layer builds them
    from the same mask in one jitted step: XLA merges them (unrolled layers: four layers compile
    to one layer's scatters) or takes them out of the loop (lax.scan: no scatter left in the
    loop's body)."""
    batch = packed_batch(9, batch=1, kv_len=1500, num_heads=2, num_kv_heads=1)
    lay = batch.layout
    params = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)
    config = mosaic_fwd.MosaicConfig(block_q=64, block_kv=128, stages=2, persistent=True)

    def layer(mask, x):
        items = mosaic_fwd.programs(mask, config, 1500, 1500, doc_runs=mask.doc_runs)
        work = mosaic_fwd.persistent_work(items)
        slots = mosaic_fwd.lse_slots(items, 1500, config.tokens)
        return x * 1.5 + jnp.sum(work) + jnp.sum(slots)

    def model(layers, pos, seg, x):
        (mask,) = create_attention_mask(pos, seg, pos, seg, fwd_params=params)
        if scanned:
            return lax.scan(lambda x, _: (layer(mask, x), None), x, None, length=layers)[0]
        for _ in range(layers):
            x = layer(mask, x)
        return x

    def compiled(layers):
        return jax.jit(model, static_argnums=0).lower(
            layers, lay.query_positions, lay.query_segment_ids, jnp.float32(1)).compile().as_text()

    def scatters(text):
        return len(re.findall(r"\bscatter\(", text))

    one, four = compiled(1), compiled(4)
    assert scatters(one) > 0
    if not scanned:
        assert scatters(four) == scatters(one)
    else:  # the while loops' bodies (the scan's, the mask's searchsorted), and what they call
        bodies = re.findall(r"\bwhile\(.*?body=%?([\w.\-]+)", four)
        computations = dict(re.findall(r"^%?([\w.\-]+) .*?{\n(.*?)^}", four, re.M | re.S))
        seen, todo = set(), list(bodies)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += re.findall(r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)",
                               computations[name])
        assert not any(scatters(computations[name]) for name in seen), sorted(seen)


@pytest.mark.parametrize("is_causal", [True, False], ids=["causal", "bidirectional"])
def test_mask_carries_the_forward_schedule(is_causal, monkeypatch):
    """On a Hopper GPU (here pretended), a forward mask whose blocks take the default tiles
    (128x128 here) carries the forward's tables (Schedule: programs, the persistent work list
    and, with the document chunks, the logsumexp's slots) and the kernel's copies of the layout
    (the rank rule's), equal to what a call would build;
    other blocks and the backward's masks carry none. It goes through jit as part of the mask.
    Elsewhere no mask carries one (nothing would read it)."""
    batch = packed_batch(4, batch=2, kv_len=1300, num_heads=2, num_kv_heads=1)
    lay = batch.layout
    p128 = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)
    if not is_hopper(current_device_kind()):
        (plain,) = create_attention_mask(*lay.arrays, fwd_params=p128)
        assert plain.schedule is None
    monkeypatch.setattr(api, "wants_schedule", lambda: True)
    masks = jax.jit(lambda *a: create_attention_mask(
        *a, fwd_params=p128, bwd_params=BWD128, calc_bwd_mask=True, is_causal=is_causal))(
        *lay.arrays)
    fwd, sched = masks[0], masks[0].schedule
    assert masks[1].schedule is None and masks[2].schedule is None
    config = mosaic_fwd.MosaicConfig(persistent=True, rank_rule=True)
    doc_runs = fwd.doc_runs if is_causal else None
    assert (doc_runs is not None) == is_causal
    items = mosaic_fwd.programs(fwd, config, 1300, 1300, doc_runs=doc_runs)
    np.testing.assert_array_equal(sched.items, items)
    np.testing.assert_array_equal(sched.work, mosaic_fwd.persistent_work(items))
    assert (sched.slots is None) == (not is_causal)
    if is_causal:
        np.testing.assert_array_equal(sched.slots, mosaic_fwd.lse_slots(items, 1300, 128))
    layouts = mosaic_fwd.kernel_layouts(*lay.arrays, pad_id=PADDING_SEGMENT_ID, config=config,
                                        variant=fwd.variant)
    assert len(sched.layouts) == len(layouts) == 4
    for got, want in zip(sched.layouts, layouts):
        assert got.shape == (2, 1) + want.shape[1:]
        np.testing.assert_array_equal(got[:, 0], want)
    assert sched.fits(config, doc_runs) and not sched.fits(config, None if is_causal else fwd)
    assert not sched.fits(dataclasses.replace(config, block_kv=64), doc_runs)
    assert sched.rank_rule and not sched.fits(dataclasses.replace(config, rank_rule=False),
                                              doc_runs)
    (small,) = create_attention_mask(*lay.arrays, fwd_params=FlashAttentionParamsConfig(
        query_block_size=64, kv_block_size=64))
    assert small.schedule is None


def test_tables_no_backend_reads_cost_nothing_inside_jit(monkeypatch):
    """A mask built on a Hopper GPU carries the Hopper forward's tables whichever backend the
    call then takes. Inside a jitted step (where masks belong) XLA drops them when the backend
    does not read them: here the pure-JAX backend, standing in for a call that forces Triton
    (which cannot compile on CPU), compiles to the same program with the tables or without.
    Built alone, the mask with its tables is a larger program (what this test would catch if
    the tables were not there to drop)."""
    batch = packed_batch(3, batch=1, kv_len=512, num_heads=4, num_kv_heads=2, head_dim=64,
                         dtype="bfloat16")
    lay = [jnp.asarray(a) for a in batch.layout.arrays]
    qkv = [jnp.asarray(x) for x in (batch.query, batch.key, batch.value)]
    p128 = FlashAttentionParamsConfig(query_block_size=128, kv_block_size=128)

    def step(q, k, v, *lay):
        mask = create_attention_mask(*lay, fwd_params=p128)
        return flash_attention(q, k, v, *lay, mask=mask, fwd_params=p128, backend="xla")

    def instructions(fn, *args, tables):
        monkeypatch.setattr(api, "wants_schedule", lambda: tables)
        jax.clear_caches()
        text = jax.jit(fn).lower(*args).compile().as_text()
        return len(re.findall(r"^\s+\S+ = ", text, re.MULTILINE))

    assert instructions(step, *qkv, *lay, tables=True) == instructions(step, *qkv, *lay,
                                                                        tables=False)

    def mask_alone(*lay):
        return create_attention_mask(*lay, fwd_params=p128)

    assert (instructions(mask_alone, *lay, tables=True)
            > instructions(mask_alone, *lay, tables=False))


def test_a_call_with_a_prebuilt_mask_builds_no_tables():
    """The forward reads the mask's schedule: lowered with the mask as an argument (as a model's
    step or the benchmark passes it), it has no scan, no scatter, and no padding or windowed
    maximum of the layout before its kernel; the same mask without its schedule builds them
    (what this test would catch)."""
    batch = packed_batch(6, batch=1, kv_len=2000, num_heads=4, num_kv_heads=2, head_dim=128,
                         dtype="bfloat16")
    lay = batch.layout
    (mask,) = build_masks(*lay.arrays, fwd_params=FWD, bwd_params=None, skip_pad_tokens=True,
                          schedule=True)
    q, k = jnp.asarray(batch.query), jnp.asarray(batch.key)

    def lowered(mask):
        def fn(q, k, v, mask, *layout):
            return mosaic_fwd.forward(q, k, v, 0.1, *layout, mask, variant=MaskVariant(),
                                      pad_id=PADDING_SEGMENT_ID, config=mosaic_fwd.choose_config(
                                          mask, 128, 2))
        text = jax.jit(fn).trace(q, k, k, mask, *lay.arrays).lower(
            lowering_platforms=("cuda",)).as_text()
        return (len(re.findall(r"stablehlo\.scatter|chlo\.scan|@cumsum", text)),
                len(re.findall(r"stablehlo\.pad|stablehlo\.reduce_window", text)))

    assert mask.schedule is not None and mosaic_fwd.choose_config(mask, 128, 2).persistent
    assert lowered(mask) == (0, 0)
    tables, layouts = lowered(dataclasses.replace(mask, schedule=None))
    assert tables > 0 and layouts > 0


def test_split_count_fills_one_wave_with_runs_of_a_few_tiles():
    assert mosaic_fwd.split_count(200, 1000, 132) == 1
    assert mosaic_fwd.split_count(8, 1000, 132) == 16
    assert mosaic_fwd.split_count(8, 20, 132) == 5  # at least MIN_SPLIT_TILES each
    assert mosaic_fwd.split_count(66, 1000, 132) == 2
    assert mosaic_fwd.split_count(67, 1000, 132) == 1


def test_split_keys_partition_each_programs_tiles():
    """Each program's key tiles, in order, once across its splits, each tile keeping whether
    it is fully visible; the rows' and stores' columns unchanged."""
    rng = np.random.default_rng(3)
    steps = rng.integers(0, 40, (2, 6))
    f_lo = rng.integers(0, 40, (2, 6)) % (steps + 1)
    f_hi = f_lo + rng.integers(0, 40, (2, 6)) % (steps - f_lo + 1)
    k0 = rng.integers(0, 100, (2, 6)) * 16
    rows = rng.integers(0, 50, (2, 6, 3))
    items = np.concatenate([rows, np.stack([k0, steps, f_lo, f_hi], -1)], -1).astype(np.int32)
    for splits in (1, 2, 3, 7):
        out = np.asarray(mosaic_fwd.split_keys(jnp.asarray(items), splits, 128))
        assert out.shape == (2, 6 * splits, 8)
        for b, p in np.ndindex(2, 6):
            runs = out[b, p * splits:(p + 1) * splits]
            np.testing.assert_array_equal(runs[:, 7], np.arange(splits))
            np.testing.assert_array_equal(runs[:, :3],
                                          np.broadcast_to(items[b, p, :3], (splits, 3)))
            tiles, full = [], []
            for first8, count, lo, hi in runs[:, [3, 4, 5, 6]]:
                assert 0 <= lo <= hi <= count
                start = (first8 - k0[b, p]) // 16  # 128-key tiles, in units of 8 keys
                tiles += list(range(start, start + count))
                full += [lo <= i < hi for i in range(count)]
            assert tiles == list(range(steps[b, p]))
            assert full == [f_lo[b, p] <= i < f_hi[b, p] for i in range(steps[b, p])]


def test_combine_splits_is_attention_over_all_keys():
    """Split outputs weighed by their logsumexps: the output and logsumexp of all their keys
    together; a split that saw nothing weighs 0, a row no split saw gives 0 and -inf."""
    rng = np.random.default_rng(4)
    s, b, t, n, h, keys = 3, 2, 5, 2, 8, 30
    logits = rng.normal(0, 3, (s, b, n, t, keys))
    values = rng.normal(0, 1, (s, b, keys, n, h))
    seen = np.ones((s, b, n, t, keys), bool)
    seen[1] = False  # a split with no visible key
    seen[:, 0, 1, 2] = False  # a row that sees nothing
    logits = np.where(seen, logits, -np.inf)
    lse = np.logaddexp.reduce(logits, axis=-1)
    with np.errstate(invalid="ignore"):
        p = np.nan_to_num(np.exp(logits - lse[..., None]))
    outs = np.einsum("sbntk,sbknh->sbtnh", p, values)
    got, got_lse = mosaic_fwd.combine_splits(jnp.asarray(outs, jnp.float32),
                                             jnp.asarray(lse, jnp.float32))
    all_logits = np.moveaxis(logits, 0, -2).reshape(b, n, t, s * keys)
    all_values = np.moveaxis(values, 0, 1).reshape(b, s * keys, n, h)
    want_lse = np.logaddexp.reduce(all_logits, axis=-1)
    with np.errstate(invalid="ignore"):
        weights = np.nan_to_num(np.exp(all_logits - want_lse[..., None]))
    want = np.einsum("bntk,bknh->btnh", weights, all_values)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got_lse), want_lse, rtol=1e-5)
    assert np.all(np.asarray(got)[0, 2, 1] == 0) and np.asarray(got_lse)[0, 1, 2] == -np.inf


def test_packed_heads_refuse_what_they_cannot_hold():
    """Packing more heads than a kv group has, or any with sinks (read per head), key splits
    with sinks (each split would add the sink) or fewer than one, and a persistent forward with
    packed heads or the overlapped order are refused before anything is built."""
    q = jnp.zeros((1, 40, 4, 128), jnp.bfloat16)
    k = jnp.zeros((1, 300, 2, 128), jnp.bfloat16)
    q_pos, q_seg, kv_pos, kv_seg = _one_document(40, 300)
    (mask,) = build_masks(q_pos, q_seg, kv_pos, kv_seg, fwd_params=FWD, bwd_params=None,
                          skip_pad_tokens=True)
    for config, sinks, what in [
            (mosaic_fwd.MosaicConfig(pack=4), None, "pack=4"),
            (mosaic_fwd.MosaicConfig(pack=2), jnp.zeros((4,), jnp.float32), "pack=2"),
            (mosaic_fwd.MosaicConfig(splits=2), jnp.zeros((4,), jnp.float32), "splits=2"),
            (mosaic_fwd.MosaicConfig(splits=0), None, "splits=0"),
            (mosaic_fwd.MosaicConfig(pack=2, persistent=True), None, "persistent"),
            (mosaic_fwd.MosaicConfig(overlap=True, persistent=True), None, "overlap=True")]:
        with pytest.raises(NotImplementedError, match=what):
            mosaic_fwd.forward(q, k, k, 0.1, q_pos, q_seg, kv_pos, kv_seg, mask,
                               variant=MaskVariant(), pad_id=PADDING_SEGMENT_ID, config=config,
                               sinks=sinks)


def test_backend_refuses_what_it_cannot_run(monkeypatch):
    """Explicitly asked for, it says why; "auto" falls through past it (here to xla)."""
    backend = backends.get("mosaic")
    q = jnp.zeros((1, 8, 2, 128), jnp.bfloat16)
    with pytest.raises(NotImplementedError, match="mosaic"):
        backend.check(q, q, q, platform="cpu")
    with pytest.raises(NotImplementedError, match="multiples of 128x64"):
        backend.check_call(fwd_params=FlashAttentionParamsConfig(query_block_size=64))
    assert backends.resolve("auto", q, q, q, fwd_params=FWD) == "xla"
    monkeypatch.setattr(backends, "_platform", lambda: "gpu")
    monkeypatch.setattr("kvax._src.config.current_device_kind", lambda: "NVIDIA H100 80GB HBM3")
    backend.check(q, q, q, platform="gpu")  # the arrays alone pass
    for bad, why in [(q.astype(jnp.float32), "bfloat16 or float16"),
                     (jnp.zeros((1, 8, 2, 96), jnp.bfloat16), "head dims"),
                     (jax.ShapeDtypeStruct((1, 128 * 65536, 2, 128), jnp.bfloat16), "65535")]:
        with pytest.raises(NotImplementedError, match=why):
            backend.check(bad, bad, bad, platform="gpu")
    assert backends.names()[:3] == ("mosaic", "triton", "xla")


BACKWARD_LOWERINGS = [
    (128, "bfloat16", MaskVariant(), {}),
    (64, "float16", MaskVariant(False), {}),
    (128, "bfloat16", MaskVariant(False, (9, 4)), dict(cap=30.0, sinks=True, t=1, s=300)),
    (64, "bfloat16", MaskVariant(True, (100, 0)), dict(t=700, s=1300)),
]


def _training_step(h, dtype, variant, *, cap=None, sinks=False, t=1000, s=1000,
                   deterministic=False, schedule=False):
    """(the gradients of q, k, v through both Mosaic kernels, q, k) for one document, its
    logsumexp in the loss too; schedule: the forward mask brings its Schedule, as
    create_attention_mask's on a Hopper GPU."""
    q = jnp.zeros((1, t, 4, h), jnp.dtype(dtype))
    k = jnp.zeros((1, s, 2, h), jnp.dtype(dtype))
    layout = _one_document(t, s)
    masks = build_masks(*layout, fwd_params=FWD, bwd_params=BWD128, skip_pad_tokens=True,
                        variant=variant, schedule=schedule)
    opts = Options(sequential=False, backend="mosaic", fwd_params=FWD, bwd_params=BWD128,
                   variant=variant, logits_soft_cap=cap, deterministic=deterministic)
    sink_logits = jnp.zeros((4,), jnp.float32) if sinks else None

    def loss(q, k, v):
        out, lse = vjp_attention(opts, q, k, v, jnp.float32(0.1), sink_logits, *layout, masks)
        return jnp.sum(out.astype(jnp.float32)) + jnp.sum(jnp.where(jnp.isfinite(lse), lse, 0))

    return jax.grad(loss, argnums=(0, 1, 2)), q, k


@pytest.mark.parametrize("h,dtype,variant,extra", BACKWARD_LOWERINGS)
@pytest.mark.parametrize("deterministic", [True, False], ids=["fixed", "float"])
def test_backward_lowers_for_cuda(h, dtype, variant, extra, deterministic):
    """The whole step is two Mosaic GPU kernels (forward, backward), dQ summed in fixed point
    (the default) or float32, and the backward's shared memory fits."""
    step, q, k = _training_step(h, dtype, variant, deterministic=deterministic, **extra)
    text = jax.jit(step).trace(q, k, k).lower(lowering_platforms=("cuda",)).as_text()
    assert re.findall(r"stablehlo.custom_call @(\w+)", text) == ["mosaic_gpu_v2"] * 2
    _assert_hardware_tanh(text, extra)


def test_channel_split_backward_is_head_dim_256s():
    """BackwardConfig.channel_split is the API's config at head dim 256 and only there: it takes
    256 and only 256, 64-key dK/dV blocks, and not the rank rule; the other head dims keep the
    default split."""
    split = mosaic_bwd.channel_config()
    assert split.keys == 64 and split.stages == 2
    assert mosaic_bwd.chosen_config(256) == split
    for h in (64, 128):
        assert mosaic_bwd.chosen_config(h) == mosaic_bwd.BackwardConfig()
    assert mosaic_bwd.supported(256, (128, 64)) is None  # what the backends ask
    assert mosaic_bwd.supported(256, (64, 64)) is None
    assert "head dims" in mosaic_bwd.supported(128, (128, 64), config=split)
    assert "head dims" in mosaic_bwd.supported(256, (128, 64),
                                               config=mosaic_bwd.BackwardConfig())
    assert "multiples of 64x64" in mosaic_bwd.supported(256, (96, 64))
    q = jnp.zeros((1, 128, 2, 256), jnp.bfloat16)
    layout = _one_document(128, 128)
    (mask,) = build_masks(*layout, fwd_params=FWD, bwd_params=None, skip_pad_tokens=True)
    with pytest.raises(NotImplementedError, match="rank_rule"):
        mosaic_bwd.backward(q, q, q, 0.1, *layout, jnp.zeros((1, 2, 128)),
                            jnp.zeros((1, 2, 128)), q, mask, variant=MaskVariant(),
                            pad_id=PADDING_SEGMENT_ID,
                            config=dataclasses.replace(split, rank_rule=True))


@pytest.mark.parametrize("variant,extra,deterministic", [
    (MaskVariant(), {}, True),
    (MaskVariant(False, (9, 4)), dict(cap=30.0, t=1, s=300), False)], ids=["fixed", "float"])
def test_channel_split_backward_lowers_for_cuda(monkeypatch, variant, extra, deterministic):
    """Head dim 256 through both Mosaic kernels with the channel split: it lowers, its shared
    memory fits at two stages of Q and dO with dQ's shares in their bytes (about 225.5 KiB of
    227), and three stages would not."""
    step, q, k = _training_step(256, "bfloat16", variant, deterministic=deterministic, **extra)
    text = jax.jit(step).trace(q, k, k).lower(lowering_platforms=("cuda",)).as_text()
    assert re.findall(r"stablehlo.custom_call @(\w+)", text) == ["mosaic_gpu_v2"] * 2
    if deterministic:
        monkeypatch.setattr(mosaic_bwd, "chosen_config", lambda *_: dataclasses.replace(
            mosaic_bwd.channel_config(), stages=3))
        jax.clear_caches()  # the step's inner jit would reuse the two-stage trace
        step, q, k = _training_step(256, "bfloat16", variant, deterministic=deterministic,
                                    **extra)
        with pytest.raises(ValueError, match="exceeds available shared memory"):
            jax.jit(step).trace(q, k, k).lower(lowering_platforms=("cuda",))


@pytest.mark.parametrize("schedule,rule,ranks", [
    (True, True, (True, True)), (False, True, (False, True)), (True, False, (True, False)),
    (False, False, (False, False))], ids=["schedule", "built", "default", "default-none"])
def test_backward_rank_rule_reads_the_forward_masks_layouts(monkeypatch, schedule, rule, ranks):
    """BackwardConfig.rank_rule: the backward's masked steps test key ranks, with the layouts
    the forward mask's schedule brings (the forward's query layout, [B, 3, T'], goes into both
    kernels, and the step sorts nothing), or else built in the call (a sort per call); by
    default ids and positions ([B, 2, T']), whatever the forward reads."""
    monkeypatch.setattr(mosaic_bwd, "chosen_config",
                        lambda *_: mosaic_bwd.BackwardConfig(rank_rule=rule))
    jax.clear_caches()
    step, q, k = _training_step(128, "bfloat16", MaskVariant(False, (300, 20)), t=1000, s=1000,
                                schedule=schedule)
    text = jax.jit(step).trace(q, k, k).lower(lowering_platforms=("cuda",)).as_text()
    jax.clear_caches()
    calls = [line for line in text.splitlines() if "custom_call @mosaic_gpu" in line]
    assert len(calls) == 2  # the forward, then the backward
    got = tuple(re.findall(r"tensor<1x([23])x\d+xi32>", call)[0] == "3" for call in calls)
    assert got == ranks
    # the sort of keys and queries' bounds together (MaskVariant.intervals): 1000 + 2 x 1000
    assert ("1x3000xi32" in text) == (ranks[1] and not schedule)


def test_a_deep_step_traces_and_lowers_each_kernel_once(monkeypatch):
    """The Hopper kernels' first call is mostly their tracing, lowering and Mosaic GPU compile
    (seconds each). A model's step with many attention layers pays it once, not once a layer:
    through the public API ("auto" on a pretended H100), three unrolled layers trace the forward
    and the backward as often as one layer does, once each (the forward rule's kernel only, not
    also the non-differentiated forward's), and lower to one forward and one backward kernel,
    which every layer calls."""
    monkeypatch.setattr(backends, "_platform", lambda: "gpu")
    monkeypatch.setattr("kvax._src.config.current_device_kind", lambda: "NVIDIA H100 80GB HBM3")
    traced = {"forward": 0, "backward": 0}
    for module, name in ((mosaic_fwd, "forward"), (mosaic_bwd, "backward")):
        def counted(*args, _fn=getattr(module, name), _name=name, **kwargs):
            traced[_name] += 1
            return _fn(*args, **kwargs)
        monkeypatch.setattr(module, name, counted)
    batch = packed_batch(17, batch=1, kv_len=1000, num_heads=4, num_kv_heads=2, head_dim=64,
                         dtype="bfloat16")
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    q = jnp.asarray(batch.query)

    def lowered(layers, grad=True):
        jax.clear_caches()  # each count from a cold start, as a new process has
        traced.update(forward=0, backward=0)

        def loss(x):
            masks = create_attention_mask(*layout, fwd_params=FWD, bwd_params=BWD128,
                                          calc_bwd_mask=True)
            for _ in range(layers):
                x = flash_attention(x, x[:, :, :2], x[:, :, 2:], *layout, mask=masks,
                                    scale=0.125, fwd_params=FWD, bwd_params=BWD128)
            return jnp.sum(x.astype(jnp.float32))

        step = jax.jit(jax.grad(loss) if grad else loss)
        text = step.trace(q).lower(lowering_platforms=("cuda",)).as_text()
        return re.findall(r"stablehlo.custom_call @(\w+)", text), dict(traced)

    kernels_one, traced_one = lowered(1)
    kernels_three, traced_three = lowered(3)
    assert kernels_one == kernels_three == ["mosaic_gpu_v2"] * 2
    assert traced_three == traced_one == {"forward": 1, "backward": 1}, (traced_one, traced_three)
    kernels, traced_inference = lowered(3, grad=False)  # no gradient: the forward alone, once
    assert kernels == ["mosaic_gpu_v2"] and traced_inference == {"forward": 1, "backward": 0}


@pytest.mark.parametrize("bounds", [(0, 2, 5, 7), (0, 0, 3, 3), (1, 1, 1, 4), (2, 4, 4, 4),
                                    (0, 0, 0, 0), (3, 5, 9, 12)])
def test_masked_full_masked_runs_every_step_once_in_order(bounds):
    """[lo, lf) masked, [lf, uf) full, [uf, hi) masked, each step once and in that order, empty
    ranges included."""
    lo, lf, uf, hi = bounds

    def record(flag):
        def step(i, carry):
            seen, n = carry
            return seen.at[n].set(jnp.stack([i, jnp.int32(flag)])), n + 1
        return step

    seen, n = jax.jit(lambda *b: mosaic_fwd.masked_full_masked(
        *b, record(1), record(0), (jnp.full((16, 2), -1, jnp.int32), jnp.int32(0))))(
            *map(jnp.int32, bounds))
    expected = ([(i, 1) for i in range(lo, lf)] + [(i, 0) for i in range(lf, uf)]
                + [(i, 1) for i in range(uf, hi)])
    assert int(n) == len(expected)
    assert [tuple(r) for r in np.asarray(seen[:int(n)]).tolist()] == expected


def _products(fn, *args) -> int:
    """The tensor-core products (wgmma) in fn's jaxpr, kernels included."""
    return [e.primitive.name for e in _all_eqns(jax.make_jaxpr(fn)(*args).jaxpr)].count("wgmma_ref")


def test_forward_emits_its_step_once_masked_and_once_not():
    """Mosaic GPU's compile (LLVM and ptxas, inside XLA's compile) grows with the kernels' code,
    most of it the loop's step. The forward's step appears twice, with and without the element
    rule, though the masked steps run in two ranges (masked_full_masked): 2 x 2 products (QK^T
    and PV), and in the overlapped forward 2 more (the first QK^T and the last PV). Three loops
    in a row made them 3 x 2, and the forward's compile about 0.5 s longer on an H100. The
    backward keeps its masked step twice (mosaic_bwd.head_steps, faster so): 2 x 2 + 3 x 5 in a
    training step."""
    q, k = jnp.zeros((1, 1000, 4, 128), jnp.bfloat16), jnp.zeros((1, 1000, 2, 128), jnp.bfloat16)
    layout = _one_document(1000, 1000)
    (mask,) = build_masks(*layout, fwd_params=FWD, bwd_params=None, skip_pad_tokens=True,
                          variant=MaskVariant())
    for config, products in ((None, 2 * 2), (mosaic_fwd.MosaicConfig(overlap=True), 2 * 2 + 2)):
        assert _products(lambda q, k, v: mosaic_fwd.forward(
            q, k, v, jnp.float32(0.1), *layout, mask, variant=MaskVariant(),
            pad_id=PADDING_SEGMENT_ID, config=config), q, k, k) == products
    step, q, k = _training_step(128, "bfloat16", MaskVariant(), t=1000, s=1000)
    assert _products(step, q, k, k) == 2 * 2 + 3 * 5


def _backward_jaxpr(t: int, deterministic: bool = False):
    """The Mosaic backward's jaxpr for one document of t queries and 300 keys (4 query heads, 2
    kv heads, head dim 64), and {var: the equation producing it}."""
    s = 300
    q = jnp.zeros((1, t, 4, 64), jnp.bfloat16)
    k = jnp.zeros((1, s, 2, 64), jnp.bfloat16)
    layout = _one_document(t, s)
    *_, dkdv = build_masks(*layout, fwd_params=FWD, bwd_params=BWD128, skip_pad_tokens=True,
                           variant=MaskVariant())

    def backward(lse, delta):
        return mosaic_bwd.backward(q, k, k, jnp.float32(0.1), *layout, lse, delta, q, dkdv,
                                   variant=MaskVariant(), pad_id=PADDING_SEGMENT_ID,
                                   deterministic=deterministic)

    stats = jnp.zeros((1, 4, t), jnp.float32)
    jaxpr = jax.make_jaxpr(backward)(stats, stats).jaxpr
    return jaxpr, {var: eqn for eqn in jaxpr.eqns for var in eqn.outvars}


def test_backward_keeps_delta_out_of_the_stacking():
    """The kernel reads (logsumexp, delta) stacked; XLA fused delta's reduction into that stacking
    and ran it 4.5x slower (1.65 vs 0.36 ms a step on an H100 at 64k): both stacked arrays come
    out of an optimization barrier."""
    t = 200
    jaxpr, producer = _backward_jaxpr(t)
    (stack,) = [eqn for eqn in jaxpr.eqns if eqn.primitive.name in ("stack", "concatenate")
                and eqn.outvars[0].aval.shape == (1, 4, 2, t)]
    for var in stack.invars:
        eqn = producer[var]
        while eqn.primitive.name in ("broadcast_in_dim", "reshape", "convert_element_type"):
            eqn = producer[eqn.invars[0]]
        assert eqn.primitive.name == "optimization_barrier"


@pytest.mark.parametrize("deterministic", [True, False], ids=["fixed", "float"])
def test_backward_zeroes_its_dq_accumulator_from_its_own_barrier(deterministic):
    """dQ's accumulator (int32 or float32, [B, N, tiles, 2, ...]) is zeros broadcast from an
    optimization barrier's output, which also carries this call's stats: XLA fused the zeroing
    of every unrolled layer's accumulator into one fusion, and all of them (1 GiB each at 64k
    tokens x 32 heads) were then alive at once (tools/dev/memory_layers.py)."""
    jaxpr, producer = _backward_jaxpr(200, deterministic)
    (fill,) = [eqn for eqn in jaxpr.eqns if eqn.primitive.name == "broadcast_in_dim"
               and eqn.outvars[0].aval.ndim == 6]
    barrier = producer[fill.invars[0]]
    assert barrier.primitive.name == "optimization_barrier"
    assert any(v.aval.shape[:2] == (1, 4) and v.aval.ndim == 4 for v in barrier.invars)


def _all_eqns(jaxpr):
    """Every equation of a jaxpr and of the jaxprs inside it."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            for sub in (param if isinstance(param, (tuple, list)) else (param,)):
                sub = getattr(sub, "jaxpr", sub)
                if hasattr(sub, "eqns"):
                    yield from _all_eqns(sub)


def test_inputs_are_not_copied_to_whole_tiles():
    """Token lengths that are multiples of 8 reach both Mosaic kernels without padded copies
    (TMA fills the tiles past the end with zeros and skips storing them), and K and V with no
    padding-zeroing copies: the forward zeroes V's padding rows in shared memory, the backward
    K's, and it hides V's behind the element rule."""
    h = 64
    step, q, k = _training_step(h, "bfloat16", MaskVariant(), t=1000, s=1000)  # no whole tiles
    eqns = list(_all_eqns(jax.make_jaxpr(step)(q, k, k).jaxpr))
    big = [e for e in eqns if e.primitive.name in ("pad", "select_n", "concatenate")
           and e.outvars[0].aval.shape[-1:] == (h,)]  # token arrays, not the small stats
    assert not [e for e in big if e.primitive.name != "select_n"]
    assert not [e for e in big if e.outvars[0].aval.shape == k.shape]


def _selects(step, q, k):
    """The selects over whole query-shaped arrays in a training step's jaxpr."""
    return [e for e in _all_eqns(jax.make_jaxpr(step)(q, k, k).jaxpr)
            if e.primitive.name == "select_n" and e.outvars[0].aval.shape == q.shape]


def test_forward_hands_the_mosaic_backward_a_zeroed_query(monkeypatch):
    """Ahead of the Mosaic backward the forward stores Q's tiles with the padding rows zeroed
    (store_query): the training step has one query-sized zeroing select fewer than with the
    plain forward and the backward's own copy. The dK/dV blocks it decides with
    when the backward builds its own masks are the ones build_masks gives."""
    step, q, k = _training_step(64, "bfloat16", MaskVariant(), t=1000, s=1000)
    fewer = len(_selects(step, q, k))
    # the plain forward, and the backward zeroing its copy
    monkeypatch.setattr(backends.MosaicBackend, "forward_for_grad",
                        backends.Backend.forward_for_grad)
    backward = mosaic_bwd.backward
    monkeypatch.setattr(mosaic_bwd, "backward", lambda *a, **kw: backward(
        *a, **{**kw, "query_padding_zeroed": False}))
    jax.clear_caches()  # the jitted attention's trace
    assert len(_selects(step, q, k)) == fewer + 1
    monkeypatch.undo()
    jax.clear_caches()
    masks = build_masks(*_one_document(300, 300), fwd_params=FWD, bwd_params=BWD128,
                        skip_pad_tokens=True)
    assert (masks[2].row_block, masks[2].col_block) == (BWD128.kv_block_size,
                                                        BWD128.query_block_size)


def test_backward_choice_follows_the_blocks_not_determinism():
    """The Mosaic backward runs by default (deterministic, dQ in fixed point) and with
    deterministic=False alike, wherever its shapes allow (the choice takes no options); dK/dV
    blocks of 64 keys keep the Triton backward (the README's way to avoid its dQ buffer); head dim
    256 takes the channel split, with dK/dV blocks of multiples of 64x64."""
    q = jax.ShapeDtypeStruct((1, 1000, 4, 128), jnp.bfloat16)
    k = jax.ShapeDtypeStruct((1, 1000, 2, 128), jnp.bfloat16)
    h256 = jax.ShapeDtypeStruct((1, 1000, 2, 256), jnp.bfloat16)
    choose = backends.MosaicBackend._mosaic_backward
    assert choose(q, k, k, (128, 64))
    assert not choose(q, k, k, (64, 64))
    assert choose(h256, h256, h256, (128, 64)) and choose(h256, h256, h256, (64, 64))
    assert not choose(h256, h256, h256, (96, 64))


@pytest.mark.parametrize("seed", range(4))
def test_padding_windows_flag_every_tile_that_holds_padding(seed):
    """The forward's flag per key tile start (a multiple of 8): set iff one of the tile's keys
    is padding, whatever the layout (padding anywhere, lengths not multiples of 8)."""
    rng = np.random.default_rng(seed)
    s_len, size = int(rng.integers(1, 700)), int(rng.choice([64, 128]))
    seg = rng.integers(0, 3, (2, s_len)) - 1  # -1: padding
    seg[0, : s_len // 2] = 0  # a long run without padding
    length = mosaic_fwd.round_up(s_len, 128) + 128
    flags = np.asarray(mosaic_fwd.padding_windows(jnp.asarray(seg), -1, length, size))
    assert flags.shape == (2, length // 8)
    for b in range(2):
        for j in range(length // 8):
            assert flags[b, j] == (seg[b, 8 * j:8 * j + size] == -1).any(), (b, j)


def test_backward_refuses_what_it_cannot_run():
    assert mosaic_bwd.supported(128, (128, 64)) is None
    assert mosaic_bwd.supported(64, (256, 128)) is None
    assert mosaic_bwd.supported(256, (128, 64)) is None  # the channel split
    assert "head dims" in mosaic_bwd.supported(96, (128, 64))
    assert "128x64" in mosaic_bwd.supported(128, (64, 64))
    assert "128x64" in mosaic_bwd.supported(128, (128, 32))
    assert "equal for keys and values" in mosaic_bwd.supported(128, (128, 64), value_dim=64)
    assert "65535 tiles" in mosaic_bwd.supported(128, (128, 64), kv_len=128 * 65536)
    with pytest.raises(ValueError, match="deterministic must be True or False"):
        q = jnp.zeros((1, 8, 2, 64), jnp.float32)
        layout = (jnp.zeros((1, 8), jnp.int32),) * 4
        flash_attention(q, q, q, *layout, deterministic="no")


def _fixed_point_dq(seed, *, outlier_channel=False):
    """The deterministic Mosaic backward's dQ arithmetic, emulated on a packed batch with large
    logsumexp cotangents and rows of dO 1e6 apart: each 128-key tile's share of dQ (float32, as
    the kernel's product gives it), scaled, rounded by to_fixed and summed as integers.
    (integer sums [B, T, N, H], the shares' summed |values| in units, unscale, the exact dQ
    without the softmax scale, the float32 sum in key order)."""
    rng = np.random.default_rng(seed)
    batch = packed_batch(seed, kv_len=301, num_heads=4, num_kv_heads=2, head_dim=64,
                         poison_padding=True, num_docs=(2, 5))
    seg, pos = batch.layout.query_segment_ids, batch.layout.query_positions
    k = np.asarray(batch.key, np.float32)  # NaN and Inf in the padding
    if outlier_channel:
        k[..., 3] *= 300.0
    live = seg != PADDING_SEGMENT_ID
    allowed = ((seg[:, :, None] == seg[:, None, :]) & live[:, :, None]
               & (pos[:, :, None] >= pos[:, None, :]))[:, :, None, :]  # [B, T, 1, S]
    real = lambda x: np.where(live[..., None, None], np.asarray(x, np.float64), 0.0)
    q, kk, vv = real(batch.query), real(k).repeat(2, axis=2), real(batch.value).repeat(2, axis=2)
    with np.errstate(all="ignore"):  # rows with nothing to attend
        logits = np.where(allowed, np.einsum("btnh,bsnh->btns", q, kk) * 0.125, -np.inf)
        top = logits.max(-1, keepdims=True)
        lse = np.log(np.sum(np.exp(logits - top), -1)) + top[..., 0]
        p = np.where(allowed, np.exp(logits - lse[..., None]), 0.0)
    dout = real(rng.standard_normal(q.shape) * 10.0 ** rng.uniform(-3, 3, q.shape[:3] + (1,)))
    dlse = rng.standard_normal(lse.shape) * 30.0  # the logsumexp's cotangent, in delta
    delta = np.einsum("btnh,btnh->btn", dout, np.einsum("btns,bsnh->btnh", p, vv)) - dlse
    delta = np.where(live[..., None], delta, 0.0)
    ds = p * (np.einsum("btnh,bsnh->btns", dout, vv) - delta[..., None])
    shares = np.stack([np.einsum("btns,bsnh->btnh", ds[..., j:j + 128], kk[:, j:j + 128])
                       for j in range(0, ds.shape[-1], 128)]).astype(np.float32)
    bnt = lambda x: jnp.asarray(np.swapaxes(x, 1, 2), jnp.float32)
    scale, unscale = mosaic_bwd.fixed_point_scales(
        jnp.asarray(dout, jnp.float32), jnp.asarray(k), jnp.asarray(batch.value),
        jnp.asarray(batch.layout.kv_segment_ids), bnt(delta),
        bnt(np.where(live[..., None], lse, -np.inf)), PADDING_SEGMENT_ID)
    row = lambda x: np.swapaxes(np.asarray(x), 1, 2)[..., None]  # [B, N, T] -> [B, T, N, 1]
    row_scale = row(scale)
    y = shares * row_scale
    ints = np.stack([np.asarray(mosaic_bwd.to_fixed(jnp.asarray(x), jnp.asarray(row_scale)))
                     for x in shares])
    np.testing.assert_array_less(np.abs(ints - y.astype(np.float64)), 0.5 + 1e-9)  # nearest
    in_key_order = shares[0]
    for x in shares[1:]:
        in_key_order = in_key_order + x  # float32 sums in one arrival order
    return (ints.astype(np.int64).sum(0), np.abs(y.astype(np.float64)).sum(0), row(unscale),
            np.einsum("btns,bsnh->btnh", ds, kk), in_key_order)


@pytest.mark.parametrize("variant", [MaskVariant(), MaskVariant(False, None),
                                     MaskVariant(True, (5, 5)), MaskVariant(False, (3, 7))],
                         ids=str)
def test_backward_key_side_rule_is_the_element_rule(variant):
    """The backward's masked steps test padding on the keys' side (once per key row): the same
    pairs as element_rule, for ids that repeat, padding on either side and any positions."""
    rng = np.random.default_rng(7)
    ids = np.asarray([PADDING_SEGMENT_ID, 0, 3, 2**31 - 1, -5], np.int32)
    q_seg, k_seg = (jnp.asarray(rng.choice(ids, n)) for n in (64, 48))
    q_pos, k_pos = (jnp.asarray(rng.integers(-20, 20, n, dtype=np.int32)) for n in (64, 48))
    rows = lambda x: jnp.broadcast_to(x[:, None], (48, 64))  # noqa: E731 keys down
    cols = lambda x: jnp.broadcast_to(x[None, :], (48, 64))  # noqa: E731 queries across
    got = mosaic_bwd.key_side_rule(variant, rows, cols, k_seg != PADDING_SEGMENT_ID, q_seg,
                                   k_seg, q_pos, k_pos)
    want = variant.element_rule(cols(q_pos), cols(q_seg), rows(k_pos), rows(k_seg),
                                PADDING_SEGMENT_ID)
    assert 0 < int(want.sum()) < want.size
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("variant", [MaskVariant(), MaskVariant(False, None),
                                     MaskVariant(True, (5, 5)), MaskVariant(False, (3, 7)),
                                     MaskVariant(True, (0, 4)), MaskVariant(False, (0, 0)),
                                     MaskVariant(False, (2**30 - 1, 2**30 - 1))],
                         ids=str)
@pytest.mark.parametrize("seed,positions", [(3, "small"), (4, "small"), (5, "extreme")])
def test_rank_intervals_are_the_element_rule(variant, seed, positions):
    """MosaicConfig.rank_rule's layouts (rank_layouts, MaskVariant.intervals): a key's rank
    inside a query's interval exactly where element_rule allows the pair, for ids that repeat
    and interleave, repeated positions (also at the limits with the widest window), padding on
    either side, more keys than queries, and the kernels' padding past the tokens (never
    visible), tested as both kernels test it (in_intervals), and in the backward's
    orientation."""
    rng = np.random.default_rng(seed)
    ids = np.asarray([PADDING_SEGMENT_ID, 0, 3, 2**31 - 1, -2**31, -5], np.int32)
    b, t, s = 2, 61, 83
    q_seg, k_seg = (jnp.asarray(rng.choice(ids, (b, n))) for n in (t, s))
    if positions == "small":
        q_pos, k_pos = (jnp.asarray(rng.integers(-9, 9, (b, n), dtype=np.int32))
                        for n in (t, s))
    else:
        edges = np.asarray([-2**30, 1 - 2**30, -1, 0, 1, 2**30 - 1, 2**30], np.int32)
        q_pos, k_pos = (jnp.asarray(rng.choice(edges, (b, n))) for n in (t, s))
    q_lay, k_lay = mosaic_fwd.rank_layouts(q_pos, q_seg, k_pos, k_seg, t + 8, s + 5,
                                           pad_id=PADDING_SEGMENT_ID, variant=variant)
    assert q_lay.shape == (b, 3, t + 8) and k_lay.shape == (b, 2, s + 5)
    rank, lo, hi = k_lay[:, 0, None, :], q_lay[:, 0, :, None], q_lay[:, 1, :, None]
    got = mosaic_fwd.in_intervals(rank, lo, hi)
    want = variant.element_rule(q_pos[:, :, None], q_seg[:, :, None], k_pos[:, None],
                                k_seg[:, None], PADDING_SEGMENT_ID)
    assert 0 < int(want.sum()) < want.size
    np.testing.assert_array_equal(got[:, :t, :s], want)
    assert not np.any(got[:, t:]) and not np.any(got[:, :, s:])
    np.testing.assert_array_equal(q_lay[:, 2, :t], q_seg)
    np.testing.assert_array_equal(k_lay[:, 1, :s], k_seg)
    # the backward's form (BackwardConfig.rank_rule): keys down, queries across
    rows = lambda x: jnp.broadcast_to(x[:, None], (s + 5, t + 8))  # noqa: E731
    cols = lambda x: jnp.broadcast_to(x[None, :], (s + 5, t + 8))  # noqa: E731
    for row in range(b):
        np.testing.assert_array_equal(mosaic_fwd.in_intervals(
            rows(k_lay[row, 0]), cols(q_lay[row, 0]), cols(q_lay[row, 1])), got[row].T)


@pytest.mark.parametrize("h", mosaic_bwd.HEAD_DIMS)
def test_untile_dq_puts_each_share_back_in_token_order(h):
    """The backward's dQ accumulator holds each consumer's (block_q, H / 2) share of a query
    tile as shared memory does under TilingTransform((8, 8)): tile (i, j) at [i, j], element
    (r, c) of a tile at [r, c], flattened; untile_dq reads every element back to its token,
    head and channel."""
    rng = np.random.default_rng(h)
    b, tiles, n, block_q, half = 2, 3, 4, 64, h // 2
    dq = rng.integers(-2**31, 2**31 - 1, (b, tiles * block_q, n, h), dtype=np.int32)
    acc = np.empty((b, n, tiles, 2, block_q * half), np.int32)
    for bi, qt, ni, wg in np.ndindex(b, tiles, n, 2):
        share = dq[bi, qt * block_q:(qt + 1) * block_q, ni, wg * half:(wg + 1) * half]
        acc[bi, ni, qt, wg] = [share[8 * i + r, 8 * j + c] for i in range(block_q // 8)
                               for j in range(half // 8) for r in range(8) for c in range(8)]
    acc = acc.reshape(b, n, tiles, 2, -1, 256)
    np.testing.assert_array_equal(mosaic_bwd.untile_dq(jnp.asarray(acc), block_q), dq)


def test_backward_rotates_only_bidirectional_masks_without_a_window():
    default = mosaic_bwd.BackwardConfig()
    assert mosaic_bwd.rotation(MaskVariant(is_causal=False), default) == 1
    assert mosaic_bwd.rotation(MaskVariant(), default) == 0
    assert mosaic_bwd.rotation(MaskVariant(False, (40, 3)), default) == 0
    assert mosaic_bwd.rotation(MaskVariant(True, (40, 0)), default) == 0
    forced = dataclasses.replace(default, rotate=3)
    assert mosaic_bwd.rotation(MaskVariant(), forced) == 3


def test_backward_rotation_takes_each_query_tile_once():
    """query_tile over a head's steps: each query tile of [lo, hi) once, the masked ones in
    place and the fully visible ones [lf, uf) in turn from lf + rot; the consumer's calls (which
    know whether a step is masked) and the producer's (deciding per step) give the same tiles,
    so the loads and the products meet."""
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**31))
    for _ in range(60):
        lo = int(rng.integers(0, 20))
        hi = lo + int(rng.integers(0, 30))
        lf = int(rng.integers(lo, hi + 1))
        uf = int(rng.integers(lf, hi + 1))
        i = np.arange(hi - lo)
        masked = (i < lf - lo) | (i >= uf - lo)
        for rot in [None, *range(max(uf - lf, 1))]:
            tiles = np.asarray(mosaic_bwd.query_tile(i, lo, lf, uf, rot))
            assert sorted(tiles.tolist()) == list(range(lo, hi)), (lo, hi, lf, uf, rot)
            np.testing.assert_array_equal(tiles[masked], lo + i[masked])
            expected = lf + (np.arange(uf - lf) + (rot or 0)) % max(uf - lf, 1)
            np.testing.assert_array_equal(tiles[~masked], expected)
            consumer = [mosaic_bwd.query_tile(j, lo, lf, uf, rot, masked=bool(m))
                        for j, m in zip(i, masked)]
            np.testing.assert_array_equal(np.asarray(consumer, np.int64).reshape(-1), tiles)


@pytest.mark.parametrize("num_kv,row_ratio", [(3, 1), (3, 2), (1, 1)])
def test_backward_program_order_launches_the_last_heads_longest_tiles_first(num_kv, row_ratio):
    """Each launch slot takes one program (kv head x tiles + key tile), each program once; the
    heads but the last keep the grid's order, the last head's tiles go longest first (ties in
    tile order), their lengths being the block mask's query tiles, clipped as the kernel does."""
    rng = np.random.default_rng(row_ratio)
    b, k_tiles, q_tiles, col_ratio = 2, 12, 20, 2
    lo = rng.integers(0, 12, (b, k_tiles // row_ratio))
    hi = lo + rng.integers(0, 6, lo.shape)  # some empty rows, some past the last query tile
    bounds = np.stack([lo, hi, lo, lo], axis=-1).astype(np.int32)
    order = np.asarray(mosaic_bwd.program_order(jnp.asarray(bounds), num_kv, k_tiles, q_tiles,
                                                row_ratio, col_ratio))
    assert order.shape == (b, num_kv * k_tiles)
    first = (num_kv - 1) * k_tiles
    for row in range(b):
        assert sorted(order[row]) == list(range(num_kv * k_tiles))
        assert list(order[row, :first]) == list(range(first))
        tiles = order[row, first:] - first
        rows = tiles // row_ratio
        length = (np.minimum(hi[row, rows] * col_ratio, q_tiles)
                  - np.minimum(lo[row, rows] * col_ratio, q_tiles))
        assert np.all(np.diff(length) <= 0) and length[0] > length[-1]
        ties = np.diff(length) == 0
        assert np.all(np.diff(tiles)[ties] > 0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_ring_is_the_remainder_of_a_step(n):
    """mosaic_bwd.ring(s, n) is s mod n for the steps' s >= 0: a mask for powers of two, the
    remainder otherwise (the slots of the backward's rings of buffers)."""
    s = jnp.arange(0, 1000, dtype=jnp.int32)
    assert np.array_equal(np.asarray(jax.jit(lambda s: mosaic_bwd.ring(s, n))(s)),
                          np.arange(1000) % n)


@pytest.mark.parametrize("seed", range(2))
def test_to_fixed_rounds_to_nearest_over_the_int32_range(seed):
    """to_fixed(x, scale) is round(x * scale) for |x * scale| up to 2^31 (ties included) with
    power-of-two scales across float32's range, in eager float32 arithmetic as the kernel's."""
    rng = np.random.default_rng(seed)
    n = 200_000
    scale = np.exp2(rng.integers(-60, 121, n)).astype(np.float32)
    y = (rng.choice([-1, 1], n) * np.exp2(rng.uniform(-40, 30.99, n))).astype(np.float32)
    y[:2000] = np.round(y[:2000]) + 0.5  # ties
    y[2000:2008] = [0.0, 0.5, -0.5, 1.5, 32767.5, -32768.5, 2**31 - 128, -(2**31 - 128)]
    x = (y.astype(np.float64) / scale).astype(np.float32)
    y = x.astype(np.float64) * scale  # exact: scale is a power of two
    ints = np.asarray(mosaic_bwd.to_fixed(jnp.asarray(x), jnp.asarray(scale))).astype(np.float64)
    assert np.max(np.abs(ints - y)) <= 0.5
    ties = np.abs(ints - y) == 0.5
    assert ties.sum() >= 2000 and np.all(ints[ties] % 2 == 0)  # float32's ties to even


@pytest.mark.parametrize("outlier_channel", [False, True], ids=["normal", "outliers"])
@pytest.mark.parametrize("seed", range(3))
def test_fixed_point_dq_error_is_far_below_bfloat16_rounding(seed, outlier_channel):
    """The deterministic dQ's integers cannot overflow int32 (the bound holds, here with large
    logsumexp cotangents, dO rows 1e6 apart, and a K channel 300x the others), and dQ's error is
    within 16x float32's own summation error (0.2 ppm here), or with the outlier channel, whose
    scale the row's shares take, within 2^-16 (bfloat16's rounding is 2^-9; measured 3 ppm)."""
    total, magnitude, unscale, exact, float32 = _fixed_point_dq(seed,
                                                                outlier_channel=outlier_channel)
    assert magnitude.max() < 2**30 and np.abs(total).max() < 2**30
    assert magnitude.max() > 2**27  # the bound is not so loose that the integers go unused
    assert np.all(np.isfinite(unscale))
    err = lambda x: np.linalg.norm(x - exact) / np.linalg.norm(exact)
    fixed = err(total * unscale)
    assert fixed < (2**-16 if outlier_channel else 16 * max(err(float32), 2**-24)), fixed


def test_fixed_point_dq_unscale_is_nan_where_float32_would_be():
    """NaN logsumexp or delta, or NaN in a real key: unscale NaN there (dQ NaN, never a finite
    wrong number); NaN and Inf in the padding keys: finite."""
    b, t, n, h = 1, 6, 2, 8
    seg = jnp.asarray([[0, 0, 1, 1, PADDING_SEGMENT_ID, PADDING_SEGMENT_ID]])
    k = np.ones((b, t, 1, h), np.float32)
    k[0, 4, 0, 0], k[0, 5, 0, 1] = np.nan, np.inf  # padding
    dout = jnp.ones((b, t, n, h), jnp.float32)
    delta, lse = np.zeros((b, n, t), np.float32), np.zeros((b, n, t), np.float32)
    lse[0, 1, 2], delta[0, 0, 3] = np.nan, np.nan

    def unscale(k):
        return np.asarray(mosaic_bwd.fixed_point_scales(dout, jnp.asarray(k), jnp.asarray(k),
                                                        seg, jnp.asarray(delta),
                                                        jnp.asarray(lse),
                                                        PADDING_SEGMENT_ID)[1])

    bad = np.isnan(unscale(k))
    assert bad[0, 1, 2] and bad[0, 0, 3] and bad.sum() == 2
    k[0, 1, 0, 2] = np.nan  # a real key
    assert np.isnan(unscale(k)).all()


# --- on a Hopper GPU ---------------------------------------------------------------------------

hopper = pytest.mark.skipif(
    jax.default_backend() != "gpu" or not is_hopper(current_device_kind()),
    reason="needs a Hopper GPU (H100/H200)")


def attention(fwd, bwd, scale, backend="mosaic", deterministic=True, **variant):
    mask_variant = {k: variant[k] for k in ("is_causal", "local_window_size") if k in variant}

    def fn(q, k, v, *layout, **sinks):
        masks = create_attention_mask(*layout, fwd_params=fwd, bwd_params=bwd, calc_bwd_mask=True,
                                      **mask_variant)
        return flash_attention(q, k, v, *layout, mask=masks, scale=scale, fwd_params=fwd,
                               bwd_params=bwd, backend=backend, deterministic=deterministic,
                               **variant, **sinks)
    return jax.jit(fn)


# (layout, heads (N, K), head dim, dtype, query length, forward blocks)
CASES = [
    dict(kv_len=1000, heads=(4, 2), head_dim=128, dtype="bfloat16",
         layout=dict(segment_ids="shuffled", num_docs=(3, 9))),
    dict(kv_len=777, q_len=300, heads=(6, 2), head_dim=64, dtype="float16",
         layout=dict(segment_ids="reused")),
    dict(kv_len=300, q_len=1, heads=(4, 1), head_dim=128, dtype="bfloat16"),  # decode, MQA
    dict(kv_len=513, heads=(2, 2), head_dim=256, dtype="bfloat16", layout=dict(positions="zeros")),
    dict(kv_len=384, heads=(4, 4), head_dim=128, dtype="bfloat16", batch=1,
         layout=dict(pad_tokens=0, num_docs=1, positions="global")),
    dict(kv_len=1500, heads=(4, 2), head_dim=64, dtype="bfloat16",
         layout=dict(segment_ids="large", num_docs=(20, 40))),
    dict(kv_len=900, heads=(4, 2), head_dim=128, dtype="bfloat16",
         fwd=FlashAttentionParamsConfig(query_block_size=256, kv_block_size=64)),
    dict(kv_len=1100, q_len=77, heads=(16, 2), head_dim=128, dtype="bfloat16",
         layout=dict(segment_ids="shuffled", num_docs=(2, 5))),
]


def _batch(case, seed):
    n, k = case["heads"]
    return packed_batch(seed, batch=case.get("batch", 2), kv_len=case["kv_len"],
                        q_len=case.get("q_len"), num_heads=n, num_kv_heads=k,
                        head_dim=case["head_dim"], dtype=case["dtype"], poison_padding=True,
                        **case.get("layout", {}))


def _case_id(case):
    n, k = case["heads"]
    return (f"S{case['kv_len']}-T{case.get('q_len', case['kv_len'])}-N{n}K{k}-H{case['head_dim']}"
            f"-{case['dtype']}" + ("-fwd256x64" if "fwd" in case else ""))


VARIANTS = [
    {},
    dict(is_causal=False),
    dict(local_window_size=17),
    dict(is_causal=False, local_window_size=(9, 4)),
    dict(logits_soft_cap=5.0),
    dict(sinks=True),
    dict(sinks=True, logits_soft_cap=4.0, local_window_size=(40, 0)),
    dict(return_residual=True, is_causal=False),
]


def _variant_id(variant):
    return "-".join(f"{k}={variant[k]}" for k in variant) or "default"


def _two_runs(fn, batch):
    """(output, dq, dk, dv) of two identical steps with a cotangent of ones, as float32 arrays."""
    layout = [jnp.asarray(a) for a in batch.layout.arrays]

    def step(q, k, v):
        out, vjp = jax.vjp(lambda *x: fn(*x, *layout), q, k, v)
        return (out, *vjp(jnp.ones_like(out)))

    return [[np.asarray(x, np.float32) for x in step(batch.query, batch.key, batch.value)]
            for _ in range(2)]


def _assert_matches(case, variant, **options):
    """_check with a fresh seed, which the failure message names."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    report = _check(case, variant, seed, **options)
    assert report.ok, f"seed={seed}\n{report}"


def _check(case, variant, seed, bwd=BWD, deterministic=True, scale_sign=1.0, batch=None):
    batch = batch or _batch(case, seed)
    scale = scale_sign * case["head_dim"] ** -0.5
    variant = dict(variant)
    sinks = None
    if variant.pop("sinks", False):
        sinks = np.random.default_rng(seed).normal(0.5, 1.5, case["heads"][0]).astype(np.float32)
        sinks[-1] = -np.inf
    cap = variant.get("logits_soft_cap")
    fn = attention(case.get("fwd", FWD), bwd, scale, deterministic=deterministic, **variant)
    return check_attention(fn, batch, scale=scale, seed=seed,
                           mask_terms=mask_terms(**{k: v for k, v in variant.items()
                                                    if k in ("is_causal", "local_window_size")}),
                           logits_fn=None if cap is None else soft_cap(cap), sinks=sinks,
                           residual=variant.get("return_residual", False),
                           logit_error=backends.kernel_logit_error(cap, batch.query.dtype))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_matches_reference(case):
    _assert_matches(case, {})


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("variant", VARIANTS, ids=_variant_id)
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3]], ids=_case_id)
def test_variants_match_reference(variant, case):
    _assert_matches(case, variant)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("variant,sign", [({}, -1.0), (dict(logits_soft_cap=5.0), -1.0),
                                          ({}, 0.0)], ids=["negative", "negative-capped", "zero"])
def test_scale_of_any_sign_matches_reference(variant, sign):
    """The forward's softmax takes row maxima before the logits' factor: a negative scale must
    flip its Q tile (uncapped) or pass through tanh (capped), and 0 give uniform weights."""
    _assert_matches(CASES[0], variant, scale_sign=sign)


def _one_key_batch(seed: int, kv_len: int, num_docs):
    """Causal documents of a few tokens each, shuffled ids, NaN in 5-40 padding tokens, head dim
    128, bfloat16: each document's first token sees one key."""
    return packed_batch(seed, batch=1, kv_len=kv_len, num_heads=2, num_kv_heads=1, head_dim=128,
                        dtype="bfloat16", poison_padding=True, num_docs=num_docs,
                        pad_tokens=(5, 40), segment_ids="shuffled")


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("cap,fixed", [(None, False), (5.0, False), (30.0, False), (5.0, True),
                                       (30.0, True), (50.0, True)])
def test_rows_that_see_one_key_return_its_value(monkeypatch, cap, fixed):
    """A row that sees one key returns its value, bitwise, soft-capped or not: the weight is
    exactly 1 (fuzz seed 5812 found the capped forward's fixed reference a rounding off). With
    MosaicConfig.fixed_reference (capped bfloat16's default: no row maxima) no weight is 1:
    such a row is divided by its weight rounded as P is."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = _one_key_batch(seed, 1000, (60, 120))
    with _edited_configs(monkeypatch, lambda config, group: dataclasses.replace(
            config, fixed_reference=fixed)) as chosen:
        fn = attention(FWD, BWD, 128 ** -0.5, logits_soft_cap=cap)
        out = fn(batch.query, batch.key, batch.value, *batch.layout.arrays)
    assert chosen and chosen[-1].fixed_reference == fixed
    assert assert_one_key_rows_exact(out, batch, mask_terms()) >= 60 * 2, f"seed={seed}"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("cap", [30.0, 50.0, 70.0])
@pytest.mark.parametrize("sign", [40.0, -40.0])
def test_large_caps_with_saturated_logits_match_reference(cap, sign):
    """Scores at 40 times the scale put most logits near +-c (running row maxima on the
    tanhs)."""
    _assert_matches(CASES[0], dict(logits_soft_cap=cap), scale_sign=sign)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("case,variant", [
    (CASES[0], {}),
    (CASES[0], dict(sinks=True, logits_soft_cap=4.0, local_window_size=(40, 0))),
    (CASES[1], dict(is_causal=False)),
    (CASES[3], {}),
], ids=lambda x: _case_id(x) if "heads" in x else _variant_id(x))
def test_overlapped_forward_matches_reference(monkeypatch, case, variant):
    """The forward with each tile's softmax under the previous tile's PV (MosaicConfig.overlap,
    not the default yet), through the whole API."""
    with _edited_configs(monkeypatch, lambda config, group: dataclasses.replace(
            config, overlap=True, persistent=False)) as chosen:
        _assert_matches(case, variant)
    assert chosen, "the Mosaic forward did not run: the overlapped kernel went untested"


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("fixed", [True, False], ids=["fixed-reference", "maxima"])
@pytest.mark.parametrize("case,variant,sign", [
    (CASES[0], dict(logits_soft_cap=5.0), 1.0),
    (CASES[0], dict(logits_soft_cap=50.0), 40.0),
    (CASES[0], dict(logits_soft_cap=30.0, is_causal=False), -40.0),
    (CASES[3], dict(sinks=True, logits_soft_cap=4.0, local_window_size=(40, 0)), 1.0),
], ids=lambda x: _case_id(x) if isinstance(x, dict) and "heads" in x
    else _variant_id(x) if isinstance(x, dict) else f"x{x:g}")
def test_fixed_reference_forward_matches_reference(monkeypatch, case, variant, sign, fixed):
    """The soft-capped bfloat16 forward without row maxima (MosaicConfig.fixed_reference, the
    default since session 57) and with them (fixed_reference=False, as before), through the
    whole API, logits near +-c among them."""
    with _edited_configs(monkeypatch, lambda config, group: dataclasses.replace(
            config, fixed_reference=fixed)) as chosen:
        _assert_matches(case, variant, scale_sign=sign)
    assert chosen, "the Mosaic forward did not run: the capped kernel went untested"


@contextlib.contextmanager
def _edited_configs(monkeypatch, edit):
    """mosaic_fwd.choose_config patched to return edit(its config, the kv group's query heads);
    yields the configs it returned. Traced afresh (a trace of the same call cached by an earlier
    test would skip the patch), and not left in the caches for the tests after it."""
    choose, chosen = mosaic_fwd.choose_config, []

    def edited(mask, h, group=1, *args, **kwargs):
        chosen.append(edit(choose(mask, h, group, *args, **kwargs), group))
        return chosen[-1]

    monkeypatch.setattr(mosaic_fwd, "choose_config", edited)
    jax.clear_caches()
    try:
        yield chosen
    finally:
        jax.clear_caches()


@pytest.mark.gpu
@hopper
def test_auto_picks_mosaic_and_falls_through():
    """Default params: "auto" runs the Mosaic forward (the same bits as backend="mosaic"); a
    float32 call, a head dim of 96 or 64-row masks fall through to triton."""
    batch = _batch(CASES[0], 5)
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    q, k, v = batch.query, batch.key, batch.value

    def run(backend):
        return np.asarray(flash_attention(q, k, v, *layout, scale=0.1, backend=backend),
                          np.float32)

    assert backends.resolve("auto", q, k, v, fwd_params=FWD) == "mosaic"
    np.testing.assert_array_equal(run("auto"), run("mosaic"))
    f32 = jnp.zeros((1, 8, 2, 128), jnp.float32)
    h96 = jnp.zeros((1, 8, 2, 96), jnp.bfloat16)
    assert backends.resolve("auto", f32, f32, f32, fwd_params=FWD) == "triton"
    assert backends.resolve("auto", h96, h96, h96, fwd_params=FWD) == "triton"
    assert backends.resolve("auto", q, k, v, fwd_params=BWD) == "triton"


@pytest.mark.gpu
@hopper
def test_deterministic_and_padding_exact():
    """Bitwise reruns; padding rows give exactly 0 output and 0 gradients with NaN/Inf there."""
    _assert_bitwise_and_padding_exact(_batch(CASES[0], 6))


def _assert_bitwise_and_padding_exact(batch, bwd=BWD):
    """Two default steps on batch (NaN/Inf in its padding): bitwise equal, finite, and exactly
    0 output and gradients on the padding rows."""
    pad = batch.layout.query_segment_ids == PADDING_SEGMENT_ID
    kv_pad = batch.layout.kv_segment_ids == PADDING_SEGMENT_ID
    first, again = _two_runs(attention(FWD, bwd, 0.1), batch)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert pad.any() and kv_pad.any()
    for x in first:
        assert np.all(np.isfinite(x))
    assert np.all(first[0][pad] == 0) and np.all(first[1][pad] == 0)
    assert np.all(first[2][kv_pad] == 0) and np.all(first[3][kv_pad] == 0)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("deterministic", [True, False], ids=["fixed", "float"])
def test_each_further_layer_keeps_only_its_residuals(deterministic):
    """Compiled forward+backward of three chained attention calls (a model's layers, each
    output the next call's query) against one: each further layer adds what it keeps for its
    backward (its output and its zeroed Q copy, at most two query-sized arrays, and small
    stats), not its dQ accumulator (int32 or float32: two more query-sized arrays) beside the
    others'. At 64k tokens two further layers added 3.1 query-sized arrays, and 7 when XLA fused
    the layers' accumulator zeroing (docs/bench/h100-2026-11-27-layers/)."""
    t, n, h = 4096, 8, 128
    rng = np.random.default_rng(int(np.random.SeedSequence().entropy % 2**31))
    q, k, v = (jnp.asarray(rng.standard_normal((1, t, heads, h)), jnp.bfloat16)
               for heads in (n, 2, 2))
    seg = jnp.asarray(np.repeat(np.arange(4), t // 4)[None], jnp.int32)
    pos = jnp.asarray(np.tile(np.arange(t // 4), 4)[None], jnp.int32)
    masks = create_attention_mask(pos, seg, pos, seg, fwd_params=FWD, bwd_params=BWD128,
                                  calc_bwd_mask=True)

    def compiled_bytes(layers):
        def step(q, k, v, dout):
            def chain(q, k, v):
                for _ in range(layers):
                    q = flash_attention(q, k, v, pos, seg, pos, seg, mask=masks, scale=0.1,
                                        fwd_params=FWD, bwd_params=BWD128, backend="mosaic",
                                        deterministic=deterministic)
                return q
            _, vjp = jax.vjp(chain, q, k, v)
            return vjp(dout)
        m = jax.jit(step).lower(q, k, v, q).compile().memory_analysis()
        return m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes

    extra = (compiled_bytes(3) - compiled_bytes(1)) / q.nbytes
    print(f"two further layers: {extra:.2f} query-sized arrays")
    assert extra < 5, extra


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("case", [CASES[0], CASES[5]], ids=_case_id)
def test_mosaic_backward_deterministic_and_padding_exact(case):
    """The default (deterministic) Mosaic backward, dQ summed in fixed point: bitwise reruns,
    exact zeros on the padding."""
    _assert_bitwise_and_padding_exact(_batch(case, 8), bwd=BWD128)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("variant", VARIANTS, ids=_variant_id)
@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[5]], ids=_case_id)
@pytest.mark.parametrize("deterministic", [True, False], ids=["fixed", "float"])
def test_mosaic_backward_matches_reference(variant, case, deterministic):
    """The Mosaic backward (head dims 64 and 128, 128x64 dK/dV blocks), its dQ summed in fixed
    point (the default) or in float32 (deterministic=False)."""
    _assert_matches(case, variant, bwd=BWD128, deterministic=deterministic)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("case", [CASES[2], CASES[3], CASES[4]], ids=_case_id)
@pytest.mark.parametrize("deterministic", [True, False], ids=["fixed", "float"])
def test_mosaic_backward_other_shapes(case, deterministic):
    """Decode and MQA, head dim 256 (the channel split), one global document."""
    _assert_matches(case, {}, bwd=BWD128, deterministic=deterministic)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("variant", [{}, dict(logits_soft_cap=4.0, local_window_size=(40, 0)),
                                     dict(is_causal=False, sinks=True)], ids=_variant_id)
@pytest.mark.parametrize("deterministic", [True, False], ids=["fixed", "float"])
def test_channel_split_backward_matches_reference(variant, deterministic):
    """BackwardConfig.channel_split, head dim 256's: against the reference, then bitwise reruns
    with exact zeros on the padding."""
    _assert_matches(CASES[3], variant, bwd=BWD128, deterministic=deterministic)
    if deterministic and not variant:
        _assert_bitwise_and_padding_exact(_batch(CASES[3], 8), bwd=BWD128)


@pytest.mark.gpu
@hopper
def test_mosaic_backward_padding_exact_and_dkdv_deterministic():
    """NaN/Inf in the padding: exactly 0 output and gradients there, finite elsewhere; dK and dV
    are summed in registers in a fixed order (bitwise reruns), dQ by reduce-add (close)."""
    batch = _batch(CASES[0], 7)
    pad = batch.layout.query_segment_ids == -1
    kv_pad = batch.layout.kv_segment_ids == -1
    first, again = _two_runs(attention(FWD, BWD128, 0.1, deterministic=False), batch)
    for a, b in zip(first[2:], again[2:]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(first[1], again[1], rtol=0, atol=1e-2)
    assert pad.any() and kv_pad.any()
    for x in first:
        assert np.all(np.isfinite(x))
    assert np.all(first[0][pad] == 0) and np.all(first[1][pad] == 0)
    assert np.all(first[2][kv_pad] == 0) and np.all(first[3][kv_pad] == 0)


# layouts whose rows take the forward's document chunks (runs.py): a few documents per row
CHUNKED = [
    dict(kv_len=2300, heads=(4, 2), head_dim=128, dtype="bfloat16",
         layout=dict(segment_ids="shuffled", num_docs=2)),
    dict(kv_len=2201, heads=(4, 1), head_dim=64, dtype="float16",
         layout=dict(segment_ids="large", num_docs=(1, 2), positions="global")),
    dict(kv_len=2050, heads=(8, 2), head_dim=128, dtype="bfloat16",
         layout=dict(segment_ids="shuffled", num_docs=(3, 5))),
]


def _chunked_batch(case, seed, *, mixed=False):
    """_batch whose rows all take the document chunks, or with mixed=True the second row not
    (another document's 40 tokens in the middle of its longest one, whose id then comes back
    after them)."""
    batch = _batch(case, seed)
    if mixed:
        seg = batch.layout.query_segment_ids.copy()
        starts = np.flatnonzero(np.diff(seg[1], prepend=seg[1, 0] - 1))
        lengths = np.diff(starts, append=seg.shape[1])
        middle = starts[np.argmax(lengths)] + lengths.max() // 2
        seg[1, middle - 20:middle + 20] = 987654
        layout = dataclasses.replace(batch.layout, query_segment_ids=seg, kv_segment_ids=seg)
        batch = dataclasses.replace(batch, layout=layout)
    (mask,) = create_attention_mask(*batch.layout.arrays, fwd_params=FWD)
    chunked = np.asarray(mask.doc_runs)[:, 0, 2] >= 0
    assert chunked.tolist() == ([True, False] if mixed else [True] * len(chunked)), seed
    return batch


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("variant", [{}, dict(logits_soft_cap=5.0), dict(sinks=True),
                                     dict(return_residual=True)], ids=_variant_id)
@pytest.mark.parametrize("case", CHUNKED, ids=_case_id)
@pytest.mark.parametrize("mixed", [False, True], ids=["chunked", "mixed"])
def test_document_chunks_match_reference(variant, case, mixed):
    """The forward with query chunks from each document's start, against the reference; with
    mixed=True one row of the batch keeps the row-aligned tiles."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    report = _check(case, variant, seed, batch=_chunked_batch(case, seed, mixed=mixed))
    assert report.ok, f"seed={seed}\n{report}"


@pytest.mark.gpu
@hopper
def test_document_chunks_bitwise_and_padding_exact():
    """Each token's output is stored by one program: bitwise reruns, and NaN/Inf in the padding
    give exactly 0 there and finite values elsewhere."""
    _assert_bitwise_and_padding_exact(_chunked_batch(CHUNKED[0], 12))


def _interpreted_batch(seed: int, kv_len: int, ids: str):
    """A small packed row for the kernels under the interpreter: 2-4 documents, 20-60 padding
    tokens holding NaN, 2 query heads on one kv head, head dim 128, bfloat16."""
    return packed_batch(seed, batch=1, kv_len=kv_len, num_heads=2, num_kv_heads=1, head_dim=128,
                        dtype="bfloat16", poison_padding=True, num_docs=(2, 4), segment_ids=ids,
                        pad_tokens=(20, 60))


def _residual_forward(mask, config: mosaic_fwd.MosaicConfig, scale: float, **options):
    """mosaic_fwd.forward with this mask and config as check_attention's residual=True takes
    it: (q, k, v, *layout, sinks=None) -> (output, logsumexp [B, T, N])."""
    def forward(q, k, v, *layout, sinks=None):
        out, lse = mosaic_fwd.forward(q, k, v, scale, *layout, mask, variant=MaskVariant(),
                                      pad_id=PADDING_SEGMENT_ID, config=config, sinks=sinks,
                                      **options)
        return out, lse[..., :q.shape[1]].transpose(0, 2, 1)

    return forward


@pytest.mark.parametrize("workers,ids,schedule", [(132, "sequential", False),
                                                  (3, "shuffled", False), (5, "shuffled", True)])
def test_persistent_forward_interpreted_on_cpu_matches_reference(monkeypatch, workers, ids,
                                                                 schedule):
    """The persistent Mosaic forward kernel itself, run on CPU by jax's GPU interpret mode
    (mosaic_interpret.py), against the float64 reference: within twice the error of plain
    bfloat16 math, exactly 0 (and a logsumexp of -inf) on padding rows holding NaN. With 3 or
    5 SMs each worker runs several programs in turn: the key/value ring, the Q buffers and the
    loads ahead go on across them. With schedule, the mask brings its tables and rank layouts
    as create_attention_mask's does on a Hopper GPU, so the masked steps take the rule on key
    ranks (the default there)."""
    import mosaic_interpret

    monkeypatch.setattr(mosaic_fwd, "device_sms", lambda: workers)
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = _interpreted_batch(seed, 700, ids)
    (mask,) = build_masks(*(jnp.asarray(a) for a in batch.layout.arrays), fwd_params=FWD,
                          bwd_params=None, skip_pad_tokens=True, schedule=schedule)
    assert (mask.schedule is not None) is schedule
    assert not schedule or mask.schedule.rank_rule  # the rule on key ranks
    config = mosaic_fwd.choose_config(mask, 128)
    assert config.persistent
    forward = _residual_forward(mask, config, 0.1)

    with mosaic_interpret.interpreted():
        report = check_attention(forward, batch, scale=0.1, seed=seed, grads=False,
                                 residual=True)
    assert report.ok, f"seed={seed}\n{report}"


@pytest.mark.parametrize("fixed", [False, True], ids=["maxima", "fixed-reference"])
def test_forward_interpreted_on_cpu_one_key_rows_exact(fixed):
    """The Mosaic forward, soft-capped, run on CPU by jax's GPU interpret mode: each row that
    sees one key returns its value bitwise (fuzz seed 5812: the capped forward once skipped the
    row maxima, and a rounding of P reached those rows). With MosaicConfig.fixed_reference (the
    default) there are no maxima: such rows are divided by their weight rounded as P is."""
    import mosaic_interpret

    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = _one_key_batch(seed, 300, (40, 60))
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    variant = MaskVariant(is_causal=True)
    (mask,) = build_masks(*layout, fwd_params=FWD, bwd_params=None, skip_pad_tokens=True,
                          variant=variant)
    config = dataclasses.replace(mosaic_fwd.choose_config(mask, 128), fixed_reference=fixed)
    assert (mosaic_fwd.fixed_weights(config, 4.0, batch.query.dtype) is not None) is fixed
    with mosaic_interpret.interpreted():
        out, _ = mosaic_fwd.forward(batch.query, batch.key, batch.value, 0.1, *layout, mask,
                                    variant=variant, pad_id=PADDING_SEGMENT_ID, config=config,
                                    logits_soft_cap=4.0)
    assert assert_one_key_rows_exact(out, batch, mask_terms()) >= 40 * 2, f"seed={seed}"


def test_fixed_reference_serves_capped_bfloat16_only():
    """MosaicConfig.fixed_reference (on by default) takes blockwise.capped_reference's reference
    for soft-capped bfloat16 with caps up to 55; float16 (whose range cannot hold the weights),
    no cap, larger caps, the overlapped kernel and fixed_reference=False keep their row
    maxima."""
    on = mosaic_fwd.MosaicConfig()
    assert on.fixed_reference
    assert mosaic_fwd.fixed_weights(on, 30.0, jnp.bfloat16) == 24.0
    assert mosaic_fwd.fixed_weights(on, 10.0, jnp.bfloat16) == pytest.approx(10.0 * 1.4426950)
    for config, cap, dtype in [(on, 30.0, jnp.float16), (on, None, jnp.bfloat16),
                               (on, 60.0, jnp.bfloat16),
                               (mosaic_fwd.MosaicConfig(fixed_reference=False), 30.0,
                                jnp.bfloat16),
                               (dataclasses.replace(on, overlap=True), 30.0, jnp.bfloat16)]:
        assert mosaic_fwd.fixed_weights(config, cap, dtype) is None, (config, cap, dtype)


@pytest.mark.parametrize("cap,sinks", [(4.0, False), (50.0, True)])
def test_fixed_reference_interpreted_on_cpu_matches_reference(monkeypatch, cap, sinks):
    """MosaicConfig.fixed_reference (the default: soft-capped bfloat16 without row maxima), the
    kernel run on CPU by jax's GPU interpret mode, persistent on 3 SMs: output and logsumexp
    against the float64 reference within the usual bounds, exactly 0 and -inf on padding rows
    holding NaN, rows that see one key exact. Without sinks two documents over 900 tokens, so
    that fully visible tiles (no top weight kept there) come too; with sinks (whose epilogue
    takes the fixed reference as the rows' maxima), short documents, a cap of 50 and logits 8
    times the usual scale, near +-c."""
    import mosaic_interpret

    monkeypatch.setattr(mosaic_fwd, "device_sms", lambda: 3)
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = (_one_key_batch(seed, 400, (6, 12)) if sinks else  # one document >= 420 tokens
             _one_key_batch(seed, 900, (2, 2)))
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    (mask,) = build_masks(*layout, fwd_params=FWD, bwd_params=None, skip_pad_tokens=True)
    assert sinks or (mask.block_classes(0) == 2).any(), "no fully visible tile"
    config = dataclasses.replace(mosaic_fwd.choose_config(mask, 128), fixed_reference=True)
    scale = (8.0 if sinks else 1.0) * 128 ** -0.5
    sink_logits = (np.random.default_rng(seed).normal(0.5, 1.5, 2).astype(np.float32)
                   if sinks else None)
    forward = _residual_forward(mask, config, scale, logits_soft_cap=cap)

    with mosaic_interpret.interpreted():
        report = check_attention(forward, batch, scale=scale, seed=seed, grads=False,
                                 residual=True, logits_fn=soft_cap(cap), sinks=sink_logits)
    assert report.ok, f"seed={seed}\n{report}"


@pytest.mark.parametrize("edit", [dict(pack=2), dict(splits=3)], ids=["pack-2", "splits-3"])
def test_fixed_reference_interpreted_on_cpu_packed_and_split(edit):
    """The fixed reference (capped bfloat16's default) in the grid kernels the persistent one
    does not take, run on CPU by jax's GPU interpret mode: two query heads per program
    (MosaicConfig.pack), or each program's keys in three splits combined by their logsumexps
    (a split that sees no key of a row weighs 0). Output and logsumexp against the float64
    reference, exactly 0 and -inf on padding rows holding NaN, rows that see one key exact."""
    import mosaic_interpret

    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = _one_key_batch(seed, 420, (8, 14))
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    (mask,) = build_masks(*layout, fwd_params=FWD, bwd_params=None, skip_pad_tokens=True)
    config = dataclasses.replace(mosaic_fwd.choose_config(mask, 128), persistent=False, **edit)
    assert mosaic_fwd.fixed_weights(config, 5.0, batch.query.dtype) is not None
    forward = _residual_forward(mask, config, 0.1, logits_soft_cap=5.0)

    with mosaic_interpret.interpreted():
        report = check_attention(forward, batch, scale=0.1, seed=seed, grads=False,
                                 residual=True, logits_fn=soft_cap(5.0))
    assert report.ok, f"seed={seed}\n{report}"


@pytest.mark.parametrize("deterministic,is_causal,cap,ranks", [
    (True, True, None, False), (False, False, 4.0, False), (True, True, None, True)],
    ids=["fixed-causal", "float-bidirectional-capped", "fixed-causal-ranks"])
def test_backward_interpreted_on_cpu_matches_reference(monkeypatch, deterministic, is_causal,
                                                       cap, ranks):
    """The Mosaic backward kernel itself, after the Mosaic forward with its zeroed Q copy, both
    through the API's custom_vjp (vjp._attention, the Mosaic backend) run on CPU by jax's GPU
    interpret mode, against the float64 reference: output, logsumexp and gradients within
    twice the error of plain bfloat16 math, with NaN in the padding. dQ in fixed point (the
    default) and in float32; causal, and bidirectional with a soft cap; with ranks, both
    kernels' masked steps on key ranks (BackwardConfig.rank_rule, with the layouts the forward
    mask's schedule brings). The custom_vjp is called eagerly, not through the jitted
    vjp.attention: inside an outer jit the interpreter's warpgroup threads sometimes
    deadlocked on a 2-core machine."""
    monkeypatch.setattr(mosaic_bwd, "chosen_config",
                        lambda *_: mosaic_bwd.BackwardConfig(rank_rule=ranks))
    seed = int(np.random.SeedSequence().entropy % 2**31)
    report = _interpreted_training_check(_interpreted_batch(seed, 300, "shuffled"), seed,
                                         deterministic, is_causal, cap, schedule=ranks)
    assert report.ok, f"seed={seed}\n{report}"


def _interpreted_training_check(batch, seed, deterministic, is_causal, cap, schedule=False):
    """check_attention's report on output, logsumexp and gradients through the API's
    custom_vjp with the Mosaic kernels (vjp._attention, called eagerly), run on CPU by jax's
    GPU interpret mode; schedule: the forward mask brings its Schedule (rank rule)."""
    import mosaic_interpret

    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    variant = MaskVariant(is_causal=is_causal)
    masks = build_masks(*layout, fwd_params=FWD, bwd_params=BWD128, skip_pad_tokens=True,
                        variant=variant, schedule=schedule)
    assert not schedule or masks[0].schedule.rank_rule
    opts = Options(sequential=False, backend="mosaic", fwd_params=FWD, bwd_params=BWD128,
                   variant=variant, logits_soft_cap=cap, deterministic=deterministic)

    def attention(q, k, v, *layout):  # (output, logsumexp [B, T, N])
        out, lse = _attention(opts, q, k, v, jnp.float32(0.1), None, *layout, masks)
        return out, lse.transpose(0, 2, 1)

    with mosaic_interpret.interpreted():
        return check_attention(attention, batch, scale=0.1, seed=seed, residual=True,
                               mask_terms=mask_terms(is_causal=is_causal),
                               logits_fn=None if cap is None else soft_cap(cap))


@pytest.mark.parametrize("deterministic,is_causal,cap,kv_len", [
    (True, True, None, 300), (False, False, 4.0, 333)],
    ids=["fixed-causal", "float-bidirectional-capped"])
def test_channel_split_backward_interpreted_on_cpu_matches_reference(monkeypatch, deterministic,
                                                                     is_causal, cap, kv_len):
    """BackwardConfig.channel_split at head dim 256 (both consumers on one 64-key tile, S and
    dP split by keys, dK, dV and dQ by channels, P and dS meeting in shared memory), after the
    Mosaic forward, on CPU under jax's GPU interpret mode, against the float64 reference as
    test_backward_interpreted_on_cpu_matches_reference does."""
    seed = int(np.random.SeedSequence().entropy % 2**31)
    batch = packed_batch(seed, batch=1, kv_len=kv_len, num_heads=2, num_kv_heads=1,
                         head_dim=256, dtype="bfloat16", poison_padding=True, num_docs=(2, 4),
                         segment_ids="shuffled", pad_tokens=(20, 60))
    steps = []
    rule = mosaic_bwd.key_side_rule
    monkeypatch.setattr(mosaic_bwd, "key_side_rule",
                        lambda *args: steps.append(args[1].__name__) or rule(*args))
    report = _interpreted_training_check(batch, seed, deterministic, is_causal, cap)
    assert report.ok, f"seed={seed}\n{report}"
    assert set(steps) == {"k_cols"}  # the split's masked steps ran (keys along the columns)


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("workers", [1, 5, 13])
def test_persistent_workers_each_run_many_programs(monkeypatch, workers):
    """With 132 SMs the other tests here give each persistent worker one program at most. With
    the SMs capped each worker runs many in turn: the key/value ring, the two Q buffers, the
    table entries loaded rounds ahead and the every-other-round order go on across programs,
    and the last round leaves some workers without one. Against the reference on row-aligned
    tiles (soft cap and sinks) and on document chunks (their partial stores leave from the
    round's Q buffer), then bitwise reruns with exact zeros on the padding."""
    monkeypatch.setattr(mosaic_fwd, "device_sms", lambda: workers)
    (mask,) = create_attention_mask(*_batch(CASES[0], 1).layout.arrays, fwd_params=FWD)
    assert mosaic_fwd.choose_config(mask, 128, 2, True, 1000, batch=2, heads=4,
                                    keys=1000).persistent  # 64 programs
    _assert_matches(CASES[0], dict(logits_soft_cap=4.0, sinks=True))
    seed = int(np.random.SeedSequence().entropy % 2**31)
    report = _check(CHUNKED[2], {}, seed, batch=_chunked_batch(CHUNKED[2], seed))
    assert report.ok, f"seed={seed}\n{report}"
    _assert_bitwise_and_padding_exact(_chunked_batch(CHUNKED[0], 31))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("mixed", [False, True], ids=["chunked", "mixed"])
def test_forward_schedule_from_the_mask_is_bitwise_the_built_one(mixed):
    """The forward reading the mask's schedule and the forward building its tables in the call
    (the same mask without it): bitwise the same output, logsumexp and gradients. With the
    schedule the forward's masked steps test key ranks, without it ids and positions."""
    batch = _chunked_batch(CHUNKED[2], 21, mixed=mixed)
    q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
    layout = [jnp.asarray(a) for a in batch.layout.arrays]
    masks = create_attention_mask(*layout, fwd_params=FWD, bwd_params=BWD128, calc_bwd_mask=True)
    assert masks[0].schedule is not None and masks[0].schedule.slots is not None
    bare = (dataclasses.replace(masks[0], schedule=None),) + masks[1:]

    @jax.jit
    def step(q, k, v, masks):
        def loss(q, k, v):
            out, lse = flash_attention(q, k, v, *layout, mask=masks, scale=0.1, fwd_params=FWD,
                                       bwd_params=BWD128, backend="mosaic", return_residual=True)
            return jnp.sum(out.astype(jnp.float32) ** 2) + jnp.sum(
                jnp.where(jnp.isfinite(lse), lse, 0.0)), (out, lse)
        grads, (out, lse) = jax.grad(loss, argnums=(0, 1, 2), has_aux=True)(q, k, v)
        return (out, lse) + grads

    for a, b in zip(step(q, k, v, masks), step(q, k, v, bare)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("case,variant", [
    (CASES[0], {}),  # 2 heads per program
    (CASES[0], dict(logits_soft_cap=4.0, local_window_size=(40, 0))),
    (CASES[2], {}),  # decode, MQA: 4 heads
    (CASES[5], dict(is_causal=False)),
    (CASES[7], {}),  # 8 heads
    (CASES[7], dict(return_residual=True)),
    (CHUNKED[2], {}),  # document chunks, 4 heads
    (CHUNKED[0], dict(logits_soft_cap=5.0)),
], ids=lambda x: _case_id(x) if "heads" in x else _variant_id(x))
@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
def test_packed_heads_forward_matches_reference(monkeypatch, case, variant, overlap):
    """The forward with every query head of a kv group that pack_heads allows in one program
    (MosaicConfig.pack, by default only for fewer queries than a program's rows), through the
    whole API, the Mosaic backward after it."""
    def packed(config, group):
        return dataclasses.replace(config, overlap=overlap, pack=mosaic_fwd.pack_heads(group),
                                   persistent=False)

    with _edited_configs(monkeypatch, packed) as chosen:
        seed = int(np.random.SeedSequence().entropy % 2**31)
        batch = _chunked_batch(case, seed) if case in CHUNKED else None
        report = _check(case, variant, seed, batch=batch)
        assert report.ok, f"seed={seed}\n{report}"
    packs = [config.pack for config in chosen]
    n, k = case["heads"]
    assert packs and set(packs) == {mosaic_fwd.pack_heads(n // k)} and packs[0] > 1


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("variant", [{}, dict(is_causal=False, local_window_size=(9, 4)),
                                     dict(sinks=True, logits_soft_cap=4.0)], ids=_variant_id)
@pytest.mark.parametrize("case", [CASES[1], CASES[2], CASES[3], CASES[6], CASES[7]],
                         ids=_case_id)
@pytest.mark.parametrize("rank_rule", [True, False], ids=["ranks", "positions"])
def test_either_rule_matches_reference(monkeypatch, case, variant, rank_rule):
    """The masked tiles' rule on key ranks (MosaicConfig.rank_rule; by default where the mask's
    schedule brings the layouts) asked for where the call builds its layouts (packed heads,
    split keys, head dim 256, 256x64 blocks, repeated and zero positions), and the rule on
    positions and ids asked for where the schedule would bring ranks: each through the whole
    API, the backward after it with the same rule (the Mosaic one, BackwardConfig.rank_rule,
    where it takes the head dim)."""
    monkeypatch.setattr(mosaic_bwd, "chosen_config",
                        lambda *_: mosaic_bwd.BackwardConfig(rank_rule=rank_rule))
    with _edited_configs(monkeypatch, lambda config, group: dataclasses.replace(
            config, rank_rule=rank_rule)) as chosen:
        _assert_matches(case, variant, bwd=BWD128)
    assert chosen and all(config.rank_rule is rank_rule for config in chosen), chosen


# few queries against many keys, where the forward splits the keys by default
SPLIT_CASES = [
    dict(kv_len=3001, q_len=1, heads=(8, 2), head_dim=128, dtype="bfloat16", batch=1),  # decode
    dict(kv_len=2500, q_len=300, heads=(4, 4), head_dim=64, dtype="float16",
         layout=dict(segment_ids="reused")),
    CASES[7],  # 77 queries against 1100 keys, 16 / 2 heads, shuffled ids
]


@pytest.mark.gpu
@hopper
@pytest.mark.parametrize("variant", [{}, dict(logits_soft_cap=5.0),
                                     dict(is_causal=False, local_window_size=(9, 4)),
                                     dict(return_residual=True, is_causal=False)],
                         ids=_variant_id)
@pytest.mark.parametrize("case", SPLIT_CASES, ids=_case_id)
@pytest.mark.parametrize("splits,overlap", [(None, False), (7, True)],
                         ids=["default", "7-overlap"])
def test_split_keys_forward_matches_reference(monkeypatch, case, variant, splits, overlap):
    """The forward with each program's key tiles split (MosaicConfig.splits: by default where
    fewer queries than keys leave SMs idle; or 7 splits in the overlapped order, some of them
    empty on the shorter rows), through the whole API with the Mosaic backward after it; the
    residual's logsumexp is the splits' combined one."""
    def split(config, group):
        return dataclasses.replace(config, overlap=overlap, splits=splits or config.splits,
                                   persistent=False)

    with _edited_configs(monkeypatch, split) as chosen:
        _assert_matches(case, variant)
    assert chosen and all(config.splits > 1 for config in chosen), chosen


@pytest.mark.gpu
@hopper
def test_split_keys_bitwise_and_padding_exact(monkeypatch):
    """Split keys: bitwise reruns, and NaN/Inf in the padding give exactly 0 there."""
    case = dict(SPLIT_CASES[1], layout=dict(segment_ids="shuffled", num_docs=(2, 4)))
    with _edited_configs(monkeypatch, lambda config, group: dataclasses.replace(
            config, splits=5, persistent=False)) as chosen:
        _assert_bitwise_and_padding_exact(_batch(case, 13))
    assert chosen
