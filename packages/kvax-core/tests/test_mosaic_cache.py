"""Our Mosaic kernels compiled once per machine (kvax/_src/attention/mosaic_cache.py).

On any machine: a kernel lowered again (in this process, after jax.clear_caches, or in another
process) has the same hash, other modules keep Mosaic GPU's names, and an entry written to the
disk is read back by its kernel's hash on the same device, never under another hash or from a
bad or foreign file (a CPU program stands in for the kernel's: the executable's serialization is
the same API). On a Hopper GPU: a second process reads both kernels from the disk and compiles
none, with bitwise the first process's results."""

import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
import types

import jax
import jax.numpy as jnp
import pytest

from kvax._src.attention import mosaic_cache, prewarm
from kvax._src.attention.triton_launch import cache_dir
from kvax._src.config import current_device_kind, is_hopper

LOWER = """
import hashlib, json, re, sys
sys.path.insert(0, TESTS)  # kvax_core_cases
from jax.experimental.mosaic.gpu import core
from kvax._src.attention import mosaic_cache
from kvax_core_cases import lowered_for_hopper
def lower(kv_len):
    text = lowered_for_hopper(kv_len)
    return dict(text=hashlib.sha256(text.encode()).hexdigest(), reused=len(mosaic_cache.reused))
# the same step twice, as a second jit of it would lower it, then a step of another length
lowerings = [lower(700), lower(700), lower(600)]
names = {key.hex(): re.search(rb"kvax_mosaic_[a-z]+_[0-9a-f]+", module).group().decode()
         for key, module in core.KNOWN_KERNELS.items()}
print(json.dumps(dict(names=names, lowerings=lowerings)))
"""


def _lowered(cache: str) -> dict:
    """A fresh process's lowerings for CUDA (KVAX_CACHE_DIR=cache): {kernel hash: dump
    basename} of every Mosaic module it lowered, and each lowering's text digest and the count
    of modules reused by then."""
    script = LOWER.replace("TESTS", repr(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, KVAX_CACHE_DIR=cache))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_a_kernel_lowers_once_with_the_same_hash_in_every_process(tmp_path):
    alone = _lowered("off")  # no disk: each process lowers its kernels itself
    first, second = _lowered(str(tmp_path)), _lowered(str(tmp_path))
    # without the stamp, each lowering's modules have new hashes (a counter in every module),
    # none shared between processes
    assert len(alone["names"]) == 4 and first["names"] == alone["names"] == second["names"]
    assert sorted({re.sub("_[0-9a-f]{16}$", "", name) for name in alone["names"].values()}) == [
        "kvax_mosaic_backward", "kvax_mosaic_forward"]
    for run in (alone, first, second):  # the same step, the same program; another, another
        texts = [lowering["text"] for lowering in run["lowerings"]]
        assert texts[0] == texts[1] != texts[2]
        assert texts == [lowering["text"] for lowering in alone["lowerings"]]
    # modules reused: the second jit's from memory; in the second process every one from disk
    assert [lowering["reused"] for lowering in alone["lowerings"]] == [0, 2, 2]
    assert [lowering["reused"] for lowering in first["lowerings"]] == [0, 2, 2]
    assert [lowering["reused"] for lowering in second["lowerings"]] == [2, 4, 6]
    assert len(list((tmp_path / "mosaic").glob("*.mlir"))) == 4


@dataclasses.dataclass
class Result:  # Pallas's LoweringResult
    module: object
    grid: tuple
    block: tuple
    new_out_shapes: tuple
    profiler_spec: object
    gmem_scratch_shapes: tuple


