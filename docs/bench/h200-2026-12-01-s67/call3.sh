# Session 67 call 3: the channel split made head dim 256's backward in the API (chosen_config).
# The GPU tests at head dim 256 through the API, then head dim 256 beside cuDNN on session 65's
# rows (8 documents: its packed path; one causal document), then the split's 64x64 dK/dV mask
# against the default 128x64 on short log-normal documents. One H200.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 250 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core \
  -k "256 or channel_split" -n 8 --kvax-report $OUT/h200-kvax-core-hd256.md > $OUT/pytest3.txt 2>&1
echo "pytest rc $? at $SECONDS s"; tail -3 $OUT/pytest3.txt
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --peer-timeout 100 --seq-lens 65536 --heads 16 --kv-heads 8 --head-dim 256"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $? at $SECONDS s"; grep -A5 "allowed pairs" $OUT/bench-$name.txt | head -7; }
run 110 hd256-docs8-cudnn --rounds 4 --num-segments 8 --num-pad-tokens 2000 --peers cudnn_packed
run 120 hd256-doc1-cudnn --rounds 4 --num-segments 1 --num-pad-tokens 0 --peers cudnn
timeout -s INT $((540 - SECONDS)) python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 \
  --doc-median 300 --num-pad-tokens 1000 --repeats 5 --fwd --bwd 64,64,8,2 \
  --out $OUT/tune3-300.json 2>&1 | grep "^{\|pairs\|Error"
echo "done at $SECONDS s"
