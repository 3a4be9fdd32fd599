# Session 68 call 4: head dim 256 (16 / 8 heads) beside cuDNN on the rows session 67 left out:
# log-normal documents (median 1100) with shuffled ids (cuDNN's packed path ran out of memory
# there in session 66; reported, not hidden), and one bidirectional 16k document. One H200.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --peer-timeout 100 --heads 16 --kv-heads 8 --head-dim 256"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $? at $SECONDS s"; grep -A5 "allowed pairs" $OUT/bench-$name.txt | head -7; }
run 150 hd256-lognormal-shuffled-cudnn --rounds 3 --seq-lens 65536 --doc-median 1100 \
  --num-pad-tokens 1000 --ids shuffled --peers cudnn_packed
run $((330 - SECONDS)) hd256-bidir16k-cudnn --rounds 3 --seq-lens 16384 --num-segments 1 \
  --num-pad-tokens 0 --bidirectional --peers cudnn
