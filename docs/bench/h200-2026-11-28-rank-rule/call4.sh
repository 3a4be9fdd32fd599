# Call 4 (session 41, 2 H200s, the session's last 5 minutes): kvax-dist's suite on the GPU mesh
# with the rank rule (each query shard's schedule brings rank layouts over the gathered keys).
set -x
source tools/gpu_env.sh
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist \
  --kvax-mesh-platform gpu -q -n 6 --kvax-report $OUT/h200x2-kvax-dist-rank-rule.md \
  > $OUT/4-dist.txt 2>&1; echo "dist rc $?"; tail -3 $OUT/4-dist.txt; echo "at $SECONDS s"
