"""Every peer of the benchmark, described once: its name in tables, what it cannot run (a reason
instead of a result), and how it runs: JAX peers in the benchmark's process (`jax_attention`),
the others in their own process (tools/peer_process.py, under the peer's key).

A JAX peer is `JaxAttention(attn, extra)`: `extra(pos, seg)` builds what `attn(q, k, v, extra)`
reads besides the inputs (a dense mask, document offsets; timed as the peer's "mask" time), and
`repeat_kv` says it needs as many key/value heads as query heads.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from workloads import Workload


@dataclasses.dataclass(frozen=True)
class JaxAttention:
    attn: Callable
    extra: Callable | None = None
    repeat_kv: bool = False


@dataclasses.dataclass(frozen=True)
class Peer:
    key: str  # its --peers name
    label: str  # its name in tables
    why_not: Callable[[Workload, bool], str | None]  # (workload, memory_sweep) -> reason or None
    jax_attention: Callable[[Workload, bool], JaxAttention] | None = None  # None: own process


def _scale(w: Workload) -> float:
    return w.head_dim ** -0.5


def _lacks(w: Workload, name: str, *, window=False, soft_cap=False, sinks=False,
           bidirectional=True) -> str | None:
    """The reason a peer with (or without) these features cannot run w, or None."""
    missing = [what for what, has, used in (("a sliding window", window, w.window is not None),
                                            ("logit soft-capping", soft_cap,
                                             w.soft_cap is not None),
                                            ("attention sinks", sinks, w.sinks),
                                            ("bidirectional attention", bidirectional,
                                             not w.causal)) if used and not has]
    return f"{name} has no {' or '.join(missing)}" if missing else None


def _one_sequence(w: Workload) -> bool:
    return w.num_segments == 1 and w.num_pad_tokens == 0 and not w.doc_median


# cuDNN through jax.nn.dot_product_attention, as its users call it: is_causal for one sequence, a
# dense [T, S] mask for documents.
def _cudnn_why_not(w: Workload, memory_sweep: bool) -> str | None:
    reason = _lacks(w, "jax.nn.dot_product_attention", window=True)
    if reason is None and not _one_sequence(w) and w.seq_len > 32768 and not memory_sweep:
        reason = (f"a dense [{w.seq_len}x{w.seq_len}] mask is what cuDNN users must pass for "
                  "documents; skipped above 32k tokens (memory)")
    return reason


def _cudnn(w: Workload, memory_sweep: bool) -> JaxAttention:
    import jax

    window = None if w.window is None else (w.window, 0 if w.causal else w.seq_len)
    if _one_sequence(w):
        def whole(q, k, v, extra=None):
            return jax.nn.dot_product_attention(q, k, v, scale=_scale(w), is_causal=w.causal,
                                                local_window_size=window,
                                                implementation="cudnn")
        return JaxAttention(whole)

    def dense(q, k, v, mask):
        return jax.nn.dot_product_attention(q, k, v, scale=_scale(w), mask=mask,
                                            implementation="cudnn")

    def make_mask(pos, seg):
        return w.rule(pos[:, :, None], seg[:, :, None], pos[:, None, :], seg[:, None, :])[:, None]
    return JaxAttention(dense, make_mask)


# cuDNN's packed (THD) path inside jax 0.11.2 (a private API): documents as offsets and lengths,
# with a static maximum number of documents per row.
def _cudnn_packed_why_not(w: Workload, memory_sweep: bool) -> str | None:
    return _lacks(w, "cuDNN's packed path", window=True)


def cudnn_segments(w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """(lengths [B, M], offsets [B, M + 1]) of each row's documents, -1 past a row's last."""
    runs = [w.runs(b) for b in range(w.batch)]
    most = max(len(r) for r in runs)
    lengths = np.full((w.batch, most), -1, np.int32)
    offsets = np.full((w.batch, most + 1), -1, np.int32)
    for b, row in enumerate(runs):
        for i, (start, end) in enumerate(row):
            lengths[b, i], offsets[b, i] = end - start, start
    return lengths, offsets


def _cudnn_packed(w: Workload, memory_sweep: bool) -> JaxAttention:
    import jax.numpy as jnp
    from jax._src.cudnn.fused_attention_stablehlo import MaskType, dot_product_attention

    lengths, offsets = cudnn_segments(w)
    window = None if w.window is None else w.window + 1  # cuDNN: (pos - W, pos]

    def attn(q, k, v, extra):
        lens, offs = extra
        return dot_product_attention(
            q, k, v, q_seqlen=lens, kv_seqlen=lens, q_offsets=offs, kv_offsets=offs,
            scale=_scale(w), qkv_layout="BTNH", sliding_window_length=window,
            mask_type=MaskType.PADDING_CAUSAL if w.causal else MaskType.PADDING)

    return JaxAttention(attn, lambda pos, seg: (jnp.asarray(lengths), jnp.asarray(offsets)))


# FlashAttention-3 (flash-attn3-jax, varlen): documents must be contiguous; the trailing padding
# is one more document whose rows nobody reads.
def _fa3_why_not(w: Workload, memory_sweep: bool) -> str | None:
    # no soft cap: the wrapper passes softcap=0.0 and the wheel's kernels refuse any other
    # (docs/bench/h100-2026-11-25-fa3-softcap)
    reason = _lacks(w, "flash-attn3-jax", window=True)
    if reason is None and w.head_dim != 128:
        reason = f"flash-attn3-jax's published build has head dim 128 only, not {w.head_dim}"
    return reason


def fa3_cu_seqlens(w: Workload) -> np.ndarray:
    """Document boundaries in the flattened [B * S] tokens, each row's padding one more document."""
    bounds = [0]
    for b in range(w.batch):
        bounds += [b * w.seq_len + end for _, end in w.runs(b, padding=True)]
    return np.asarray(bounds, np.int32)


