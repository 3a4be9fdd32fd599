source tools/gpu_env.sh
nvidia-smi -L; date +%T
# the sharded suite on both GPUs, and the kernels' fuzz on the second GPU beside it
CUDA_VISIBLE_DEVICES=1 timeout -s INT 300 python3 tools/dev/fuzz.py variants --seeds 0:40 > $OUT/fuzz-variants.txt 2>&1 &
timeout -s INT 240 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist --kvax-mesh-platform gpu -q -n 6 --kvax-report $OUT/h100x2-kvax-dist.md > $OUT/dist.txt 2>&1; echo "dist rc $?"
tail -3 $OUT/dist.txt; date +%T
timeout -s INT 120 python3 tools/dev/fuzz.py sharded --platform gpu --seeds 0:20 > $OUT/fuzz-sharded.txt 2>&1; echo "sharded fuzz rc $?"
tail -3 $OUT/fuzz-sharded.txt; wait; tail -3 $OUT/fuzz-variants.txt; date +%T
# single calls on one GPU, nothing else running: the public call with the masks as arguments
# ("api"), closed over them ("apic"), the kernel alone and FA3
CUDA_VISIBLE_DEVICES=0 timeout -s INT 200 python3 tools/dev/per_call.py --out $OUT/percall --rows 1,0 --configs 64x128x2p --public --turns 30 --bursts 6 > $OUT/percall.txt 2>&1; echo "percall rc $?"
grep -E "alternate|bursts  " $OUT/percall.txt
rm -f $OUT/percall/smi.csv
date +%T
