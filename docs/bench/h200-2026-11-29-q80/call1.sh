# Session 53, call 1 (one H200): the last untried lead of the tuning journal. FA3's
# bidirectional head-dim-128 backward takes 80 queries a step, with dQ computed swapped
# (dQ^T = K^T dS^T); ours takes 64. BackwardConfig(block_q=80, swizzle=32) does the same
# (Mosaic GPU's WGMMA wants K, here the step's 80 queries in dV's and dK's products, a multiple
# of the swizzle's width: 32-byte swizzles). `s32` is 64 queries with 32-byte swizzles, to
# separate the two changes. Forward+backward in turns through the public API, the kernels' PTX
# dumped (for their SASS and spills here: Triton's ptxas and cuobjdump).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL 540 python3 \
  tools/dev/spike_det_bwd.py --layouts bidir16k,docs8bidir,causal1,docs8,lognormal \
  --configs "mosaic det,mosaic nondet" --variant "q80:block_q=80,swizzle=32" \
  --variant "q80nd:block_q=80,swizzle=32,deterministic=0" --variant "s32:swizzle=32" \
  --rounds 3 2>&1 | grep -v "^W0000\|^I0000" > $OUT/1-spike-bwd.txt
echo "rc $? at $SECONDS s"; grep -A30 "^median" $OUT/1-spike-bwd.txt
ls /tmp/dump | grep -c ptx
for f in /tmp/dump/*backward*.ptx; do gzip -c $f > $OUT/$(basename $f).gz; done
