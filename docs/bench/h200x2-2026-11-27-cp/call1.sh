source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi -L; date +%T
# kvax-dist's sharded suite through the kernels, on the changed Mosaic backward
timeout -s INT 300 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist --kvax-mesh-platform gpu -q -n 4 --kvax-report $OUT/gpu/kvax-dist.md > $OUT/dist.txt 2>&1; echo "dist rc $?"; tail -2 $OUT/dist.txt; date +%T
# context parallelism with the masks and layout as arguments (bench_cp.py since session 33)
timeout -s INT 230 python3 tools/bench.py mha_cp_bwd --doc-len 32768 --num-pad-tokens 2000 --repeats 3 --permute-tokens-for-load-balance striped --seq-lens 131072 --cp-sizes 1 2 --out /tmp/cp > $OUT/cp-striped.log 2>&1; echo "cp rc $?"; cp /tmp/cp/cp_results.jsonl $OUT/ 2>/dev/null; grep "cp=\|shards" $OUT/cp-striped.log; date +%T
