"""kvax's launch layer under jax-triton: a disk cache of built kernels, and what Hopper's TMA and
warp-specialised kernels need from the launch.

jax-triton 0.3.1 builds every kernel from scratch in every new process (Python AST -> TTIR ->
TTGIR -> LLVM -> PTX: 5.7 s of the 7.6 s a warm 64k forward+backward took before its first result
on an H100) and keeps the result in memory only; it sets TRITON_CACHE_DIR to "" when imported,
which breaks torch/Triton users in the same process; and it builds jaxlib's kernel without two
things Triton's metadata carries: the global scratch buffer that device-side TMA descriptors
(`tl.make_tensor_descriptor`) are written to (without it the kernel gets a null pointer and dies
with an illegal address) and the real warp count after warp specialisation adds warps (without
it the launch gets too few threads). Here, for kernels launched through kvax
(`triton_common.launch`) or defined in kvax:

- `import_jax_triton()` imports it and puts the user's TRITON_CACHE_DIR back.
- TTIR -> PTX is run by `compile_to_ptx`, which keeps Triton's metadata, and jaxlib's kernel is
  built with its `global_scratch_size`/`global_scratch_align` and total `num_warps`.
- The disk cache: the key is a SHA-256 of the kernel's source hash (Triton's `cache_key`: its
  source, the jit functions it calls and the constexpr globals it reads), the argument types,
  scalars, constexprs and launch options, the compute capability and the versions of triton,
  jax-triton and jaxlib. An entry holds what jaxlib needs to launch (PTX, TTIR, name, shared
  memory, warps, scratch, argument attributes, and the cubin), so a hit skips Triton's front end
  and compiler both. Entries are written to a temporary file and renamed into place, so
  concurrent processes never read a partial entry; a corrupt entry is rebuilt.
- The cubin: jaxlib runs ptxas on a kernel's PTX at its first launch in every process (1.1-2.0
  s for the forward and backward kernels on an H200: a warm Triton step's whole first run), and
  keeps the result in memory only. Triton's own ptxas (the one its PTX is written for) runs here
  with jaxlib's flags (`make_cubin`) when the kernel is built, its cubin goes in the entry, and
  the launch carries it as jaxlib's `TritonKernel.module_image` (`with_module_image`), which
  jaxlib loads instead of compiling. Where that ptxas is missing or fails, the kernel launches
  as before.
- Shared memory: a built kernel that takes more shared memory than one program of its GPU may
  (`config.capability_shared_memory`) is built again with one pipeline stage fewer until it
  fits, which changes the speed, never the result; where one stage does not fit, a ValueError
  says so at the lowering, before anything launches. Without this, jaxlib's launch failed
  ("Shared memory requested exceeds device resources"): on GPUs with 99 KiB a program, the
  default backward at head dim 128 took 107520 bytes at 3 stages. On Hopper the launchers'
  model (triton_common.fit_stages) already asks for stages that fit, without a build to spare.
- Built ahead: jax-triton builds each kernel as the step lowers, one after another. A launch
  traced on a GPU starts its kernel's build in a thread (`build_ahead`), and the Triton
  backend's forward under differentiation has its backward lowered in one (`lower_ahead`,
  vjp.py), so that both kernels build beside the step's tracing; `cached` builds each kernel
  once, whichever thread asks first, and the others wait for it.

Location: $KVAX_CACHE_DIR, else $XDG_CACHE_HOME/kvax/triton, else ~/.cache/kvax/triton (the
Mosaic kernels' entries, mosaic_cache.py, in $KVAX_CACHE_DIR/mosaic or .../kvax/mosaic).
KVAX_CACHE_DIR=off disables the cache (not the launch fixes). What stays per process: XLA's
compilation of the program around the kernels (JAX's persistent cache,
`jax_compilation_cache_dir`, covers that).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import tempfile
import threading

from kvax._src.config import capability_shared_memory

_ENV = "KVAX_CACHE_DIR"
WAIT_S = 120.0  # the longest a lowering waits for another thread's build of the same kernel
_ENTRY_FORMAT = 2  # 2: entries hold the cubin (earlier ones did not: a new key, rebuilt once)
_lock = threading.Lock()
_installed = False
_registered: set = set()  # kernels launched through kvax (triton_common.launch)
_local = threading.local()  # what the kernel being built in this thread compiled to
_images: dict = {}  # id(jaxlib kernel) -> (kernel, cubin, name, shared): launched with its cubin
obtained: list = []  # (kernel, thread) for each of our kernels built or read from the disk
refitted: list = []  # (kernel, stages asked, stages taken) where the asked ones did not fit
_ahead: set = set()  # the calls lowered ahead in this process (lower_ahead's `about`)
_threads: list = []  # the threads lowering them
ahead_errors: list = []  # (about, error) of each lowering ahead that failed


def cache_dir(kind: str = "triton") -> str | None:
    """The cache folder of one kind of kernel ("triton", or "mosaic": the Mosaic kernels'
    lowered modules and compiled kernels, mosaic_cache.py), or None when disabled
    (KVAX_CACHE_DIR=off). $KVAX_CACHE_DIR holds the Triton entries itself and the Mosaic ones
    in its mosaic/ folder; by default each kind has its folder under $XDG_CACHE_HOME/kvax
    (~/.cache/kvax)."""
    value = os.environ.get(_ENV)
    if value is not None:
        if value.strip().lower() in ("", "off", "0", "none"):
            return None
        return value if kind == "triton" else os.path.join(value, kind)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kvax", kind)


def import_jax_triton():
    """Import jax_triton, leaving TRITON_CACHE_DIR as the user had it (it blanks it)."""
    before = os.environ.get("TRITON_CACHE_DIR")
    import jax_triton

    if before is None:
        os.environ.pop("TRITON_CACHE_DIR", None)
    else:
        os.environ["TRITON_CACHE_DIR"] = before
    return jax_triton


def _versions() -> str:
    out = [f"entry-format={_ENTRY_FORMAT}"]
    for name in ("triton", "jax-triton", "jaxlib"):
        try:
            out.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name}=?")
    return ",".join(out)


def entry_key(*parts) -> str:
    flags = [os.environ.get(f"JAX_TRITON_PTXAS_{name}", "") for name in ("EXTRA_FLAGS",
                                                                          "DEVICE_DEBUG")]
    text = "\n".join([_versions(), *map(repr, parts), repr(flags)])
    return hashlib.sha256(text.encode()).hexdigest()


def read_entry(folder: str, key: str) -> dict | None:
    try:
        with open(os.path.join(folder, key + ".json")) as f:
            entry = json.load(f)
        return entry if entry.get("key") == key else None
    except (OSError, ValueError):
        return None


def write_entry(folder: str, key: str, entry: dict) -> None:
    write_atomically(os.path.join(folder, key + ".json"),
                     json.dumps({**entry, "key": key}).encode())


def write_atomically(path: str, data: bytes) -> bool:
    """A temporary file in the same folder, renamed into place, so that concurrent processes
    never read a partial entry; True if written. A read-only or full disk costs a rebuild,
    never a failure."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def register(kernel) -> None:
    """A kernel launched through kvax gets the launch layer, wherever it is defined."""
    _registered.add(kernel)


