# Session 67 call 4: the 8 of call 3's 36 head-dim-256 selected GPU tests that its time limit
# cut (channel split fixed-default; test_either_rule_matches_reference, with the 5 of its
# head-dim-256 and 256x64 cases that ran). One H200.
source tools/gpu_env.sh
timeout -s INT 230 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -k "(either_rule and 256) or (channel_split and fixed-default)" \
  -n 8 --kvax-report $OUT/h200-kvax-core-hd256-rest.md > $OUT/pytest4.txt 2>&1
echo "pytest rc $? at $SECONDS s"; tail -3 $OUT/pytest4.txt
