"""Compile the Triton kernels for sm_90 on any machine (no GPU needed): catches kernel errors in CI
and checks that the tiles the launchers choose fit an H100's shared memory, and (built for 7.5,
8.0 and 8.6) that the defaults off Hopper fit those GPUs'."""

import jax
import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from kvax._src.attention import triton_bwd, triton_common as tc, triton_fwd  # noqa: E402
from kvax.utils import default_params  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"
H100_SHARED_BYTES = 232448
POINTERS_I32 = ("QPOS", "QSEG", "KPOS", "KSEG", "LO", "HI", "LF", "UF", "KV_LO", "KV_HI", "KV_LF",
                "KV_UF", "Q_LO", "Q_HI", "Q_LF", "Q_UF")
POINTERS_F32 = ("LSE", "DELTA", "SCALE", "SINKS")


def compile_for_hopper(kernel, dtype, constants, num_warps, num_stages, capability=90):
    """Compile as jax-triton does (for sm_90 unless another compute capability is given):
    runtime arguments in kernel order, then the constexprs in the order the launcher passes
    them (tc.ordered_constants), read by position."""
    elem = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[dtype]
    constants = tc.ordered_constants(kernel, constants)
    signature = {}
    for name in kernel.arg_names:
        if name in constants:
            continue
        elif name in POINTERS_I32:
            signature[name] = "*i32"
        elif name in POINTERS_F32:
            signature[name] = "*fp32"
        elif name in ("Q", "K", "V", "O", "DO", "DQ", "DK", "DV"):
            signature[name] = f"*{elem}"  # Q K V O DO DQ DK DV
        else:
            signature[name] = "i32"
    signature.update({name: "constexpr" for name in constants})
    # jax-triton tells Triton every array is 16-byte aligned and gives integer scalars no hints
    aligned = [(kernel.arg_names.index(n),) for n, ty in signature.items() if ty.startswith("*")]
    attrs = {i: [["tt.divisibility", 16]] for i in aligned}
    source = ASTSource(fn=kernel, signature=signature, constexprs=dict(constants), attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", capability, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages))


def launch_constants(kind, dtype, h, hv, params, device_kind=H100, capability=None):
    """The constexprs and stages the launchers pass on an H100, or another GPU (8 query heads, 2
    kv heads)."""
    consts = dict(N=8, G=4, **tc.common_constants(dtype, h, hv, sequential=False))
    where = dict(device_kind=device_kind, capability=capability)
    if kind == "fwd":
        tiles = tc.forward_tiles(dtype, h, hv, (params.query_block_size, params.kv_block_size),
                                 params, **where)
        consts.update(BLOCK_M=tiles["BLOCK_M_TILE"], BLOCK_N=tiles["BLOCK_N_TILE"],
                      ROW_RATIO=tiles["ROW_RATIO"], COL_RATIO=tiles["COL_RATIO"], TMA=False,
                      HAS_SINKS=False, FIXED_M=None)
        return consts, tiles["num_stages"]
    kv, qt, stages = tc.backward_tiles(dtype, h, hv, (params.kv_block_size,
                                                      params.query_block_size),
                                       params.dq_blocks, params, **where)
    consts.update(KH=2, KV_BLOCK_Q=kv["BLOCK_N_TILE"], KV_BLOCK_K=kv["BLOCK_M_TILE"],
                  KV_ROW_RATIO=kv["ROW_RATIO"], KV_COL_RATIO=kv["COL_RATIO"],
                  Q_BLOCK_Q=qt["BLOCK_M_TILE"], Q_BLOCK_K=qt["BLOCK_N_TILE"],
                  Q_ROW_RATIO=qt["ROW_RATIO"], Q_COL_RATIO=qt["COL_RATIO"])
    return consts, stages


def shared_model(kind, dtype, h, hv, params, stages):
    """tc's model of the kernel's shared memory at `stages` stages of the launcher's tiles."""
    if kind == "fwd":
        tiles = tc.forward_tiles(dtype, h, hv, (params.query_block_size, params.kv_block_size),
                                 params, H100)
        return tc.forward_shared_memory(dtype, h, hv, tiles, stages)
    kv, qt, _ = tc.backward_tiles(dtype, h, hv, (params.kv_block_size, params.query_block_size),
                                  params.dq_blocks, params, H100)
    return tc.backward_shared_memory(dtype, h, hv, kv, qt, stages)


KERNELS = {"fwd": triton_fwd._fwd_kernel, "bwd": triton_bwd._bwd_kernel}


@pytest.mark.parametrize("kind", ["fwd", "bwd"])
@pytest.mark.parametrize("dtype,h,hv", [("bfloat16", 128, 128), ("bfloat16", 256, 256),
                                        ("float16", 96, 40), ("float32", 256, 192)])
def test_kernel_compiles_and_fits_hopper(kind, dtype, h, hv):
    params = default_params(H100, backward=kind != "fwd")
    consts, stages = launch_constants(kind, dtype, h, hv, params)
    compiled = compile_for_hopper(KERNELS[kind], dtype, consts, params.num_warps, stages)
    assert 0 < compiled.metadata.shared <= H100_SHARED_BYTES
    dots = [line for line in compiled.asm["ttir"].splitlines() if "tt.dot" in line]
    assert dots
    if dtype != "float32":  # every product takes 16-bit operands: tensor cores, no promotion
        elem = {"bfloat16": "xbf16>", "float16": "xf16>"}[dtype]
        for line in dots:
            operands = line.split(":")[-1].split("->")[0]
            assert operands.count(elem) == 2, f"a product with promoted operands: {line.strip()}"
        ptx = compiled.asm["ptx"]
        assert "mma" in ptx
        # tiles move in 16-byte vectors, never element by element
        assert "ld.global.b16" not in ptx and "ld.global.u16" not in ptx
        assert "cp.async.cg.shared.global" in ptx or "ld.global.v4" in ptx


def ptxas_report(ptx: str, tmp_path) -> str:
    """ptxas -v's report for sm_90a, from the ptxas Triton itself compiles with."""
    import subprocess

    from triton.backends.nvidia.compiler import get_ptxas

    ptxas = get_ptxas(90).path
    (tmp_path / "k.ptx").write_text(ptx)
    result = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(tmp_path / "k.ptx"), "-o",
                             str(tmp_path / "k.cubin")], capture_output=True, text=True,
                            check=True)
    return result.stdout + result.stderr


