r"""Context-parallel scaling: kvax-dist's all-gather context parallelism over 1, 2, 4... devices.

    python tools/bench.py mha_cp_bwd --seq-lens 131072 262144 524288 --cp-sizes 1 2 4 \
        --doc-len 32768

For every (length, context size): forward and forward+backward time of the sharded step (the
masks are built once outside it, as a model builds them once for all layers; inputs already
permuted and sharded as they leave the previous layer), per-device TF/s against one device at the
first length, each shard's own work timed alone on one device (slowest / fastest shard), the time
of the K/V all-gather (and of the dK/dV reduce-scatter) alone and its share of the step, the
compiled program's memory per device, and the output's difference from one device's.
Each result is appended to OUT/cp_results.jsonl as soon as it is measured.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from measure import median_ms, memory_gib, rel_err
from workloads import Workload, for_args, inputs, sample_rows


def single_device(w: Workload, arrays, args, sample):
    """One device, no mesh: the baseline, and each shard's own work when given its queries."""
    import jax

    from kvax.ops import create_attention_mask, flash_attention

    q, k, v, qp, qs, kp, ks, dout = arrays
    scale = w.head_dim ** -0.5
    masks = jax.jit(lambda *lay: create_attention_mask(*lay, calc_bwd_mask=True))(qp, qs, kp, ks)

    extra = (masks, qp, qs, kp, ks)  # arguments, as a training step has them (bench.py)

    def attn(q, k, v, extra):
        m, *lay = extra
        return flash_attention(q, k, v, *lay, mask=m, scale=scale)

    fwd = jax.jit(attn)
    fwdbwd = jax.jit(lambda q, k, v, x, d: jax.vjp(lambda *a: attn(*a, x), q, k, v)[1](d))
    out = fwd(q, k, v, extra)
    fwd_ms = median_ms(lambda: fwd(q, k, v, extra), args.repeats)
    fwdbwd_ms = (median_ms(lambda: fwdbwd(q, k, v, extra, dout), args.repeats)
                 if args.mode.endswith("bwd") else None)
    mem = memory_gib(fwdbwd, q, k, v, extra, dout) if sample else None
    return fwd_ms, fwdbwd_ms, mem, (np.asarray(out[sample[0], sample[1]], np.float32)
                                    if sample else None)


