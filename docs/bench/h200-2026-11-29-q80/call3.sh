# Session 53, call 3 (one H200): call 2 read 32-byte swizzles 1.5-3.6% slower than the default's
# 128-byte ones in the backward; session 36 had read 64-byte ones level (-0.7 to -1.1%) inside
# its split kernels. `s64`: the default backward with 64-byte swizzles (BackwardConfig.swizzle,
# a trial field), 6 rounds in turn on four rows, both dQ modes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout -s KILL 560 python3 tools/dev/spike_det_bwd.py \
  --layouts bidir16k,docs8,lognormal,causal1 --configs "mosaic det,mosaic nondet" \
  --variant "s64:swizzle=64" --variant "s64nd:swizzle=64,deterministic=0" \
  --rounds 6 2>&1 | grep -v "^W0000\|^I0000" > $OUT/3-spike-bwd.txt
echo "rc $? at $SECONDS s"; grep -A20 "^median" $OUT/3-spike-bwd.txt
grep -h "bitwise\|could not" $OUT/3-spike-bwd.txt
