"""Hopper backward in Pallas Mosaic GPU, dQ accumulated by TMA reduce-add.

The default backward on Hopper for the shapes it takes (head dims 64 and 128, dK/dV mask blocks of
multiples of 128 keys x 64 queries; head dim 256, split by channels as below, multiples of
64 x 64). One program per (kv head, 128 keys, batch row), three warpgroups: a producer streams
(Q, dO, logsumexp, delta) tiles of the query blocks our dK/dV block mask visits, for each query
head of the kv head's group in turn; two consumers own 64 keys each and keep dK and dV in
registers across the group (GQA summed there). Per tile and consumer:

    S^T = K Q^T and dP^T = V dO^T          issued together; the exponentials overlap dP^T
    P^T = exp(S^T - lse), dS^T = P^T (dP^T - delta)     (soft cap: times 1 - tanh^2)
    dV += P^T dO                            from registers
    dQ[:, half] = dS K[:, half]             both consumers' dS^T meet in shared memory; each
                                            computes half of dQ's columns over all 128 keys
    dK += dS^T Q                            from registers

issued in that order (FA3's): the dQ half goes through shared memory, while dK's product runs,
into an accumulator in global memory by TMA reduce-add, in the order it lies in shared memory
(8x8 tiles: no selects in the store, and one copy of contiguous bytes; 1-3.4% faster than rows of
256 bytes, docs/bench/h100-2026-11-24-contiguous-dq); XLA puts it back in token order
(untile_dq). 5 products per (query, key) pair instead of the Triton kernels' 7. The programs'
dQ shares arrive in any order, and float32 additions depend on it; so by default
(deterministic) each share is scaled by a power of two per query row and rounded to int32
(to_fixed, fixed_point_scales), and integer sums give bitwise-equal reruns.
With deterministic=False the shares are added in float32 (2-3% faster on an H100; dQ differs
between reruns in its last bits). dK and dV are bitwise equal across reruns either way.
The accumulator is a `jax.new_ref` passed to the kernel (plgpu.kernel aliases refs in and out).

NaN or Inf in the padding never leaks (a zero weight times NaN is NaN inside a product): Q's padding
rows come zeroed from the forward (mosaic_fwd's store_query: the consumers store the Q tiles they
loaded, with no extra read) or in a copy, and dO's in a copy (fused with delta's); each consumer
zeroes its keys' padding rows of K and V in shared memory once, before any product reads them. So
dP^T is finite on every pair the rule hides, and in masked tiles only P^T takes the rule: dS^T is 0
wherever P^T is (the predicates kept for a second select cost the masked steps about a third of
their instructions: docs/bench/h100-2026-11-24-profile). NaN in a real V or dO still gives NaN,
never a finite wrong number. Zeroing the Q and dO tiles there too (the rare tiles that hold padding,
behind a flag) cost more in the kernel than the copies, ~1 ms a step at 64k, and 2 ms on 8 documents
when only the masked steps read the flag (docs/bench/h100-2026-11-24-padding). Tiles past the end of
the tokens come in by TMA as zeros and dK/dV rows past it are not stored, so only lengths that are
not a multiple of 8 get padded copies. Tiles in [lower_full, upper_full) skip the element rule.
With BackwardConfig.rank_rule masked tiles test each key's rank against the queries' intervals
of visible ranks (mosaic_fwd.rank_layouts, the forward mask's schedule's where it brings them),
two compares an element, instead of ids, positions and the keys' padding: exact, but level in
speed on an H200 (docs/bench/h200x2-2026-11-28-bwd-ranks), so not the default.
Programs launch in the grid's order, a kv head's key tiles in turn, but the last head's tiles
longest first (program_order): the SMs no longer wait at the end on the long programs of tiles
near a long document's start (forward+backward 1.5-2.8% faster on log-normal and short documents
on an H100, level on 8 documents; docs/bench/h100-2026-11-24-timeline).
With a bidirectional mask and no window every key tile of a document visits the same query
tiles, so the programs running together would add their dQ shares into one tile at a time; each
program takes its fully visible tiles from the (key tile mod their count)-th on instead, around
(query_tile; forward+backward 3.2-3.3% faster on one bidirectional 16k document and on 8
bidirectional documents at 64k, on an H100, with dQ bitwise the same). Causal key tiles start
at their own diagonals already; there the rotation cost 3.9% on 8 documents
(docs/bench/h100-2026-11-28-rotate). Windowed ones slide likewise and keep their order (not
measured with the rotation).
Measured on an H100 in docs/bench/h100-2026-11-23-mosaic-bwd and docs/bench/h100-2026-11-23-padding.
The consumers' phases are named (prologue, loop, epilogue, store_wait) for Mosaic GPU's on-device
profiler (tools/dev/profile_timeline.py --backward).

Head dim 256 (BackwardConfig.channel_split, channel_config, what chosen_config gives there). dK
and dV of 64 keys x 256 channels would take 256 registers a thread of a consumer, so both
consumers share one tile of 64 keys: each computes S and dP for 32 of the keys over all the
channels, P and dS of all 64 keys meet in shared memory, and each computes dV, dK and dQ for 128
of the channels. Still 5 products, none recomputed. Every tile takes 64-byte swizzles (the 32-key
products' transposed operands need them, and a product's operands share one). Q and dO come in
two stages, stored by channel halves: a step's dQ shares are staged in the bytes of its own
stage, each consumer in the half that only its dV and dK products read, and the stage goes back
to the producer in the next step, once the add has read it (two stages and a separate dQ buffer
would take 290 KiB of 227). On an H200 at 64k, forward+backward ran 1.42-1.52x as fast as with
the Triton backward and 1.45-1.48x as with a one-stage split (docs/bench/h200-2026-12-01-s67;
the plan, after FA3's own head-dim-256 split: docs/bench/h200-2026-12-01-s66).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from kvax._src.attention import prewarm
from kvax._src.attention.blockwise import LOG2E
from kvax._src.attention.mask import AttentionMask
from kvax._src.attention.mosaic_fwd import (block_bounds, for_tma, in_intervals, load_layout,
                                             logit_factor, mask_bounds, rank_layouts, round_up,
                                             tile_bounds, tiled_layout, zero_padding_rows)
from kvax._src.attention.variant import MaskVariant

HEAD_DIMS = (64, 128)  # dK and dV of 64 keys x 256 do not fit one warpgroup's registers
SPLIT_HEAD_DIMS = (256,)  # BackwardConfig.channel_split's
DQ_TILE = 8  # dQ's shares in shared memory and in its accumulator: tiles of 8 x 8 (untile_dq)

# The deterministic dQ: sums of integers do not depend on their order. Each program's share of
# dQ, times a power of two fixed per row (fixed_point_scales), is rounded to int32 and summed by
# TMA reduce-add into an int32 array. Two int32 parts (a 64-bit sum) doubled the
# reduce-add traffic and the backward's time: dQ's reduce-adds run at the memory system's limit.
FIXED_BITS = 30  # twice a bound on a row's sum of |shares|, scaled, stays below 2^30 (int32: 2^31)
MAGIC = 1.5 * 2**23  # x + MAGIC for |x| < 2^22: round(x) in the low mantissa bits
MAGIC_BITS = int(np.float32(MAGIC).view(np.int32))
SPLIT = 15  # to_fixed rounds y / 2^15 and the rest, each within MAGIC's range
# The high part's magic: also a float of ulp 1 (room for |y / 2^SPLIT| <= 2^16 either way), chosen
# so that its bits times 2^SPLIT cancel MAGIC's bits modulo 2^32: the two parts' bits then sum to
# the integer with no correction.
MAGIC_HI = 2.0**23 + ((-(MAGIC_BITS >> SPLIT)) % 2**(32 - SPLIT))
assert (int(np.float32(MAGIC_HI).view(np.int32)) * 2**SPLIT + MAGIC_BITS) % 2**32 == 0


@dataclasses.dataclass(frozen=True)
class BackwardConfig:
    block_q: int = 64  # query rows per step
    keys_per_wg: int = 64  # a program holds two consumers' keys
    stages: int = 2  # query tiles in flight
    consumer_registers: int = 240
    producer_registers: int = 24
    # each program takes its fully visible query tiles in turn from the (key tile x rotate)-th
    # (mod their count), so that programs running together add dQ into different tiles; None:
    # 1 for bidirectional masks without a window (every key tile of a document starts at its
    # first query tile), 0 for causal or windowed ones (each starts at its own diagonal or
    # window: measured slower on causal documents)
    rotate: int | None = None
    # masked tiles test each key's rank against the queries' intervals (mosaic_fwd.rank_layouts:
    # the ones the call is handed, the forward mask's schedule's, else built in the call, a sort
    # per call) instead of ids and positions. Level with them on an H200 (8 documents, log-normal
    # and short ones: docs/bench/h200x2-2026-11-28-bwd-ranks), so off by default
    rank_rule: bool = False
    # head dim 256 (channel_config): both consumers on one tile of 2 x keys_per_wg keys, each
    # computing S and dP for keys_per_wg of them and dK, dV and dQ for half of the channels
    channel_split: bool = False

    @property
    def keys(self) -> int:
        return 2 * self.keys_per_wg


def channel_config() -> BackwardConfig:
    """Head dim 256's: 64 keys a program, two stages of Q and dO. Per consumer float32 dK and dV
    of 64 keys x 128 channels (128 registers a thread) and shared memory of about 225.5 KiB (K and
    V: 32 KiB each; Q and dO: 2 x 64 KiB, where each step's dQ shares go too; P and dS: 2 x 8 KiB
    each). FA3 splits its head-dim-256 backward by channels too."""
    return BackwardConfig(keys_per_wg=32, channel_split=True)


def chosen_config(head_dim: int = 128) -> BackwardConfig:
    """The config of the API's backward calls at this head dim: channel_config at 256, else the
    defaults (tests patch it to ask for others)."""
    return channel_config() if head_dim in SPLIT_HEAD_DIMS else BackwardConfig()


def supported(head_dim: int, dkdv_blocks: tuple[int, int], *, kv_len: int = 0,
              value_dim: int | None = None, config: BackwardConfig | None = None) -> str | None:
    """Why a call with this head dim and dK/dV mask blocks (rows = keys, columns = queries) cannot
    take this backward, or None."""
    config = config or chosen_config(head_dim)
    dims = SPLIT_HEAD_DIMS if config.channel_split else HEAD_DIMS
    if head_dim not in dims or value_dim not in (None, head_dim):
        return (f"the Mosaic backward takes head dims {dims} equal for keys and values, got "
                f"{head_dim} and {value_dim}")
    if -(-kv_len // config.keys) > 65535:  # CUDA's grid limit
        return f"the Mosaic backward takes up to 65535 tiles of {config.keys} keys, got {kv_len}"
    rows, cols = dkdv_blocks
    if rows % config.keys or cols % config.block_q:
        return (f"the Mosaic backward needs dK/dV mask blocks that are multiples of "
                f"{config.keys}x{config.block_q}, got {rows}x{cols}")
    return None


def program_order(bounds, num_kv: int, num_k_tiles: int, num_q_tiles: int, row_ratio: int,
                  col_ratio: int):
    """[B, num_kv x num_k_tiles] int32: the program (kv head x num_k_tiles + key tile) that each
    launch slot takes, from the block mask's bounds (mask_bounds): the grid's order (a head's key
    tiles in turn, head after head), but the last head's tiles longest first. A key tile's
    program makes (its query tiles) x (the group's heads) steps, so a tile near the start of a
    long document runs many times the mean. Launched late in the grid's order such programs
    left the SMs idle for 8% of the backward while they finished
    (docs/bench/h100-2026-11-24-timeline); sorting every head's tiles cost more than it saved
    (the programs running together then read queries from all over the row, not from a few
    documents), and sorting the last two heads' together too."""
    lo_t, hi_t, _, _ = tile_bounds(bounds, num_k_tiles, row_ratio, col_ratio, num_q_tiles)
    first = (num_kv - 1) * num_k_tiles
    last = jnp.argsort(lo_t - hi_t, axis=1, stable=True) + first  # longest first
    codes = jnp.broadcast_to(jnp.arange(first), (last.shape[0], first))
    return jnp.concatenate([codes, last], axis=1).astype(jnp.int32)


def head_steps(group: int, per_head, lf, uf, masked_step, full_step, carry):
    """Inside the kernel: steps [g * per_head, (g + 1) * per_head) for each query head g of the
    group in turn, each head's [lf, uf) by full_step(s, g, carry) and the rest by masked_step
    (the same arguments), in order: three loops a head, the masked step's code emitted twice.
    Unlike the forward's (masked_full_masked) this costs compile time: with each step emitted
    once (tools/dev/spike_step_copies.py) the backward compiled about 1 s faster, but
    forward+backward ran 0.5-1.4% slower on 8 documents and on one causal document, level on
    log-normal ones, in two runs on an H100 (docs/bench/h100-2026-11-27-compile)."""

    def head(g, carry):
        base = g * per_head
        masked = lambda s, carry: masked_step(s, g, carry)  # noqa: E731
        full = lambda s, carry: full_step(s, g, carry)  # noqa: E731
        carry = lax.fori_loop(base, base + lf, masked, carry)
        carry = lax.fori_loop(base + lf, base + uf, full, carry)
        return lax.fori_loop(base + uf, base + per_head, masked, carry)

    return lax.fori_loop(0, group, head, carry)


def rotation(variant: MaskVariant, config: BackwardConfig) -> int:
    """config.rotate, or where it is None 1 for a bidirectional mask without a window and 0
    otherwise: causal and windowed key tiles start at their own diagonal or window, and the
    rotation measured slower on causal documents (docs/bench/h100-2026-11-28-rotate)."""
    if config.rotate is not None:
        return config.rotate
    return int(variant.diff_bounds == (None, None))


def query_tile(i, lo, lf, uf, rot, masked: bool | None = None):
    """The query tile of a program's i-th step in a head (0 <= i < hi - lo): lo + i, but the
    fully visible tiles [lf, uf) taken in turn from lf + rot (rot in [0, uf - lf), or None for
    no rotation). masked: whether the caller knows the step to be masked (True) or fully
    visible (False); None decides it per step (the producer's single loop). Bidirectional
    masks give every key tile of a document the same [lf, uf), so without a rotation the
    programs running together add their dQ shares into the same tile at the same time
    (docs/bench/h100-2026-11-28-rotate)."""
    if rot is None or masked:
        return lo + i
    n_full = uf - lf
    j = i - (lf - lo) + rot
    rotated = lf + jnp.where(j >= n_full, j - n_full, j)
    if masked is False:
        return rotated
    return jnp.where((i >= lf - lo) & (i < uf - lo), rotated, lo + i)


def ring(s, n: int):
    """s mod n for a step s >= 0: a mask for powers of two (lax.rem's sign fix-ups cost
    instructions in every step)."""
    return lax.bitwise_and(s, n - 1) if n & (n - 1) == 0 else lax.rem(s, n)


def to_fixed(x, scale):
    """x * scale (float32, scale a power of two, |x * scale| < 2^31) rounded to the nearest
    int32 without float-to-int conversions (slower here: docs/bench/h100-2026-11-24-bwd-alu-trials).
    y = x * scale is split into y / 2^SPLIT and the rest, each rounded by adding a magic number
    (a float whose last mantissa bit is worth 1) and read as integers. Four operations an
    element: hi = fma(x, scale / 2^SPLIT, MAGIC_HI) holds n = round(y / 2^SPLIT); a second fma
    gives MAGIC - n 2^SPLIT exactly; lo = fma(x, scale, that) rounds y - n 2^SPLIT (exact) plus
    MAGIC once; and bits(hi) 2^SPLIT + bits(lo) is n 2^SPLIT + round(y - n 2^SPLIT), the magic
    numbers' bits cancelling modulo 2^32 (MAGIC_HI). Every step is exact whether or not the
    compiler fuses the multiply-adds (the products are by powers of two)."""
    back = MAGIC + MAGIC_HI * 2**SPLIT  # a float32 exactly (17 significant bits)
    hi_r = x * (scale * (1.0 / 2**SPLIT)) + MAGIC_HI
    lo_r = x * scale + (back - hi_r * float(2**SPLIT))  # MAGIC + y - n 2^SPLIT, rounded once
    hi, lo = (lax.bitcast_convert_type(r, jnp.int32) for r in (hi_r, lo_r))
    return hi * (2**SPLIT) + lo


def key_side_rule(variant: MaskVariant, rows, cols, k_live, q_seg, k_seg, q_pos, k_pos):
    """variant.element_rule on a tile of key rows and query columns (rows, cols: broadcast a
    row's or a column's values to the tile), its padding test on the keys' side: k_live is
    k_seg != pad_id, one value per key row instead of one test per element. Equal ids make the
    two tests the same (tested against element_rule in test_mosaic.py)."""
    return rows(k_live) & (cols(q_seg) == rows(k_seg)) & variant.allows(cols(q_pos), rows(k_pos))


def untile_dq(acc, block_q: int):
    """dQ in [B, T, N, H] (T a multiple of block_q) from the kernel's accumulator
    [B, N, query tiles, 2 consumers' column halves, ...]: each (block_q, H / 2) share in
    DQ_TILE x DQ_TILE tiles, row-major over the tiles and within each, as a tiled shared-memory
    array lies (plgpu.TilingTransform)."""
    b, n, tiles, halves = acc.shape[:4]
    half = math.prod(acc.shape[4:]) // block_q
    acc = acc.reshape(b, n, tiles, halves, block_q // DQ_TILE, half // DQ_TILE, DQ_TILE, DQ_TILE)
    # (b, n, query tile, half, tile row, tile column, row, column) -> (b, t, n, h)
    acc = acc.transpose(0, 2, 4, 6, 1, 3, 5, 7)
    return acc.reshape(b, tiles * block_q, n, halves * half)


def fixed_point_scales(dout, k, v, kv_seg, delta, lse, pad_id: int):
    """(scale, unscale), [B, N, T] float32 powers of two, for the deterministic dQ: the kernel
    multiplies each program's share of dQ's row t (the sum over its keys of dS_ts K_s, before
    the softmax scale) by scale[t] and rounds it to integers; dQ is their sums times unscale.

    The scale comes from a bound on the sum of |shares| of any element of the row:
        sum_s |dS_ts K_sh| <= max|K| sum_s P_ts |dP_ts - delta_t|
                           <= max|K| (|dO_t| max_s |V_s| + |delta_t|)
    (sum_s P_ts <= 1, |dP_ts| = |dO_t . V_s| <= |dO_t| |V_s|; a soft cap's factor 1 - tanh^2
    is <= 1), the maxima over the batch row's real keys of the kv head. Twice the bound, scaled,
    stays below 2^FIXED_BITS, so the int32 sums cannot overflow, and each share is rounded to
    2^-28 of the bound or finer (tested against float32 sums in test_mosaic.py). A scale per
    column too (K's channels differ) cost the backward 10%: its products spilled registers.
    unscale is NaN where the float32 sums would be NaN (NaN logsumexp or delta; a non-finite
    bound, from NaN or Inf in the real keys or dO, or one past 2^90): never a finite wrong
    number.

    dout: padding rows zeroed; delta and lse as the kernel reads them ([B, N, T])."""
    group = dout.shape[2] // k.shape[2]
    live = (kv_seg != pad_id)[:, :, None, None]
    k_max = jnp.max(jnp.where(live, jnp.abs(k.astype(jnp.float32)), 0.0), axis=(1, 3))
    v_norm2 = jnp.sum(jnp.square(v.astype(jnp.float32)), axis=3)
    v_max = jnp.sqrt(jnp.max(jnp.where(live[..., 0], v_norm2, 0.0), axis=1))  # [B, Nk]
    do_norm = jnp.sqrt(jnp.einsum("btnd,btnd->bnt", dout, dout,
                                  preferred_element_type=jnp.float32))
    per_head = lambda x: jnp.repeat(x, group, axis=1)[:, :, None]  # [B, Nk] -> [B, N, 1]
    bound = 2.0 * per_head(k_max) * (do_norm * per_head(v_max) + jnp.abs(delta))
    # 2^e bound <= 2^FIXED_BITS; e is kept in [-60, 120] (float32's range): above 120 (a bound
    # near 0) a smaller scale is safe, below -60 (a bound past 2^90) it is not
    e = FIXED_BITS - jnp.ceil(jnp.log2(bound))
    bad = ~(e >= -60.0) | jnp.isnan(delta) | jnp.isnan(lse)
    e = jnp.where(jnp.isnan(e), 0.0, jnp.clip(e, -60.0, 120.0))
    return jnp.exp2(e), jnp.where(bad, jnp.nan, jnp.exp2(-e))


def backward(q, k, v, scale, q_pos, q_seg, kv_pos, kv_seg, lse, delta, dout,
             dkdv_mask: AttentionMask, *, variant: MaskVariant, pad_id: int,
             logits_soft_cap: float | None = None, config: BackwardConfig | None = None,
             query_padding_zeroed: bool = False, deterministic: bool = False,
             ranks=None):
    """(dq, dk, dv) in the inputs' dtype; lse [B, N, T] natural log (-inf on empty rows) and delta
    [B, N, T] float32 as backends.py describes them. query_padding_zeroed: q's padding rows are
    0 already (the forward's store_query), so q needs no zeroed copy here. deterministic: dQ
    summed in fixed point (to_fixed, fixed_point_scales), bitwise equal across reruns, instead
    of float32 in arrival order. ranks: (q_lay, k_lay) of mosaic_fwd.rank_layouts for
    these positions and ids and this variant, at least as long as the query and key tiles
    reach (the forward mask's schedule brings them), read with config.rank_rule."""
    import jax.experimental.pallas as pl
    import jax.experimental.pallas.mosaic_gpu as plgpu

    config = config or BackwardConfig()
    b, t, n, h = q.shape
    s_len, num_kv = k.shape[1], k.shape[2]
    group = n // num_kv
    dtype = q.dtype
    block_q, keys_per_wg, keys, stages = (config.block_q, config.keys_per_wg, config.keys,
                                          config.stages)
    why = supported(h, (dkdv_mask.row_block, dkdv_mask.col_block), kv_len=s_len,
                    value_dim=v.shape[-1], config=config)
    if why:
        raise NotImplementedError(why)
    if config.channel_split and config.rank_rule:
        raise NotImplementedError("BackwardConfig.channel_split does not take rank_rule")
    row_ratio, col_ratio = dkdv_mask.row_block // keys, dkdv_mask.col_block // block_q
    t_pad, s_pad = round_up(t, block_q), round_up(s_len, keys)
    num_k_tiles, num_q_tiles = s_pad // keys, t_pad // block_q
    half = h // 2  # the dQ columns each consumer computes
    acc_dtype = jnp.int32 if deterministic else jnp.float32  # dQ's accumulator
    dq_share = (block_q * half // 256, 256)  # a consumer's share of a step as TMA moves it
    swizzle = min(128, half * dtype.itemsize)  # K's column halves are whole swizzle tiles
    if config.channel_split:
        # each consumer's keys_per_wg keys are the N of its S and dP products, whose transposed
        # B operand takes swizzles of at most N elements, and a wgmma's operands share one
        # swizzle: 64 bytes for every tile (and the P and dS columns a consumer writes are whole
        # swizzle tiles)
        swizzle = min(swizzle, keys_per_wg * dtype.itemsize)
    tiled = (plgpu.TilingTransform((8, swizzle // dtype.itemsize)),
             plgpu.SwizzleTransform(swizzle))

    q_live = (q_seg != pad_id)[:, :, None, None]
    zero = jnp.zeros((), dtype)
    q = for_tma(q if query_padding_zeroed else jnp.where(q_live, q, zero))
    dout = jnp.where(q_live, dout.astype(dtype), zero)
    fixed_point = (dout, k, v) if deterministic else None  # the unpadded arrays
    dout, k, v = for_tma(dout), for_tma(k), for_tma(v)
    lse2 = jnp.where(jnp.isneginf(lse), jnp.inf, lse * LOG2E)  # log2 units; +inf gives P = 0
    # delta's reduction over dO * O stays its own fusion: fused into the stacking below, XLA
    # ran it 4.5x slower (1.65 ms a step at 64k x 32 heads on an H100, tools/dev/profile_step.py)
    lse2, delta = lax.optimization_barrier((lse2, delta.astype(jnp.float32)))
    rows = [lse2, delta]
    if deterministic:
        fixed_scale, fixed_unscale = fixed_point_scales(*fixed_point, kv_seg, delta, lse,
                                                        pad_id)
        rows.append(fixed_scale)
    stats = jnp.stack(rows, axis=2)  # [B, N, 2 or 3, T]
    stats = jnp.pad(stats, ((0, 0), (0, 0), (0, 0), (0, t_pad - t)))
    stats = stats.at[:, :, 0, t:].set(jnp.inf)
    rank_rule = config.rank_rule
    if rank_rule:  # rows (0, 1): the queries' (lo, hi), the keys' (rank, id); without the
        # mask's layouts, built here (a sort a call)
        q_lay, k_lay = ranks if ranks is not None else rank_layouts(
            q_pos, q_seg, kv_pos, kv_seg, t_pad, s_pad, pad_id=pad_id, variant=variant)
        if q_lay.shape[-1] < t_pad or k_lay.shape[-1] < s_pad:
            raise ValueError(f"ranks must reach {t_pad} queries and {s_pad} keys, got layouts "
                             f"of shapes {q_lay.shape} and {k_lay.shape}")
    else:  # rows (0, 1): positions, ids
        q_lay = tiled_layout(q_pos, q_seg, t_pad, pad_id)
        k_lay = tiled_layout(kv_pos, kv_seg, s_pad, pad_id)
    bounds = mask_bounds(dkdv_mask)
    order = program_order(bounds, num_kv, num_k_tiles, num_q_tiles, row_ratio, col_ratio)
    cap = logits_soft_cap
    factors = jnp.stack([logit_factor(scale, cap), jnp.asarray(scale, jnp.float32)])
    row_layout = plgpu.Layout.WGMMA.reduce(1)
    col_layout = plgpu.Layout.WGMMA.reduce(0)

    def kernel(q_ref, k_ref, v_ref, do_ref, stats_ref, qlay_ref, klay_ref, bounds_ref,
               factors_ref, order_ref, dq_ref, dk_ref, dv_ref, scoped):
        batch = lax.axis_index("batch")
        code = order_ref[batch, lax.axis_index("heads") * num_k_tiles + lax.axis_index("k_seq")]
        kvh, tile = lax.div(code, num_k_tiles), lax.rem(code, num_k_tiles)
        wg = lax.axis_index("wg")
        bufs, loaded, free, kv_ready, ds_ready, done = scoped
        # dQ's shares: the same bytes as 8x8 tiles for the registers' store and flat for TMA. A
        # RefUnion's groups each start at its first byte; Mosaic does not promise more, and
        # writing through one view and reading through the other relies on that (the GPU tests
        # check every element)
        if config.channel_split:  # Q and dO as [stage, channel half, (Q, dO)]; each step's
            # dQ shares in the bytes of its stage, a half each (RefUnion)
            (dq_smem, dq_flat, qdo), st_smem, k_smem, v_smem, ds_smem = bufs
        else:
            q_smem, do_smem, st_smem, k_smem, v_smem, ds_smem, (dq_smem, dq_flat) = bufs

        lo, hi, lf, uf = block_bounds(bounds_ref, batch, tile // row_ratio, col_ratio,
                                      num_q_tiles)
        per_head = hi - lo
        steps = per_head * group
        rotate = rotation(variant, config)
        rot = lax.rem(tile * rotate, jnp.maximum(uf - lf, 1)) if rotate else None

        def q_tile(i, masked: bool | None = None):
            return query_tile(i, lo, lf, uf, rot, masked)

        def head_step(s, g=None):
            """(query head, step within that head) of step s: the group's heads in turn, each
            over [lo, hi); g, the step's head in the group, where the caller knows it (a
            division in each step cost the consumers ~30 instructions of ~600)."""
            if g is None:
                g = lax.div(s, jnp.maximum(per_head, 1))
            return kvh * group + g, s - g * per_head

        def where_step(s, g=None, masked: bool | None = None):
            """(query head, query tile) of step s (head_step; masked as for query_tile)."""
            head, i = head_step(s, g)
            return head, q_tile(i, masked)

        def open_step(s, g, masked: bool, layout):
            """(stage, P/dS slot, query head, query tile, a masked step's query layout in
            `layout`) of step s, once its Q, dO and stats have landed. The layout's global
            loads are issued before the wait, so that their latency is hidden (4-8% on
            log-normal and short documents)."""
            slot = ring(s, stages)
            d = ring(s, 2)
            head, qt = where_step(s, g, masked)
            q_layout = (load_layout(qlay_ref, batch, qt * block_q, block_q, layout)
                        if masked else None)
            plgpu.barrier_wait(loaded.at[slot])  # Q, dO and the stats
            return slot, d, head, qt, q_layout

        def zeros(shape):
            """A float32 accumulator of zeros in the WGMMA layout."""
            return plgpu.layout_cast(jnp.full(shape, 0.0, jnp.float32), plgpu.Layout.WGMMA)

        def probabilities(x, lse, spread, c):
            """(P, the soft cap's factor 1 - tanh^2 or None) of the scores x (S or S^T), the
            logsumexp lse (log2) spread to them by `spread`; c: logit_factor's."""
            if cap is None:
                return jnp.exp2(x * c - spread(lse)), None
            th = jnp.tanh(x * c)
            return jnp.exp2(th * (cap * LOG2E) - spread(lse)), 1.0 - th * th

        def score_grads(p, dp, d_cap):
            """dS from P, dP - delta and the cap's factor: P is 0 where the rule hides a pair,
            and dP finite there (V's and dO's padding rows are 0), so no select of its own."""
            return p * dp if d_cap is None else p * dp * d_cap

        def add_dq(dq, slot, head, qt):
            """A consumer's share of dQ ([block_q, half], before the softmax scale) added into
            the accumulator by TMA: scaled per row and rounded to int32 (deterministic), or in
            float32, times the scale after the kernel. With channel_split it goes through the
            bytes of the step's own stage (free: this consumer's products have read them),
            else through the consumer's one buffer, once the last add has read it."""
            if config.channel_split:
                tiles, flat = dq_smem.at[slot, wg], dq_flat.at[slot, wg]
            else:
                plgpu.wait_smem_to_gmem(0, wait_read_only=True)  # the last add read it
                tiles, flat = dq_smem.at[wg], dq_flat.at[wg]
            if deterministic:
                scale_r = plgpu.load(st_smem.at[slot, 2], layout=row_layout)
                tiles[...] = to_fixed(dq, lax.broadcast_in_dim(scale_r, (block_q, half), [0]))
            else:
                tiles[...] = dq
            plgpu.commit_smem()
            plgpu.copy_smem_to_gmem(flat, dq_ref.at[batch, head, qt, wg], reduction_op="add")

        def _consumer():
            plgpu.set_max_registers(config.consumer_registers, action="increase")
            with jax.named_scope("prologue"):
                k_start = tile * keys + wg * keys_per_wg
                kv_slice = (batch, pl.ds(k_start, keys_per_wg), kvh)
                k_mine = k_smem.at[pl.ds(wg * keys_per_wg, keys_per_wg)]
                plgpu.copy_gmem_to_smem(k_ref.at[kv_slice], k_mine, kv_ready.at[wg])
                plgpu.copy_gmem_to_smem(v_ref.at[kv_slice], v_smem.at[wg], kv_ready.at[2 + wg])
                # the keys' positions (with rank_rule their ranks) and ids
                k_pos_r, k_seg_r = load_layout(klay_ref, batch, k_start, keys_per_wg, row_layout)
                c, sc = factors_ref[0], factors_ref[1]
                plgpu.barrier_wait(kv_ready.at[wg])
                # dQ reads both consumers' keys: the other's after its first dS^T arrival, so after
                # its zeroing too
                zero_padding_rows(k_mine, k_seg_r, pad_id)
                plgpu.barrier_wait(kv_ready.at[1 - wg])
                plgpu.barrier_wait(kv_ready.at[2 + wg])
                zero_padding_rows(v_smem.at[wg], k_seg_r, pad_id)  # read only by our dP^T
            k_live_r = None if rank_rule else k_seg_r != pad_id
            k_cols = k_smem.at[:, pl.ds(wg * half, half)]
            shape = (keys_per_wg, block_q)

            def cols(x):
                return lax.broadcast_in_dim(x, shape, [1])

            def rows(x):
                return lax.broadcast_in_dim(x, shape, [0])

            def step(s, g, carry, masked: bool):
                dk, dv = carry
                slot, d, head, qt, q_layout = open_step(s, g, masked, col_layout)

                def sdp_scope(s_acc, dp_acc):
                    plgpu.wgmma(s_acc, k_mine, q_smem.at[slot].transpose((1, 0)))
                    plgpu.wgmma(dp_acc, v_smem.at[wg], do_smem.at[slot].transpose((1, 0)))
                    s_t = plgpu.wgmma_accumulator_load(s_acc, wait_n=1)
                    lse_c = plgpu.load(st_smem.at[slot, 0], layout=col_layout)
                    p_t, d_cap = probabilities(s_t, lse_c, cols, c)
                    if masked and rank_rule:  # the keys' ranks, the queries' (lo, hi)
                        q_lo_c, q_hi_c = q_layout
                        ok = in_intervals(rows(k_pos_r), cols(q_lo_c), cols(q_hi_c))
                        p_t = jnp.where(ok, p_t, 0.0)
                    elif masked:  # the element rule, padding tested on the keys' side
                        q_pos_c, q_seg_c = q_layout
                        ok = key_side_rule(variant, rows, cols, k_live_r, q_seg_c, k_seg_r,
                                           q_pos_c, k_pos_r)
                        p_t = jnp.where(ok, p_t, 0.0)
                    delta_c = plgpu.load(st_smem.at[slot, 1], layout=col_layout)
                    dp_t = plgpu.wgmma_accumulator_load(dp_acc, wait_n=0) - cols(delta_c)
                    ds_t = score_grads(p_t, dp_t, d_cap)
                    return p_t.astype(dtype), ds_t.astype(dtype)

                acc = plgpu.ACC(shape, jnp.float32)
                p_t, ds_t = pl.run_scoped(sdp_scope, acc, acc)
                # both consumers' dS^T meet in shared memory (two slots: a consumer writes slot d
                # again only after passing the other's arrival of the step between)
                ds_smem.at[d, pl.ds(wg * keys_per_wg, keys_per_wg)][...] = ds_t
                plgpu.commit_smem()
                plgpu.barrier_arrive(ds_ready.at[d])

                def grad_scope(refs):
                    """FA3's order: dV, then dQ, then dK, and dQ's store runs under dK."""
                    dv_acc, dk_acc, dq_acc = refs
                    plgpu.wgmma(dv_acc, p_t, do_smem.at[slot])
                    plgpu.barrier_wait(ds_ready.at[d])
                    plgpu.wgmma(dq_acc, ds_smem.at[d].transpose((1, 0)), k_cols)
                    plgpu.wgmma(dk_acc, ds_t, q_smem.at[slot])
                    add_dq(plgpu.wgmma_accumulator_load(dq_acc, wait_n=1), slot, head, qt)

                dv, dk, _ = pl.run_state(grad_scope)(
                    (plgpu.ACC.init(dv), plgpu.ACC.init(dk),
                     plgpu.ACC.init(zeros((block_q, half)))))
                plgpu.barrier_arrive(free.at[slot])
                return dk, dv

            with jax.named_scope("loop"):
                dk, dv = head_steps(group, per_head, lf - lo, uf - lo,
                                    lambda s, g, c_: step(s, g, c_, True),
                                    lambda s, g, c_: step(s, g, c_, False),
                                    (zeros((keys_per_wg, h)), zeros((keys_per_wg, h))))
            with jax.named_scope("epilogue"):
                plgpu.barrier_arrive(done)  # the other consumer's last dQ has read our keys
                plgpu.barrier_wait(done)
                plgpu.wait_smem_to_gmem(0)
                k_mine[...] = (dk * sc).astype(dtype)
                v_smem.at[wg][...] = dv.astype(dtype)
                plgpu.commit_smem()
                plgpu.copy_smem_to_gmem(k_mine, dk_ref.at[kv_slice], commit_group=False)
                plgpu.copy_smem_to_gmem(v_smem.at[wg], dv_ref.at[kv_slice], commit_group=False)
                plgpu.commit_smem_to_gmem_group()
                with jax.named_scope("store_wait"):
                    plgpu.wait_smem_to_gmem(0)

        def _channel_consumer():
            """channel_split (head dim 256): both consumers hold the tile's keys_per_wg x 2 keys.
            Consumer wg computes S and dP for keys [wg x keys_per_wg, +keys_per_wg) over all
            channels, and dV, dK and dQ for channels [wg x half, +half) over all the keys:
            P and dS (queries x keys, bfloat16) meet in shared memory, and the products are
            the 5 of the default split, none recomputed."""
            plgpu.set_max_registers(config.consumer_registers, action="increase")
            cols_h = pl.ds(wg * half, half)
            mine = pl.ds(wg * keys_per_wg, keys_per_wg)
            with jax.named_scope("prologue"):
                k_start = tile * keys
                kv_slice = (batch, pl.ds(k_start, keys), kvh)
                pl.when(wg == 0)(lambda: plgpu.copy_gmem_to_smem(k_ref.at[kv_slice], k_smem,
                                                                 kv_ready.at[0]))
                pl.when(wg == 1)(lambda: plgpu.copy_gmem_to_smem(v_ref.at[kv_slice], v_smem,
                                                                 kv_ready.at[1]))
                (k_seg_r,) = load_layout(klay_ref, batch, k_start, keys, row_layout, rows=(1,))
                k_pos_c, k_seg_c = load_layout(klay_ref, batch, k_start + wg * keys_per_wg,
                                               keys_per_wg, col_layout)
                c, sc = factors_ref[0], factors_ref[1]
                plgpu.barrier_wait(kv_ready.at[0])
                plgpu.barrier_wait(kv_ready.at[1])
                # each zeroes its channels of the padding rows; every product reads all of them
                zero_padding_rows(k_smem.at[:, cols_h], k_seg_r, pad_id)
                zero_padding_rows(v_smem.at[:, cols_h], k_seg_r, pad_id)
                plgpu.barrier_arrive(done.at[0])
                plgpu.barrier_wait(done.at[0])
            k_live_c = k_seg_c != pad_id
            shape = (block_q, keys_per_wg)

            def k_half(i):  # B operands of S and dP: our keys, the i-th half of the channels
                return k_smem.at[mine, pl.ds(i * half, half)].transpose((1, 0))

            def v_half(i):
                return v_smem.at[mine, pl.ds(i * half, half)].transpose((1, 0))

            def q_rows(x):
                return lax.broadcast_in_dim(x, shape, [0])

            def k_cols(x):
                return lax.broadcast_in_dim(x, shape, [1])

            def step(s, g, carry, masked: bool):
                dk, dv = carry
                slot, d, head, qt, q_layout = open_step(s, g, masked, row_layout)

                def release():
                    """The last step's stage back to the producer, once its dQ add has read
                    it: the next stage loads during this step."""
                    plgpu.wait_smem_to_gmem(0, wait_read_only=True)
                    plgpu.barrier_arrive(free.at[ring(s - 1, stages)])

                def sdp_scope(s_acc, dp_acc):
                    for i in range(2):  # over all the channels: a product per stored half
                        plgpu.wgmma(s_acc, qdo.at[slot, i, 0], k_half(i))
                    for i in range(2):
                        plgpu.wgmma(dp_acc, qdo.at[slot, i, 1], v_half(i))
                    pl.when(s > 0)(release)
                    s_ = plgpu.wgmma_accumulator_load(s_acc, wait_n=2)
                    lse_r = plgpu.load(st_smem.at[slot, 0], layout=row_layout)
                    p, d_cap = probabilities(s_, lse_r, q_rows, c)
                    if masked:  # key_side_rule with the keys along the columns
                        q_pos_r, q_seg_r = q_layout
                        ok = key_side_rule(variant, k_cols, q_rows, k_live_c, q_seg_r, k_seg_c,
                                           q_pos_r, k_pos_c)
                        p = jnp.where(ok, p, 0.0)
                    delta_r = plgpu.load(st_smem.at[slot, 1], layout=row_layout)
                    dp = plgpu.wgmma_accumulator_load(dp_acc, wait_n=0) - q_rows(delta_r)
                    ds = score_grads(p, dp, d_cap)
                    return p.astype(dtype), ds.astype(dtype)

                acc = plgpu.ACC(shape, jnp.float32)
                p, ds = pl.run_scoped(sdp_scope, acc, acc)
                # P and dS of both consumers' keys meet in shared memory (two slots, as the
                # default split's dS^T)
                ds_smem.at[0, d, :, mine][...] = p
                ds_smem.at[1, d, :, mine][...] = ds
                plgpu.commit_smem()
                plgpu.barrier_arrive(ds_ready.at[d])
                plgpu.barrier_wait(ds_ready.at[d])

                def grad_scope(refs):
                    """dV and dK read this consumer's half of the stage, so dQ's share, which
                    then takes those bytes, waits for all three products."""
                    dv_acc, dk_acc, dq_acc = refs
                    plgpu.wgmma(dv_acc, ds_smem.at[0, d].transpose((1, 0)), qdo.at[slot, wg, 1])
                    plgpu.wgmma(dk_acc, ds_smem.at[1, d].transpose((1, 0)), qdo.at[slot, wg, 0])
                    plgpu.wgmma(dq_acc, ds_smem.at[1, d], k_smem.at[:, cols_h])
                    add_dq(plgpu.wgmma_accumulator_load(dq_acc, wait_n=0), slot, head, qt)

                dv, dk, _ = pl.run_state(grad_scope)(
                    (plgpu.ACC.init(dv), plgpu.ACC.init(dk),
                     plgpu.ACC.init(zeros((block_q, half)))))
                return dk, dv  # the stage goes back in the next step (release)

            with jax.named_scope("loop"):
                dk, dv = head_steps(group, per_head, lf - lo, uf - lo,
                                    lambda s, g, c_: step(s, g, c_, True),
                                    lambda s, g, c_: step(s, g, c_, False),
                                    (zeros((keys, half)), zeros((keys, half))))
            with jax.named_scope("epilogue"):
                plgpu.barrier_arrive(done.at[1])  # both consumers' products have read K and V
                plgpu.barrier_wait(done.at[1])
                plgpu.wait_smem_to_gmem(0)
                k_smem.at[:, cols_h][...] = (dk * sc).astype(dtype)
                v_smem.at[:, cols_h][...] = dv.astype(dtype)
                plgpu.commit_smem()
                plgpu.barrier_arrive(done.at[2])  # both halves written
                plgpu.barrier_wait(done.at[2])
                pl.when(wg == 0)(lambda: plgpu.copy_smem_to_gmem(k_smem, dk_ref.at[kv_slice]))
                pl.when(wg == 1)(lambda: plgpu.copy_smem_to_gmem(v_smem, dv_ref.at[kv_slice]))
                with jax.named_scope("store_wait"):
                    plgpu.wait_smem_to_gmem(0)

        pl.when(wg < 2)(_channel_consumer if config.channel_split else _consumer)

        @pl.when(wg == 2)
        def _producer():
            plgpu.set_max_registers(config.producer_registers, action="decrease")

            def issue(head, qt, slot, wait):
                q_slice = (batch, pl.ds(qt * block_q, block_q), head)
                if wait:
                    plgpu.barrier_wait(free.at[slot])
                if config.channel_split:  # Q, then dO, by channel halves
                    for j, src in enumerate((q_ref, do_ref)):
                        for i in range(2):
                            plgpu.copy_gmem_to_smem(src.at[(*q_slice, pl.ds(i * half, half))],
                                                    qdo.at[slot, i, j], loaded.at[slot])
                    plgpu.copy_gmem_to_smem(
                        stats_ref.at[batch, head, :, pl.ds(qt * block_q, block_q)],
                        st_smem.at[slot], loaded.at[slot])
                    return
                plgpu.copy_gmem_to_smem(q_ref.at[q_slice], q_smem.at[slot], loaded.at[slot])
                plgpu.copy_gmem_to_smem(
                    stats_ref.at[batch, head, :, pl.ds(qt * block_q, block_q)],
                    st_smem.at[slot], loaded.at[slot])
                plgpu.copy_gmem_to_smem(do_ref.at[q_slice], do_smem.at[slot], loaded.at[slot])

            for i in range(stages):
                pl.when(i < steps)(lambda i=i: issue(*where_step(jnp.int32(i)), i, False))

            def one(s, at):  # step s + stages, its (head, step in the head) carried, not divided
                head, i = at
                issue(head, q_tile(i), ring(s, stages), True)
                last = i + 1 == per_head
                return jnp.where(last, head + 1, head), jnp.where(last, 0, i + 1)

            lax.fori_loop(0, jnp.maximum(steps - stages, 0), one, head_step(jnp.int32(stages)))

    def entry(q_ref, k_ref, v_ref, do_ref, stats_ref, qlay_ref, klay_ref, bounds_ref, factors_ref,
              order_ref, dq_ref, dk_ref, dv_ref):
        dq_tiling = (plgpu.TilingTransform((DQ_TILE, DQ_TILE)),)
        # logsumexp (log2), delta, and for the deterministic dQ its scale
        st_smem = plgpu.SMEM((stages, stats.shape[2], block_q), jnp.float32)
        if config.channel_split:
            # per stage and channel half: Q's and dO's columns (bfloat16), then that half's dQ
            # share (float32 or int32) in the same 32 KiB; K and V of all the keys; P and dS
            # (queries x keys), two steps
            assert 2 * dtype.itemsize == jnp.dtype(acc_dtype).itemsize  # [stage, half] align
            smem = (
                plgpu.RefUnion(
                    plgpu.SMEM((stages, 2, block_q, half), acc_dtype, transforms=dq_tiling),
                    plgpu.SMEM((stages, 2, *dq_share), acc_dtype),
                    plgpu.SMEM((stages, 2, 2, block_q, half), dtype, transforms=tiled)),
                st_smem,
                plgpu.SMEM((keys, h), dtype, transforms=tiled),
                plgpu.SMEM((keys, h), dtype, transforms=tiled),
                plgpu.SMEM((2, 2, block_q, keys), dtype, transforms=tiled))
            tma_loads = 5  # Q and dO by halves, the stats
        else:
            smem = (
                plgpu.SMEM((stages, block_q, h), dtype, transforms=tiled),  # Q
                plgpu.SMEM((stages, block_q, h), dtype, transforms=tiled),  # dO
                st_smem,
                # K (then dK); the consumers' V (then dV); dS^T (keys x queries), two steps
                plgpu.SMEM((keys, h), dtype, transforms=tiled),
                plgpu.SMEM((2, keys_per_wg, h), dtype, transforms=tiled),
                plgpu.SMEM((2, keys, block_q), dtype, transforms=tiled),
                plgpu.RefUnion(  # the consumers' dQ shares, float32 or int32 fixed point
                    plgpu.SMEM((2, block_q, half), acc_dtype, transforms=dq_tiling),
                    plgpu.SMEM((2, *dq_share), acc_dtype)))
            tma_loads = 3  # Q, dO, the stats
        pl.run_scoped(
            lambda *scoped: kernel(q_ref, k_ref, v_ref, do_ref, stats_ref, qlay_ref, klay_ref,
                                   bounds_ref, factors_ref, order_ref, dq_ref, dk_ref, dv_ref,
                                   scoped),
            smem, plgpu.Barrier(num_arrivals=tma_loads, num_barriers=stages),
            plgpu.Barrier(num_arrivals=2, num_barriers=stages), plgpu.Barrier(num_barriers=4),
            plgpu.Barrier(num_arrivals=2, num_barriers=2),
            # the consumers meet: at the end (and with channel_split, after zeroing K's and V's
            # padding and between the epilogue's reads and writes of K and V), a barrier each
            plgpu.Barrier(num_arrivals=2, num_barriers=3 if config.channel_split else 1),
            collective_axes="wg")

    # dQ's accumulator: zeros from a barrier with this call's stats, so that XLA neither fuses
    # the zeroing with another layer's (one fusion kept every layer's 1 GiB accumulator alive
    # at once at 64k tokens x 32 heads: +1 GiB per unrolled layer) nor runs it before this
    # backward's inputs exist
    zero_acc = lax.optimization_barrier((jnp.zeros((), acc_dtype), stats))[0]
    dq_acc = jax.new_ref(jnp.broadcast_to(zero_acc, (b, n, num_q_tiles, 2, *dq_share)))
    prewarm.watch()  # compile the kernel as soon as the step's lowering has it
    dk, dv = plgpu.kernel(
        entry,  # refs: the inputs with dq_acc last (aliased in and out), then dk and dv
        out_type=(jax.ShapeDtypeStruct(k.shape, dtype), jax.ShapeDtypeStruct(k.shape, dtype)),
        grid=(num_kv, num_k_tiles, b),
        grid_names=("heads", "k_seq", "batch"),
        num_threads=3,
        thread_name="wg",
        compiler_params=plgpu.CompilerParams(approx_math=True),
        kernel_name=prewarm.KERNEL_PREFIX + "backward",
    )(q, k, v, dout, stats, q_lay, k_lay, bounds, factors, order, dq_acc)
    dq = untile_dq(dq_acc[...], block_q)[:, :t]
    if deterministic:
        dq = dq.astype(jnp.float32) * (jnp.swapaxes(fixed_unscale, 1, 2)[..., None] * scale)
    else:
        dq = dq * jnp.asarray(scale, jnp.float32)
    return dq.astype(dtype), dk[:, :s_len], dv[:, :s_len]