def context_parallel(w: Workload, host, cp: int, devices, args, sample):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from kvax.ops import create_attention_mask, flash_attention
    from kvax.utils import attention_specs
    from kvax_dist import permutation

    q, k, v, pos, seg, dout = host
    mesh = jax.sharding.Mesh(np.asarray(devices[:cp]), ("context",))
    seq = NamedSharding(mesh, P(None, "context"))
    rep = NamedSharding(mesh, P())
    permute = {"true": True, "false": False, "striped": "striped"}[
        args.permute_tokens_for_load_balance]
    strategy = "striped" if permute == "striped" else "chunks"
    order = (lambda x: permutation.permute(x, cp, strategy)) if permute else (lambda x: x)
    unorder = (lambda x: permutation.unpermute(x, cp, strategy)) if permute else (lambda x: x)
    perm = lambda x: np.asarray(order(jnp.asarray(x)))  # noqa: E731
    qp_, qs_ = perm(pos), perm(seg)
    qd, kd, vd, dd = (jax.device_put(perm(x), seq) for x in (q, k, v, dout))
    qpd, qsd = jax.device_put(qp_, seq), jax.device_put(qs_, seq)
    kpd, ksd = jax.device_put(pos, rep), jax.device_put(seg, rep)
    scale = w.head_dim ** -0.5
    specs = ((None, "context", None, None), (None, None, None, None))

    with attention_specs(*specs):
        masks = jax.jit(lambda *lay: create_attention_mask(*lay, calc_bwd_mask=True, mesh=mesh))(
            qpd, qsd, kpd, ksd)

    extra = (masks, qpd, qsd, kpd, ksd)

    def attn(q, k, v, extra):
        m, *lay = extra
        with attention_specs(*specs):
            return flash_attention(q, k, v, *lay, mask=m, scale=scale,
                                   permute_tokens_for_load_balance=permute, mesh=mesh)

    fwd = jax.jit(attn)
    fwdbwd = jax.jit(lambda q, k, v, x, d: jax.vjp(lambda *a: attn(*a, x), q, k, v)[1](d))
    out = fwd(qd, kd, vd, extra)
    rec = dict(fwd_ms=median_ms(lambda: fwd(qd, kd, vd, extra), args.repeats))
    if args.mode.endswith("bwd"):
        rec["fwdbwd_ms"] = median_ms(lambda: fwdbwd(qd, kd, vd, extra, dd), args.repeats)
    rec["compiled_gib_per_device"] = memory_gib(fwdbwd, qd, kd, vd, extra, dd)
    out = np.asarray(unorder(jnp.asarray(np.asarray(out))))
    rec["sample"] = out[sample[0], sample[1]].astype(np.float32)

    # the collectives alone: K/V all-gather (+ unpermute) forward, dK/dV reduce-scatter backward
    def gather(k, v):
        return tuple(unorder(jax.lax.all_gather(x, "context", axis=1, tiled=True))
                     for x in (k, v))

    def gather_scatter(k, v):
        g = gather(k, v)
        return tuple(jax.lax.psum_scatter(order(x), "context", scatter_dimension=1, tiled=True)
                     for x in g)

    spec = P(None, "context")
    ag = jax.jit(jax.shard_map(gather, mesh=mesh, in_specs=(spec, spec), out_specs=(spec, spec),
                               check_vma=False))
    agrs = jax.jit(jax.shard_map(gather_scatter, mesh=mesh, in_specs=(spec, spec),
                                 out_specs=(spec, spec), check_vma=False))
    rec["allgather_ms"] = median_ms(lambda: ag(kd, vd), args.repeats)
    rec["allgather_reducescatter_ms"] = median_ms(lambda: agrs(kd, vd), args.repeats)

    # each shard's own work, alone on one device: its queries against the whole kv sequence
    chunk = w.seq_len // cp
    shard_fwd, shard_fwdbwd = [], []
    for i in range(cp):
        rows = slice(i * chunk, (i + 1) * chunk)
        arrays = [jnp.asarray(perm(q)[:, rows]), jnp.asarray(k), jnp.asarray(v),
                  jnp.asarray(qp_[:, rows]), jnp.asarray(qs_[:, rows]), jnp.asarray(pos),
                  jnp.asarray(seg), jnp.asarray(perm(dout)[:, rows])]
        f_ms, fb_ms, _, _ = single_device(w, arrays, args, None)
        shard_fwd.append(f_ms)
        shard_fwdbwd.append(fb_ms)
    rec.update(shard_fwd_ms=shard_fwd, shard_fwdbwd_ms=shard_fwdbwd)
    return rec


