source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# the soft cap's and the sinks' cost on today's code, chained as the table (log-normal, 64k)
timeout -s INT 420 python3 tools/dev/spike_softcap.py --doc-median 1100 --sinks --layers 8 --rounds 10 --repeats 1 > $OUT/softcap-layers8.txt 2>&1; echo "rc $?"; tail -6 $OUT/softcap-layers8.txt; date +%T
