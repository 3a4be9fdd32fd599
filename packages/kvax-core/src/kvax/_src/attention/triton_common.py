"""Pieces shared by the forward and backward Triton kernels, and launcher helpers.

Layout is (B, T, N, H) for queries and (B, S, K, H) for keys and values, contiguous; positions and
segment ids are [B, T] / [B, S] int32; logsumexp and delta are [B, N, T] float32. The forward
stores the logsumexp as every backend does (natural log, -inf on rows with nothing to attend);
the backward kernels read it in log2 units of the scaled logits with +inf there (triton_bwd's
launcher converts), so that exp2(s - lse) is 0 on those rows.
Every offset that can pass 2^31 elements is formed in int64 (batch, head and block starts); only
offsets inside one tile stay int32.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl
from triton.language.extra import libdevice

from kvax._src.attention.blockwise import LOG2E
from kvax._src.attention.variant import MaskVariant
from kvax._src.config import PADDING_SEGMENT_ID, is_hopper, shared_memory_bytes


@triton.jit
def load_tile_layout(pos_ptr, seg_ptr, start, offs, length, SEQUENTIAL: tl.constexpr,
                     PAD_ID: tl.constexpr):
    """(positions, segment ids, live) of the tile of tokens start + offs: tokens at or past length
    read as padding, and padding is not live."""
    in_range = offs < length - start  # one scalar subtraction, no int64 vector
    seg = tl.load(seg_ptr + start + offs, mask=in_range, other=PAD_ID)
    if SEQUENTIAL:
        pos = start.to(tl.int32) + offs
    else:
        pos = tl.load(pos_ptr + start + offs, mask=in_range, other=0)
    return pos, seg, seg != PAD_ID


@triton.jit
def masked_tile(t, lf, uf, MASKED: tl.constexpr):
    """The column tile of step t. Masked tiles are [lo, lf) and [uf, hi), walked by one loop over
    [lo, lf + hi - uf); full tiles [lf, uf) by another. Two loops instead of three: with three,
    ptxas serialised the backward's wgmma chain (C7515)."""
    if MASKED:
        return tl.where(t < lf, t, t - lf + uf)
    else:
        return t


@triton.jit
def load_bounds(LO, HI, LF, UF, row, COL_RATIO: tl.constexpr):
    """One row's block-mask bounds (lower, upper, lower_full, upper_full), in kernel tiles."""
    lo = tl.load(LO + row) * COL_RATIO
    hi = tl.load(HI + row) * COL_RATIO
    lf = tl.load(LF + row) * COL_RATIO
    uf = tl.load(UF + row) * COL_RATIO
    return lo, hi, lf, uf


@triton.jit
def position_rule(q_pos, k_pos, VARIANT: tl.constexpr):
    """q_pos and k_pos broadcast against each other: with d = q_pos - k_pos, VARIANT = (low, high,
    cap) allows low <= d <= high, None meaning unbounded (variant.MaskVariant.diff_bounds; causal
    is (0, None)). Written as q >= k + low and q <= k + high: no int32 overflow within the
    limits."""
    ok = q_pos == q_pos
    if VARIANT[0] is not None:
        ok = ok & (q_pos >= k_pos + VARIANT[0])
    if VARIANT[1] is not None:
        ok = ok & (q_pos <= k_pos + VARIANT[1])
    return ok


@triton.jit
def tanh(x, IEEE: tl.constexpr):
    """libdevice's tanh for float32 inputs; the hardware's tanh.approx.f32 (one MUFU op, relative
    error ~2^-11, under bf16/f16 rounding) for 16-bit ones: libdevice's made the capped forward
    2.1x slower on an H100. tanh.approx.f16x2 (one MUFU op per two logits, three conversions)
    measured no faster here (docs/bench/h100-2026-11-23-softcap)."""
    if IEEE:
        return libdevice.tanh(x)
    else:
        return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x],
                                         dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def logit_scale(qk_scale, VARIANT: tl.constexpr):
    """What Q K^T is multiplied by, once per program: the scale in log2 units, divided by the cap
    c (times log2(e), VARIANT[2]) when logits are soft-capped, so that one multiply feeds tanh."""
    if VARIANT[2] is not None:
        return qk_scale * (1.0 / VARIANT[2])
    else:
        return qk_scale


