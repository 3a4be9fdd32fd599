source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# cold forward+backward first calls with the masks built in the step, under XLA flags that may
# bear on the masks' compile there; the plain one first and last
F="python3 tools/first_call.py --doc-median 1100 --processes 1 --backend auto"
for flags in "" "--xla_gpu_autotune_level=0" "--xla_gpu_enable_command_buffer=" "--xla_gpu_enable_latency_hiding_scheduler=false" ""; do
  XLA_FLAGS="$flags" timeout -s INT 100 $F --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? [$flags]: $(tail -1 $OUT/fc.txt)"
done; date +%T
