"""A persistent on-disk cache of compiled Triton kernels, under jax-triton.

jax-triton 0.3.1 builds every kernel from scratch in every new process (Python AST -> TTIR ->
TTGIR -> LLVM -> PTX: 5.7 s of the 7.6 s a warm 64k forward+backward took before its first result
on an H100) and keeps the result in memory only; it also sets TRITON_CACHE_DIR to "" when
imported, which breaks torch/Triton users in the same process. Here:

- `import_jax_triton()` imports it and puts the user's TRITON_CACHE_DIR back.
- `install()` wraps jax-triton's kernel builder for kvax's own kernels: the key is a SHA-256 of
  the kernel's source hash (Triton's `cache_key`: its source, the jit functions it calls and the
  constexpr globals it reads), the argument types, scalars, constexprs and launch options, the
  compute capability and the versions of triton, jax-triton and jaxlib. An entry holds what jaxlib
  needs to launch (PTX, TTIR, name, shared memory, warps, argument attributes), so a hit skips
  Triton's front end and compiler both. Entries are written to a temporary file and renamed into
  place, so concurrent processes never read a partial entry; a corrupt entry is rebuilt.

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
_local = threading.local()  # what the kernel being built in this thread compiled to


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
    """Atomic: a temporary file in the same folder, renamed into place."""
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({**entry, "key": key}, f)
        os.replace(tmp, os.path.join(folder, key + ".json"))
    except OSError:  # a read-only or full disk costs a rebuild, never a failure
        pass


def capturing(compile_ttir):
    """compile_ttir(ttir, backend, options, compute_capability, platform), recording the TTIR and
    the result of a kvax kernel's build for the entry written after it."""

    def compile_and_capture(ttir, backend, options, compute_capability, platform):
        capture = getattr(_local, "capture", None)
        text = str(ttir) if capture is not None else None  # before the passes rewrite it in place
        result = compile_ttir(ttir, backend, options, compute_capability, platform)
        if capture is not None:  # the same TTIR jax-triton put in its kernel: the same HLO, so
            # JAX's persistent cache hits in a second process too
            capture.update(ttir=text, ptx=result.binary, name=result.name,
                           shared=result.shared_mem_bytes)
        return result

    return compile_and_capture


def cached(get_or_create, make_kernel, compute_capability_of):
    """jax-triton's get_or_create_triton_kernel(backend_init_func, platform, fn, arg_dtypes,
    scalar_args, *, num_warps, num_stages, num_ctas, compute_capability, enable_fp_fusion,
    metaparams, dump) -> (kernel, attrs), with the disk cache for kvax's kernels.
    make_kernel(name, num_warps, num_ctas, shared, ptx, ttir, cc) builds jaxlib's kernel."""
    memory = {}

    def get_or_create_kernel(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
        folder = cache_dir()
        ours = getattr(fn, "__module__", "").startswith("kvax.")
        if not ours or folder is None or platform != "cuda":
            return get_or_create(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw)
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
            _local.capture = {}
            try:
                kernel, attrs = get_or_create(backend_init_func, platform, fn, arg_dtypes,
                                              scalar_args, **kw)
                captured = _local.capture
            finally:
                _local.capture = None
            if captured:  # empty when jax-triton answered from its own memory
                write_entry(folder, key, dict(
                    captured, num_warps=num_warps, num_ctas=kw.get("num_ctas") or 1, cc=cc,
                    attrs=[[list(i), a] for i, a in attrs.items()]))
            memory[key] = (kernel, attrs)
            return kernel, attrs
        kernel = make_kernel(entry["name"], entry["num_warps"], entry["num_ctas"],
                             entry["shared"], entry["ptx"], entry["ttir"], entry["cc"])
        attrs = {tuple(i): a for i, a in entry["attrs"]}
        memory[key] = (kernel, attrs)
        return kernel, attrs

    return get_or_create_kernel


def install() -> None:
    """Wrap jax-triton's kernel builder once per process (idempotent, thread-safe)."""
    global _installed
    with _lock:
        if _installed:
            return
        import_jax_triton()
        import jax_triton.triton_lib as jtl

        lib = jtl.triton_kernel_call_lib
        jtl.compile_ttir_inplace = capturing(jtl.compile_ttir_inplace)
        jtl.get_or_create_triton_kernel = cached(
            jtl.get_or_create_triton_kernel, lib.TritonKernel,
            lambda: lib.get_compute_capability(0))
        _installed = True
