# Session 64, call 2 (one H200): MosaicConfig.consumer_tiles (a trial, off by default), each
# consumer of the Hopper forward computing only the masked key tiles its own 64 rows meet.
# Its GPU tests first (bitwise the default kernel, against the reference), then the spike on
# short documents (7.7% of consumer steps idle there), log-normal and 8 documents (no idle step:
# document chunks), the default beside it and FA3, 8 rounds in turn.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -k consumer_tiles -n 3 \
  --kvax-report $OUT/h200-kvax-core-consumer-tiles.md > $OUT/1-pytest.txt 2>&1
echo "pytest rc $?"; tail -n 3 $OUT/1-pytest.txt; echo "at $SECONDS s"
timeout -s INT $((560 - SECONDS)) python3 tools/dev/spike_mosaic.py --rows 2,1,0 \
  --configs 64x128x2p,64x128x2pc --rounds 8 --fa3 2>&1 | grep -v "^[WI]0000 " > $OUT/1-spike.txt
echo "spike rc ${PIPESTATUS[0]}"; grep -v "round" $OUT/1-spike.txt | tail -30; echo "done at $SECONDS s"
