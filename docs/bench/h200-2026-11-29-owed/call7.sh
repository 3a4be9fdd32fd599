# Session 52, call 7 (prepared in session 51): what soft-capping and sinks cost at today's kernels on
# a Hopper GPU, chained as the benchmark's table (log-normal documents, 64k; then 8 documents), as
# ../h100-2026-11-27-table/call7.sh measured them on an H100 in session 34. The README's cap
# cost (issue #13: forward+backward +15%, the goal 10%) is that H100 reading; no H200 has timed
# it. About 8 minutes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader; date +%T
timeout -s INT 300 python3 tools/dev/spike_softcap.py --doc-median 1100 --sinks --layers 8 \
  --rounds 10 --repeats 1 > $OUT/softcap-lognormal-layers8.txt 2>&1
echo "rc $?"; tail -8 $OUT/softcap-lognormal-layers8.txt; date +%T
timeout -s INT $((540 - SECONDS)) python3 tools/dev/spike_softcap.py --layers 8 --rounds 8 \
  --repeats 1 > $OUT/softcap-docs8-layers8.txt 2>&1
echo "rc $?"; tail -6 $OUT/softcap-docs8-layers8.txt; date +%T
