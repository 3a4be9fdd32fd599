# Session 52, call 6 (prepared in session 51): the trials BackwardConfig.static_slots (f52bd33) and
# static_consumers (e038680), both off by default, in one process beside the default, on a Hopper
# GPU. static_slots runs the Mosaic backward's fully visible steps in pairs
# (mosaic_bwd.parity_steps), each emitted for its ring slot, so that its Q/dO/stats buffers, its
# dS^T slot and their barriers are constants; static_consumers emits each consumer
# warpgroup's code apart, so that its keys', values', dS^T rows' and dQ buffer's addresses are
# constants. Session 38 read 7 values spilled across each step's softmax (barrier phases, a
# wgmma descriptor's shared-memory address, dQ's store address, ...): do constants free some,
# and what is that worth? Both are bitwise the default's gradients under the interpreter on CPU
# (test_backward_static_slots_interpreted_on_cpu_bitwise_the_default). Their Mosaic modules
# lower for CUDA on CPU in 1.4-1.7 s (slots), 1.9-2.3 s (consumers) and 3.4-3.8 s (both)
# against 0.9-1.3 s (lower_static.py here, two runs: a 1000-token and a 513-token step;
# lower_static.txt), so a default would have to pay for its compile time.
# First the kernels' PTX on the bidirectional 16k row (for their SASS here: Triton's ptxas and
# cuobjdump, then tools/dev/sass_loops.py --count LDL,STL), then forward+backward in turns on
# the bidirectional 16k document and 8 causal documents. About 9 minutes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL 170 python3 \
  tools/dev/spike_det_bwd.py --layouts bidir16k --configs "mosaic det" \
  --variant "slots:static_slots=1" --variant "cons:static_consumers=1" \
  --variant "both:static_slots=1,static_consumers=1" --rounds 1 > $OUT/dump.txt 2>&1
echo "rc $? at $SECONDS s"; ls -la /tmp/dump | head -20
for f in /tmp/dump/*.ptx; do gzip -c $f > $OUT/$(basename $f).gz; done
timeout -s KILL $((570 - SECONDS)) python3 tools/dev/spike_det_bwd.py \
  --layouts bidir16k,docs8 --configs "mosaic det,mosaic nondet" \
  --variant "slots:static_slots=1" --variant "cons:static_consumers=1" \
  --variant "both:static_slots=1,static_consumers=1" \
  --variant "both-nd:static_slots=1,static_consumers=1,deterministic=0" \
  --rounds 4 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/spike-static.txt
echo "done at $SECONDS s"