def run_cp(args, devices=None):
    import jax
    import jax.numpy as jnp

    devices = devices or jax.devices()
    sizes = args.cp_sizes or [len(devices)]
    if max(sizes) > len(devices):
        raise ValueError(f"--cp-sizes {sizes} needs {max(sizes)} devices, have {len(devices)}")
    log_path = os.path.join(args.out, "cp_results.jsonl")
    results, base = [], None
    for seq_len in args.seq_lens or [131072]:
        w = for_args(args, seq_len)
        q, k, v, pos, seg = inputs(w)
        dt = jnp.dtype(w.dtype)
        q, k, v = (np.asarray(jnp.asarray(x, dt)) for x in (q, k, v))
        dout = np.asarray(jnp.asarray(np.random.default_rng(3).standard_normal(q.shape), dt))
        rows = sample_rows(w)
        sample = (rows[:, 0], rows[:, 1])
        ref = None
        for cp in sizes:
            if cp == 1:
                arrays = [jnp.asarray(x) for x in (q, k, v, pos, seg, pos, seg, dout)]
                f_ms, fb_ms, mem, out = single_device(w, arrays, args, sample)
                rec = dict(fwd_ms=f_ms, fwdbwd_ms=fb_ms, compiled_gib_per_device=mem,
                           sample=out)
            else:
                rec = context_parallel(w, (q, k, v, pos, seg, dout), cp, devices, args, sample)
            sampled = rec.pop("sample")
            if cp == 1:
                ref = sampled
            permuted = args.permute_tokens_for_load_balance if cp > 1 else "false"
            rec.update(workload=dataclasses.asdict(w), name=w.name, seq_len=seq_len,
                       devices=cp, permuted=permuted, device_kind=devices[0].device_kind,
                       allowed_pairs=w.allowed_pairs())
            rec["fwd_tflops_per_device"] = w.flops(False) / rec["fwd_ms"] / 1e9 / cp
            if rec.get("fwdbwd_ms"):
                rec["fwdbwd_tflops_per_device"] = w.flops(True) / rec["fwdbwd_ms"] / 1e9 / cp
            if ref is not None and cp > 1:
                rec["rel_err_vs_one_device"] = rel_err(sampled, ref)
            if base is None and cp == 1:
                base = rec
            derive(rec, base)
            summarize(rec, base)
            with open(log_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
            results.append(rec)
    peaks = {}
    for d in devices[:max(sizes)]:
        try:
            peaks[str(d.id)] = d.memory_stats()["peak_bytes_in_use"] / 2**30
        except Exception:  # noqa: BLE001 - CPU devices keep no statistics
            pass
    print("peak memory in use per device over the whole run (GiB):",
          {k: round(v, 2) for k, v in peaks.items()})
    return [dict(cp=results, peak_gib_per_device_whole_run=peaks)]


def derive(rec, base):
    """Ratios from the measured times: per device against one device at the first length,
    slowest over fastest shard, the collectives' share of the step."""
    if base is not None:
        for key in ("fwd_tflops_per_device", "fwdbwd_tflops_per_device"):
            if rec.get(key) and base.get(key):
                rec[key.replace("tflops_per_device", "vs_one_device_first_length")] = (
                    rec[key] / base[key])
    if rec["devices"] > 1:
        for key in ("shard_fwd_ms", "shard_fwdbwd_ms"):
            times = [t for t in rec.get(key) or [] if t]
            if times:
                rec[key.replace("_ms", "_slowest_over_fastest")] = max(times) / min(times)
        rec["allgather_share_fwd"] = rec["allgather_ms"] / rec["fwd_ms"]
        if rec.get("fwdbwd_ms"):
            rec["collectives_share_fwdbwd"] = rec["allgather_reducescatter_ms"] / rec["fwdbwd_ms"]


def summarize(rec, base):
    line = (f"{rec['name']} cp={rec['devices']}: fwd {rec['fwd_ms']:.2f} ms "
            f"({rec['fwd_tflops_per_device']:.0f} TF/s/device)")
    if rec.get("fwdbwd_ms"):
        line += (f", fwd+bwd {rec['fwdbwd_ms']:.2f} ms "
                 f"({rec['fwdbwd_tflops_per_device']:.0f} TF/s/device)")
    if base is not None:
        line += (f"; per device vs 1 device at {base['seq_len']}: "
                 f"{rec.get('fwd_vs_one_device_first_length', float('nan')):.2f} fwd, "
                 f"{rec.get('fwdbwd_vs_one_device_first_length', float('nan')):.2f} fwd+bwd")
    if rec["devices"] > 1:
        line += (f"\n    shards slowest/fastest: fwd "
                 f"{rec.get('shard_fwd_slowest_over_fastest', 0):.3f}, fwd+bwd "
                 f"{rec.get('shard_fwdbwd_slowest_over_fastest', 0):.3f}; all-gather "
                 f"{rec['allgather_ms']:.2f} ms ({100 * rec['allgather_share_fwd']:.1f}% of fwd), "
                 f"+reduce-scatter {rec['allgather_reducescatter_ms']:.2f} ms "
                 f"({100 * rec.get('collectives_share_fwdbwd', 0):.1f}% of fwd+bwd)")
        if "rel_err_vs_one_device" in rec:
            line += f"; error vs one device {rec['rel_err_vs_one_device']:.2e}"
    if rec.get("compiled_gib_per_device"):
        line += f"; compiled memory {rec['compiled_gib_per_device']:.2f} GiB/device"
    print(line, flush=True)
