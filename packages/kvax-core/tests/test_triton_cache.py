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


def fake_compiler(calls):
    def compile_ttir(ttir, backend, options, cc, platform):
        calls.append(ttir)
        return Result(f"ptx of {ttir}", "kvax_fwd", 1234)
    return compile_ttir


def make_result(ptx, name, shared):
    return Result(ptx, name, shared)


def test_cache_dir_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    assert cache.cache_dir() == str(tmp_path)
    monkeypatch.setenv("KVAX_CACHE_DIR", "off")
    assert cache.cache_dir() is None
    monkeypatch.delenv("KVAX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == os.path.join(str(tmp_path), "kvax", "triton")


def test_key_covers_source_options_and_device():
    base = cache.entry_key("ttir A", {"num_warps": 8}, 90)
    assert base == cache.entry_key("ttir A", {"num_warps": 8}, 90)
    assert len({base, cache.entry_key("ttir B", {"num_warps": 8}, 90),
                cache.entry_key("ttir A", {"num_warps": 4}, 90),
                cache.entry_key("ttir A", {"num_warps": 8}, 80)}) == 4


def test_second_process_reads_the_disk(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    calls = []
    compile_ttir = cache.cached(fake_compiler(calls), make_result)
    run = cache.compiling_kvax_kernels(
        lambda backend, platform, fn, ttir: compile_ttir(ttir, None, "opts", 90, platform))

    class Kernel:
        __module__ = "kvax._src.attention.triton_fwd"

    first = run(None, "cuda", Kernel(), "module 1")
    # a new process: a fresh wrapper with nothing in memory
    compile_again = cache.cached(fake_compiler(calls), make_result)
    again = cache.compiling_kvax_kernels(
        lambda backend, platform, fn, ttir: compile_again(ttir, None, "opts", 90, platform))
    second = again(None, "cuda", Kernel(), "module 1")
    assert calls == ["module 1"] and second == first
    again(None, "cuda", Kernel(), "module 2")  # another kernel: compiled
    assert calls == ["module 1", "module 2"]
    entries = sorted(p for p in os.listdir(tmp_path))
    assert len(entries) == 2 and all(p.endswith(".json") for p in entries)  # no temporary files


def test_other_kernels_and_bad_entries(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    calls = []
    compile_ttir = cache.cached(fake_compiler(calls), make_result)
    run = cache.compiling_kvax_kernels(
        lambda backend, platform, fn, ttir: compile_ttir(ttir, None, "opts", 90, platform))

    class Theirs:
        __module__ = "my_project.kernels"

    run(None, "cuda", Theirs(), "their module")
    run(None, "cuda", Theirs(), "their module")
    assert calls == ["their module"] * 2 and not os.listdir(tmp_path)  # not ours: not cached
    key = cache.entry_key("module 3", "opts", 90)
    (tmp_path / f"{key}.json").write_text("{not json")
    assert cache.read_entry(str(tmp_path), key) is None
    (tmp_path / f"{key}.json").write_text(json.dumps({"key": "another", "ptx": "x"}))
    assert cache.read_entry(str(tmp_path), key) is None


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
