import jax
import pytest

from kvax.utils import FlashAttentionParamsConfig


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def pytest_collection_modifyitems(config, items):
    if on_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (Triton kernels); run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# The backends every correctness test runs on: the pure-JAX path everywhere, the kernels on a GPU.
BACKENDS = [pytest.param("xla", id="xla"), pytest.param("triton", id="triton", marks=pytest.mark.gpu)]

SMALL = FlashAttentionParamsConfig(query_block_size=32, kv_block_size=16, num_warps=4, num_stages=2)
