"""Named packed-batch workloads shared by the benchmark, its peers and the tests.

A workload is documents of random lengths filling a row, then padding; positions restart at 0 in
each document. FLOPs are counted from the exact number of allowed (query, key) pairs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

PADDING_SEGMENT_ID = -1


@dataclasses.dataclass(frozen=True)
class Workload:
    seq_len: int
    num_segments: int = 1
    num_pad_tokens: int = 0
    batch: int = 1
    num_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    dtype: str = "bfloat16"
    seed: int = 0
    ids: str = "sequential"  # segment ids as pipelines assign them: sequential, shuffled, large
    doc_median: int | None = None  # log-normal document lengths with this median (tokens)
    window: int | None = None  # causal sliding window: a query sees keys up to this far back
    soft_cap: float | None = None  # logit soft-capping c * tanh(x / c)
    sinks: bool = False  # one attention-sink logit per query head (gpt-oss)
    causal: bool = True  # False: every key of the query's document (bidirectional)

    @property
    def name(self) -> str:
        docs = (f"lognormal{self.doc_median}" if self.doc_median else
                f"docs{self.num_segments}")
        ids = "" if self.ids == "sequential" else f"-{self.ids}-ids"
        window = "" if self.window is None else f"-window{self.window}"
        window += "" if self.soft_cap is None else f"-softcap{self.soft_cap:g}"
        window += "-sinks" if self.sinks else ""
        window += "" if self.causal else "-bidirectional"
        return (f"B{self.batch}-S{self.seq_len}-{docs}-pad{self.num_pad_tokens}"
                f"-N{self.num_heads}-K{self.num_kv_heads}-H{self.head_dim}-{self.dtype}{ids}"
                f"{window}")

    def _bounds(self, rng, real: int) -> np.ndarray:
        """Document boundaries in [0, real]: num_segments uniform cuts, or log-normal lengths
        (sigma 1: lengths spread over two orders of magnitude) until the row is full."""
        if self.doc_median:
            lengths = []
            while sum(lengths) < real:
                lengths.append(max(1, int(rng.lognormal(np.log(self.doc_median), 1.0))))
            return np.minimum(np.concatenate([[0], np.cumsum(lengths)]), real)
        if self.num_segments > 1:
            cuts = np.sort(rng.choice(np.arange(1, real), self.num_segments - 1, replace=False))
        else:
            cuts = np.array([], np.int64)
        return np.concatenate([[0], cuts, [real]])

    def _ids(self, rng, count: int) -> np.ndarray:
        order = np.arange(count) if self.ids == "sequential" else rng.permutation(count)
        if self.ids == "large":
            return np.iinfo(np.int32).max - 1 - 3 * order
        return order * (7 if self.ids == "shuffled" else 1) + (3 if self.ids == "shuffled" else 0)

    def layout(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, segment_ids), int32 [B, S]."""
        if self.ids not in ("sequential", "shuffled", "large"):
            raise ValueError(f"ids must be sequential, shuffled or large, got {self.ids!r}")
        rng = np.random.default_rng(self.seed)
        pos = np.zeros((self.batch, self.seq_len), np.int32)
        seg = np.full((self.batch, self.seq_len), PADDING_SEGMENT_ID, np.int32)
        real = self.seq_len - self.num_pad_tokens
        if real <= 0:
            raise ValueError(f"num_pad_tokens={self.num_pad_tokens} leaves no real tokens")
        for b in range(self.batch):
            bounds = self._bounds(rng, real)
            ids = self._ids(rng, len(bounds) - 1)
            for d in range(len(bounds) - 1):
                lo, hi = bounds[d], bounds[d + 1]
                seg[b, lo:hi] = ids[d]
                pos[b, lo:hi] = np.arange(hi - lo)
        return pos, seg

    def rule(self, q_pos, q_seg, k_pos, k_seg):
        """The workload's element rule, written once with operators only, so that numpy, JAX
        and torch arrays (broadcast against each other) all take it: the same document, not
        padding, and the causal and window terms on positions."""
        allowed = (q_seg == k_seg) & (q_seg != PADDING_SEGMENT_ID)
        if self.causal:
            allowed = allowed & (q_pos >= k_pos)
        if self.window is not None:
            allowed = allowed & (q_pos - k_pos <= self.window)
        return allowed

    def runs(self, row: int = 0, padding: bool = False) -> list[tuple[int, int]]:
        """(start, end) of each document of a row in order (documents are contiguous here);
        with padding=True the trailing padding is one more run."""
        _, seg = self.layout()
        seg = seg[row]
        starts = [0] + [i for i in range(1, len(seg)) if seg[i] != seg[i - 1]]
        ends = starts[1:] + [len(seg)]
        return [(a, b) for a, b in zip(starts, ends)
                if padding or seg[a] != PADDING_SEGMENT_ID]

    def documents(self) -> int:
        """Documents in the first row."""
        _, seg = self.layout()
        return len(np.unique(seg[0][seg[0] != PADDING_SEGMENT_ID]))

    def allowed_pairs(self) -> int:
        pos, seg = self.layout()
        total = 0
        for b in range(self.batch):
            for d in np.unique(seg[b][seg[b] != PADDING_SEGMENT_ID]):
                n = int(np.sum(seg[b] == d))
                if not self.causal and self.window is None:
                    total += n * n
                elif not self.causal:  # query p sees keys p - window .. the document's end
                    total += int((np.minimum(np.arange(n), self.window) + n - np.arange(n)).sum())
                elif self.window is None:
                    total += n * (n + 1) // 2  # causal within a document of sequential positions
                else:  # query p sees keys max(0, p - window) .. p
                    total += int(np.minimum(np.arange(n), self.window).sum()) + n
        return total

    def flops(self, backward: bool) -> float:
        """Useful FLOPs: 4 * N * H per allowed pair forward; forward+backward is 3.5x that."""
        fwd = 4.0 * self.num_heads * self.head_dim * self.allowed_pairs()
        return 3.5 * fwd if backward else fwd


