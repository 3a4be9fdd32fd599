# Session 68 call 3: what the soft cap costs at head dim 256 (Gemma's shape, 16 / 8 heads), now
# that the backward there is the Mosaic channel split: spike_softcap.py, no cap and c = 30 in one
# process, 8 chained calls, on 8 documents and on log-normal ones (median 1100, shuffled ids).
# One H200.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
shape="--head-dim 256 --heads 16 --kv-heads 8 --layers 8 --rounds 3 --repeats 5 --caps 30"
timeout -s INT 250 python3 tools/dev/spike_softcap.py $shape 2>&1 | grep -v "^[WIE]1[0-9]* " \
  | grep -v "^ \|^$\|XLA\|bug\|fold" | tail -12
echo "at $SECONDS s"
timeout -s INT $((520 - SECONDS)) python3 tools/dev/spike_softcap.py $shape --doc-median 1100 \
  2>&1 | grep -v "^[WIE]1[0-9]* " | grep -v "^ \|^$\|XLA\|bug\|fold" | tail -12
echo "at $SECONDS s"
