# Session 68 call 5 (typed into the run, kept here as the record): head dim 256, soft cap 30,
# 8 documents, beside FlexAttention with the same score_mod (the one peer with a soft cap). One
# H200, warm from call 4.
source tools/gpu_env.sh; timeout -s INT 200 python3 tools/bench.py mha_bwd --repeats 1 --layers 8 \
  --peer-timeout 150 --heads 16 --kv-heads 8 --head-dim 256 --rounds 2 --seq-lens 65536 \
  --num-segments 8 --num-pad-tokens 2000 --logits-soft-cap 30 --peers flex --out /tmp/bo/x \
  > $OUT/bench-hd256-docs8-cap30-flex.txt 2>&1; echo "rc $?"
grep -A6 "allowed pairs" $OUT/bench-hd256-docs8-cap30-flex.txt | head -8
