# Call 2 (session 52, one H200, the session's last device time): call 1's forward rounds were
# single calls that spread 5-15% between rounds, too wide for a 2% trial. The forward's static
# consumers ("g") against the default and FA3 per call instead (tools/dev/per_call.py: single
# calls in turn, bursts, queued bursts) on log-normal, 8 documents, the bidirectional 16k
# document and short documents, as many as the time allows.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout -s KILL 320 python3 tools/dev/per_call.py --out $OUT/pc --rows 1,0,5,2 \
  --configs 64x128x2p,64x128x2pg --turns 16 --bursts 6 2>&1 \
  | grep -v "^W0000\|^I0000\|clock samples" > $OUT/2-percall.txt
echo "rc $? at $SECONDS s"; grep "queued\|alternate" $OUT/2-percall.txt