@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_wgmma_chain_not_serialised(kind, tmp_path):
    """ptxas serialises every wgmma of a kernel (warning C7515) when other instructions write an
    accumulator inside a pipeline stage; the backward did with three loops per row (15% slower dQ
    on an H100). Compiled with the H100 defaults in bf16."""
    params = default_params(H100, backward=kind != "fwd")
    consts, stages = launch_constants(kind, "bfloat16", 128, 128, params)
    compiled = compile_for_hopper(KERNELS[kind], "bfloat16", consts, params.num_warps, stages)
    report = ptxas_report(compiled.asm["ptx"], tmp_path)
    assert "Used" in report and "registers" in report, report
    assert "C7515" not in report, report


@pytest.mark.parametrize("change", [dict(SEQUENTIAL=True), dict(HAS_SINKS=True)],
                         ids=["sequential", "sinks"])
def test_forward_options_compile(change, tmp_path):
    params = default_params(H100, backward=False)
    consts, stages = launch_constants("fwd", "bfloat16", 128, 128, params)
    consts.update(change)
    compiled = compile_for_hopper(triton_fwd._fwd_kernel, "bfloat16", consts, params.num_warps,
                                  stages)
    assert "C7515" not in ptxas_report(compiled.asm["ptx"], tmp_path)


def test_constants_are_ordered_as_the_kernel():
    shuffled = {"IEEE": False, "N": 8, "BLOCK_M": 64, "H": 128}
    ordered = tc.ordered_constants(triton_fwd._fwd_kernel, shuffled)
    assert list(ordered) == ["N", "H", "BLOCK_M", "IEEE"]
    with pytest.raises(TypeError, match="no parameters"):
        tc.ordered_constants(triton_fwd._fwd_kernel, {"NOPE": 1})


