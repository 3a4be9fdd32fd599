"""A persistent on-disk cache of compiled Triton kernels, under jax-triton.

jax-triton 0.3.1 compiles every kernel from scratch in every new process (TTIR -> TTGIR -> LLVM ->
PTX: 3-7 s per kernel on a 2-core machine) and keeps the result in memory only; it also sets
TRITON_CACHE_DIR to "" when imported, which breaks torch/Triton users in the same process. Here:

- `import_jax_triton()` imports it and puts the user's TRITON_CACHE_DIR back.
- `install()` wraps jax-triton's TTIR -> PTX step with a disk cache for kvax's own kernels. The
  key is a SHA-256 of the kernel's TTIR (which holds its source, constexprs and argument
  specialisation), the compile options, the compute capability and the versions of triton,
  jax-triton and jaxlib; an entry is the PTX and the launch metadata. Entries are written to a
  temporary file and renamed into place, so concurrent processes never read a partial entry; a
  corrupt or unreadable entry is compiled again.

Location: $KVAX_CACHE_DIR, else $XDG_CACHE_HOME/kvax/triton, else ~/.cache/kvax/triton.
KVAX_CACHE_DIR=off disables it. What stays per process: ptxas (jaxlib turns the PTX into a
cubin at the first launch and caches it in memory only) and XLA's compilation of the program
around the kernels (JAX's own persistent cache, `jax_compilation_cache_dir`, covers that).
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
_local = threading.local()  # the kernel jax-triton is compiling in this thread


def cache_dir() -> str | None:
    """The cache folder, or None when disabled (KVAX_CACHE_DIR=off)."""
    value = os.environ.get(_ENV)
    if value is not None:
        return None if value.strip().lower() in ("", "off", "0", "none") else value
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kvax", "triton")


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


def entry_key(ttir: str, options, compute_capability) -> str:
    text = "\n".join([_versions(), str(compute_capability), repr(options), ttir])
    return hashlib.sha256(text.encode()).hexdigest()


def read_entry(folder: str, key: str) -> dict | None:
    try:
        with open(os.path.join(folder, key + ".json")) as f:
            entry = json.load(f)
        return entry if entry.get("key") == key else None
    except (OSError, ValueError):
        return None


def write_entry(folder: str, key: str, entry: dict) -> None:
    """Atomic: a temporary file in the same folder, renamed into place."""
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({**entry, "key": key}, f)
        os.replace(tmp, os.path.join(folder, key + ".json"))
    except OSError:  # a read-only or full disk costs a recompile, never a failure
        pass


def cached(compile_ttir, make_result):
    """compile_ttir(ttir, backend, options, compute_capability, platform) with the disk cache for
    kvax's kernels; make_result(ptx, name, shared) builds what compile_ttir returns."""

    def compile_with_cache(ttir, backend, options, compute_capability, platform):
        folder = cache_dir()
        if not getattr(_local, "kvax", False) or folder is None or platform != "cuda":
            return compile_ttir(ttir, backend, options, compute_capability, platform)
        key = entry_key(str(ttir), options, compute_capability)
        entry = read_entry(folder, key)
        if entry is not None:
            return make_result(entry["ptx"], entry["name"], entry["shared"])
        result = compile_ttir(ttir, backend, options, compute_capability, platform)
        write_entry(folder, key, dict(ptx=result.binary, name=result.name,
                                      shared=result.shared_mem_bytes))
        return result

    return compile_with_cache


def compiling_kvax_kernels(get_or_create):
    """Marks, for the compile step below it, whether the kernel being built is one of kvax's."""

    def get_or_create_kernel(backend_init_func, platform, fn, *args, **kwargs):
        _local.kvax = getattr(fn, "__module__", "").startswith("kvax.")
        try:
            return get_or_create(backend_init_func, platform, fn, *args, **kwargs)
        finally:
            _local.kvax = False

    return get_or_create_kernel


def install() -> None:
    """Wrap jax-triton's compile step once per process (idempotent, thread-safe)."""
    global _installed
    with _lock:
        if _installed:
            return
        import_jax_triton()
        import jax_triton.triton_lib as jtl

        def make_result(ptx, name, shared):
            return jtl.CompilationResult(binary=ptx, name=name, shared_mem_bytes=shared,
                                         ttgir=None, llir=None)

        jtl.get_or_create_triton_kernel = compiling_kvax_kernels(jtl.get_or_create_triton_kernel)
        jtl.compile_ttir_inplace = cached(jtl.compile_ttir_inplace, make_result)
        _installed = True
