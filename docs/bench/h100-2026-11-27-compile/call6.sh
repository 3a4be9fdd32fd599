source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# the masks built by a jitted call of their own, passed to the step: the step's XLA compile is
# then the kernels' and the XLA work around them; mask_s is the masks' own first call
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for c in "auto --forward-only --mask-apart" "auto --mask-apart" "triton --mask-apart" "auto --forward-only"; do
  timeout -s INT 100 $F --backend $c --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? $c: $(tail -1 $OUT/fc.txt)"
done; date +%T
