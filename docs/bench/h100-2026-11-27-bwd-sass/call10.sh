source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# the soft cap's and sinks' cost on the changed backward, as the table run measured it (call 7 of
# h100-2026-11-27-table: +4.2% forward, +15.7% forward+backward)
timeout -s INT 330 python3 tools/dev/spike_softcap.py --doc-median 1100 --sinks --layers 8 --rounds 6 --repeats 1 > $OUT/softcap-layers8.txt 2>&1; echo "rc $?"; tail -6 $OUT/softcap-layers8.txt; date +%T
