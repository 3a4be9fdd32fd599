"""The Mosaic kernels compiled while the rest of a step is still lowering, or read from the disk.

Mosaic GPU compiles a kernel (its MLIR to PTX, ptxas, the host launcher) when XLA compiles the
program that calls it, one kernel after another on XLA's compiling thread: on an H200 about
5 and 2 s for our forward and backward, most of a cold step's XLA compile (docs/bench/
h200-2026-11-28-compile). jaxlib keeps compiled kernels in a process-wide cache keyed by the
hash that lowering gives each kernel's module (jax.experimental.mosaic.gpu.core.KNOWN_KERNELS
holds each module lowered in this process under that hash; mosaic_cache makes that hash the
same for the same kernel in every process).

So when one of our kernels is traced on a GPU, `watch` starts a thread that waits for our
modules to appear there (they do while the step lowers, seconds before XLA compiles it) and
puts each one in that cache at once: read from kvax's disk cache (mosaic_cache.load) if an
earlier process compiled it, else compiled through a program of its own (the kernel's custom
call alone, with the same hash and module, compiled and never run) and written there
(mosaic_cache.store). XLA's compile of the step then finds the kernel in memory. The thread
holds no GIL while a kernel compiles, and stops once nothing new appears for IDLE_S seconds.
Any error there only means the step compiles the kernel itself. A step only lowered, never
compiled (jax.jit(f).lower(...) to inspect it, jax.export), has its kernels compiled all the
same, for nothing; at exit a compile under way finishes first.

KVAX_PREWARM=0 turns it off (the disk cache of Mosaic kernels with it); so does JAX's
persistent compilation cache (see `enabled`).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time

from kvax._src.attention import mosaic_cache, triton_launch

KERNEL_PREFIX = mosaic_cache.KERNEL_PREFIX  # our kernels' names: the modules the thread takes
IDLE_S = 30.0  # the thread stops when no new module of ours appeared for this long
POLL_S = 0.05  # how often the thread looks for new modules

_log = logging.getLogger("kvax")
_lock = threading.Lock()
_thread: threading.Thread | None = None
_deadline = 0.0  # time.monotonic() after which an idle thread stops
_stop = threading.Event()
compiled: list[bytes] = []  # the hashes this process compiled ahead, in order
loaded: list[bytes] = []  # the hashes this process read from the disk, in order


def enabled() -> bool:
    """Off with KVAX_PREWARM=0, and while JAX's persistent compilation cache is on: a process
    that loads the step from there needs no kernel compiled (it then lowered 1 s slower with
    the thread on an H200), and the thread's programs would fill that cache."""
    import jax

    cached = jax.config.jax_compilation_cache_dir and jax.config.jax_enable_compilation_cache
    return triton_launch.ahead_switched_on() and not cached


def watch() -> None:
    """Called as one of our Mosaic kernels is traced: from now until the watcher is idle for
    IDLE_S, each new module of ours is compiled as soon as lowering produces it."""
    global _thread, _deadline
    import jax

    mosaic_cache.install()  # names and lowerings kept, on any platform (CUDA lowered on CPU too)
    if jax.default_backend() != "gpu" or not enabled():
        return
    with _lock:
        _deadline = time.monotonic() + IDLE_S
        if _thread is None:  # none, or the last one has stopped (it clears this first)
            _stop.clear()
            _thread = threading.Thread(target=_run, args=(set(_known()),), daemon=True,
                                       name="kvax-prewarm")
            _thread.start()


def ours(module: bytes) -> bool:
    return KERNEL_PREFIX.encode() in module


def _known() -> dict[bytes, bytes]:
    from jax.experimental.mosaic.gpu import core

    return core.KNOWN_KERNELS


def _run(seen: set[bytes]) -> None:
    global _deadline, _thread
    while True:
        with _lock:
            if _stop.is_set() or time.monotonic() > _deadline:
                _thread = None  # under the lock: a watch() from now on starts another
                return
        fresh = [(key, module) for key, module in list(_known().items()) if key not in seen]
        for key, module in fresh:
            seen.add(key)
            if ours(module) and not _stop.is_set():
                load_kernel(key) or compile_kernel(key, module)
                with _lock:
                    _deadline = max(_deadline, time.monotonic() + IDLE_S)
        time.sleep(POLL_S)


def program(key: bytes, module: bytes):
    """A function of no arguments whose program is the kernel's custom call alone, with the
    attributes jax.experimental.mosaic.gpu.core's lowering gives it (no collectives, no custom
    barrier): XLA's compile of it compiles the kernel, as the step's would."""
    import jax

    def call():
        jax.ffi.ffi_call("mosaic_gpu_v2", (), has_side_effect=True)(
            kernel_hash=key, module=module, use_custom_barrier=False,
            skip_device_barrier=False, uses_xla_collective_metadata=False)

    return call


def load_kernel(key: bytes) -> bool:
    """The kernel of hash `key` into jaxlib's cache from kvax's disk cache; True if it was
    there and loaded."""
    try:
        hit = mosaic_cache.load(key)
    except Exception as error:  # a bad entry: compiled again, and the entry rewritten
        _log.debug("kvax: reading a Mosaic kernel from the disk failed: %s", error)
        return False
    if hit:
        loaded.append(key)
    return hit


def compile_kernel(key: bytes, module: bytes) -> bool:
    """Mosaic GPU's compile of one lowered module into jaxlib's kernel cache: a program of its
    custom call alone (the attributes its lowering gives it), compiled, written to kvax's disk
    cache and dropped. True if it compiled."""
    import jax

    try:
        ahead = jax.jit(program(key, module)).lower().compile()
    except Exception as error:  # the step's own compile will meet (and report) any real fault
        _log.debug("kvax: compiling a Mosaic kernel ahead failed: %s", error)
        return False
    compiled.append(key)
    try:
        mosaic_cache.store(key, ahead)
    except Exception as error:  # the next process compiles it again
        _log.debug("kvax: writing a Mosaic kernel to the disk failed: %s", error)
    return True


@atexit.register
def _join() -> None:
    """A kernel compiling when the interpreter exits finishes first."""
    _stop.set()
    thread = _thread
    if thread is not None:
        thread.join(timeout=60)
