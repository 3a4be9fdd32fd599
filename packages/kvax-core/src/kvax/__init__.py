"""Kvax: document-masked flash attention for JAX (Triton kernels on GPU, pure JAX elsewhere)."""

__version_info__ = (0, 2, 0)
__version__ = ".".join(str(v) for v in __version_info__)

import kvax.nn as nn  # noqa: E402
import kvax.ops as ops  # noqa: E402
import kvax.utils as utils  # noqa: E402

__all__ = ["nn", "ops", "utils", "__version__"]  # `from kvax import *` gives the modules