@triton.jit
def scores(x, VARIANT: tl.constexpr, IEEE: tl.constexpr):
    """Scores of x = Q K^T * logit_scale: x itself (the logits in log2 units), or with a cap
    t = tanh(x) (the capped logits are VARIANT[2] * t; to_log2 turns scores into those)."""
    if VARIANT[2] is not None:
        return tanh(x, IEEE)
    else:
        return x


@triton.jit
def to_log2(s, VARIANT: tl.constexpr):
    """Scores as logits in log2 units: one multiply by the cap, which ptxas fuses with the
    subtraction of the row maximum or logsumexp that follows into one FMA."""
    if VARIANT[2] is not None:
        return s * VARIANT[2]
    else:
        return s


@triton.jit
def cap_weight(p, s, VARIANT: tl.constexpr):
    """p times the cap's derivative 1 - t^2 (t = the score; p itself without a cap), so that
    dS = cap_weight(p, s) (dP - delta). Taken as soon as p is, it keeps one tile alive across
    dP's product instead of two (p and s): the capped backward 3.6% faster on an H100
    (docs/bench/h100-2026-11-24-softcap-bwd)."""
    if VARIANT[2] is not None:
        return p * (1.0 - s * s)
    else:
        return p


@triton.jit
def element_mask(q_pos, q_seg, k_pos, k_seg, PAD_ID: tl.constexpr, VARIANT: tl.constexpr):
    """[BLOCK_Q] x [BLOCK_K] -> [BLOCK_Q, BLOCK_K]: same document, not padding, VARIANT."""
    same = q_seg[:, None] == k_seg[None, :]
    rule = position_rule(q_pos[:, None], k_pos[None, :], VARIANT)
    return same & (q_seg[:, None] != PAD_ID) & rule


@triton.jit
def element_mask_t(k_pos, k_seg, q_pos, q_seg, PAD_ID: tl.constexpr, VARIANT: tl.constexpr):
    """The same rule, transposed: [BLOCK_K] x [BLOCK_Q] -> [BLOCK_K, BLOCK_Q]."""
    same = k_seg[:, None] == q_seg[None, :]
    rule = position_rule(q_pos[None, :], k_pos[:, None], VARIANT)
    return same & (q_seg[None, :] != PAD_ID) & rule


