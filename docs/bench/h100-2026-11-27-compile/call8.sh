source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# one machine: cold forward+backward first calls, masks built in the step and apart, both
# backends; then "auto" with XLA's LLVM module split over threads
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for c in "auto" "auto --mask-apart" "triton" "triton --mask-apart"; do
  timeout -s INT 100 $F --backend $c --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? $c: $(tail -1 $OUT/fc.txt)"
done
XLA_FLAGS=--xla_gpu_enable_llvm_module_compilation_parallelism=true timeout -s INT 100 $F --backend auto --out $OUT/fcp > $OUT/fc.txt 2>&1; echo "rc $? auto, LLVM parallel: $(tail -1 $OUT/fc.txt)"
date +%T
