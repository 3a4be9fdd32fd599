# Session 65, call 5 (one H200): call 4's 8-document row at head dim 256 beside cuDNN (its packed
# path through jax.nn, and is_causal on one document), since FA3's build has head dim 128 only.
source tools/gpu_env.sh
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --peer-timeout 100 --seq-lens 65536 --heads 16 --kv-heads 8 --head-dim 256"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $? at $SECONDS s"; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A5 "allowed pairs" $OUT/bench-$name.txt | head -7; }
run 110 hd256-docs8-cudnn --rounds 4 --num-segments 8 --num-pad-tokens 2000 --peers cudnn_packed
run $((190 - SECONDS)) hd256-doc1-cudnn --rounds 4 --num-segments 1 --num-pad-tokens 0 --peers cudnn
echo "done at $SECONDS s"
