"""The disk cache of compiled kernels, on CPU: keys, atomic entries, reuse across processes
(simulated: a second compile with nothing in memory), other kernels untouched. On a GPU,
tools/bench.py --first-call measures cold and warm first calls in fresh processes."""

import dataclasses
import json
import os

import pytest

from kvax._src.attention import triton_cache as cache


@dataclasses.dataclass
class Result:
    binary: str
    name: str
    shared_mem_bytes: int


class FakeJaxTriton:
    """jax-triton's two steps, counting the kernels it really builds."""

    def __init__(self):
        self.built = []
        self.compile = cache.capturing(self._compile)

    def _compile(self, ttir, backend, options, cc, platform):
        return Result(f"ptx of {ttir}", "kvax_fwd", 1234)

    def get_or_create(self, backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        self.built.append(fn.source)
        self.compile(fn.source, None, "options", 90, platform)
        return ("kernel", fn.source), {(0,): [["tt.divisibility", 16]]}


def make_kernel(name, num_warps, num_ctas, shared, ptx, ttir, cc):
    return ("kernel", ttir)


class Kernel:
    __module__ = "kvax._src.attention.triton_fwd"

    def __init__(self, source):
        self.source = self.cache_key = source


def build(jt, fn, num_warps=8):
    get = cache.cached(jt.get_or_create, make_kernel, lambda: 90)
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
    first = FakeJaxTriton()
    kernel, attrs = build(first, Kernel("module 1"))
    assert first.built == ["module 1"]
    second = FakeJaxTriton()  # a new process: nothing in memory
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

    jt = FakeJaxTriton()
    build(jt, Theirs("their module"))
    build(FakeJaxTriton(), Theirs("their module"))
    assert not os.listdir(tmp_path)  # not ours: not cached
    key = cache.entry_key("module 3")
    (tmp_path / f"{key}.json").write_text("{not json")
    assert cache.read_entry(str(tmp_path), key) is None
    (tmp_path / f"{key}.json").write_text(json.dumps({"key": "another", "ptx": "x"}))
    assert cache.read_entry(str(tmp_path), key) is None
    monkeypatch.setenv("KVAX_CACHE_DIR", "off")
    jt = FakeJaxTriton()
    build(jt, Kernel("module 4"))
    build(FakeJaxTriton(), Kernel("module 4"))
    assert len(os.listdir(tmp_path)) == 1  # only the bad entry written above


@pytest.mark.gpu
def test_triton_cache_dir_restored(tmp_path):
    """jax_triton blanks TRITON_CACHE_DIR on import; ours puts the user's value back (or leaves
    it unset). In a fresh process, since the import happens once."""
    import subprocess
    import sys

    code = ("import os; from kvax._src.attention import triton_cache as c; "
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
