source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# the public API against the float64 reference on fresh seeds, on the kernels of session 34 (its
# backward step work), 8 processes; no new case after 230 s
timeout -s INT 330 python3 tools/dev/fuzz.py variants --platform gpu --seeds 400:520 --jobs 8 --time-limit 230 > $OUT/fuzz-variants.txt 2>&1; echo "fuzz rc $?"; tail -4 $OUT/fuzz-variants.txt; date +%T