def for_args(args, seq_len: int, num_pad_tokens: int | None = None) -> Workload:
    """The command line's workload at one length; with --doc-len, the number of documents grows
    with the length so that documents keep their average size."""
    docs = max(1, round(seq_len / args.doc_len)) if args.doc_len else args.num_segments
    pad = args.num_pad_tokens if num_pad_tokens is None else num_pad_tokens
    return Workload(seq_len, docs, pad, args.batch, args.heads, args.kv_heads, args.head_dim,
                    args.dtype, ids=getattr(args, "ids", "sequential"),
                    doc_median=getattr(args, "doc_median", None),
                    window=getattr(args, "window", None),
                    soft_cap=getattr(args, "logits_soft_cap", None),
                    sinks=getattr(args, "sinks", False),
                    causal=not getattr(args, "bidirectional", False))


def add_row_args(parser) -> None:
    """One 64k-class row's layout on a dev tool's command line (row_from_args reads it back):
    --seq-len, --num-segments, --num-pad-tokens, --doc-median, --ids."""
    parser.add_argument("--seq-len", type=int, default=65536)
    parser.add_argument("--num-segments", type=int, default=8)
    parser.add_argument("--num-pad-tokens", type=int, default=1000)
    parser.add_argument("--doc-median", type=int, default=None)
    parser.add_argument("--ids", default="sequential")


def row_from_args(args) -> Workload:
    return Workload(args.seq_len, args.num_segments, args.num_pad_tokens, ids=args.ids,
                    doc_median=args.doc_median)


def inputs(w: Workload):
    """Random query, key, value (numpy float32; cast on the device) and the layout."""
    rng = np.random.default_rng(w.seed + 1)
    q, k, v = (rng.standard_normal(shape, np.float32) for shape in shapes(w))
    pos, seg = w.layout()
    return q, k, v, pos, seg


def sink_logits(w: Workload) -> np.ndarray | None:
    """The workload's sinks [N] (float32), or None."""
    if not w.sinks:
        return None
    return np.random.default_rng(w.seed + 3).normal(0.0, 1.0, w.num_heads).astype(np.float32)


def shapes(w: Workload):
    """Shapes of query, key and value, [B, S, heads, H]."""
    return ((w.batch, w.seq_len, w.num_heads, w.head_dim),
            (w.batch, w.seq_len, w.num_kv_heads, w.head_dim),
            (w.batch, w.seq_len, w.num_kv_heads, w.head_dim))


def sample_rows(w: Workload, count: int = 2048) -> np.ndarray:
    """Indices (b, t) of real query rows where peers' outputs are compared with ours."""
    _, seg = w.layout()
    rows = np.argwhere(seg != PADDING_SEGMENT_ID)
    rng = np.random.default_rng(w.seed + 2)
    return rows[rng.choice(len(rows), min(count, len(rows)), replace=False)]
