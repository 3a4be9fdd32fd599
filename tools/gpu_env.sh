# Source on the GPU machine (from the repository root): our sources and carried wheels on the path.
# The machine has jax, jaxlib, the CUDA plugin, triton, torch; jax-triton (and kvax 0.1.0 for
# comparisons) travel as wheels in .whl/ (see README, "Running on the GPU machine").
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD/packages/kvax-core/src:$PWD/packages/kvax-dist/src:$PWD/packages/kvax-testing/src:$PWD
export HOME=/tmp TRITON_HOME=/tmp/th TRITON_CACHE_DIR=/tmp/tc TORCHINDUCTOR_CACHE_DIR=/tmp/ti
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
export TRITON_ALLOW_NON_CONSTEXPR_GLOBALS=1  # only the original kvax 0.1.0 needs it
mkdir -p /tmp/th /tmp/tc /tmp/ti
