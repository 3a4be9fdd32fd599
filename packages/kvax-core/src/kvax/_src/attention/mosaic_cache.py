"""Our Mosaic kernels lowered and compiled once per machine, not once per process or jit.

Mosaic GPU compiles a kernel when XLA compiles the program that calls it (seconds on an H200),
and jaxlib keeps the result in memory, keyed by the SHA-256 of the kernel's lowered module (the
custom call's `kernel_hash`). Three things kept a kernel's lowering and compile from being
reused:

- Names. Lowering stamps each module with `mosaic_gpu.dump_basename` (the name of its dump
  files): the module's name and a count of the modules this process has lowered. So the same
  kernel lowered again, in the same process (another jit of the same shapes, an eval step,
  after jax.clear_caches) or in the next one, had another hash, and jaxlib compiled it again.
  `install` stamps ours first, with their name and a digest of their content, so a kernel's
  hash depends on the kernel alone.
- Lowering. Pallas lowers each kernel's jaxpr to a Mosaic GPU module in Python, about 2-3 s a
  kernel (layout inference, the dialect's lowering), in every process and for every new jit.
  `cache_lowering` keeps each module of ours, in memory and on the disk, under a digest of
  what Pallas lowers it from (the kernel's jaxpr as printed, its mesh, compiler parameters,
  argument shapes, the JAX mesh, the versions, the GPU and kvax's source), and hands it back
  for the same inputs. The custom call built around it is byte for byte the one a fresh
  lowering builds.
- The disk. jaxlib can write a compiled kernel out and read it back: for JAX's persistent
  compilation cache, the custom call's compiled state travels inside the serialized XLA
  executable. `store` writes the executable of a program made of the kernel's custom call
  alone (prewarm.program); `load` reads it back in a later process, which puts the kernel in
  jaxlib's memory under its hash, where the step's compile then finds it.

A compiled kernel is one file in triton_launch.cache_dir("mosaic"), named by a SHA-256 of the
kernel's hash, the versions of jax and jaxlib, the GPU runtime, the GPU's kind and compute
capability and the host's CPU (an entry holds host code too); a lowered module is one file
there too (`<digest>.mlir`). Each is written to a temporary file and renamed into place, and
starts with a header naming it, checked on reading. A bad or foreign entry only means the work
is done again and the entry rewritten. Modules kept in memory stay for the process's life
(150-190 KB each). Like JAX's persistent cache, an entry is loaded as code: the folder must be
writable by you alone. prewarm's thread is the only reader and writer of compiled kernels, so
KVAX_PREWARM=0 turns those off too (as does JAX's persistent cache, which then keeps the
kernels itself); KVAX_CACHE_DIR=off turns off the disk for both.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import platform
import threading

from kvax._src.attention.triton_launch import cache_dir, write_atomically

KERNEL_PREFIX = "kvax_mosaic_"  # our kernels' names (plgpu.kernel's kernel_name)
BASENAME = "mosaic_gpu.dump_basename"
_MAGIC = b"kvax-mosaic-kernel-1\n"
_MODULE_MAGIC = b"kvax-mosaic-module-1\n"
_lock = threading.Lock()
_installed = False
_lowered: dict[str, tuple[dict, bytes]] = {}  # lowering_key -> (metadata, module bytecode)
reused: list[str] = []  # the lowering keys this process took from memory or the disk, in order


def install() -> None:
    """From now on each module of ours gets a dump basename of its own content before Mosaic GPU
    would give it a counter's, and is lowered once (idempotent, thread-safe)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        try:
            from jax._src.lib import mosaic_gpu_dialect as dialect
            from jax._src.pallas.mosaic_gpu import lowering
        except ImportError:  # a jaxlib without Mosaic GPU lowers none of our kernels
            return
        dialect.get_or_set_dump_options = stamping(dialect.get_or_set_dump_options)
        lowering.lower_unpipelined_jaxpr_to_module = cache_lowering(
            lowering.lower_unpipelined_jaxpr_to_module, lowering.LoweringResult)


