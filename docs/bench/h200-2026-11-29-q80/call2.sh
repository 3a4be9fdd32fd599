# Session 53, call 2 (one H200). Call 1 (call1.sh, 1-spike-bwd.txt) faulted with a misaligned
# address on the first 80-query kernel (deterministic): its stats' slots were 3 x 80 floats,
# 960 bytes, so the second slot's TMA copy landed off a 128-byte boundary (the interpreter
# checks no alignment). The stats now get a zero row where that happens. Two processes, so that
# a fault in one leaves the other's timings: (A) the defaults, `q80nd` (80 queries a step,
# deterministic=False) and `s32` (64 queries, 32-byte swizzles); (B) the default and `q80`
# (80 queries a step, deterministic). PTX of every backward kernel dumped.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p /tmp/dump
L=bidir16k,causal1,docs8,lognormal
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL 300 python3 \
  tools/dev/spike_det_bwd.py --layouts $L --configs "mosaic det,mosaic nondet" \
  --variant "q80nd:block_q=80,swizzle=32,deterministic=0" --variant "s32:swizzle=32" \
  --rounds 3 2>&1 | grep -v "^W0000\|^I0000\|nvdisasm\|dump.cc" > $OUT/2a-spike-bwd.txt
echo "A rc $? at $SECONDS s"; grep -A20 "^median" $OUT/2a-spike-bwd.txt
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL $((560 - SECONDS)) python3 \
  tools/dev/spike_det_bwd.py --layouts $L --configs "mosaic det" \
  --variant "q80:block_q=80,swizzle=32" \
  --rounds 3 2>&1 | grep -v "^W0000\|^I0000\|nvdisasm\|dump.cc" > $OUT/2b-spike-bwd.txt
echo "B rc $? at $SECONDS s"; grep -A20 "^median" $OUT/2b-spike-bwd.txt
grep -h "bitwise\|max |d\|could not\|Error" $OUT/2a-spike-bwd.txt $OUT/2b-spike-bwd.txt | head -40
for f in /tmp/dump/*backward*.ptx; do gzip -c $f > $OUT/$(basename $f).gz; done
