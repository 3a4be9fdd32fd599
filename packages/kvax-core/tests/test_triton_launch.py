"""The disk cache of compiled kernels, on CPU: keys, atomic entries, reuse across processes
(simulated: a second compile with nothing in memory), other kernels untouched. On a GPU,
tools/bench.py --first-call measures cold and warm first calls in fresh processes."""

import dataclasses
import json
import os
import re

import pytest

from kvax._src.attention import triton_launch as cache


@dataclasses.dataclass
class Result:
    binary: str
    name: str
    shared_mem_bytes: int


class FakeLib:
    """jaxlib's gpu_triton: records how kernels are built; a call's proto is its kernel's
    TritonKernel message inside a TritonKernelCall inside a TritonAnyKernelCall."""

    def __init__(self):
        self.kernels = []

    def TritonKernel(self, name, num_warps, num_ctas, shared, ptx, ttir, cc, **extra):  # noqa: N802
        self.kernels.append(dict(name=name, num_warps=num_warps, ptx=ptx, ttir=ttir, **extra))
        return ("kernel", ttir, num_warps, tuple(sorted(extra.items())))

    def TritonKernelCall(self, kernel, *grid_and_params):  # noqa: N802
        return FakeCall(kernel)

    def TritonAutotunedKernelCall(self, name, calls, aliases):  # noqa: N802
        return [call for call, _ in calls]  # jaxlib takes its own calls only


class FakeCall:
    def __init__(self, kernel):
        self.kernel = kernel

    def to_proto(self, name, metadata):
        kernel = cache._message(1, self.kernel[0].encode()) + cache._message(5, b"ttir")
        return cache._message(1, cache._message(1, kernel)) + cache._message(4, name.encode())


class FakeJaxTriton:
    """jax-triton's get_or_create_triton_kernel and compile step, counting real builds; its
    compile is wrapped as install() wraps it, and TMA kernels report a scratch buffer and warp
    specialisation two more warps, as Triton's metadata does. A source "needs A + B a stage"
    builds to A + B x num_stages bytes of shared memory."""

    def __init__(self, monkeypatch):
        self.built, self.stages = [], []
        self.lib = cache.KernelLib(FakeLib())
        self.compile = cache.capturing(self._their_compile, lambda ptx, name, shared:
                                       Result(ptx, name, shared))
        monkeypatch.setattr(cache, "compile_to_ptx", self._our_compile)

    def _their_compile(self, ttir, backend, options, cc, platform):
        return Result(f"ptx of {ttir}", "their_kernel", 1)

    def _our_compile(self, ttir, backend, stages, cc):
        tma = "tma" in ttir
        cubin = None if "no ptxas" in ttir else b"\x7fELF cubin of " + ttir.encode()
        needs = re.match(r"needs (\d+) \+ (\d+) a stage", ttir)
        shared = int(needs[1]) + int(needs[2]) * stages if needs else 1234
        return dict(ptx=f"ptx of {ttir}", name="kvax_fwd", shared=shared,
                    total_warps=10 if tma else 8, scratch=128 if tma else 0, scratch_align=128,
                    cubin=cubin)

    def get_or_create(self, backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        self.built.append(fn.source)
        stages = kw.get("num_stages") or 3  # jax-triton's default
        self.stages.append(stages)
        result = self.compile(fn.source, None, stages, 90, platform)
        kernel = self.lib.TritonKernel(result.name, kw["num_warps"], 1, result.shared_mem_bytes,
                                       result.binary, fn.source, 90)
        return kernel, {(0,): [["tt.divisibility", 16]]}


class Kernel:
    __module__ = "kvax._src.attention.triton_fwd"

    def __init__(self, source):
        self.source = self.cache_key = source
        self.__name__ = "_fwd_kernel"  # a Triton JITFunction's name

    def __hash__(self):
        return hash(self.source)


def build(jt, fn, num_warps=8, cc=90, block=64, get=None):
    """One kernel asked for through a fresh launch layer (empty memory), or through `get`."""
    get = get or cache.cached(jt.get_or_create, jt.lib._lib.TritonKernel, lambda: cc)
    return get(None, "cuda", fn, ["*bf16", "i32"], [(1, "i32", 7)], num_warps=num_warps,
               num_stages=3, num_ctas=1, compute_capability=None, enable_fp_fusion=True,
               metaparams={"BLOCK": block, "BLOCK_H": 128}, dump=False)


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


def test_kernels_over_shared_memory_take_fewer_stages(monkeypatch, tmp_path):
    """A build over its GPU's shared memory a program (232448 bytes on compute capability 9.0,
    101376 on 8.9) is built again with one stage fewer until it fits, once: a second process
    reads both entries from the disk and builds nothing. Where one stage does not fit, a
    ValueError names the kernel, the bytes and the limit; an unknown GPU is not checked."""
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "refitted", [])
    source = "needs 40000 + 30000 a stage"  # 130000 bytes at 3 stages, 100000 at 2
    first = FakeJaxTriton(monkeypatch)
    build(first, Kernel(source))  # fits an H100 at the 3 stages asked
    kernel = build(first, Kernel(source), cc=89)
    assert first.stages == [3, 3, 2] and cache.refitted == [("_fwd_kernel", 3, 2)]
    second = FakeJaxTriton(monkeypatch)
    assert build(second, Kernel(source), cc=89) == kernel and second.built == []
    message = (r"_fwd_kernel with tiles \{'BLOCK': 64, 'BLOCK_H': 128\} needs 250000 bytes of "
               r"shared memory at 1 stage\(s\); one program of this GPU \(compute capability "
               r"9.0\) may take 232448: pass smaller query_block_size/kv_block_size in "
               r"fwd_params/bwd_params")
    with pytest.raises(ValueError, match=message):
        build(first, Kernel("needs 200000 + 50000 a stage"))
    with pytest.raises(ValueError, match="smallest there are: use a 16-bit dtype or a smaller"):
        build(first, Kernel("needs 200000 + 50000 a stage"), block=16)
    build(first, Kernel("needs 200000 + 50000 a stage"), cc=999)  # unknown: launched as asked


