source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s INT 150 python3 tools/dev/memory_layers.py --layers 1 2 4 > $OUT/memory-layers.txt 2>&1; echo "rc $?"; grep -v "^ " $OUT/memory-layers.txt | tail -14; date +%T
timeout -s INT 60 python3 tools/dev/memory_layers.py --layers 2 --only kvax --dump /tmp/dump > $OUT/memory-dump.txt 2>&1; echo "rc $?"
mkdir -p $OUT/dump; for f in /tmp/dump/*chain*buffer-assignment.txt; do head -c 60000 $f > $OUT/dump/$(basename $f); done; ls -la $OUT/dump; date +%T
timeout -s INT 150 python3 tools/first_call.py --doc-median 1100 --out $OUT/fc-auto > $OUT/first-call-auto.txt 2>&1; echo "rc $?"; tail -6 $OUT/first-call-auto.txt; date +%T
timeout -s INT 120 python3 tools/first_call.py --doc-median 1100 --backend triton --out $OUT/fc-triton > $OUT/first-call-triton.txt 2>&1; echo "rc $?"; tail -6 $OUT/first-call-triton.txt; date +%T
