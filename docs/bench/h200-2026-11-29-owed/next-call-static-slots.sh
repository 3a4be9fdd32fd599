# Prepared for the next session (not run): the trial BackwardConfig.static_slots (f52bd33), in
# one process beside the default, on a Hopper GPU. The Mosaic backward's fully visible steps
# run in pairs (mosaic_bwd.parity_steps), each emitted for its ring slot, so that its Q/dO/stats
# buffers, its dS^T slot and their barriers are constants. Session 38 read 7 values spilled
# across each step's softmax (barrier phases, a wgmma descriptor's shared-memory address, dQ's
# store address, ...); the question is whether constant slots free some of them, and what that
# is worth. Bitwise the default's gradients under the interpreter on CPU
# (test_backward_static_slots_interpreted_on_cpu_bitwise_the_default); its Mosaic module
# lowers for CUDA on CPU 0.3-0.4 s slower (1.37 against 1.09 s, a 1000-token step).
# First the kernels' PTX (for their SASS here: Triton's ptxas and cuobjdump, then
# tools/dev/sass_loops.py --count LDL,STL), then forward+backward in turns. About 9 minutes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL 150 python3 \
  tools/dev/spike_det_bwd.py --layouts bidir16k --configs "mosaic det" \
  --variant "static:static_slots=1" --rounds 1 > $OUT/dump.txt 2>&1
echo "rc $? at $SECONDS s"; ls /tmp/dump | head -20
for f in /tmp/dump/*.ptx; do gzip -c $f > $OUT/$(basename $f).gz; done
timeout -s KILL $((560 - SECONDS)) python3 tools/dev/spike_det_bwd.py \
  --layouts bidir16k,docs8,lognormal --configs "mosaic det,mosaic nondet" \
  --variant "static:static_slots=1" --variant "static-nd:static_slots=1,deterministic=0" \
  --rounds 4 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/spike-static-slots.txt
echo "done at $SECONDS s"