def ours(fn) -> bool:
    return fn in _registered or getattr(fn, "__module__", "").startswith("kvax.")


def compile_to_ptx(ttir, backend, options, compute_capability) -> dict:
    """Triton's TTIR -> TTGIR -> LLVM IR -> PTX passes, keeping the metadata jax-triton drops."""
    meta: dict = {}
    ttgir = backend.make_ttgir(backend.make_ttir(ttir, meta, options, compute_capability), meta,
                               options, compute_capability)
    ptx = backend.make_ptx(backend.make_llir(ttgir, meta, options, compute_capability), meta,
                           options, compute_capability)
    return dict(ptx=ptx, name=meta["name"], shared=meta["shared"],
                total_warps=meta.get("num_warps"),
                scratch=int(meta.get("global_scratch_size") or 0),
                scratch_align=int(meta.get("global_scratch_align") or 1),
                cubin=make_cubin(ptx, compute_capability))


def ptxas_path(compute_capability: int) -> str | None:
    """Triton's own ptxas for this GPU (bundled with triton, the version its PTX is written for;
    TRITON_PTXAS_PATH overrides it, as for Triton's runtime), or None if there is none."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas

        path = get_ptxas(compute_capability).path
    except Exception:  # noqa: BLE001  (no ptxas: jaxlib compiles at the launch)
        return None
    return path if path and os.access(path, os.X_OK) else None


def ptxas_flags(compute_capability: int) -> list[str]:
    """jaxlib's ptxas command line for a Triton kernel (its CompileGpuAsm): the architecture
    (sm_90a from Hopper on), spills reported, and the user's JAX_TRITON_PTXAS_EXTRA_FLAGS and
    JAX_TRITON_PTXAS_DEVICE_DEBUG."""
    suffix = "a" if compute_capability >= 90 else ""
    flags = [f"-arch=sm_{compute_capability}{suffix}", "--warn-on-spills"]
    flags += os.environ.get("JAX_TRITON_PTXAS_EXTRA_FLAGS", "").split()
    if (os.environ.get("JAX_TRITON_PTXAS_DEVICE_DEBUG", "").lower() in ("1", "true")
            and not {"--device-debug", "-g"} & set(flags)):
        flags.append("--device-debug")
    return flags


def make_cubin(ptx: str, compute_capability: int) -> bytes | None:
    """The cubin of this PTX, made now by Triton's ptxas with jaxlib's command line; None where
    that ptxas is not found or fails (jaxlib then compiles the PTX at the launch as before, and
    reports any error itself)."""
    ptxas = ptxas_path(compute_capability)
    if ptxas is None:
        return None
    import subprocess

    with tempfile.TemporaryDirectory(prefix="kvax-ptxas-") as folder:
        source, cubin = os.path.join(folder, "kernel.ptx"), os.path.join(folder, "kernel.cubin")
        with open(source, "w") as f:
            f.write(ptx)
        done = subprocess.run([ptxas, source, "-o", cubin, *ptxas_flags(compute_capability)],
                              capture_output=True)
        if done.returncode or not os.path.exists(cubin):
            return None
        with open(cubin, "rb") as f:
            data = f.read()
    return data if data[:4] == b"\x7fELF" else None


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _message(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(data: bytes):
    """(field number, wire type, payload, the field's whole bytes) of one protobuf message;
    payload is empty but for length-delimited fields."""
    i = 0
    while i < len(data):
        start = i
        tag, i = _read_varint(data, i)
        wire, payload = tag & 7, b""
        if wire == 0:
            i = _read_varint(data, i)[1]
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        elif wire == 2:
            length, i = _read_varint(data, i)
            payload, i = data[i:i + length], i + length
        else:
            raise ValueError(f"protobuf wire type {wire} is not expected here")
        yield tag >> 3, wire, payload, data[start:i]


def with_module_image(call: bytes, cubin: bytes, name: str, shared: int) -> bytes:
    """jaxlib's serialized TritonAnyKernelCall (`TritonKernelCall.to_proto`) with the kernel's
    `module_image` set (TritonKernel field 11: ModuleImageProto's object_file 1, kernel_name
    2, shared_mem_bytes 3), which jaxlib's launch loads instead of running ptxas (jaxlib 0.11's
    triton.proto). Calls that are not a single kernel call, or already carry an image, are
    returned as they are."""
    image = (_message(1, cubin) + _message(2, name.encode())
             + _varint(3 << 3) + _varint(shared))

    def rebuild(data, field, inner):
        out, done = [], False
        for number, wire, payload, whole in _fields(data):
            if number == field and wire == 2 and not done:
                whole, done = _message(field, inner(payload)), True
            out.append(whole)
        return b"".join(out)

    def kernel(data):
        if any(number == 11 for number, *_ in _fields(data)):
            return data
        return data + _message(11, image)

    return rebuild(call, 1, lambda kernel_call: rebuild(kernel_call, 1, kernel))


def capturing(compile_ttir, make_result):
    """jax-triton's compile_ttir_inplace(ttir, backend, options, compute_capability, platform);
    for a kernel of ours (a build in progress in this thread) our compile_to_ptx, recording the
    TTIR and the metadata for the kernel and the cache entry built after it."""

    def compile_and_capture(ttir, backend, options, compute_capability, platform):
        capture = getattr(_local, "capture", None)
        if capture is None or platform != "cuda":
            return compile_ttir(ttir, backend, options, compute_capability, platform)
        capture["ttir"] = str(ttir)  # before the passes rewrite it in place: the same TTIR
        # jax-triton puts in its kernel, so the same HLO in every process (JAX's cache hits)
        capture.update(compile_to_ptx(ttir, backend, options, compute_capability))
        return make_result(capture["ptx"], capture["name"], capture["shared"])

    return compile_and_capture


def launch_kwargs(entry: dict, num_warps: int) -> tuple[int, dict]:
    """(warps, extra keywords) for jaxlib's TritonKernel from a build's metadata: Triton's total
    warp count, and the global scratch buffer TMA descriptors need (when there is one)."""
    extra = {}
    if entry.get("scratch"):
        extra = dict(global_scratch_size=entry["scratch"],
                     global_scratch_align=entry.get("scratch_align") or 1)
    return entry.get("total_warps") or num_warps, extra


class KernelLib:
    """Stands in for jaxlib's gpu_triton module inside jax-triton: TritonKernel built for one of
    our kernels gets the launch fixes of launch_kwargs; everything else passes through."""

    def __init__(self, lib):
        self._lib = lib

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def TritonKernel(self, name, num_warps, num_ctas, shared, ptx, ttir, cc):  # noqa: N802
        capture = getattr(_local, "capture", None)
        if capture is None:
            return self._lib.TritonKernel(name, num_warps, num_ctas, shared, ptx, ttir, cc)
        warps, extra = launch_kwargs(capture, num_warps)
        return self._lib.TritonKernel(name, warps, num_ctas, shared, ptx, ttir, cc, **extra)

    def TritonKernelCall(self, kernel, *args):  # noqa: N802
        call = self._lib.TritonKernelCall(kernel, *args)
        image = _images.get(id(kernel))
        return call if image is None or image[0] is not kernel else WithImage(call, image[1:])

    def TritonAutotunedKernelCall(self, name, calls, aliases):  # noqa: N802
        calls = [(call.call if isinstance(call, WithImage) else call, about)
                 for call, about in calls]
        return self._lib.TritonAutotunedKernelCall(name, calls, aliases)


class WithImage:
    """jaxlib's TritonKernelCall whose serialized form carries the kernel's cubin."""

    def __init__(self, call, image):
        self.call, self.image = call, image

    def __getattr__(self, name):
        return getattr(self.call, name)

    def to_proto(self, *args):
        return with_module_image(self.call.to_proto(*args), *self.image)


def remember_image(kernel, entry: dict) -> None:
    """Launch this jaxlib kernel with the cubin its build or its entry holds, if any."""
    cubin = entry.get("cubin")
    if isinstance(cubin, str):
        cubin = base64.b64decode(cubin)
    if cubin:
        _images[id(kernel)] = (kernel, cubin, entry["name"], int(entry["shared"]))


def kernel_name(fn) -> str:
    return getattr(fn, "__name__", repr(fn))


def too_large(fn, kw: dict, shared: int, limit: int, cc: int) -> ValueError:
    metaparams = dict(kw.get("metaparams") or {})
    tiles = {k: v for k, v in sorted(metaparams.items()) if "BLOCK" in k or k in ("H", "HV")}
    rows = [v for k, v in metaparams.items() if "BLOCK" in k and not k.startswith("BLOCK_H")]
    advice = ("pass smaller query_block_size/kv_block_size in fwd_params/bwd_params"
              if any(v > 16 for v in rows) else
              "its tiles are the smallest there are: use a 16-bit dtype or a smaller head dim")
    return ValueError(
        f"kvax's {kernel_name(fn)} with tiles {tiles} needs {shared} bytes of shared "
        f"memory at {kw.get('num_stages')} stage(s); one program of this GPU (compute capability "
        f"{cc // 10}.{cc % 10}) may take {limit}: {advice}")


def cached(get_or_create, make_kernel, compute_capability_of):
    """jax-triton's get_or_create_triton_kernel(backend_init_func, platform, fn, arg_dtypes,
    scalar_args, *, num_warps, num_stages, num_ctas, compute_capability, enable_fp_fusion,
    metaparams, dump) -> (kernel, attrs), with the launch layer and the disk cache for our
    kernels. make_kernel(name, num_warps, num_ctas, shared, ptx, ttir, cc, **extra) builds
    jaxlib's kernel. A kernel over the GPU's shared memory is built with fewer stages
    (`fitted`)."""
    memory: dict = {}  # (key, shared memory limit) -> (kernel, attrs)
    building: dict = {}  # (key, limit) -> threading.Event, set once the thread building it is done
    lock = threading.Lock()

    def build(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        _local.capture = {}  # our compile and KernelLib fill and read it
        try:
            kernel, attrs = get_or_create(backend_init_func, platform, fn, arg_dtypes,
                                          scalar_args, **kw)
            return kernel, attrs, _local.capture
        finally:
            _local.capture = None

    def read_or_build(key, cc, backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        folder = cache_dir()
        entry = None if folder is None else read_entry(folder, key)
        if entry is None:
            kernel, attrs, captured = build(backend_init_func, platform, fn, arg_dtypes,
                                            scalar_args, **kw)
            if folder is not None and captured.get("ptx"):  # no ptx: jax-triton's memory hit
                cubin = captured.get("cubin")
                write_entry(folder, key, dict(
                    captured, num_warps=kw.get("num_warps") or 4,
                    num_ctas=kw.get("num_ctas") or 1, cc=cc,
                    attrs=[[list(i), a] for i, a in attrs.items()],
                    cubin=base64.b64encode(cubin).decode() if cubin else None))
            remember_image(kernel, captured)
            return kernel, attrs, captured.get("shared")
        warps, extra = launch_kwargs(entry, entry["num_warps"])
        kernel = make_kernel(entry["name"], warps, entry["num_ctas"], entry["shared"],
                             entry["ptx"], entry["ttir"], entry["cc"], **extra)
        remember_image(kernel, entry)
        return kernel, {tuple(i): a for i, a in entry["attrs"]}, entry["shared"]

    def key_of(fn, arg_dtypes, scalar_args, cc, kw) -> str:
        return entry_key(fn.cache_key, list(arg_dtypes), list(scalar_args), cc, ptxas_path(cc),
                         sorted((k, v) for k, v in kw.items() if k not in ("metaparams",
                                                                           "compute_capability")),
                         sorted(dict(kw.get("metaparams") or {}).items()))

    def fitted(key, cc, limit, backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        """read_or_build, again with one stage fewer while the kernel takes more shared memory
        than `limit` (one program of this GPU's, or None: not checked); a ValueError where one
        stage is too many."""
        asked = kw.get("num_stages")
        while True:
            kernel, attrs, shared = read_or_build(key, cc, backend_init_func, platform, fn,
                                                  arg_dtypes, scalar_args, **kw)
            if limit is None or shared is None or shared <= limit:
                if kw.get("num_stages") != asked:
                    refitted.append((kernel_name(fn), asked, kw.get("num_stages")))
                return kernel, attrs
            if not kw.get("num_stages") or kw["num_stages"] <= 1:
                raise too_large(fn, kw, shared, limit, cc)
            kw = dict(kw, num_stages=kw["num_stages"] - 1)
            key = key_of(fn, arg_dtypes, scalar_args, cc, kw)

    def get_or_create_kernel(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        if not ours(fn) or platform != "cuda":
            return get_or_create(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw)
        cc = kw.get("compute_capability") or compute_capability_of()
        key = key_of(fn, arg_dtypes, scalar_args, cc, kw)
        limit = capability_shared_memory(cc)  # read once per ask (tests lower it)
        slot = key, limit  # kept fitted to that limit
        while True:  # one thread builds a kernel; others asking for it meanwhile wait for it
            with lock:
                if slot in memory:
                    return memory[slot]
                done = building.get(slot)
                if done is None:
                    done = building[slot] = threading.Event()
                    break
            # then in memory, or its build failed there and is tried again here; a build that
            # takes longer than WAIT_S is not waited for (this one goes ahead on its own)
            if not done.wait(WAIT_S):
                done = None
                break
        try:
            memory[slot] = fitted(key, cc, limit, backend_init_func, platform, fn, arg_dtypes,
                                  scalar_args, **kw)
            obtained.append((kernel_name(fn), threading.current_thread().name))
            return memory[slot]
        finally:
            if done is not None:
                with lock:
                    del building[slot]
                done.set()

    return get_or_create_kernel


AHEAD_THREAD = "kvax-triton-ahead"


def ahead_switched_on() -> bool:
    """KVAX_PREWARM, the one switch of every compile and build ahead (here and prewarm.py):
    on unless it is "0"."""
    return os.environ.get("KVAX_PREWARM", "1") != "0"


def lower_ahead(about, fn, *args) -> None:
    """Lower jax.jit(fn)(*args) (arrays, or anything with a shape and dtype, in pytrees) in a
    thread of its own, once per `about` (a hashable description of the call) and process, so
    that the Triton kernels it launches are built (or read from the disk cache) there.

    jax-triton builds a kernel when the step that calls it is lowered, one kernel after another
    (our forward and backward kernels took 1.0 and 3.0 s on a CPU, 2.4 s together in two
    threads: Triton's passes and ptxas hold no GIL). Lowered ahead, a kernel is built while the
    rest of the step traces and lowers and beside the step's other kernels; the step's lowering
    then finds it in memory, or waits for the build under way (`cached`). Any error in the
    thread only means the step's lowering builds the kernel itself. Nothing is started with
    KVAX_PREWARM=0 (which also turns off the Mosaic kernels' compile ahead, prewarm.py), nor
    from a thread of this kind."""
    if not ahead_switched_on() or threading.current_thread().name == AHEAD_THREAD:
        return
    import jax

    try:
        specs = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), args)
    except (AttributeError, TypeError):  # not arrays: nothing to lower ahead from
        return
    with _lock:
        if about in _ahead:
            return
        _ahead.add(about)
        if not _threads:
            import atexit

            atexit.register(_join_ahead)

    def run():
        try:
            jax.jit(fn).lower(*specs)
        except Exception as e:  # noqa: BLE001  (the step's lowering builds it, reports errors)
            import logging

            ahead_errors.append((about, repr(e)))
            logging.getLogger("kvax").debug("lowering ahead failed", exc_info=True)

    thread = threading.Thread(target=run, name=AHEAD_THREAD, daemon=True)
    _threads.append(thread)
    thread.start()


def build_ahead(jt, kernel, args, kwargs) -> None:
    """Build the kernel of this launch (jax_triton.triton_call(*args, kernel=kernel, **kwargs))
    ahead, as it is traced: a program of the launch alone lowered by `lower_ahead`."""
    import jax
    import numpy as np

    def scalar(arg):  # what triton_call passes as a scalar, not an array
        return isinstance(arg, (bool, int, float, np.float32))

    flat, tree = jax.tree.flatten(args)
    about = repr((kernel, tree, [arg if scalar(arg) else (np.shape(arg), str(arg.dtype))
                                 for arg in flat], sorted(kwargs.items())))

    def launch_alone(*arrays):
        arrays = iter(arrays)
        full = [arg if scalar(arg) else next(arrays) for arg in flat]
        return jt.triton_call(*jax.tree.unflatten(tree, full), kernel=kernel, **kwargs)

    lower_ahead(about, launch_alone, *(arg for arg in flat if not scalar(arg)))


def _join_ahead() -> None:
    """At exit a build under way finishes first (Triton's passes do not stop halfway)."""
    for thread in _threads:
        thread.join()


def install() -> None:
    """Put the launch layer under jax-triton once per process (idempotent, thread-safe)."""
    global _installed
    with _lock:
        if _installed:
            return
        import_jax_triton()
        import jax_triton.triton_lib as jtl

        def make_result(ptx, name, shared):
            return jtl.CompilationResult(binary=ptx, name=name, shared_mem_bytes=shared,
                                         ttgir=None, llir=None)

        lib = jtl.triton_kernel_call_lib
        jtl.triton_kernel_call_lib = KernelLib(lib)
        jtl.compile_ttir_inplace = capturing(jtl.compile_ttir_inplace, make_result)
        jtl.get_or_create_triton_kernel = cached(
            jtl.get_or_create_triton_kernel, lib.TritonKernel,
            lambda: lib.get_compute_capability(0))
        _installed = True
