source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi -L; date +%T
# the forward reading the mask's layouts: the Mosaic suite's forward tests on GPU 0 and the
# sharded suite on both GPUs, side by side
CUDA_VISIBLE_DEVICES=0 timeout -s INT 330 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 10 -q -k "document_chunks or test_matches_reference or deterministic_and_padding or auto_picks or persistent or bitwise_the_built" --kvax-report $OUT/gpu/h200-kvax-core-mosaic-mask-layouts.md > $OUT/suite.txt 2>&1 &
timeout -s INT 300 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist --kvax-mesh-platform gpu -q -n 4 --kvax-report $OUT/gpu/h200x2-kvax-dist.md > $OUT/dist.txt 2>&1; echo "dist rc $?"
wait; echo "suite done"; tail -3 $OUT/suite.txt; tail -2 $OUT/dist.txt; date +%T
CUDA_VISIBLE_DEVICES=0 timeout -s INT 200 python3 tools/dev/per_call.py --out $OUT/percall --rows 1,0 --configs 64x128x2p --public --turns 30 --bursts 6 > $OUT/percall.txt 2>&1; echo "percall rc $?"
grep -E "alternate|bursts  " $OUT/percall.txt
rm -f $OUT/percall/smi.csv
date +%T
