"""Attention operations."""

from kvax._src.attention.api import create_attention_mask, flash_attention
from kvax._src.attention.mask import AttentionMask

__all__ = ["AttentionMask", "create_attention_mask", "flash_attention"]
