"""What soft-capping costs FlashAttention-3 (flash-attn3-jax's varlen kernels) on a Hopper GPU,
chained as a model's layers like spike_softcap.py times ours: forward and forward+backward with
no cap and with --cap, in turns. flash-attn3-jax's wrapper always passes softcap=0.0; here its
FFI calls get the cap while each function is lowered. First a check that the cap reaches the
kernels: FA3 capped at 2 against kvax capped at 2 (close) and against kvax uncapped (apart).

    python tools/dev/fa3_softcap.py [--doc-median 1100] [--cap 30] [--layers 8] [--rounds 6]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from unittest import mock

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from measure import against, in_turns, layered, rel_err  # noqa: E402
from peers import fa3_cu_seqlens  # noqa: E402
from workloads import Workload, inputs  # noqa: E402


@contextlib.contextmanager
def fa3_softcap(cap: float):
    """flash-attn3-jax's forward and backward FFI calls lowered with softcap=cap."""
    import jax

    ffi_call = jax.ffi.ffi_call

    def capped(name, *args, **kwargs):
        call = ffi_call(name, *args, **kwargs)
        if not name.startswith("flash_mha"):
            return call
        return lambda *operands, **attrs: call(
            *operands, **(attrs | {"softcap": float(cap)} if "softcap" in attrs else attrs))

    with mock.patch.object(jax.ffi, "ffi_call", capped):
        yield


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--doc-median", type=int, default=1100,
                        help="log-normal documents of this median length (0: 8 documents)")
    parser.add_argument("--cap", type=float, default=30.0)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    import jax
    import jax.numpy as jnp
    from flash_attn3_jax import flash_mha_varlen

    import kvax

    w = (Workload(65536, num_pad_tokens=1000, doc_median=args.doc_median, ids="shuffled")
         if args.doc_median else Workload(65536, num_segments=8, num_pad_tokens=2000))
    q, k, v, pos, seg = inputs(w)
    q, k, v = (jnp.asarray(x, jnp.bfloat16) for x in (q, k, v))
    bounds = jnp.asarray(fa3_cu_seqlens(w))
    longest = int(np.max(np.diff(np.asarray(bounds))))
    scale = w.head_dim ** -0.5

    def fa3(q, k, v):
        b, s = q.shape[:2]
        flat = [x.reshape(b * s, *x.shape[2:]) for x in (q, k, v)]
        out = flash_mha_varlen(*flat, bounds, bounds, max_seqlen_q=longest,
                               max_seqlen_k=longest, softmax_scale=scale, is_causal=w.causal)
        return out.reshape(q.shape)

    def compiled(fn, cap, *operands):
        jax.clear_caches()  # else jit's caches hand back the other cap's lowering
        with fa3_softcap(cap):
            return jax.jit(fn).lower(*operands).compile()

    print(f"device {jax.devices()[0].device_kind}; {w.name}; cap {args.cap}, "
          f"{args.layers} calls chained", flush=True)
    masks = kvax.ops.create_attention_mask(jnp.asarray(pos), jnp.asarray(seg), jnp.asarray(pos),
                                           jnp.asarray(seg))
    ours = {c: kvax.ops.flash_attention(q, k, v, *(jnp.asarray(a) for a in (pos, seg, pos, seg)),
                                        mask=masks, scale=scale, logits_soft_cap=c)
            for c in (None, 2.0)}
    live = np.asarray(seg) != kvax.utils.PADDING_SEGMENT_ID
    got = np.asarray(compiled(fa3, 2.0, q, k, v)(q, k, v), np.float32)[live]
    capped, plain = (np.asarray(ours[c], np.float32)[live] for c in (2.0, None))
    print(f"check: FA3 capped at 2 against kvax capped at 2: {rel_err(got, capped):.2e}, "
          f"against kvax uncapped: {rel_err(got, plain):.2e}", flush=True)

    chain = layered(fa3, args.layers)

    def loss(q, k, v):
        return jnp.sum(chain(q, k, v).astype(jnp.float32))

    runs = {}
    for name, cap in (("no cap", 0.0), (f"cap {args.cap:g}", args.cap)):
        fwd = compiled(chain, cap, q, k, v)
        fwdbwd = compiled(jax.grad(loss, argnums=(0, 1, 2)), cap, q, k, v)
        runs[name] = {"fwd": lambda f=fwd: f(q, k, v),
                      "f+b": lambda f=fwdbwd: f(q, k, v)}
    outs = [np.asarray(runs[name]["fwd"](), np.float32)[live] for name in runs]
    print(f"the chained outputs capped and not differ by {rel_err(*outs):.2e}", flush=True)
    times = in_turns(runs, args.rounds, args.repeats, label=str)
    print(f"\nmedian of {args.rounds} rounds (ms per call of {args.layers} chained, cost "
          "against no cap): fwd | f+b")
    for line in against(times, "no cap", per=args.layers):
        print(line)


if __name__ == "__main__":
    main()