def test_a_kept_lowering_is_given_back_for_the_same_inputs_only(monkeypatch, tmp_path):
    from jax._src.lib.mlir import ir

    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(mosaic_cache, "_lowered", {})
    calls = []

    def lower(mesh, jax_mesh, jaxpr, ins, outs, params, **kw):
        calls.append(jaxpr)
        module = ir.Module.parse(f'module attributes {{kvax.t = "{jaxpr}"}} {{}}')
        return Result(module, (3, 1, 1), (384, 1, 1), (jax.ShapeDtypeStruct((2, 5), "bfloat16"),),
                      params.profile, ())

    lower_once = mosaic_cache.cache_lowering(lower, Result)
    ours, theirs = types.SimpleNamespace(kernel_name="kvax_mosaic_forward"), types.SimpleNamespace(
        kernel_name="their_kernel")
    plain, profiled = types.SimpleNamespace(profile_space=0, profile=None), types.SimpleNamespace(
        profile_space=64, profile="spec")

    def call(mesh, jaxpr, params=plain, ins=((4,),)):
        with ir.Context() as context, ir.Location.unknown():
            context.allow_unregistered_dialects = True
            result = lower_once(mesh, None, jaxpr, ins, (), params, outer_traceback=None)
            return str(result.module), result

    text, result = call(ours, "a")
    assert calls == ["a"] and 'kvax.t = "a"' in text
    assert call(ours, "a")[0] == text and calls == ["a"]  # from memory
    mosaic_cache._lowered.clear()
    again = call(ours, "a")  # from the disk: the same module and the same metadata
    assert again[0] == text and calls == ["a"]
    assert (again[1].grid, again[1].block, again[1].new_out_shapes) == (
        result.grid, result.block, result.new_out_shapes)
    call(ours, "b")
    call(ours, "a", ins=((5,),))  # another jaxpr, other shapes: lowered
    assert calls == ["a", "b", "a"]
    with monkeypatch.context() as patch:
        patch.setattr(mosaic_cache, "_kvax_source", lambda: "an edited kvax")
        call(ours, "a")  # kvax's source changed: lowered
    assert calls == ["a", "b", "a", "a"]
    calls.pop()  # (the edited kvax's lowering)
    call(theirs, "a")
    call(theirs, "a")  # not ours: always lowered, never kept
    call(ours, "p", profiled)
    call(ours, "p", profiled)  # a kernel recording a profile: always lowered
    assert calls == ["a", "b", "a", "a", "a", "p", "p"]
    assert len(list((tmp_path / "mosaic").glob("*.mlir"))) == 4  # a, b, a at (5,), edited a
    mosaic_cache._lowered.clear()
    for path in (tmp_path / "mosaic").glob("*.mlir"):  # bad modules: lowered again, rewritten
        head, key, meta, _ = path.read_bytes().split(b"\n", 3)
        path.write_bytes(b"\n".join([head, key, meta, b"{not mlir"]))
    assert call(ours, "a")[0] == text and calls[-1] == "a" and len(calls) == 8
    mosaic_cache._lowered.clear()
    assert call(ours, "a")[0] == text and len(calls) == 8  # the rewritten entry


def _module(name: str | None, basename: str | None = None):
    from jax._src.lib.mlir import ir

    context = ir.Context()
    with context, ir.Location.unknown():
        module = ir.Module.create()
        if name is not None:
            module.operation.attributes["sym_name"] = ir.StringAttr.get(name)
        if basename is not None:
            module.operation.attributes[mosaic_cache.BASENAME] = ir.StringAttr.get(basename)
    return module


def _basename(module) -> str | None:
    from jax._src.lib.mlir import ir

    attributes = module.operation.attributes
    if mosaic_cache.BASENAME not in attributes:
        return None
    return ir.StringAttr(attributes[mosaic_cache.BASENAME]).value


def test_only_our_modules_are_stamped_and_never_twice():
    for theirs in (_module("someone_elses_kernel"), _module(None)):
        mosaic_cache.stamp(theirs)
        assert _basename(theirs) is None  # Mosaic GPU names it as before
    ours, again = _module("kvax_mosaic_forward"), _module("kvax_mosaic_forward")
    mosaic_cache.stamp(ours)
    mosaic_cache.stamp(again)
    assert re.fullmatch("kvax_mosaic_forward_[0-9a-f]{16}", _basename(ours))
    assert _basename(again) == _basename(ours)
    other = _module("kvax_mosaic_backward")
    mosaic_cache.stamp(other)
    assert _basename(other) != _basename(ours)
    named = _module("kvax_mosaic_forward", basename="given")
    mosaic_cache.stamp(named)
    assert _basename(named) == "given"


def _program(value: float):
    return jax.jit(lambda: jnp.full((3,), value)).lower().compile()


