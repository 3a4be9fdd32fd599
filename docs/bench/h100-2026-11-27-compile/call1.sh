source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
CUDA_ROOT=$(python3 -c "from jax._src import lib; print(lib.cuda_path)"); PTXAS=$CUDA_ROOT/bin/ptxas
echo "cuda root $CUDA_ROOT"; $PTXAS --version | tail -2
# cold first calls, one fresh process each, empty caches: forward alone and forward+backward
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for c in "auto --forward-only" "auto" "triton --forward-only" "triton"; do
  timeout -s INT 100 $F --backend $c --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? $c: $(tail -1 $OUT/fc.txt)"
done; date +%T
# the same forward+backward with Mosaic GPU's dumps: the kernels' PTX and ptxas's report
export MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1
mkdir -p /tmp/dump; timeout -s INT 120 $F --out /tmp/fcd > $OUT/fc-dump.txt 2>&1; echo "rc $? dump: $(tail -1 $OUT/fc-dump.txt)"
unset MOSAIC_GPU_DUMP_TO MOSAIC_GPU_DUMP_PTX MOSAIC_GPU_DUMP_PTXAS
ls -la /tmp/dump
# each kernel's PTX through ptxas alone, timed: size, products, and ptxas's share of the compile
for f in /tmp/dump/*.ptx; do
  echo "== $(basename $f): $(wc -l < $f) lines, $(grep -c wgmma.mma_async $f) wgmma, $(grep -c 'ex2.approx' $f) ex2, $(grep -c 'tanh.approx' $f) tanh"
  for o in 3 1; do s=$(date +%s.%N); $PTXAS -arch=sm_90a -O$o $f -o /tmp/k.cubin; e=$(date +%s.%N); echo "  ptxas -O$o: $(python3 -c "print(round($e - $s, 2))") s"; done
done
mkdir -p $OUT/dump; cp /tmp/dump/*.ptxas* $OUT/dump/ 2>/dev/null; for f in /tmp/dump/*.ptx; do gzip -c $f > $OUT/dump/$(basename $f).gz; done; date +%T
# kvax 0.1.0's process chained (--layers), never run before: 8 documents, 4 layers
timeout -s INT 200 python3 tools/bench.py mha_bwd --repeats 1 --peer-timeout 150 --seq-lens 65536 --peers kvax010 --layers 4 --rounds 3 --num-segments 8 --num-pad-tokens 2000 --out /tmp/bo/k > $OUT/bench-kvax010-layers4.txt 2>&1; echo "rc $?"; cp /tmp/bo/k/results.json $OUT/kvax010-layers4-results.json; grep -A6 "allowed pairs" $OUT/bench-kvax010-layers4.txt | head -8; date +%T
