# Session 61, call 4 (call 1's H200): the rest of the session's device time on variants fuzz
# (from seed 8700; call 2 ran 8300-8700) with the new launch layer.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/4-variants.txt 420 variants --seeds 8700:9300 --jobs 8 --time-limit 380
echo "done at $SECONDS s"
