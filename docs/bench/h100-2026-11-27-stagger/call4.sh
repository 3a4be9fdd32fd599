source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# cold first calls again, masks built in the step from positions and ids passed as arguments,
# the Mosaic and Triton kernels in alternation, one fresh process each
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for c in triton auto triton auto; do
  timeout -s INT 60 $F --backend $c --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? $c: $(tail -1 $OUT/fc.txt)"
done; date +%T
# the sharded suite through the kernels on two GPUs (last run before session 32's forward loop)
timeout -s INT 250 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist --kvax-mesh-platform gpu -q -n 4 --kvax-report $OUT/gpu/x2-kvax-dist.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -2 $OUT/suite.txt; grep incomplete $OUT/gpu/*.md; date +%T
