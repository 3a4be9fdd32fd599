"""Test helpers for attention kernels: dense reference, packed batches, checkers, fake meshes."""

from kvax_testing.batches import PackedBatch, PackedLayout, packed_batch, packed_layout
from kvax_testing.checks import (CheckReport, Comparison, assert_attention_close,
                                 assert_one_key_rows_exact, check_attention)
from kvax_testing.mesh import FakeDevicesError, fake_mesh, set_fake_cpu_devices
from kvax_testing.reference import (
    DEFAULT_MASK_TERMS,
    PADDING_SEGMENT_ID,
    causal_term,
    document_term,
    mask_terms,
    reference_attention,
    reference_logits,
    reference_mask,
    soft_cap,
    window_term,
)

__all__ = [
    "DEFAULT_MASK_TERMS",
    "PADDING_SEGMENT_ID",
    "CheckReport",
    "Comparison",
    "FakeDevicesError",
    "PackedBatch",
    "PackedLayout",
    "assert_attention_close",
    "assert_one_key_rows_exact",
    "causal_term",
    "check_attention",
    "document_term",
    "mask_terms",
    "fake_mesh",
    "packed_batch",
    "packed_layout",
    "reference_attention",
    "reference_logits",
    "reference_mask",
    "set_fake_cpu_devices",
    "soft_cap",
    "window_term",
]
