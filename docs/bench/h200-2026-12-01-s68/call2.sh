# Session 68 call 2: two orders of the head-dim-256 backward's grad products (BackwardConfig's
# trial flags dq_early, dq_halves), each beside the default in one process (tune.py --bwd-config;
# stages=2 is the default timed again, last, for the drift). Deterministic dQ (the API's), so
# dq_early must match the default bitwise (rel_diff 0). One H200.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
for rows in "--num-segments 8 --num-pad-tokens 2000" "--doc-median 1100 --num-pad-tokens 1000" \
            "--doc-median 300 --num-pad-tokens 1000"; do
  timeout -s INT 170 python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 $rows \
    --repeats 5 --fwd --bwd --bwd-config dq_early=1 dq_halves=1 stages=2 \
    --out $OUT/tune-$(echo $rows | cut -d' ' -f2).json 2>&1 | grep "^{\|pairs\|Error"
  echo "at $SECONDS s"
done
