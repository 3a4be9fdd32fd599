"""The one place where kvax-core finds sharded attention (the kvax-dist package).

kvax-core has no import of kvax-dist: kvax-dist declares itself under the entry-point group
"kvax.sharded", and importing it registers the implementation here (kvax.extend.register_sharded).
A source checkout on PYTHONPATH has no entry points: then the module named SOURCE_FALLBACK is
imported if it can be found.
The implementation is a module or object with create_attention_mask, flash_attention,
specs_active and the helpers kvax.utils re-exports.
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib import metadata

GROUP = "kvax.sharded"
SOURCE_FALLBACK = "kvax_dist"
_impl = None


def register(impl) -> None:
    global _impl
    _impl = impl


def load(purpose: str):
    """The registered implementation, loading the installed one if needed; ImportError naming
    `purpose` when none is installed."""
    if _impl is None:
        for entry in metadata.entry_points(group=GROUP):
            entry.load()  # importing it registers it
    if _impl is None and importlib.util.find_spec(SOURCE_FALLBACK) is not None:
        importlib.import_module(SOURCE_FALLBACK)
    if _impl is None:
        raise ImportError(f"{purpose} needs sharded attention, which lives in the kvax-dist "
                          "package: install kvax-dist beside kvax-core")
    return _impl


def for_call(mesh):
    """The implementation when a call must run sharded (a mesh given, or attention_specs active),
    else None."""
    if mesh is None and (_impl is None or not _impl.specs_active()):
        return None
    return load("mesh=")