def test_kernels_in_memory_are_fitted_to_the_limit_they_were_asked_under(monkeypatch, tmp_path):
    """A kernel kept in memory was fitted to one GPU's shared memory; asked again under a lower
    limit (tests lower the table's entry to play a smaller GPU), it is fitted again, not taken
    from memory as it was."""
    from kvax._src import config

    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "refitted", [])
    jt = FakeJaxTriton(monkeypatch)
    get = cache.cached(jt.get_or_create, jt.lib._lib.TritonKernel, lambda: 90)
    source = "needs 40000 + 30000 a stage"  # 130000 bytes at 3 stages, 100000 at 2
    first = build(jt, Kernel(source), get=get)
    assert build(jt, Kernel(source), get=get) == first and jt.stages == [3]  # from memory
    monkeypatch.setitem(config.SHARED_MEMORY_BY_CAPABILITY, 90, 101376)
    build(jt, Kernel(source), get=get)
    assert jt.stages == [3, 2]  # 3 read from the disk (no build), 2 built
    assert cache.refitted == [("_fwd_kernel", 3, 2)]


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


def launched_image(jt, kernel):
    """The module image a launch of this kernel carries (the fake proto parsed back), or None."""
    proto = jt.lib.TritonKernelCall(kernel, 1, 1, 1, []).to_proto("call", b"")
    (kernel_call,) = [p for f, _, p, _ in cache._fields(proto) if f == 1]
    (message,) = [p for f, _, p, _ in cache._fields(kernel_call) if f == 1]
    images = [p for f, _, p, _ in cache._fields(message) if f == 11]
    return {f: p for f, _, p, _ in cache._fields(images[0])} if images else None


