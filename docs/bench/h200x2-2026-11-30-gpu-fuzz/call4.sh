# Session 59, call 4 (one H200, a fresh machine), the last of the device time: gpu_fuzz again
# after the fix of fuzz.py's stopping (call 3's parent died on timeout's second signal), with
# `variants` cases interrupted mid-run on purpose: the summary and fuzz.py's status must come.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/4-variants.txt 110 variants --seeds 8200:8300 --jobs 12 --time-limit 90
echo "done at $SECONDS s"
