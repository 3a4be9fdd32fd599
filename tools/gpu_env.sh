# Source on the GPU machine (from the repository root): our sources and carried wheels on the path.
# The machine has jax, jaxlib, the CUDA plugin, triton, torch; jax-triton (and kvax 0.1.0 and
# flash-attn3-jax for comparisons) travel as wheels in .whl/ (see README, "Running on the GPU
# machine").
# The original kvax is also called `kvax`: it goes to its own folder, used only by the benchmark's
# separate process for it (tools/peers.py).
rm -rf /tmp/site /tmp/kvax010  # a warm machine keeps what the last call installed
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/jax_triton-*.whl || return 1
if ls .whl/flash_attn3_jax-*.whl >/dev/null 2>&1; then  # FlashAttention-3 for JAX (Hopper)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/flash_attn3_jax-*.whl || return 1
fi
if ls .whl/kvax-0.1.0-*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/kvax010 .whl/kvax-0.1.0-*.whl || return 1
fi
export PYTHONPATH=/tmp/site:$PWD/packages/kvax-core/src:$PWD/packages/kvax-dist/src:$PWD/packages/kvax-testing/src:$PWD
export USER=${USER:-root} LOGNAME=${LOGNAME:-root} HOME=/tmp TRITON_HOME=/tmp/th TRITON_CACHE_DIR=/tmp/tc TORCHINDUCTOR_CACHE_DIR=/tmp/ti
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
export TORCHINDUCTOR_COMPILE_THREADS=1  # inductor's worker pool lost the Triton cache dir here
mkdir -p /tmp/th /tmp/tc /tmp/ti

# gpu_fuzz LOG SECONDS FUZZ_ARGS...: tools/dev/fuzz.py with FUZZ_ARGS, interrupted after SECONDS
# (killed 30 s later if it is still running), XLA's log lines dropped, into LOG. Prints fuzz.py's
# own exit status (0: no case failed; 137: killed, no summary), its summary and any failure.
gpu_fuzz() {
  local log=$1 seconds=$2; shift 2
  timeout --preserve-status -s INT -k 30 "$seconds" python3 tools/dev/fuzz.py "$@" 2>&1 \
    | grep -v "^[WI]0000 " > "$log"
  local rc=${PIPESTATUS[0]}
  echo "fuzz $* -> $(basename "$log"): rc $rc, $(grep -c '^ok' "$log") ok"
  grep -v "^ok\|^stop" "$log" | tail -8
}