@pytest.mark.parametrize("disk", [True, False])
def test_launch_carries_the_cubin(monkeypatch, tmp_path, disk):
    """A kernel whose build made a cubin launches with it as jaxlib's module image (object
    file, kernel name), freshly built and read from the disk, and with the disk off; a kernel
    whose ptxas step failed launches as before (jaxlib compiles its PTX)."""
    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path) if disk else "off")
    for jt in (FakeJaxTriton(monkeypatch), FakeJaxTriton(monkeypatch)):  # built, then read
        image = launched_image(jt, build(jt, Kernel("module 5"))[0])
        assert image[1] == b"\x7fELF cubin of module 5" and image[2] == b"kvax_fwd"
        assert launched_image(jt, build(jt, Kernel("no ptxas 6"))[0]) is None
    if disk:
        entries = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
        assert sorted(e["cubin"] is None for e in entries) == [False, True]
    # autotuned configs (several calls in one) go to jaxlib as its own calls, without images
    with_image = jt.lib.TritonKernelCall(build(jt, Kernel("module 5"))[0], 1, 1, 1, [])
    plain = FakeCall(("kernel",))
    assert isinstance(with_image, cache.WithImage)
    assert jt.lib.TritonAutotunedKernelCall("tuned", [(with_image, "a"), (plain, "b")], ()) == [
        with_image.call, plain]