# (kind, dtype, head dims, (query block, kv block, num_stages)): the defaults and configs at and
# over an H100's shared memory; bwd bfloat16 128 with 128x64 and 3 stages asked for 232960 bytes
# on an H200 (causal, two query heads a kv head) and failed at launch (mosaic fuzz, session 60)
SHARED_CASES = [
    ("fwd", "bfloat16", 128, 128, (128, 128, 3)), ("fwd", "bfloat16", 128, 128, (128, 128, 5)),
    ("fwd", "bfloat16", 128, 128, (64, 128, 4)), ("fwd", "float16", 96, 40, (64, 128, 5)),
    ("bwd", "bfloat16", 128, 128, (64, 128, 3)), ("bwd", "bfloat16", 128, 128, (64, 128, 4)),
    ("bwd", "bfloat16", 128, 128, (128, 64, 3)), ("bwd", "bfloat16", 128, 128, (128, 128, 3)),
    ("bwd", "bfloat16", 64, 64, (128, 128, 4)), ("bwd", "float16", 96, 40, (128, 64, 4)),
]


@pytest.mark.parametrize("kind,dtype,h,hv,config", SHARED_CASES)
def test_stages_fit_shared_memory(kind, dtype, h, hv, config):
    """The launchers' stages (num_stages, or fewer where that many would not fit: fit_stages)
    give kernels within an H100's shared memory, and tc's model bounds what the compiled kernel
    takes (with a causal mask under a soft cap too) by at most 6% more: a model far above it
    would take stages away for nothing. At one stage more than the launcher's, the model is over
    the limit (an H200 built bwd 128x64 at 3 stages 1.5 KiB larger than these sm_90 builds)."""
    from kvax._src.attention.variant import make_variant
    from kvax.utils import FlashAttentionParamsConfig

    params = FlashAttentionParamsConfig(*config[:2], 8, config[2])
    consts, stages = launch_constants(kind, dtype, h, hv, params)
    model = shared_model(kind, dtype, h, hv, params, stages)
    assert model <= H100_SHARED_BYTES
    for variant, cap in ((None, None), (make_variant(True, None), 30.0)):
        if variant is not None:
            consts.update(tc.common_constants(dtype, h, hv, False, variant, logits_soft_cap=cap))
        shared = compile_for_hopper(KERNELS[kind], dtype, consts, 8, stages).metadata.shared
        assert shared <= model <= 1.06 * shared, (shared, model)
    requested = tc.choose_tiles(dtype, h, hv, *config[:2], config[2], forward=kind == "fwd",
                                device_kind=H100)["num_stages"]
    if stages < requested:
        assert shared_model(kind, dtype, h, hv, params, stages + 1) > H100_SHARED_BYTES


@pytest.mark.parametrize("capability", [75, 80, 86])
@pytest.mark.parametrize("kind,dtype,h,capped", [
    (kind, dtype, h, False) for kind in ("fwd", "bwd") for dtype in ("bfloat16", "float32")
    for h in (64, 128, 256)] + [("bwd", "bfloat16", 128, True)])
