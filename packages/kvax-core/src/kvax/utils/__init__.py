"""Configuration and constants; sharding helpers come from kvax-dist when it is installed."""

from kvax._src.config import PADDING_SEGMENT_ID, FlashAttentionParamsConfig, default_params

_FROM_DIST = ("attention_specs", "permute_tokens_context_parallelism",
              "unpermute_tokens_context_parallelism")

__all__ = ["FlashAttentionParamsConfig", "PADDING_SEGMENT_ID", "default_params", *_FROM_DIST]


def __getattr__(name):
    if name in _FROM_DIST:
        from kvax._src import sharded

        return getattr(sharded.load(f"kvax.utils.{name}"), name)
    raise AttributeError(f"module 'kvax.utils' has no attribute {name!r}")