def test_module_image_is_jaxlibs_field():
    """with_module_image against jaxlib's triton.proto (the messages it touches, built with
    protobuf's own parser): the kernel gains module_image {object_file, kernel_name,
    shared_mem_bytes}, every other field as it was; an autotuned call, or a kernel that has
    an image, is left alone."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto  # noqa: N806

    def message(name, *fields):
        m = f.message_type.add(name=name)
        for field_name, number, kind, type_name, repeated in fields:
            m.field.add(name=field_name, number=number, type=kind, type_name=type_name,
                        label=T.LABEL_REPEATED if repeated else T.LABEL_OPTIONAL)

    message("Image", ("object_file", 1, T.TYPE_BYTES, None, False),
            ("kernel_name", 2, T.TYPE_STRING, None, False),
            ("shared_mem_bytes", 3, T.TYPE_UINT32, None, False))
    message("Kernel", ("kernel_name", 1, T.TYPE_STRING, None, False),
            ("num_warps", 2, T.TYPE_UINT32, None, False),
            ("ptx", 4, T.TYPE_STRING, None, False),
            ("module_image", 11, T.TYPE_MESSAGE, ".t.Image", False),
            ("global_scratch_size", 12, T.TYPE_UINT32, None, False))
    message("Call", ("kernel", 1, T.TYPE_MESSAGE, ".t.Kernel", False),
            ("grid_0", 2, T.TYPE_UINT32, None, False),
            ("parameters", 5, T.TYPE_UINT64, None, True))
    message("Any", ("kernel_call", 1, T.TYPE_MESSAGE, ".t.Call", False),
            ("autotuned_kernel_call", 2, T.TYPE_BYTES, None, False),
            ("metadata", 3, T.TYPE_BYTES, None, False), ("name", 4, T.TYPE_STRING, None, False))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    Any = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Any"))  # noqa: N806
    call = Any(name="fwd", metadata=b"\x00\x01meta")
    call.kernel_call.grid_0 = 300
    call.kernel_call.parameters.extend([1, 2**40])
    call.kernel_call.kernel.kernel_name = "kvax_fwd"
    call.kernel_call.kernel.num_warps = 8
    call.kernel_call.kernel.ptx = "x" * 200  # lengths past one byte of varint
    call.kernel_call.kernel.global_scratch_size = 128
    cubin = b"\x7fELF" + bytes(range(256)) * 600
    got = Any.FromString(cache.with_module_image(call.SerializeToString(), cubin, "kvax_fwd",
                                                 70000))
    image = got.kernel_call.kernel.module_image
    assert (image.object_file, image.kernel_name, image.shared_mem_bytes) == (cubin, "kvax_fwd",
                                                                              70000)
    got.kernel_call.kernel.ClearField("module_image")
    assert got == call
    tuned = Any(name="tuned", autotuned_kernel_call=b"configs").SerializeToString()
    assert cache.with_module_image(tuned, cubin, "kvax_fwd", 1) == tuned
    call.kernel_call.kernel.module_image.kernel_name = "theirs"
    once = call.SerializeToString()
    assert cache.with_module_image(once, cubin, "kvax_fwd", 1) == once


def test_registered_kernels_get_the_layer():
    class Elsewhere(Kernel):
        __module__ = "tests.my_tma_kernel"

    fn = Elsewhere("x")
    assert not cache.ours(fn)
    cache.register(fn)
    assert cache.ours(fn)


@pytest.mark.parametrize("disk", [True, False])
def test_one_build_per_kernel_across_threads(monkeypatch, tmp_path, disk):
    """A kernel asked for while another thread builds it (the build started ahead, then the
    step's lowering) is built once; the second thread waits and gets the same kernel. A build
    that fails in one thread is tried again in the next, which sees its own error."""
    import threading
    import time

    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path) if disk else "off")
    jt, started, attempts = FakeJaxTriton(monkeypatch), threading.Event(), []
    slow = jt.get_or_create

    def get_or_create(*args, **kw):
        started.set()
        attempts.append(args[2].source)
        time.sleep(0.3)
        if args[2].source == "fails":
            raise RuntimeError(f"attempt {len(attempts)} failed")
        return slow(*args, **kw)

    jt.get_or_create = get_or_create
    get = cache.cached(jt.get_or_create, jt.lib._lib.TritonKernel, lambda: 90)

    def ask(fn, out):
        try:
            out.append(get(None, "cuda", fn, ["*bf16"], [], num_warps=8, metaparams={}))
        except RuntimeError as e:
            out.append(str(e))

    monkeypatch.setattr(cache, "obtained", [])
    for source, want in (("module 7", None), ("fails", ["attempt 2 failed", "attempt 3 failed"])):
        first, second, started = [], [], threading.Event()
        ahead = threading.Thread(target=ask, args=(Kernel(source), first), name="ahead")
        ahead.start()
        assert started.wait(5)
        ask(Kernel(source), second)  # the lowering, while the build above is under way
        ahead.join()
        if want is None:
            assert first == second and first[0][0] is not None and jt.built == [source]
        else:  # failed there, then tried again here
            assert first + second == want
    assert [thread for _, thread in cache.obtained] == ["ahead"]


def test_a_build_that_never_ends_is_not_waited_for(monkeypatch, tmp_path):
    """A thread asking for a kernel that another thread has been building for longer than
    WAIT_S builds it itself rather than wait on (a build that hangs never hangs the step)."""
    import threading

    monkeypatch.setenv("KVAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cache, "WAIT_S", 0.2)
    jt, started, release = FakeJaxTriton(monkeypatch), threading.Event(), threading.Event()
    quick = jt.get_or_create

    def get_or_create(*args, **kw):
        if threading.current_thread().name == "stuck":
            started.set()
            release.wait(10)
        return quick(*args, **kw)

    jt.get_or_create = get_or_create
    get = cache.cached(jt.get_or_create, jt.lib._lib.TritonKernel, lambda: 90)

    def ask():
        return get(None, "cuda", Kernel("module 9"), ["*bf16"], [], num_warps=8, metaparams={})

    stuck = threading.Thread(target=ask, name="stuck")
    stuck.start()
    assert started.wait(5)
    assert ask()[0] is not None and jt.built == ["module 9"]  # built here, the other still stuck
    release.set()
    stuck.join()
    assert jt.built == ["module 9", "module 9"]


class FakeTritonCall:
    """jax_triton.triton_call, recording what it is called with (zeros of its outputs)."""

    def __init__(self, fail=False):
        self.calls, self.fail = [], fail

    def triton_call(self, *args, kernel, out_shape, **kwargs):
        import jax.numpy as jnp

        self.calls.append((args, kernel, out_shape, kwargs))
        if self.fail:
            raise ValueError("no lowering here")
        return [jnp.zeros(s.shape, s.dtype) for s in out_shape]


@pytest.fixture
def no_lowerings_ahead_yet(monkeypatch):
    """The launch layer's record of lowerings ahead emptied for one test (and put back after),
    with the builds ahead on."""
    monkeypatch.setattr(cache, "_ahead", set())
    monkeypatch.setattr(cache, "_threads", [])
    monkeypatch.setattr(cache, "ahead_errors", [])
    monkeypatch.delenv("KVAX_PREWARM", raising=False)


def test_build_ahead_lowers_the_launch_alone_once(monkeypatch, no_lowerings_ahead_yet):
    """build_ahead lowers triton_call of the same kernel, scalars and keywords, with arrays of
    the launch's shapes and dtypes in their places, in a thread; once per launch and process;
    not at all with KVAX_PREWARM=0; an error there stays there."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    jt, kernel = FakeTritonCall(), Kernel("module 8")
    q, lse = jnp.ones((2, 5, 3), jnp.bfloat16), jnp.ones((2, 5), jnp.float32)
    kwargs = dict(out_shape=(jax.ShapeDtypeStruct((2, 5, 3), jnp.bfloat16),), grid=(4, 1, 1),
                  num_warps=8, BLOCK=64)
    args = (q, 7, np.float32(0.5), lse)

    def ahead(jt, args, **more):
        cache.build_ahead(jt, kernel, args, {**kwargs, **more})
        for thread in cache._threads:
            thread.join()

    ahead(jt, args)
    ahead(jt, (jnp.zeros_like(q), 7, np.float32(0.5), lse))  # the same launch: not again
    (call,) = jt.calls
    assert [getattr(a, "aval", a) for a in call[0]] == [
        jax.core.ShapedArray((2, 5, 3), jnp.bfloat16), 7, np.float32(0.5),
        jax.core.ShapedArray((2, 5), jnp.float32)]
    assert call[1] is kernel and call[2] == kwargs["out_shape"]
    assert call[3] == dict(grid=(4, 1, 1), num_warps=8, BLOCK=64)
    ahead(jt, (q, 8, np.float32(0.5), lse))  # another scalar: another kernel
    ahead(jt, args, BLOCK=128)  # another constexpr
    assert len(jt.calls) == 3
    failing = FakeTritonCall(fail=True)
    ahead(failing, args, BLOCK=32)  # raises in its thread only
    assert len(failing.calls) == 1
    cache.lower_ahead("not arrays", lambda x: x, object())  # nothing to lower: nothing started
    assert "not arrays" not in cache._ahead
    monkeypatch.setenv("KVAX_PREWARM", "0")
    ahead(jt, args, BLOCK=16)
    assert len(jt.calls) == 3


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


_PTXAS_CHILD = """
import json, os, sys, jax, jax.numpy as jnp, numpy as np
mode, broken = sys.argv[1], sys.argv[2] == "broken"


def run(fn, *args):  # compiled first; with `broken`, jaxlib's ptxas refuses to run afterwards
    compiled = jax.jit(fn).lower(*args).compile()
    if broken:
        os.environ["JAX_TRITON_PTXAS_EXTRA_FLAGS"] = "--kvax-no-such-ptxas-flag"
    return jax.block_until_ready(compiled(*args))


if mode == "theirs":  # a Triton kernel of someone else's, through jax-triton alone
    import jax_triton as jt, triton, triton.language as tl
    @triton.jit
    def add_one(x_ref, o_ref, n: tl.constexpr):
        i = tl.arange(0, n)
        tl.store(o_ref + i, tl.load(x_ref + i) + 1.0)
    x = jnp.arange(128, dtype=jnp.float32)
    out = run(lambda x: jt.triton_call(x, kernel=add_one, out_shape=x, grid=(1,), n=128), x)
    print(json.dumps([float(out.sum())]))
    sys.exit(0)
from kvax._src.attention import triton_launch
triton_launch.WAIT_S = 3600.0  # who builds is counted: no second build where a crowded host is slow
if mode == "jaxlib":  # no cubin from the build: jaxlib compiles the PTX at the launch
    triton_launch.make_cubin = lambda *args: None
from kvax.ops import flash_attention
from kvax_testing import packed_batch
b = packed_batch(5, batch=1, kv_len=333, num_heads=4, num_kv_heads=2, head_dim=64,
                 dtype="bfloat16", num_docs=3, pad_tokens=13)
lay = [jnp.asarray(a) for a in b.layout.arrays]
f = lambda q, k, v: flash_attention(q, k, v, *lay, scale=0.125, backend="triton")
loss = lambda q, k, v: jnp.sum(f(q, k, v).astype(jnp.float32))
res = run(lambda q, k, v: (f(q, k, v), *jax.grad(loss, argnums=(0, 1, 2))(q, k, v)),
          *(jnp.asarray(x) for x in (b.query, b.key, b.value)))
print(json.dumps(triton_launch.obtained))  # (kernel, thread): who built or read each
print(json.dumps([np.asarray(x, np.float32).tobytes().hex() for x in res]))
"""


@pytest.mark.gpu
def test_kernels_launch_without_jaxlibs_ptxas(tmp_path):
    """The forward and backward kernels launch with the cubins their builds made (in the
    launch's module image): a process builds them (cubins to the disk), and a second one reads
    them and runs even with jaxlib's ptxas made to fail once the step is compiled (an unknown
    flag in JAX_TRITON_PTXAS_EXTRA_FLAGS, which jaxlib reads at the first launch); their outputs
    and gradients are bitwise those of a process where jaxlib compiled the PTX itself. A Triton
    kernel not launched through kvax fails the same way, so the flag does reach jaxlib's
    ptxas. (So a second process reads both kernels from the disk and gives bitwise the first
    one's outputs and gradients.)"""
    import subprocess
    import sys

    child = tmp_path / "child.py"  # Triton's jit needs its kernel's source in a file
    child.write_text(_PTXAS_CHILD)
    cache_dir = tmp_path / "cache"

    def run(mode, folder, state):
        env = dict(os.environ, KVAX_CACHE_DIR=folder)
        env.pop("JAX_TRITON_PTXAS_EXTRA_FLAGS", None)
        return subprocess.run([sys.executable, str(child), mode, state], env=env,
                              capture_output=True, text=True)

    theirs = run("theirs", "off", "broken")
    assert theirs.returncode != 0 and "kvax-no-such-ptxas-flag" in theirs.stderr, (
        theirs.stderr[-2000:])
    outputs = []
    for mode, folder, state in (("theirs", "off", "ok"), ("ours", str(cache_dir), "ok"),
                                ("ours", str(cache_dir), "broken"), ("jaxlib", "off", "ok")):
        done = run(mode, folder, state)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(done.stdout.splitlines()[-1])
    assert outputs[1] == outputs[2] == outputs[3]
    entries = [json.loads(p.read_text()) for p in cache_dir.glob("*.json")]
    assert len(entries) == 2 and all(e["cubin"] for e in entries)


@pytest.mark.gpu
def test_kernels_built_ahead_of_the_lowering(tmp_path):
    """Traced on a GPU, the forward and backward kernels are built in threads of their own
    (build_ahead) and the step's lowering takes them from there: each kernel built once, both
    in those threads, in a fresh process with an empty cache; with KVAX_PREWARM=0 both in the
    lowering; outputs and gradients bitwise the same."""
    import subprocess
    import sys

    child = tmp_path / "child.py"
    child.write_text(_PTXAS_CHILD)
    got = {}
    for ahead in ("1", "0"):
        env = dict(os.environ, KVAX_CACHE_DIR=str(tmp_path / ahead), KVAX_PREWARM=ahead)
        env.pop("JAX_TRITON_PTXAS_EXTRA_FLAGS", None)
        done = subprocess.run([sys.executable, str(child), "ours", "ok"], env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        obtained, outputs = done.stdout.splitlines()[-2:]
        got[ahead] = sorted(map(tuple, json.loads(obtained))), outputs
    kernels = sorted(kernel for kernel, _ in got["1"][0])
    assert kernels == ["_bwd_kernel", "_fwd_kernel"], got
    assert {thread for _, thread in got["1"][0]} == {"kvax-triton-ahead"}, got
    assert got["0"][0] == [(kernel, "MainThread") for kernel in kernels], got
    assert got["1"][1] == got["0"][1]


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


def test_build_makes_a_cubin_for_hopper(monkeypatch):
    """compile_to_ptx, as the launch layer runs it on jax-triton's TTIR, compiled for sm_90 on
    CPU: with the PTX, Triton's bundled ptxas run with jaxlib's command line gives an ELF cubin
    for sm_90a; with a flag it refuses, or no ptxas, no cubin (jaxlib compiles at the
    launch)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource
    from triton.compiler.code_generator import ast_to_ttir

    consts = dict(M=M, N=N, K=K, BM=BM, BN=BN, BK=BK)
    signature = {"A": "*bf16", "B": "*bf16", "C": "*bf16", **{n: "constexpr" for n in consts}}
    backend = CUDABackend(GPUTarget("cuda", 90, 32))
    options = backend.parse_options(dict(num_warps=4, num_stages=3))
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    src = ASTSource(fn=_tma_ws_matmul, signature=signature, constexprs=consts,
                    attrs={(i,): [["tt.divisibility", 16]] for i in range(3)})
    ttir = ast_to_ttir(_tma_ws_matmul, src, context=context, options=options,
                       codegen_fns=backend.get_codegen_implementation(options),
                       module_map=backend.get_module_map())
    assert cache.ptxas_path(90).endswith("ptxas")
    built = cache.compile_to_ptx(ttir, backend, options, 90)
    assert ".target sm_90a" in built["ptx"] and built["name"] in built["ptx"]
    assert built["cubin"][:4] == b"\x7fELF"
    assert built["name"].encode() in built["cubin"]
    monkeypatch.setenv("JAX_TRITON_PTXAS_EXTRA_FLAGS", "--kvax-no-such-ptxas-flag")
    assert cache.make_cubin(built["ptx"], 90) is None
    monkeypatch.setattr(cache, "ptxas_path", lambda cc: None)
    monkeypatch.delenv("JAX_TRITON_PTXAS_EXTRA_FLAGS")
    assert cache.make_cubin(built["ptx"], 90) is None


def test_ptxas_command_line_is_jaxlibs(monkeypatch):
    """jaxlib's flags for a Triton kernel (architecture with Hopper's "a", spills reported, the
    user's extra flags and device debug), and the cache key moves with the user's flags."""
    monkeypatch.delenv("JAX_TRITON_PTXAS_EXTRA_FLAGS", raising=False)
    monkeypatch.delenv("JAX_TRITON_PTXAS_DEVICE_DEBUG", raising=False)
    assert cache.ptxas_flags(90) == ["-arch=sm_90a", "--warn-on-spills"]
    assert cache.ptxas_flags(80) == ["-arch=sm_80", "--warn-on-spills"]
    plain = cache.entry_key("src")
    monkeypatch.setenv("JAX_TRITON_PTXAS_EXTRA_FLAGS", "-O1  --x")
    monkeypatch.setenv("JAX_TRITON_PTXAS_DEVICE_DEBUG", "true")
    assert cache.ptxas_flags(100) == ["-arch=sm_100a", "--warn-on-spills", "-O1", "--x",
                                      "--device-debug"]
    assert cache.entry_key("src") != plain


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


@pytest.mark.parametrize("bwd_masks", [True, False])
def test_backward_lowered_ahead_from_the_forward(monkeypatch, no_lowerings_ahead_yet,
                                                  bwd_masks):
    """A backend whose kernels build as the step lowers (Triton's) has its backward lowered in
    a thread as soon as its forward is traced under differentiation, from the residuals'
    shapes alone (masks built by the caller or in the backward). Here the pure-JAX backend
    stands in on CPU: the thread's lowering succeeds, once per call's shapes; forward-only
    calls start nothing; the gradients are those without it."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from kvax_testing import packed_batch

    from kvax._src.attention import backends
    from kvax.ops import create_attention_mask, flash_attention

    b = packed_batch(int(np.random.SeedSequence().entropy % 2**31), batch=2, kv_len=77,
                     num_heads=4, num_kv_heads=2, head_dim=32, num_docs=3, pad_tokens=5)
    lay = [jnp.asarray(a) for a in b.layout.arrays]
    qkv = [jnp.asarray(x) for x in (b.query, b.key, b.value)]

    def loss(q, k, v):
        mask = create_attention_mask(*lay, calc_bwd_mask=bwd_masks)
        out = flash_attention(q, k, v, *lay, mask, backend="xla")
        return jnp.sum(out.astype(jnp.float32) ** 2)

    def grads():
        result = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*qkv)
        for thread in cache._threads:
            thread.join()
        return result

    jax.jit(loss)(*qkv)
    assert not cache._threads  # no differentiation: no backward lowered
    plain = grads()
    assert not cache._threads
    monkeypatch.setattr(backends.XlaBackend, "lowers_backward_ahead", True)
    jax.clear_caches()
    ahead = grads()
    assert len(cache._threads) == 1 and cache.ahead_errors == []
    assert [a[0] for a in cache._ahead] == ["backward"]
    for x, y in zip(plain, ahead):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    jax.clear_caches()
    grads()  # the same shapes again: nothing new started
    assert len(cache._threads) == 1
