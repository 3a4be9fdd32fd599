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
  memory, warps, scratch, argument attributes), so a hit skips Triton's front end and compiler
  both. Entries are written to a temporary file and renamed into place, so concurrent processes
  never read a partial entry; a corrupt entry is rebuilt.

Location: $KVAX_CACHE_DIR, else $XDG_CACHE_HOME/kvax/triton, else ~/.cache/kvax/triton (the
Mosaic kernels' entries, mosaic_cache.py, in $KVAX_CACHE_DIR/mosaic or .../kvax/mosaic).
KVAX_CACHE_DIR=off disables the cache (not the launch fixes). What stays per process: ptxas
(jaxlib turns the PTX into a cubin at the first launch and caches it in memory only) and XLA's
compilation of the program around the kernels (JAX's persistent cache,
`jax_compilation_cache_dir`, covers that).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import tempfile
import threading

_ENV = "KVAX_CACHE_DIR"
_lock = threading.Lock()
_installed = False
_registered: set = set()  # kernels launched through kvax (triton_common.launch)
_local = threading.local()  # what the kernel being built in this thread compiled to


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
    out = []
    for name in ("triton", "jax-triton", "jaxlib"):
        try:
            out.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name}=?")
    return ",".join(out)


def entry_key(*parts) -> str:
    text = "\n".join([_versions(), *map(repr, parts)])
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
                scratch_align=int(meta.get("global_scratch_align") or 1))


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


def cached(get_or_create, make_kernel, compute_capability_of):
    """jax-triton's get_or_create_triton_kernel(backend_init_func, platform, fn, arg_dtypes,
    scalar_args, *, num_warps, num_stages, num_ctas, compute_capability, enable_fp_fusion,
    metaparams, dump) -> (kernel, attrs), with the launch layer and the disk cache for our
    kernels. make_kernel(name, num_warps, num_ctas, shared, ptx, ttir, cc, **extra) builds
    jaxlib's kernel."""
    memory = {}

    def build(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        _local.capture = {}  # our compile and KernelLib fill and read it
        try:
            kernel, attrs = get_or_create(backend_init_func, platform, fn, arg_dtypes,
                                          scalar_args, **kw)
            return kernel, attrs, _local.capture
        finally:
            _local.capture = None

    def get_or_create_kernel(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        if not ours(fn) or platform != "cuda":
            return get_or_create(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw)
        folder = cache_dir()
        if folder is None:
            return build(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw)[:2]
        cc = kw.get("compute_capability") or compute_capability_of()
        num_warps = kw.get("num_warps") or 4
        key = entry_key(fn.cache_key, list(arg_dtypes), list(scalar_args), cc,
                        sorted((k, v) for k, v in kw.items() if k not in ("metaparams",
                                                                          "compute_capability")),
                        sorted(dict(kw.get("metaparams") or {}).items()))
        if key in memory:
            return memory[key]
        entry = read_entry(folder, key)
        if entry is None:
            kernel, attrs, captured = build(backend_init_func, platform, fn, arg_dtypes,
                                            scalar_args, **kw)
            if captured.get("ptx"):  # empty when jax-triton answered from its own memory
                write_entry(folder, key, dict(
                    captured, num_warps=num_warps, num_ctas=kw.get("num_ctas") or 1, cc=cc,
                    attrs=[[list(i), a] for i, a in attrs.items()]))
            memory[key] = (kernel, attrs)
            return kernel, attrs
        warps, extra = launch_kwargs(entry, entry["num_warps"])
        kernel = make_kernel(entry["name"], warps, entry["num_ctas"], entry["shared"],
                             entry["ptx"], entry["ttir"], entry["cc"], **extra)
        attrs = {tuple(i): a for i, a in entry["attrs"]}
        memory[key] = (kernel, attrs)
        return kernel, attrs

    return get_or_create_kernel


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
