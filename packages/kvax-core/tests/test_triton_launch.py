"""The disk cache of compiled kernels, on CPU: keys, atomic entries, reuse across processes
(simulated: a second compile with nothing in memory), other kernels untouched. On a GPU,
tools/bench.py --first-call measures cold and warm first calls in fresh processes."""

import dataclasses
import json
import os

import pytest

from kvax._src.attention import triton_launch as cache


@dataclasses.dataclass
class Result:
    binary: str
    name: str
    shared_mem_bytes: int


class FakeLib:
    """jaxlib's gpu_triton: records how kernels are built."""

    def __init__(self):
        self.kernels = []

    def TritonKernel(self, name, num_warps, num_ctas, shared, ptx, ttir, cc, **extra):  # noqa: N802
        self.kernels.append(dict(name=name, num_warps=num_warps, ptx=ptx, ttir=ttir, **extra))
        return ("kernel", ttir, num_warps, tuple(sorted(extra.items())))


class FakeJaxTriton:
    """jax-triton's get_or_create_triton_kernel and compile step, counting real builds; its
    compile is wrapped as install() wraps it, and TMA kernels report a scratch buffer and warp
    specialisation two more warps, as Triton's metadata does."""

    def __init__(self, monkeypatch):
        self.built = []
        self.lib = cache.KernelLib(FakeLib())
        self.compile = cache.capturing(self._their_compile, lambda ptx, name, shared:
                                       Result(ptx, name, shared))
        monkeypatch.setattr(cache, "compile_to_ptx", self._our_compile)

    def _their_compile(self, ttir, backend, options, cc, platform):
        return Result(f"ptx of {ttir}", "their_kernel", 1)

    def _our_compile(self, ttir, backend, options, cc):
        tma = "tma" in ttir
        return dict(ptx=f"ptx of {ttir}", name="kvax_fwd", shared=1234,
                    total_warps=10 if tma else 8, scratch=128 if tma else 0, scratch_align=128)

    def get_or_create(self, backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        self.built.append(fn.source)
        result = self.compile(fn.source, None, "options", 90, platform)
        kernel = self.lib.TritonKernel(result.name, kw["num_warps"], 1, result.shared_mem_bytes,
                                       result.binary, fn.source, 90)
        return kernel, {(0,): [["tt.divisibility", 16]]}


class Kernel:
    __module__ = "kvax._src.attention.triton_fwd"

    def __init__(self, source):
        self.source = self.cache_key = source

    def __hash__(self):
        return hash(self.source)


def build(jt, fn, num_warps=8):
    get = cache.cached(jt.get_or_create, jt.lib._lib.TritonKernel, lambda: 90)
    return get(None, "cuda", fn, ["*bf16", "i32"], [(1, "i32", 7)], num_warps=num_warps,
               num_stages=3, num_ctas=1, compute_capability=None, enable_fp_fusion=True,
               metaparams={"BLOCK": 64}, dump=False)


def test_cache_dir_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    assert cache.cache_dir() == str(tmp_path)
    monkeypatch.setenv("KVAX_CACHE_DIR", "off")
    assert cache.cache_dir() is None
    monkeypatch.delenv("KVAX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == os.path.join(str(tmp_path), "kvax", "triton")


def test_key_covers_source_options_and_device():
    base = cache.entry_key("src A", {"num_warps": 8}, 90)
    assert base == cache.entry_key("src A", {"num_warps": 8}, 90)
    assert len({base, cache.entry_key("src B", {"num_warps": 8}, 90),
                cache.entry_key("src A", {"num_warps": 4}, 90),
                cache.entry_key("src A", {"num_warps": 8}, 80)}) == 4


def test_second_process_reads_the_disk(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    first = FakeJaxTriton(monkeypatch)
    kernel, attrs = build(first, Kernel("module 1"))
    assert first.built == ["module 1"]
    second = FakeJaxTriton(monkeypatch)  # a new process: nothing in memory
    assert build(second, Kernel("module 1")) == (kernel, attrs) and second.built == []
    build(second, Kernel("module 1"), num_warps=4)  # other options: built
    build(second, Kernel("module 2"))  # another kernel: built
    assert second.built == ["module 1", "module 2"]
    entries = sorted(p for p in os.listdir(tmp_path))
    assert len(entries) == 3 and all(p.endswith(".json") for p in entries)  # no temporary files


def test_other_kernels_and_bad_entries(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))

    class Theirs(Kernel):
        __module__ = "my_project.kernels"

    jt = FakeJaxTriton(monkeypatch)
    build(jt, Theirs("their module"))
    build(FakeJaxTriton(monkeypatch), Theirs("their module"))
    assert jt.built == ["their module"] and not os.listdir(tmp_path)  # not ours: not cached
    assert jt.lib._lib.kernels[0]["name"] == "their_kernel"  # their compile, untouched
    key = cache.entry_key("module 3")
    (tmp_path / f"{key}.json").write_text("{not json")
    assert cache.read_entry(str(tmp_path), key) is None
    (tmp_path / f"{key}.json").write_text(json.dumps({"key": "another", "ptx": "x"}))
    assert cache.read_entry(str(tmp_path), key) is None
    monkeypatch.setenv("KVAX_CACHE_DIR", "off")
    jt = FakeJaxTriton(monkeypatch)
    build(jt, Kernel("module 4"))
    build(FakeJaxTriton(monkeypatch), Kernel("module 4"))
    assert len(os.listdir(tmp_path)) == 1  # only the bad entry written above


def test_tma_scratch_and_real_warps_reach_the_kernel(monkeypatch, tmp_path):
    """A kernel whose build reports a global scratch buffer (TMA descriptors) and more warps
    (warp specialisation) is built with both, freshly compiled and from the disk."""
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    for jt in (FakeJaxTriton(monkeypatch), FakeJaxTriton(monkeypatch)):  # compiled, then read
        kernel = build(jt, Kernel("tma module"))[0]
        assert kernel[2] == 10 and dict(kernel[3]) == dict(global_scratch_size=128,
                                                           global_scratch_align=128)
    plain = build(FakeJaxTriton(monkeypatch), Kernel("plain module"))[0]
    assert plain[2] == 8 and plain[3] == ()  # no scratch: jaxlib's defaults


def test_registered_kernels_get_the_layer():
    class Elsewhere(Kernel):
        __module__ = "tests.my_tma_kernel"

    fn = Elsewhere("x")
    assert not cache.ours(fn)
    cache.register(fn)
    assert cache.ours(fn)


@pytest.mark.gpu
def test_triton_cache_dir_restored(tmp_path):
    """jax_triton blanks TRITON_CACHE_DIR on import; ours puts the user's value back (or leaves
    it unset). In a fresh process, since the import happens once."""
    import subprocess
    import sys

    code = ("import os; from kvax._src.attention import triton_launch as c; "
            "c.import_jax_triton(); print(repr(os.environ.get('TRITON_CACHE_DIR')))")
    for value, want in ((str(tmp_path), repr(str(tmp_path))), (None, "None")):
        env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"}
        if value is not None:
            env["TRITON_CACHE_DIR"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout.strip().splitlines()[-1]
        assert out == want


@pytest.mark.gpu
def test_second_process_gets_the_same_kernels(tmp_path):
    """Through jaxlib: a second process reads both kernels from the disk and gives bitwise the
    same output and gradients as the process that compiled them."""
    import subprocess
    import sys

    code = """
import json, sys, jax, jax.numpy as jnp, numpy as np
from kvax.ops import flash_attention
from kvax_testing import packed_batch
b = packed_batch(3, batch=1, kv_len=300, num_heads=4, num_kv_heads=2, head_dim=64,
                 dtype="bfloat16", num_docs=3, pad_tokens=11)
lay = [jnp.asarray(a) for a in b.layout.arrays]
f = lambda q, k, v: flash_attention(q, k, v, *lay, scale=0.125, backend="triton")
out, vjp = jax.vjp(f, *(jnp.asarray(x) for x in (b.query, b.key, b.value)))
res = [out, *vjp(jnp.ones_like(out))]
print(json.dumps([np.asarray(x, np.float32).tobytes().hex()[:4000] for x in res]
                 + [float(np.asarray(x, np.float32).sum()) for x in res]))
"""
    env = dict(os.environ, KVAX_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.splitlines()[-1] for _ in range(2)]
    assert runs[0] == runs[1]
    assert len([p for p in os.listdir(tmp_path) if p.endswith(".json")]) == 2  # fwd and bwd


triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

M, N, K, BM, BN, BK = 256, 256, 512, 128, 128, 64


@triton.jit
def _tma_ws_matmul(A, B, C, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B^T through device-side TMA descriptors, its K loop warp-specialised."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(B, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=True):
        a = a_desc.load([pid_m * BM, k])  # [BM, BK]
        b = b_desc.load([pid_n * BN, k])  # [BN, BK]
        acc = tl.dot(a, b.T, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))


def test_tma_ws_kernel_metadata_asks_for_scratch_and_warps():
    """Compiled for sm_90 on CPU: Triton's metadata asks for a global scratch buffer (the TMA
    descriptors) and more warps than requested (warp specialisation), which jax-triton 0.3.1
    drops and the launch layer passes on."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    consts = dict(M=M, N=N, K=K, BM=BM, BN=BN, BK=BK)
    signature = {"A": "*bf16", "B": "*bf16", "C": "*bf16", **{n: "constexpr" for n in consts}}
    src = ASTSource(fn=_tma_ws_matmul, signature=signature, constexprs=consts,
                    attrs={(i,): [["tt.divisibility", 16]] for i in range(3)})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options=dict(num_warps=4, num_stages=3))
    assert compiled.metadata.global_scratch_size > 0
    assert compiled.metadata.num_warps > 4


@pytest.mark.gpu
def test_tma_and_warp_specialised_kernel_through_kvax_launch(monkeypatch, tmp_path):
    """The same kernel run through kvax's launch (tc.launch): exact against XLA's product, and
    its cache entry records the scratch and the real warps it was launched with."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from kvax._src.attention import triton_common as tc

    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    ka, kb = jax.random.split(jax.random.key(0))
    a = jax.random.normal(ka, (M, K), jnp.bfloat16)
    b = jax.random.normal(kb, (N, K), jnp.bfloat16)
    c = tc.launch(_tma_ws_matmul, a, b, out_shape=tc.shape_dtype((M, N), jnp.bfloat16),
                  grid=(M // BM, N // BN), name="tma_ws_matmul", num_warps=4, num_stages=3,
                  debug=False, M=M, N=N, K=K, BM=BM, BN=BN, BK=BK)
    want = np.asarray(a, np.float32) @ np.asarray(b, np.float32).T
    got = np.asarray(c, np.float32)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=2**-7, atol=1e-2)  # bf16 rounding of the result
    (entry,) = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert entry["scratch"] > 0 and entry["total_warps"] > 4
