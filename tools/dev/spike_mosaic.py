"""Spike (issue: FA3-class speed): the Pallas Mosaic GPU forward (mosaic_fwd.py), driven by our
block mask, against today's Triton forward; same inputs, one process.

    python tools/dev/spike_mosaic.py [--quick | --lower-only] [--configs 64x128x2,64x128x2t,...]

First a check on small odd shapes with NaN in the padding (both kernels against the float64
reference, beside bf16 math done plainly), then per workload: fwd ms and TF/s of each kernel and
configuration, and the largest differences from the Triton output and logsumexp. A config is
BQxBKVxSTAGES (BKV below the mask's 128: the mask built at that width, as the public API's
FlashAttentionParamsConfig(128, 64) makes 64-key tiles skip at 64 keys), with trailing letters
(FLAGS): "t" for the tiles' layout by TMA, "o" for each tile's softmax overlapped with the
previous tile's PV, "p" persistent, "r" the rank rule forced,
"n" the rule on positions and ids (else the rank rule wherever the config's schedule fits), "m"
soft-capped bfloat16 with running row maxima (MosaicConfig.fixed_reference off); "/P"
packs up to P query heads of a kv group per program (MosaicConfig.pack, as many as the
workload's group allows; 1 without it); a suffix "~NAME" takes the kernel from
`mosaic_fwd_ab_NAME.py`, a copy of mosaic_fwd.py placed beside it (ignored by git; e.g. the
file at an earlier commit, so that a change is timed before and after in one process); a suffix
"@C" soft-caps that kernel at C (after "~NAME" where both are given).
--rounds N times every kernel N times in turn, every other round in reverse order (the machine's
spread shows, and a drift within a round cancels), then prints each one's median over the
rounds; --layers N times N calls chained in one jitted function (each output the next call's
query, as bench.py --layers), so that no call's dispatch dilutes the times (per call); --rows picks
workloads, --logits-soft-cap C caps every kernel without its own "@", --fa3 times
FlashAttention-3 in the same rounds, --sms N runs only the small check, the persistent kernels
on N SMs (each worker then takes many programs in turn). --interpret runs only the small check's
first and third workloads, on CPU under jax's GPU interpret mode
(packages/kvax-core/tests/mosaic_interpret.py; no GPU needed, about 20 s a config): a
trial's logic checked before device time is spent on it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import in_turns, layered, lowered_for_cuda  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


# the small check's workloads: odd lengths, documents, padding (its NaN added by the check)
CHECK_WORKLOADS = (
    Workload(1000, 5, 77, num_heads=4, num_kv_heads=2, seed=11, ids="shuffled"),
    Workload(1500, 3, 130, batch=2, num_heads=4, num_kv_heads=1, seed=12),
    Workload(777, 1, 0, num_heads=2, num_kv_heads=2, seed=13, causal=False),
    Workload(2048, num_pad_tokens=300, doc_median=90, num_heads=4, num_kv_heads=4, seed=14),
    # rows that take the document chunks (runs.py), documents starting off multiples of 8
    Workload(3001, 3, 211, num_heads=4, num_kv_heads=2, seed=15, ids="shuffled"),
    Workload(2500, num_pad_tokens=100, doc_median=700, batch=2, num_heads=4, num_kv_heads=2,
             seed=16),
)

# the measured rows (--rows picks them by number)
ROWS = (Workload(65536, 8, 2000),
        Workload(65536, num_pad_tokens=1000, doc_median=1100, ids="shuffled"),
        Workload(65536, num_pad_tokens=1000, doc_median=190),
        Workload(131072, 16, 2000),
        Workload(65536, 1, 0),
        Workload(16384, 1, 0, causal=False))


def config_cap(text: str, cap):
    """The soft cap a config asks for ("...@C"), else cap."""
    return float(text.split("@")[1]) if "@" in text else cap


# a config's trailing letters: MosaicConfig fields set to True (trial patches add theirs here);
# "n" sets rank_rule to False (the rule on positions and ids), "m" fixed_reference (row maxima)
FLAGS = {"t": "layout_by_tma", "o": "overlap", "p": "persistent", "r": "rank_rule"}
FALSE_FLAGS = {"n": "rank_rule", "m": "fixed_reference"}


SMS = None  # --sms: the SM count the persistent kernels take (else the GPU's)
HOPPER = "NVIDIA H100 80GB HBM3"  # the device kind whose default blocks runs off a GPU take
INTERPRET = False  # --interpret: the Mosaic kernels called eagerly (no Triton) for the interpreter


def forward_module(text: str):
    """The module a config's kernel comes from: mosaic_fwd, or with "~NAME" the copy
    mosaic_fwd_ab_NAME.py beside it (its own MosaicConfig, schedule and forward)."""
    import importlib

    name = text.split("@")[0].partition("~")[2]
    module = importlib.import_module("kvax._src.attention.mosaic_fwd" +
                                     (f"_ab_{name}" if name else ""))
    if SMS is not None:
        module.device_sms = lambda: SMS
    return module


def parse_config(text: str, group: int = 1):
    """The config a text names, its pack clamped to what a kv group of `group` heads takes."""
    module = forward_module(text)
    MosaicConfig, pack_heads = module.MosaicConfig, module.pack_heads

    text = text.split("@")[0].split("~")[0]
    bq, bkv, stages, flags, pack = re.fullmatch(r"(\d+)x(\d+)x(\d+)([a-zA-Z]*)(?:/(\d+))?",
                                                text).groups()
    unknown = sorted(set(flags) - set(FLAGS) - set(FALSE_FLAGS))
    if unknown:  # (a trial's letter left in a script after its patch went)
        raise ValueError(f"config {text!r}: unknown letters {unknown}; known: "
                         f"{sorted(FLAGS) + sorted(FALSE_FLAGS)}")
    return MosaicConfig(block_q=int(bq), block_kv=int(bkv), stages=int(stages),
                        pack=min(int(pack or 1), pack_heads(group, int(bq))),
                        **{FLAGS[f]: True for f in flags if f in FLAGS},
                        **{FALSE_FLAGS[f]: False for f in flags if f in FALSE_FLAGS})


def _prepare(w: Workload, params):
    import jax.numpy as jnp

    from kvax._src.attention.variant import MaskVariant

    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, w.dtype) for x in (q, k, v))
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    return q, k, v, pos, seg, _mask(w, pos, seg, params), MaskVariant(w.causal)


def _mask(w: Workload, pos, seg, params):
    from kvax.ops import create_attention_mask

    (mask,) = create_attention_mask(pos, seg, pos, seg, fwd_params=params, is_causal=w.causal)
    return mask


def kernels(w: Workload, configs, params, cap=None):
    import jax
    import jax.numpy as jnp

    from kvax._src.attention import triton_fwd
    from kvax._src.config import PADDING_SEGMENT_ID

    q, k, v, pos, seg, mask, variant = _prepare(w, params)
    masks = {mask.col_block: mask}
    scale = jnp.float32(w.head_dim ** -0.5)
    # interpreted: no Triton, and the kernels called eagerly (under an outer jit the interpreter
    # may hang on a 2-core machine)
    jit = (lambda f: f) if INTERPRET else jax.jit
    fns = {} if INTERPRET else {"triton": jax.jit(lambda q, k, v: triton_fwd.forward(
        q, k, v, scale, pos, seg, pos, seg, mask, sequential=False, params=params,
        logits_soft_cap=cap))}
    for text in configs:
        cfg = parse_config(text, w.num_heads // w.num_kv_heads)
        mosaic_fwd = forward_module(text)
        # narrower key tiles than the mask's blocks take a mask of their width, as the public
        # API's do (FlashAttentionParamsConfig(128, 64): 64-key tiles that skip at 64 keys)
        width = min(cfg.block_kv, mask.col_block)
        if width not in masks:
            masks[width] = _mask(w, pos, seg, dataclasses.replace(params, kv_block_size=width))
        # the config's own tables and layouts, built before the call as the mask's are (with
        # the rank rule's layouts unless the config says rank_rule=False)
        built = dataclasses.replace(cfg, rank_rule=cfg.rank_rule is not False)
        own = dataclasses.replace(masks[width], schedule=mosaic_fwd.schedule(
            masks[width], pos, seg, pos, seg, pad_id=PADDING_SEGMENT_ID, config=built))
        fns[text] = jit(lambda q, k, v, cfg=cfg, c=config_cap(text, cap), m=own,
                        fwd=mosaic_fwd.forward:
                        fwd(q, k, v, scale, pos, seg, pos, seg, m, variant=variant,
                            pad_id=PADDING_SEGMENT_ID, config=cfg, logits_soft_cap=c))
    return (q, k, v, pos, seg), fns


def max_diff(a, b, where) -> float:
    """The largest |a - b| where `where` holds (logsumexps: rows that see no key are -inf in
    both and left out, without numpy's warning for -inf - -inf)."""
    return float(np.max(np.abs(np.subtract(a, b, out=np.zeros_like(b), where=where))))


def check_small(configs, params, cap=None) -> bool:
    """Odd lengths, documents, padding holding NaN: each kernel's error against float64, beside
    the same math done plainly in bfloat16 (configs grouped by their soft cap)."""
    caps = {config_cap(text, cap) for text in configs}
    return all([check_capped([t for t in configs if config_cap(t, cap) == c], params, c)
                for c in sorted(caps, key=lambda c: -1 if c is None else c)])


def check_capped(configs, params, cap) -> bool:
    import jax
    import jax.numpy as jnp

    from kvax_testing.reference import mask_terms, reference_attention, soft_cap

    ok = True
    for w in CHECK_WORKLOADS[0:3:2] if INTERPRET else CHECK_WORKLOADS:
        (q, k, v, pos, seg), fns = kernels(w, configs, params, cap)
        pad = (seg == -1)[:, :, None, None]
        qn, kn, vn = (jnp.where(pad, jnp.nan, x) for x in (q, k, v))
        scale = w.head_dim ** -0.5
        terms = mask_terms(is_causal=w.causal)
        logits_fn = None if cap is None else soft_cap(cap)
        with jax.enable_x64(True):
            ref, ref_lse = reference_attention(*(jnp.asarray(np.asarray(x, np.float64))
                                                 for x in (q, k, v)), pos, seg, pos, seg,
                                               scale=scale, dtype=jnp.float64, mask_terms=terms,
                                               logits_fn=logits_fn)
            ref, ref_lse = np.asarray(ref), np.asarray(ref_lse).transpose(0, 2, 1)
        plain, _ = reference_attention(q, k, v, pos, seg, pos, seg, scale=scale,
                                       dtype=q.dtype, mask_terms=terms, logits_fn=logits_fn)
        base = float(np.max(np.abs(np.asarray(plain, np.float64) - ref)))
        live = np.isfinite(ref_lse)  # [B, T, N]
        for name, fn in fns.items():
            try:
                out, lse = jax.block_until_ready(fn(qn, kn, vn))
            except Exception:  # noqa: BLE001 - a spike reports and goes on
                print(f"  {w.name} {name}: FAILED\n{traceback.format_exc()[-3000:]}", flush=True)
                ok = False
                continue
            out = np.asarray(out, np.float64)
            lse = np.asarray(lse, np.float64).transpose(0, 2, 1)
            err = float(np.max(np.abs(out - ref))) if np.all(np.isfinite(out)) else float("nan")
            lse_err = max_diff(lse, ref_lse, live)
            empty_ok = bool(np.all(out[~live] == 0) and np.all(lse[~live] == -np.inf))
            good = err <= 2 * base and lse_err < 1e-3 and empty_ok
            ok &= good
            print(f"  {w.name:<60} {name:<10} err {err:.2e} (bf16 plain {base:.2e}) lse "
                  f"{lse_err:.1e} empty rows {empty_ok} {'ok' if good else 'WRONG'}", flush=True)
    return ok


def fa3_forward(w: Workload, pos, seg):
    """FlashAttention-3's varlen forward on w's layout, as the benchmark runs it: jitted
    (q, k, v) -> output."""
    import jax

    from peers import peer

    fa3 = peer("fa3").jax_attention(w, False)
    extra = fa3.extra(pos, seg)
    return jax.jit(lambda q, k, v: fa3.attn(q, k, v, extra))


def measure(w: Workload, configs, params, repeats: int, rounds: int = 1, cap=None,
            fa3: bool = False, layers: int = 1) -> None:
    import jax

    from kvax._src.config import PADDING_SEGMENT_ID

    (q, k, v, pos, seg), fns = kernels(w, configs, params, cap)
    if fa3:  # FlashAttention-3 beside them (no logsumexp to compare)
        fa3_fn = fa3_forward(w, pos, seg)
        fns["fa3"] = jax.jit(lambda q, k, v: (fa3_fn(q, k, v), None))
    flops = w.flops(backward=False)
    # FA3 is compared on the real rows only (its padding rows attend to each other); our kernels
    # on every row, padding included
    live = np.asarray(seg != PADDING_SEGMENT_ID)[:, :, None, None]
    results = {}
    for name, fn in fns.items():
        try:
            start = time.perf_counter()
            out, lse = jax.block_until_ready(fn(q, k, v))
            first = time.perf_counter() - start
        except Exception:  # noqa: BLE001
            print(f"  {w.name} {name}: FAILED\n{traceback.format_exc()[-2000:]}", flush=True)
            continue
        results[name] = (np.asarray(out, np.float32), None if lse is None else np.asarray(lse))
        diff = lse_diff = 0.0
        if name != "triton" and "triton" in results:
            delta = results[name][0] - results["triton"][0]
            diff = float(np.max(np.abs(np.where(live, delta, 0) if name == "fa3" else delta)))
            a, b = results[name][1], results["triton"][1]
            if a is not None:
                lse_diff = max_diff(a, b, np.isfinite(b))  # rows that see a key
        print(f"  {w.name:<62} {name:<10} first {first:5.1f} s  max diff {diff:.2e} lse "
              f"{lse_diff:.1e}", flush=True)
    chained = {name: fns[name] if layers == 1 else jax.jit(layered(
        lambda q, k, v, fn=fns[name]: fn(q, k, v)[0], layers)) for name in results}
    if not chained:  # every kernel failed (printed above)
        return
    print(f"  {w.name}: ms of {layers} chained call(s) per round, in turn:", flush=True)
    times = in_turns({name: {"fwd": lambda fn=fn: fn(q, k, v)} for name, fn in chained.items()},
                     rounds, repeats, label=str)
    per_call = {name: np.asarray(t["fwd"]) / layers for name, t in times.items()}
    first = configs[0] if configs and configs[0] in per_call else next(iter(per_call))
    for name, ms_rounds in per_call.items():  # each one's median, and per round against the first
        ms = float(np.median(ms_rounds))
        against = per_call[first] / ms_rounds
        print(f"  {w.name:<62} {name:<10} median {ms:8.3f} ms {flops / ms / 1e9:6.0f} TF/s, "
              f"{first} / it per round: median {np.median(against):.3f} "
              f"[{against.min():.3f}, {against.max():.3f}]", flush=True)


def lower_only(configs, cap) -> None:
    """Each configuration's kernel lowered for CUDA on the check's first workload (any machine):
    seconds and the module's size (measure.lowered_for_cuda)."""
    from kvax.utils import default_params

    params = default_params(HOPPER, backward=False)
    (q, k, v, _, _), fns = kernels(CHECK_WORKLOADS[0], configs, params, cap)
    for text in configs:
        print(f"{text}: {lowered_for_cuda(fns[text], q, k, v)}", flush=True)


def interpret_check(configs, params, cap) -> None:
    """The small check on CPU under GPU interpret mode."""
    tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packages",
                         "kvax-core", "tests")
    sys.path.insert(0, tests)
    import mosaic_interpret

    print("interpreted on CPU (small check, 2 workloads):", flush=True)
    with mosaic_interpret.interpreted():
        ok = check_small(configs, params, cap)
    print("check", "passed" if ok else "FAILED", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--configs", default="64x128x2,64x128x2t,64x64x3")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--layers", type=int, default=1, help="calls chained per timing")
    p.add_argument("--logits-soft-cap", type=float, default=None, help="every kernel soft-capped")
    p.add_argument("--rows", default="", help="comma-separated row numbers (0-5), all by default")
    p.add_argument("--quick", action="store_true", help="the 8-document row only")
    p.add_argument("--fa3", action="store_true",
                   help="time FlashAttention-3 (flash-attn3-jax) beside the kernels")
    p.add_argument("--skip-check", action="store_true",
                   help="no small check first (only for kernels that passed it already)")
    p.add_argument("--lower-only", action="store_true",
                   help="lower the Mosaic kernels for CUDA and stop (works without a GPU)")
    p.add_argument("--sms", type=int, default=None,
                   help="the small check only, the persistent kernels on this many SMs")
    p.add_argument("--interpret", action="store_true",
                   help="the small check only (2 workloads), on CPU under jax's GPU interpret "
                        "mode")
    args = p.parse_args(argv)
    global SMS, INTERPRET
    SMS, INTERPRET = args.sms, args.interpret
    configs = args.configs.split(",")
    if args.lower_only:
        return lower_only(configs, args.logits_soft_cap)
    import jax

    from kvax.utils import default_params

    if args.interpret:
        return interpret_check(configs, default_params(HOPPER, backward=False),
                               args.logits_soft_cap)
    params = default_params(jax.devices()[0].device_kind, backward=False)
    print("device", jax.devices()[0].device_kind, "jax", jax.__version__, flush=True)
    cap = args.logits_soft_cap
    if not args.skip_check:
        print("check (small, NaN in padding):", flush=True)
        print("check", "passed" if check_small(configs, params, cap) else "FAILED", flush=True)
    if args.sms is not None:
        return
    rows = list(ROWS)
    if args.quick:
        rows = rows[:1]
    elif args.rows:
        rows = [rows[int(i)] for i in args.rows.split(",")]
    for w in rows:
        measure(w, configs, params, args.repeats, args.rounds, cap, fa3=args.fa3,
                layers=args.layers)


if __name__ == "__main__":
    main()
