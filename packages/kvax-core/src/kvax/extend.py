"""The surface for libraries that build on kvax-core (kvax-dist uses nothing else).

- Single-device pieces, for running Kvax inside shard_map or another mapping:
  `create_attention_mask_local`, `flash_attention_local`, `AttentionMask`, `MaskVariant`,
  `make_variant`, `as_int32` and the argument checks in `validate`.
- Backends: subclass `Backend` and `register_backend(...)` it; "auto" tries backends by priority
  and skips one whose `check` (the arrays) or `check_call` (the forward block sizes) raises
  NotImplementedError. Built in: "mosaic" (Hopper), "triton", "xla".
- Sharded attention: a package registers its implementation with `register_sharded` when
  imported, and declares itself under the entry-point group `SHARDED_ENTRY_POINT_GROUP`, through
  which kvax-core finds it (kvax-core never imports it by name).
"""

from kvax._src.attention import validate
from kvax._src.attention.api import as_int32, create_attention_mask_local, flash_attention_local
from kvax._src.attention.backends import Backend
from kvax._src.attention.backends import names as backend_names
from kvax._src.attention.backends import register as register_backend
from kvax._src.attention.mask import AttentionMask
from kvax._src.attention.variant import MaskVariant, make_variant
from kvax._src.sharded import GROUP as SHARDED_ENTRY_POINT_GROUP
from kvax._src.sharded import register as register_sharded

__all__ = [
    "AttentionMask",
    "Backend",
    "MaskVariant",
    "SHARDED_ENTRY_POINT_GROUP",
    "as_int32",
    "backend_names",
    "create_attention_mask_local",
    "flash_attention_local",
    "make_variant",
    "register_backend",
    "register_sharded",
    "validate",
]