def _fa3(w: Workload, memory_sweep: bool) -> JaxAttention:
    import jax.numpy as jnp
    from flash_attn3_jax import flash_mha_varlen

    bounds = fa3_cu_seqlens(w)
    longest = int(np.max(np.diff(bounds)))
    window = (-1, -1) if w.window is None else (w.window, 0 if w.causal else -1)

    def attn(q, k, v, cu_seqlens):
        b, s = q.shape[:2]
        flat = [x.reshape(b * s, *x.shape[2:]) for x in (q, k, v)]
        out = flash_mha_varlen(*flat, cu_seqlens, cu_seqlens, max_seqlen_q=longest,
                               max_seqlen_k=longest, softmax_scale=_scale(w),
                               is_causal=w.causal, window_size=window)
        return out.reshape(b, s, *out.shape[1:])

    return JaxAttention(attn, lambda pos, seg: jnp.asarray(bounds, jnp.int32))


# JAX's Pallas GPU attention: segment ids, causal or not, no GQA.
def _pallas_why_not(w: Workload, memory_sweep: bool) -> str | None:
    return _lacks(w, "JAX's Pallas GPU attention")


def _pallas(w: Workload, memory_sweep: bool) -> JaxAttention:
    from jax.experimental.pallas.ops.gpu import attention as pallas

    def attn(q, k, v, seg):
        return pallas.mha(q, k, v, segment_ids=seg, sm_scale=_scale(w), causal=w.causal)
    return JaxAttention(attn, lambda pos, seg: seg, repeat_kv=True)


PEERS = {peer.key: peer for peer in (
    Peer("cudnn", "cuDNN (jax.nn)", _cudnn_why_not, _cudnn),
    Peer("cudnn_packed", "cuDNN packed (THD)", _cudnn_packed_why_not, _cudnn_packed),
    Peer("fa3", "FlashAttention-3 (jax)", _fa3_why_not, _fa3),
    Peer("pallas", "Pallas GPU (jax)", _pallas_why_not, _pallas),
    Peer("flex", "FlexAttention (torch)",
         lambda w, sweep: _lacks(w, "FlexAttention", window=True, soft_cap=True)),
    Peer("kvax010", "kvax 0.1.0 (original)",
         lambda w, sweep: _lacks(w, "kvax 0.1.0", bidirectional=False)),
)}


def peer(key: str) -> Peer:
    if key not in PEERS:
        raise ValueError(f"unknown peer {key!r}; peers: {', '.join(PEERS)}")
    return PEERS[key]

