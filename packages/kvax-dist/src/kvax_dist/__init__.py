"""kvax-dist: sharded Kvax attention (data, tensor and all-gather context parallelism).

With it installed, kvax.ops.create_attention_mask and kvax.ops.flash_attention run sharded inside
`attention_specs(...)` (or when given mesh=), and kvax.utils re-exports the helpers below.
"""

import sys

from kvax.extend import register_sharded
from kvax_dist.ops import create_attention_mask, flash_attention
from kvax_dist.permutation import (
    permute_tokens_context_parallelism,
    unpermute_tokens_context_parallelism,
)
from kvax_dist.specs import AttentionSpecs, attention_specs, get_attention_specs, specs_active

register_sharded(sys.modules[__name__])  # kvax.ops and kvax.utils reach us through this

__all__ = [
    "AttentionSpecs",
    "attention_specs",
    "create_attention_mask",
    "flash_attention",
    "get_attention_specs",
    "permute_tokens_context_parallelism",
    "specs_active",
    "unpermute_tokens_context_parallelism",
]
