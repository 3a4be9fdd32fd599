"""Query tiles that start at each document's first token (a varlen schedule) for the Hopper forward.

Our block mask's tiles are aligned to the row: a document that starts inside a 128-row tile shares
it with the one before, so the tile visits both documents' keys and many tiles need the element
rule. Where a row is made of contiguous causal documents, the forward can instead take each
document ("run": a maximal span of one segment id, padding included) in chunks of 128 rows from
its first token, each chunk visiting the run's keys from its start: every key tile but the last
(the diagonal) is then fully visible. On 64k tokens of log-normal document lengths (median 1100)
that computes 3.9% fewer pairs (tools/mask_tightness.py) and made the forward 4% faster on an
H100 (docs/bench/h100-2026-11-24-doc-chunks).

`doc_runs` builds the chunks once per mask (create_attention_mask), as [B, M, 4] int32: per chunk
(first row, its own rows' start and end, its document's first token; -1 for a padding run's
chunks, which attend nothing), for M static (max_chunks). A run's chunks and keys start at its first
token rounded down to a multiple of 8 (Mosaic GPU's TMA copies of tiled shared memory start on
whole 8-row tiles): the rows and keys before the run's start belong to the previous run, so a
chunk stores only its own rows [start, end), and its first key tile takes the element rule when
the run does not start on a multiple of 8. A row takes this schedule only where it is exact,
checked on the data: the queries are the keys (same positions and ids), no id comes back after
another document (labels by first appearance never go down), positions strictly increase within
each run (so a key after a query in the row is never visible to it: causal on positions is
causal on indices), and its chunks fit M. Other rows get -1 as every chunk's own rows and keep
the row-aligned tiles of the block mask. Only built for the plain causal rule (no window) with
T == S.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from kvax._src.config import PADDING_SEGMENT_ID

CHUNK = 128  # rows per chunk: the Mosaic forward's rows per program


def max_chunks(length: int, per_extra: int = 2) -> int:
    """The static number of chunks per row: a row's 128-row tiles plus one per per_extra of
    them. The mask carries max_chunks(length) (rows of up to about one document per 256 tokens
    take chunks). The forward with one head per program takes them only where they fit
    max_chunks(length, 8), about one document per 1024 tokens: on shorter documents those
    chunks' extra programs, each visiting a tile or two, cost more than the pairs they save
    (H100: level to 2.5% slower on documents of median length 190,
    docs/bench/h100-2026-11-24-doc-chunks), and each chunk past the row's tiles is one more
    program to launch on rows of few documents. With several heads per program
    (mosaic_fwd.MosaicConfig.pack) each chunk is split into smaller programs, which visit
    fewer keys."""
    tiles = -(-length // CHUNK)
    return tiles + -(-tiles // per_extra)


ALIGN = 8  # rows of a tiled shared-memory tile: TMA copies start on multiples of it


def doc_runs(q_pos, q_labels, kv_pos, kv_labels) -> jax.Array:
    """[B, M, 4] int32 chunks (see the module doc) from int32 [B, T] positions and segment ids
    relabelled by first appearance (mask.relabel_by_appearance), queries and keys alike."""
    if q_pos.shape != kv_pos.shape:
        raise ValueError(f"doc_runs needs as many queries as keys, got {q_pos.shape} and "
                         f"{kv_pos.shape}")
    return jax.vmap(_one_row)(q_pos, q_labels, kv_pos, kv_labels)


def _one_row(pos, labels, kv_pos, kv_labels):
    t = pos.shape[0]
    m = max_chunks(t)
    idx = jnp.arange(t, dtype=jnp.int32)
    live = labels != PADDING_SEGMENT_ID
    same_tokens = jnp.all(pos == kv_pos) & jnp.all(labels == kv_labels)
    # an id that comes back after another document has a label below the largest one before it
    seen = lax.cummax(jnp.where(live, labels, -1), axis=0)
    never_back = jnp.all(~live[1:] | (labels[1:] >= seen[:-1]))
    starts = jnp.concatenate([jnp.ones((1,), bool), labels[1:] != labels[:-1]])
    increasing = jnp.all(starts[1:] | ~live[1:] | (pos[1:] > pos[:-1]))

    run = jnp.cumsum(starts.astype(jnp.int32)) - 1  # run index of each token
    num_runs = run[-1] + 1
    # per run r (indexed like the tokens, the first num_runs in use): its first and end token
    run_start = jnp.zeros((t + 1,), jnp.int32).at[jnp.where(starts, run, t)].set(idx, mode="drop")
    in_use = idx < num_runs
    run_end = jnp.where(idx + 1 < num_runs, run_start[1:], t)
    base = run_start[:t] - run_start[:t] % ALIGN  # a run's chunks and keys start here
    chunks = jnp.where(in_use, -(-(run_end - base) // CHUNK), 0)
    ends = jnp.cumsum(chunks)  # chunks up to and including each run
    total = ends[-1]

    j = jnp.arange(m, dtype=jnp.int32)
    which = jnp.minimum(jnp.searchsorted(ends, j, side="right"), t - 1).astype(jnp.int32)
    first = base[which] + (j - (ends[which] - chunks[which])) * CHUNK
    used = j < total
    own_start = jnp.where(used, jnp.maximum(first, run_start[which]), 0)
    own_end = jnp.where(used, jnp.minimum(first + CHUNK, run_end[which]), 0)
    padding = labels[run_start[which]] == PADDING_SEGMENT_ID
    doc_start = jnp.where(used & ~padding, run_start[which], -1)
    first = jnp.where(used, first, 0)

    exact = same_tokens & never_back & increasing & (total <= m)
    own_start, own_end = (jnp.where(exact, x, -1) for x in (own_start, own_end))
    return jnp.stack([first, own_start, own_end, doc_start], axis=-1).astype(jnp.int32)
