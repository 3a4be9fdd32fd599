# Session 64, call 4 (one H200): consumer_tiles with its idle steps in loops of their own (the
# masked step no longer inside a cond), after call 3 read +2.8% on short documents and -0.7 to
# -1.0% on the rows without idle steps. Its GPU tests, then call 3's spike again.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -k consumer_tiles -n 3 \
  --kvax-report $OUT/h200-kvax-core-consumer-tiles-loops.md > $OUT/3-pytest.txt 2>&1
echo "pytest rc $?"; tail -n 3 $OUT/3-pytest.txt; echo "at $SECONDS s"
timeout -s INT $((560 - SECONDS)) python3 tools/dev/spike_mosaic.py --rows 2,1,0 --skip-check \
  --layers 8 --configs 64x128x2p,64x128x2pc --rounds 16 --repeats 10 --fa3 2>&1 \
  | grep -v "^[WI]0000 " > $OUT/3-spike.txt
echo "spike rc ${PIPESTATUS[0]}"; grep "median\|FAIL" $OUT/3-spike.txt; echo "done at $SECONDS s"
