import jax
import pytest


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def pytest_collection_modifyitems(config, items):
    if on_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (Triton kernels); run on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

