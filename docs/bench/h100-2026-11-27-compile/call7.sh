source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# each part of create_attention_mask compiled in a fresh process (64k tokens, log-normal documents)
timeout -s INT 200 python3 tools/dev/mask_compile.py --part all > $OUT/mask-compile.txt 2>&1; echo "rc $?"; cat $OUT/mask-compile.txt | tail -12; date +%T
