"""The Mosaic kernels compiled while a step still lowers (kvax/_src/attention/prewarm.py).

On any machine: lowering a step for CUDA (a pretended H100) records our two kernels' modules
under their names, the program the thread compiles for one carries the step's custom-call
attributes byte for byte (so jaxlib's kernel cache finds it), and the thread compiles each new
module of ours once, in order, and nothing else, then stops. On a Hopper GPU, a cold step's
kernels are those the thread compiled: test_mosaic_cache.py's first process checks it."""

import re
import threading
import time

import jax
from kvax_core_cases import lowered_for_hopper

from kvax._src.attention import prewarm


def _configs(text: str) -> list[str]:
    """Each Mosaic custom call's attributes (kernel hash, module, flags) in lowered text."""
    return re.findall(r"custom_call @mosaic_gpu_v2\(.*?mhlo.backend_config = (\{.*?\}), "
                      r"operand_layouts", text)


def test_the_program_compiled_ahead_is_the_steps_custom_call():
    """For each of the step's two kernels, the module lowering recorded (the thread's input)
    gives a program whose custom call is the step's, byte for byte. (A kernel has the same
    hash in every lowering, so the step's modules may have been recorded by an earlier test.)"""
    step_configs = _configs(lowered_for_hopper())
    jax.clear_caches()
    assert len(step_configs) == 2
    found = []
    for key, module in list(prewarm._known().items()):
        if not prewarm.ours(module):
            continue
        ahead = jax.jit(prewarm.program(key, module)).trace().lower(
            lowering_platforms=("cuda",)).as_text(debug_info=False)
        if _configs(ahead)[0] in step_configs:
            found.append(re.search(rb"kvax_mosaic_[a-z]+", module).group().decode())
    assert sorted(found) == ["kvax_mosaic_backward", "kvax_mosaic_forward"]


def test_the_thread_reads_or_compiles_each_module_of_ours_once_then_stops(monkeypatch):
    known = {b"old": b"...kvax_mosaic_forward..."}  # there before: not compiled
    got, seen_all = [], threading.Event()

    def compile_kernel(key, module):
        got.append(key)
        if len(got) == 3:
            seen_all.set()
        return True

    monkeypatch.setattr(prewarm, "_known", lambda: known)
    monkeypatch.setattr(prewarm, "compile_kernel", compile_kernel)
    read = []  # b"d" is on the disk: read, not compiled
    monkeypatch.setattr(prewarm, "load_kernel", lambda key: read.append(key) or key == b"d")
    monkeypatch.setattr(prewarm, "IDLE_S", 2.0)  # long enough for a loaded CI machine
    monkeypatch.setattr(prewarm, "POLL_S", 0.01)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    prewarm.watch()
    thread = prewarm._thread
    assert thread is not None and thread.is_alive()
    known[b"a"] = b"..kvax_mosaic_forward.."
    known[b"user"] = b"..someone_elses_kernel.."
    time.sleep(0.1)
    prewarm.watch()  # a second traced kernel keeps the same thread
    assert prewarm._thread is thread
    known[b"b"] = b"..kvax_mosaic_backward.."
    known[b"d"] = b"..kvax_mosaic_backward.."
    known[b"c"] = b"..kvax_mosaic_forward.."
    assert seen_all.wait(10)
    thread.join(10)
    assert not thread.is_alive() and prewarm._thread is None  # idle for IDLE_S
    assert got == [b"a", b"b", b"c"] and read == [b"a", b"b", b"d", b"c"]
    prewarm.watch()  # a kernel traced later starts a new thread
    assert prewarm._thread is not None and prewarm._thread is not thread
    prewarm._stop.set()
    prewarm._thread.join(10)


def test_no_thread_off_a_gpu_when_turned_off_or_with_jaxs_persistent_cache(monkeypatch,
                                                                           tmp_path):
    started = []
    monkeypatch.setattr(threading, "Thread", lambda *a, **k: started.append(k) or None)
    monkeypatch.setattr(prewarm, "_thread", None)
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    prewarm.watch()
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert prewarm.enabled()
    monkeypatch.setenv("KVAX_PREWARM", "0")
    prewarm.watch()
    assert not prewarm.enabled()
    monkeypatch.delenv("KVAX_PREWARM")
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        prewarm.watch()
        assert not prewarm.enabled()
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    assert prewarm.enabled() and started == []
