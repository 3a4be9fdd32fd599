# Session 65, call 4 (one H200; the session's last ~300 s): head dim 256, as Gemma 2 9B and Gemma 3
# 4B/12B have it (16 query / 8 kv heads), on two packed rows beside FA3, chained as a model's
# layers. No head-dim-256 row had been timed against FA3: there the Mosaic forward runs with
# 64-key tiles and the backward is Triton's (the Mosaic backward covers head dims 64 and 128).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --peer-timeout 100 --seq-lens 65536 --heads 16 --kv-heads 8 --head-dim 256 --peers fa3"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $? at $SECONDS s"; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A5 "allowed pairs" $OUT/bench-$name.txt | head -7; }
run 140 hd256-docs8 --rounds 6 --num-segments 8 --num-pad-tokens 2000
run $((290 - SECONDS)) hd256-lognormal --rounds 6 --num-pad-tokens 1000 --doc-median 1100 --ids shuffled
echo "done at $SECONDS s"
# (ran as call 4; FA3's published build refused head dim 256. Call 5, at once: cuDNN instead)
