# Session 66, call 3 (one H200): head dim 256 on log-normal documents beside cuDNN's packed path
# (session 65 timed that row without a peer), then default backward blocks against 64x64 on two
# more rows (one causal document; short log-normal ones), as calls 1-2 did on 8 documents and
# log-normal ones, then fresh `variants` and `mosaic` fuzz seeds for what is left.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --peer-timeout 100 --seq-lens 65536 --heads 16 --kv-heads 8 --head-dim 256"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $? at $SECONDS s"; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A5 "allowed pairs" $OUT/bench-$name.txt | head -7; }
run 190 hd256-lognormal-cudnn --rounds 4 --num-pad-tokens 1000 --doc-median 1100 --ids shuffled --peers cudnn_packed
for rows in "--num-segments 1 --num-pad-tokens 0" "--doc-median 300 --num-pad-tokens 1000"; do
  timeout -s INT 100 python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 $rows \
    --repeats 5 --fwd --bwd 64,64,8,2 \
    --out $OUT/tune-hd256-$(echo $rows | cut -d' ' -f2).json 2>&1 | grep "^{\|pairs\|Error"
  echo "at $SECONDS s"
done
left=$((530 - SECONDS))
gpu_fuzz $OUT/3-variants.txt $left variants --seeds 16100:17000 --jobs 4 --time-limit $((left - 50)) &
gpu_fuzz $OUT/3-mosaic.txt $left mosaic --seeds 5600:6600 --jobs 3 --time-limit $((left - 50)) &
wait
echo "done at $SECONDS s"