def test_default_tiles_fit_smaller_gpus(capability, kind, dtype, h, capped):
    """The default params off Hopper (64x64, 4 warps, 3 stages) as the launchers tile them for
    an A100 (8.0, 163 KiB a program), the 99 KiB GPUs (8.6 here; 8.9 and 12.0 built the same
    sizes) and a T4 (7.5, 64 KiB), built for that GPU at one stage, fit its shared memory: the
    launch layer, which takes stages away until a build fits (triton_launch), then always finds
    one. With 32 KiB tiles the 8.6 backward took 147456 bytes at one stage at head dim 256, and
    147456 in float32 at head dim 128 (docs/bench/cpu-2026-11-30-shared-cc). One exception: on
    a T4 the float32 backward at head dim 256 takes 66560 bytes with the smallest tiles (a
    ValueError at the lowering says so)."""
    from kvax._src.attention.variant import make_variant
    from kvax._src.config import SHARED_MEMORY_BY_CAPABILITY

    params = default_params("NVIDIA GeForce RTX 3090", backward=kind == "bwd")
    assert (params.query_block_size, params.kv_block_size, params.num_stages) == (64, 64, 3)
    consts, _ = launch_constants(kind, dtype, h, h, params, "a GPU", capability)
    if capped:
        consts.update(tc.common_constants(dtype, h, h, False, make_variant(True, None), 30.0))
    kernel = compile_for_hopper(KERNELS[kind], dtype, consts, params.num_warps, 1, capability)
    fits = kernel.metadata.shared <= SHARED_MEMORY_BY_CAPABILITY[capability]
    assert fits != ((capability, kind, dtype, h) == (75, "bwd", "float32", 256))


def test_shared_memory_by_compute_capability_then_by_name():
    from kvax._src.config import current_compute_capability, shared_memory_bytes

    assert shared_memory_bytes("NVIDIA GeForce RTX 4090", 89) == 101376
    assert shared_memory_bytes("Tesla T4", 75) == 65536
    assert shared_memory_bytes(H100) == shared_memory_bytes("any", 90) == H100_SHARED_BYTES
    assert shared_memory_bytes("NVIDIA A100-SXM4-80GB") == shared_memory_bytes("any", 80)
    assert shared_memory_bytes("an unknown GPU") is None
    assert shared_memory_bytes("a future GPU", 990) is None
    # a minor version not in the table: the least of its major's entries
    assert shared_memory_bytes("NVIDIA GB10", 121) == 101376
    assert shared_memory_bytes("Jetson AGX Orin", 87) == 101376  # it has 166912: never more
    if jax.default_backend() == "cpu":
        assert current_compute_capability() is None


def test_stages_error_where_one_does_not_fit():
    need = lambda stages: 150_000 + 50_000 * stages  # noqa: E731
    assert tc.fit_stages(need, 3, H100, "bwd_params=P") == 1
    assert tc.fit_stages(need, 3, "an unknown GPU", "bwd_params=P") == 3  # no limit known
    # the model does not hold for sm_80 builds: an A100 keeps the stages asked for
    assert tc.fit_stages(need, 3, "NVIDIA A100-SXM4-80GB", "bwd_params=P") == 3
    with pytest.raises(ValueError, match=r"bwd_params=P needs ~270000 bytes.*232448.*smaller"):
        tc.fit_stages(lambda stages: 270_000, 3, H100, "bwd_params=P")


def test_tma_forward_variant_compiles():
    """The experimental forward path (K/V tiles by device-side TMA descriptors) compiles for
    sm_90 and asks for the global scratch its descriptors live in (which the launch layer gives
    it)."""
    params = default_params(H100, backward=False)
    consts, stages = launch_constants("fwd", "bfloat16", 128, 128, params)
    consts.update(TMA=True)
    compiled = compile_for_hopper(triton_fwd._fwd_kernel, "bfloat16", consts, params.num_warps,
                                  stages)
    assert compiled.metadata.global_scratch_size > 0
    assert compiled.metadata.shared <= H100_SHARED_BYTES


@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_variant_kernels_compile(kind):
    """Bidirectional with a window and a soft cap: the kernels compile for sm_90 and the cap
    brings in the hardware's tanh."""
    from kvax._src.attention.variant import make_variant

    params = default_params(H100, backward=kind != "fwd")
    consts, stages = launch_constants(kind, "bfloat16", 128, 128, params)
    consts.update(tc.common_constants("bfloat16", 128, 128, False,
                                      make_variant(False, (64, 16)), logits_soft_cap=30.0))
    compiled = compile_for_hopper(KERNELS[kind], "bfloat16", consts, params.num_warps, stages)
    assert "tanh.approx.f32" in compiled.asm["ptx"]  # no tanh without a cap (0 of ~150k chars)
    assert compiled.metadata.shared <= H100_SHARED_BYTES
