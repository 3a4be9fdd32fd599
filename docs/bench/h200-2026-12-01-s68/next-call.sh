# Prepared in session 68, not run. One H200, about 6 minutes. Is the head-dim-256 backward held
# by dQ's TMA reduce-adds? At 256 a step adds 64 KiB of dQ (64 queries x 256 channels, 4 bytes)
# for the same products as a step at 128, which adds 32 KiB; at about 4.4 us a step on 132 SMs
# that is near 2 TB/s of reduce-adds. no-dq-add.patch (applied here, on the device's copy only)
# gives BackwardConfig a dq_add field; dq_add=0 leaves the adds out (dQ wrong, timing only).
# tune.py times it beside the default in one process, at 256 and, for the comparison, at 128.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
git apply docs/bench/h200-2026-12-01-s68/no-dq-add.patch || exit 1
for rows in "--head-dim 256 --heads 16 --num-segments 8 --num-pad-tokens 2000" \
            "--head-dim 256 --heads 16 --doc-median 1100 --num-pad-tokens 1000" \
            "--head-dim 128 --heads 32 --num-segments 8 --num-pad-tokens 2000"; do
  timeout -s INT 150 python3 tools/dev/tune.py --kv-heads 8 $rows --repeats 5 --fwd --bwd \
    --bwd-config dq_add=0 stages=2 --out $OUT/tune-noadd-$(echo $rows | cut -d' ' -f2,6 \
    | tr ' ' -).json 2>&1 | grep "^{\|pairs\|Error"
  echo "at $SECONDS s"
done
git apply -R docs/bench/h200-2026-12-01-s68/no-dq-add.patch