def test_an_entry_is_read_back_by_its_hash_only(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    folder = cache_dir("mosaic")
    assert folder == os.path.join(str(tmp_path), "mosaic")
    assert not mosaic_cache.load(b"k" * 32)  # nothing there yet
    assert mosaic_cache.store(b"k" * 32, _program(2.0))
    (entry,) = os.listdir(folder)  # one file, no temporary one left
    device = jax.local_devices()[0]
    assert entry == mosaic_cache.entry_name(b"k" * 32, device) + ".bin"
    assert mosaic_cache.load(b"k" * 32) and not mosaic_cache.load(b"j" * 32)


def test_entries_load_for_real_and_bad_ones_are_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    assert mosaic_cache.store(b"k" * 32, _program(3.0))
    assert mosaic_cache.load(b"k" * 32)  # the executable deserializes on this device
    name = mosaic_cache.entry_name(b"k" * 32, jax.local_devices()[0])
    path = tmp_path / "mosaic" / (name + ".bin")
    blob = path.read_bytes()
    header = blob[: blob.index(b"\n", len(b"kvax-mosaic-kernel-1\n")) + 1]
    path.write_bytes(header.replace(name[:8].encode(), b"00000000") + blob[len(header):])
    assert not mosaic_cache.load(b"k" * 32)  # another entry's header: refused
    path.write_bytes(header + b"not an executable")
    with pytest.raises(Exception, match="."):  # whatever jaxlib raises for it
        mosaic_cache.load(b"k" * 32)
    assert not prewarm.load_kernel(b"k" * 32)  # the thread then compiles it instead


def test_the_entry_name_covers_kernel_versions_and_device(monkeypatch):
    device = jax.local_devices()[0]

    class Other:
        client = device.client
        device_kind = "another GPU"
        compute_capability = "9.0"

    base = mosaic_cache.entry_name(b"k" * 32, device)
    assert base == mosaic_cache.entry_name(b"k" * 32, device)
    assert mosaic_cache.entry_name(b"j" * 32, device) != base
    assert mosaic_cache.entry_name(b"k" * 32, Other()) != base
    monkeypatch.setattr(jax, "__version__", "0.0.0")
    assert mosaic_cache.entry_name(b"k" * 32, device) != base


def test_no_disk_when_the_cache_is_off(monkeypatch, tmp_path):
    monkeypatch.setenv("KVAX_CACHE_DIR", "off")
    assert cache_dir("mosaic") is None
    assert not mosaic_cache.store(b"k" * 32, _program(4.0))
    assert not mosaic_cache.load(b"k" * 32)
    monkeypatch.delenv("KVAX_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir("mosaic") == os.path.join(str(tmp_path), "kvax", "mosaic")


STEP = """
import glob, hashlib, json, os, sys, time, jax, jax.numpy as jnp, numpy as np
from jax._src.profiler import ProfileData
from kvax._src.attention import prewarm
from kvax.ops import create_attention_mask, flash_attention
from kvax_testing import packed_batch
from jax.experimental.mosaic.gpu import core
result, trace_dir = sys.argv[1:]
options = jax.profiler.ProfileOptions()
options.python_tracer_level = 0
options.host_tracer_level = 2
jax.profiler.start_trace(trace_dir, profiler_options=options)
batch = packed_batch(37, batch=1, kv_len=3000, num_heads=8, num_kv_heads=2, head_dim=128,
                     dtype="bfloat16")
layout = [jnp.asarray(a) for a in batch.layout.arrays]
q, k, v = (jnp.asarray(x) for x in (batch.query, batch.key, batch.value))
def loss(q, k, v):
    masks = create_attention_mask(*layout, calc_bwd_mask=True)
    out = flash_attention(q, k, v, *layout, mask=masks, scale=0.1)
    return jnp.sum(out.astype(jnp.float32) ** 2)
grads = jax.block_until_ready(jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v))
ours = {key for key, module in core.KNOWN_KERNELS.items() if prewarm.ours(module)}
deadline = time.monotonic() + 60  # the thread records a kernel once it is in jaxlib's cache
while set(prewarm.compiled) | set(prewarm.loaded) != ours and time.monotonic() < deadline:
    time.sleep(0.1)
jax.profiler.stop_trace()
xplane = max(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True))
# Mosaic GPU's compile of a kernel is a host range named "Compile", wherever it runs (the
# thread's program or XLA's compile of the step)
compiles = [event.duration_ns / 1e9 for plane in ProfileData.from_file(xplane).planes
            for line in plane.lines for event in line.events if event.name == "Compile"]
digest = hashlib.sha256(b"".join(np.asarray(g).tobytes() for g in grads)).hexdigest()
with open(result, "w") as f:
    json.dump(dict(ours=sorted(k.hex() for k in ours), digest=digest, compiles=compiles,
                   compiled=sorted(k.hex() for k in prewarm.compiled),
                   loaded=sorted(k.hex() for k in prewarm.loaded)), f)
"""


@pytest.mark.gpu
@pytest.mark.skipif(jax.default_backend() != "gpu" or not is_hopper(current_device_kind()),
                    reason="needs a Hopper GPU (H100/H200)")
def test_a_second_process_reads_the_kernels_from_the_disk(tmp_path):
    """Two fresh processes with one kvax cache: the first compiles both kernels ahead and
    writes them, the second reads both and compiles no kernel (jax's profiler shows Mosaic
    GPU's compiles: two in the first process, none in the second), and their gradients are
    bitwise the same."""
    runs = []
    for i in range(2):
        env = dict(os.environ, KVAX_CACHE_DIR=str(tmp_path / "cache"))
        result = tmp_path / f"run{i}.json"
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(STEP), str(result),
                              str(tmp_path / f"trace{i}")],
                             env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(result.read_text()))
    first, second = runs
    assert len(first["ours"]) == 2 and second["ours"] == first["ours"]  # the same hashes
    assert first["compiled"] == first["ours"] and first["loaded"] == []
    assert second["loaded"] == first["ours"] and second["compiled"] == []
    assert len(first["compiles"]) == 2 and second["compiles"] == [], (first["compiles"],
                                                                     second["compiles"])
    assert second["digest"] == first["digest"]
