"""Shared parameters of kvax-core's tests (a uniquely named module, imported by the tests)."""

import pytest

from kvax.utils import FlashAttentionParamsConfig

# The backends every correctness test runs on: the pure-JAX path everywhere, the kernels on a GPU.
BACKENDS = [pytest.param("xla", id="xla"),
            pytest.param("triton", id="triton", marks=pytest.mark.gpu)]

SMALL = FlashAttentionParamsConfig(query_block_size=32, kv_block_size=16, num_warps=4, num_stages=2)