def stamping(get_or_set_dump_options):
    """Mosaic GPU's get_or_set_dump_options(module), stamping a module of ours first."""

    @functools.wraps(get_or_set_dump_options)
    def stamp_then_get(module):
        try:
            stamp(module)
        except Exception:  # (a jax that changed beneath us) Mosaic GPU's own name, as before
            pass
        return get_or_set_dump_options(module)

    return stamp_then_get


def stamp(module) -> None:
    """A module named kvax_mosaic_* without a dump basename gets `<name>_<digest of its
    bytecode>`: the same for the same kernel in every process, apart for different kernels (so
    dumps of two shapes do not overwrite each other). Other modules are left as they are."""
    from jax._src.lib.mlir import ir

    attributes = module.operation.attributes
    if BASENAME in attributes or "sym_name" not in attributes:
        return
    name = ir.StringAttr(attributes["sym_name"]).value
    if not name.startswith(KERNEL_PREFIX):
        return
    content = io.BytesIO()
    module.operation.write_bytecode(content)
    digest = hashlib.sha256(content.getvalue()).hexdigest()[:16]
    with module.context:
        attributes[BASENAME] = ir.StringAttr.get(f"{name}_{digest}")


def lowering_key(mesh, jax_mesh, jaxpr, in_shapes, out_shapes, params) -> str:
    """A digest of what Pallas lowers a kernel's module from. The jaxpr as printed holds every
    equation with its parameters and literals (Pallas kernels close over no arrays). kvax's
    own source is in it too, so that a kvax edited or upgraded never reads a module an earlier
    one lowered, should a parameter ever print less than it holds."""
    import jax
    import jaxlib

    parts = [str(jaxpr), repr(mesh), repr(jax_mesh), repr(list(in_shapes)),
             repr(list(out_shapes)), repr(params), jax.__version__,
             getattr(jaxlib, "__version__", "?"), _target(), _kvax_source()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@functools.cache
def _kvax_source() -> str:
    """A digest of every Python source file of the kvax package, read once a process."""
    import kvax

    root = os.path.dirname(os.path.abspath(kvax.__file__))
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def _target() -> str:
    """The GPU that lowering targets (Mosaic GPU reads its compute capability)."""
    try:
        from jax.experimental.mosaic.gpu import utils

        return str(utils._infer_arch())
    except Exception:  # no GPU in this process (lowering for CUDA on CPU): the key says so
        return "?"


def cache_lowering(lower, make_result):
    """Pallas's lower_unpipelined_jaxpr_to_module(gpu_mesh, jax_mesh, jaxpr, in_shapes,
    out_shapes, params, *, outer_traceback) -> LoweringResult, for our kernels (the mesh's
    kernel_name kvax_mosaic_*) from memory or the disk when lowered before, and kept there
    after a lowering. Kernels that record a profile are always lowered."""

    @functools.wraps(lower)
    def lower_once(gpu_mesh, jax_mesh, jaxpr, in_shapes, out_shapes, params, **kw):
        name = getattr(gpu_mesh, "kernel_name", None) or ""
        if not name.startswith(KERNEL_PREFIX) or getattr(params, "profile_space", 0):
            return lower(gpu_mesh, jax_mesh, jaxpr, in_shapes, out_shapes, params, **kw)
        try:
            key = lowering_key(gpu_mesh, jax_mesh, jaxpr, in_shapes, out_shapes, params)
        except Exception:  # (a jax that changed beneath us) lowered, kept nowhere
            key = None
        entry = None if key is None else _lowered.get(key) or _read_module(key)
        if entry is not None:
            try:
                result = _result(make_result, *entry)
            except Exception:  # an entry that does not parse: lowered again, rewritten
                _lowered.pop(key, None)
            else:
                reused.append(key)
                return result
        result = lower(gpu_mesh, jax_mesh, jaxpr, in_shapes, out_shapes, params, **kw)
        if key is not None and result.profiler_spec is None:
            try:
                entry = _entry(result)
            except Exception:  # kept nowhere: the next lowering does the work again
                return result
            _lowered[key] = entry
            _write_module(key, *entry)
        return result

    return lower_once


def _shapes(structs) -> list:
    import numpy as np

    return [[list(s.shape), np.dtype(s.dtype).name] for s in structs]


def _entry(result) -> tuple[dict, bytes]:
    content = io.BytesIO()
    result.module.operation.write_bytecode(content)
    meta = dict(grid=list(result.grid), block=list(result.block),
                out=_shapes(result.new_out_shapes), scratch=_shapes(result.gmem_scratch_shapes))
    return meta, content.getvalue()


def _result(make_result, meta: dict, module: bytes):
    """A LoweringResult from a kept entry, its module parsed into the current context."""
    import jax
    from jax._src.lib.mlir import ir

    def structs(shapes):
        return tuple(jax.ShapeDtypeStruct(tuple(shape), dtype) for shape, dtype in shapes)

    return make_result(module=ir.Module.parse(module), grid=tuple(meta["grid"]),
                       block=tuple(meta["block"]), new_out_shapes=structs(meta["out"]),
                       profiler_spec=None, gmem_scratch_shapes=structs(meta["scratch"]))


def _module_path(key: str) -> str | None:
    folder = cache_dir("mosaic")
    return None if folder is None else os.path.join(folder, key + ".mlir")


def _read_module(key: str) -> tuple[dict, bytes] | None:
    path = _module_path(key)
    body = None if path is None else _read(path, _MODULE_MAGIC, key)
    if body is None:
        return None
    try:
        meta, module = body.split(b"\n", 1)
        entry = (json.loads(meta), module)
    except ValueError:
        return None
    _lowered[key] = entry
    return entry


def _write_module(key: str, meta: dict, module: bytes) -> None:
    path = _module_path(key)
    if path is not None:
        write_atomically(path, _header(_MODULE_MAGIC, key) + json.dumps(meta).encode() + b"\n"
                         + module)


def _header(magic: bytes, name: str) -> bytes:
    return magic + name.encode() + b"\n"


def _read(path: str, magic: bytes, name: str) -> bytes | None:
    """What follows an entry's header, or None when the file is missing or not that entry."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    header = _header(magic, name)
    return blob[len(header):] if blob.startswith(header) else None


@functools.cache
def _host() -> str:
    """The host CPU, as far as its code is concerned: machine, model and feature flags."""
    lines = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                field = line.split(":")[0].strip()
                if field in ("model name", "flags") and not any(
                        seen.startswith(field) for seen in lines):
                    lines.append(line.strip())
    except OSError:
        pass
    return "\n".join([platform.machine(), *lines])


def entry_name(key: bytes, device) -> str:
    """The entry's file name for the kernel of hash `key` compiled on `device`'s machine."""
    import jax
    import jaxlib

    parts = [key.hex(), jax.__version__, getattr(jaxlib, "__version__", "?"),
             device.client.platform_version, device.device_kind,
             str(getattr(device, "compute_capability", "")), _host()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _device():
    import jax

    return jax.local_devices()[0]


def store(key: bytes, compiled) -> bool:
    """Write `compiled` (the jax.stages.Compiled of prewarm.program(key, ...)) to the disk; True
    if written."""
    folder = cache_dir("mosaic")
    if folder is None:
        return False
    device = _device()
    executable = compiled.runtime_executable()
    data = executable.client.serialize_executable(executable)
    name = entry_name(key, device)
    return write_atomically(os.path.join(folder, name + ".bin"), _header(_MAGIC, name) + data)


def load(key: bytes) -> bool:
    """Put the kernel of hash `key` into jaxlib's memory from its entry on the disk; True if it
    was there and loaded."""
    from jax._src.lib import xla_client as xc

    folder = cache_dir("mosaic")
    if folder is None:
        return False
    device = _device()
    name = entry_name(key, device)
    data = _read(os.path.join(folder, name + ".bin"), _MAGIC, name)
    if data is None:
        return False
    device.client.deserialize_executable(data, xc.DeviceList((device,)), None)
    return True