@triton.jit
def mma(a, b, acc, IEEE: tl.constexpr):
    """a @ b (+ acc) with float32 accumulation; IEEE float32 products when IEEE, else the
    tensor cores' native precision for the operand dtype."""
    if IEEE:
        return tl.dot(a, b, acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


def next_pow2(x: int) -> int:
    return max(16, 1 << math.ceil(math.log2(max(x, 1))))


def ieee_products(dtype) -> bool:
    """float32 inputs get IEEE products: the tolerance is tied to plain float32 math, not TF32."""
    return jnp.dtype(dtype) == jnp.float32


def common_constants(dtype, head_dim: int, value_head_dim: int, sequential: bool,
                     variant: MaskVariant = MaskVariant(),
                     logits_soft_cap: float | None = None) -> dict:
    block_h, block_hv = next_pow2(head_dim), next_pow2(value_head_dim)
    return dict(
        H=head_dim, HV=value_head_dim, BLOCK_H=block_h, BLOCK_HV=block_hv,
        EVEN_H=block_h == head_dim, EVEN_HV=block_hv == value_head_dim,
        SEQUENTIAL=bool(sequential), PAD_ID=PADDING_SEGMENT_ID,
        VARIANT=(*variant.diff_bounds,
                 None if logits_soft_cap is None else float(logits_soft_cap) * LOG2E),
        IEEE=ieee_products(dtype), LOG2E=LOG2E,
    )


def scale_array(scale) -> jax.Array:
    """The softmax scale as a float32 [1] array, which the kernels load: jax-triton bakes scalar
    arguments into the compiled call, so a traced scale must travel as an array."""
    return jnp.reshape(jnp.asarray(scale, jnp.float32), (1,))


def choose_tiles(dtype, head_dim: int, value_head_dim: int, row_block: int, col_block: int,
                 num_stages: int, *, forward: bool = False, device_kind: str = "",
                 capability: int | None = None) -> dict:
    """Kernel tiles that divide the mask's blocks and fit shared memory and registers.

    A mask block may be split into several tiles (each inherits its block's class), so masks built
    with the default 128x128 blocks serve float32 and head dims up to 256 too. Tiles hold at most
    32 KiB of one operand: 128 rows of 16-bit head dim 128, fewer for float32 or head dim 256;
    16 KiB on GPUs that give a program less than 160 KiB of shared memory (99 KiB on compute
    capabilities 8.6, 8.9 and 12.0: RTX 30/40/50, A10, A40, L4, L40S), where the backward's
    32 KiB tiles took more than that even at one stage (head dim 256, float32), and 8 KiB
    below 96 KiB (64 KiB on 7.5: T4, RTX 20).
    On Hopper the forward kernel visits 128-key blocks as two 64-key tiles pipelined one stage
    deeper (num_stages + 1, at most 6): measured faster on an H100 than 128-key tiles with the same
    shared memory, and since the masked tiles share one loop, 3-7% faster than two stages deeper
    on document masks (docs/bench/h100-2026-11-22/tuning.md).
    """
    width = max(next_pow2(head_dim), next_pow2(value_head_dim)) * jnp.dtype(dtype).itemsize
    limit = shared_memory_bytes(device_kind, capability)
    tile_bytes = 32 * 1024  # (Hopper, A100, and GPUs whose limit is unknown)
    if limit is not None and limit < 96 * 1024:
        tile_bytes = 8 * 1024
    elif limit is not None and limit < 160 * 1024:
        tile_bytes = 16 * 1024
    cap = max(16, min(128, tile_bytes // width))
    tile_row, tile_col = min(row_block, cap), min(col_block, cap)
    stages = num_stages if width <= 256 else min(num_stages, 2)
    if forward and is_hopper(device_kind) and tile_row == 128 and tile_col == 128:
        tile_col, stages = 64, min(num_stages + 1, 6)
    return dict(BLOCK_M_TILE=tile_row, BLOCK_N_TILE=tile_col, ROW_RATIO=row_block // tile_row,
                COL_RATIO=col_block // tile_col, num_stages=stages)


# bytes past the tiles' buffers that compiled kernels were seen to take (layout conversions,
# barriers): up to 1.5 KiB in sm_90 builds of the forward (test_kernels_compile.py)
SHARED_SLACK = 2048


def forward_shared_memory(dtype, head_dim: int, value_head_dim: int, tiles: dict,
                          stages: int) -> int:
    """Bytes of shared memory the forward kernel takes with `stages` stages of these tiles, an
    upper bound (its query tile, and per stage a key and a value tile), checked against compiled
    kernels in test_kernels_compile.py."""
    item = jnp.dtype(dtype).itemsize
    return (item * (tiles["BLOCK_M_TILE"] * next_pow2(head_dim) + stages * tiles["BLOCK_N_TILE"]
                    * (next_pow2(head_dim) + next_pow2(value_head_dim))) + SHARED_SLACK)


def backward_shared_memory(dtype, head_dim: int, value_head_dim: int, kv_tiles: dict,
                           q_tiles: dict, stages: int) -> int:
    """Bytes of shared memory the backward kernel takes with `stages` stages, an upper bound over
    its two kinds of program, each holding one tile of two operands (dK/dV: K and V; dQ: Q and
    dO) and streaming, per stage, tiles of the other two with their rows' logsumexp and delta
    or positions and ids (checked against compiled kernels in test_kernels_compile.py)."""
    row = jnp.dtype(dtype).itemsize * (next_pow2(head_dim) + next_pow2(value_head_dim)) + 16

    def program(held: int, streamed: int) -> int:
        return held * row + stages * streamed * row

    return max(program(kv_tiles["BLOCK_M_TILE"], kv_tiles["BLOCK_N_TILE"]),
               program(q_tiles["BLOCK_M_TILE"], q_tiles["BLOCK_N_TILE"])) + SHARED_SLACK


def fit_stages(need, stages: int, device_kind: str, what: str) -> int:
    """The most pipeline stages, up to `stages` (the params' num_stages, or fewer where
    choose_tiles lowered it), whose shared memory need(stages) fits one program of a Hopper GPU.
    num_stages only deepens the pipeline, so fewer stages change the speed, never the result: a
    config such as 128x64 with the default 3 stages, over an H200's shared memory in the
    backward at head dim 128, runs with 2 instead of failing at launch. what: the params' name
    for the error where not even one stage fits.
    Other kinds keep `stages`: the model was checked against sm_90 builds, and Triton's sm_80
    builds do not follow it (an A100's backward can take more shared memory at one stage than
    at two, above the model; docs/bench/cpu-2026-11-30-shared-sweep), so it would cut stages
    from A100 defaults that fit; there the launch layer fits the stages to each build
    (triton_launch)."""
    limit = shared_memory_bytes(device_kind)
    if limit is None or not is_hopper(device_kind):
        return stages
    while stages > 1 and need(stages) > limit:
        stages -= 1
    if need(stages) > limit:
        raise ValueError(
            f"{what} needs ~{need(stages)} bytes of shared memory per program with one stage; a "
            f"{device_kind} has {limit}: use smaller blocks")
    return stages


def forward_tiles(dtype, head_dim: int, value_head_dim: int, blocks: tuple[int, int], params,
                  device_kind: str, capability: int | None = None) -> dict:
    """choose_tiles for the forward kernel over mask blocks (rows, columns), its num_stages fit
    to the device's shared memory (fit_stages)."""
    tiles = choose_tiles(dtype, head_dim, value_head_dim, *blocks, params.num_stages,
                         forward=True, device_kind=device_kind, capability=capability)
    stages = fit_stages(lambda n: forward_shared_memory(dtype, head_dim, value_head_dim, tiles, n),
                        tiles["num_stages"], device_kind, f"fwd_params={params}")
    return dict(tiles, num_stages=stages)


def backward_tiles(dtype, head_dim: int, value_head_dim: int, dkdv_blocks: tuple[int, int],
                   dq_blocks: tuple[int, int], params, device_kind: str,
                   capability: int | None = None) -> tuple[dict, dict, int]:
    """(dK/dV tiles, dQ tiles, stages) for the backward kernel over its two masks' blocks: the
    stages both kinds of program take, fit to the device's shared memory (fit_stages)."""
    where = dict(device_kind=device_kind, capability=capability)
    kv_tiles = choose_tiles(dtype, head_dim, value_head_dim, *dkdv_blocks, params.num_stages,
                            **where)
    q_tiles = choose_tiles(dtype, head_dim, value_head_dim, *dq_blocks, params.num_stages,
                           **where)
    stages = fit_stages(
        lambda n: backward_shared_memory(dtype, head_dim, value_head_dim, kv_tiles, q_tiles, n),
        min(kv_tiles["num_stages"], q_tiles["num_stages"]), device_kind, f"bwd_params={params}")
    return kv_tiles, q_tiles, stages


def ordered_constants(kernel, constants: dict) -> dict:
    """Constexpr values in the kernel's parameter order (a stable, readable launch record; unknown
    names fail here instead of deep inside Triton)."""
    unknown = set(constants) - set(kernel.arg_names)
    if unknown:
        raise TypeError(f"{kernel.__name__} has no parameters {sorted(unknown)}")
    return {name: constants[name] for name in kernel.arg_names if name in constants}


def launch(kernel, *args, out_shape, grid, name, num_warps, num_stages, debug, **constants):
    """jax_triton.triton_call with the constexprs in kernel order. Float scalars must be
    np.float32: jax-triton passes a Python float as fp64, which would turn the softmax to fp64."""
    for arg in args:
        if isinstance(arg, float) and not isinstance(arg, np.floating):
            raise TypeError("pass float scalars to kernels as np.float32, not Python floats")
    from kvax._src.attention import triton_launch

    triton_launch.install()  # disk cache, TMA scratch, real warps; TRITON_CACHE_DIR as it was
    triton_launch.register(kernel)
    jt = triton_launch.import_jax_triton()  # needs a CUDA jaxlib: imported only at launch

    kwargs = dict(out_shape=out_shape, grid=grid, name=name, num_warps=num_warps,
                  num_stages=num_stages, debug=debug, **ordered_constants(kernel, constants))
    triton_launch.build_ahead(jt, kernel, args, kwargs)  # built while the step traces on
    return jt.triton_call(*args, kernel=kernel, **kwargs)


def shape_dtype(shape, dtype) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))
