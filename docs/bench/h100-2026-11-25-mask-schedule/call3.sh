source tools/gpu_env.sh
date +%T
timeout -s INT 330 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 12 -q -k "document_chunks or test_matches_reference or deterministic_and_padding or auto_picks or bitwise_the_built" --kvax-report $OUT/h100-kvax-core-mosaic-schedule.md > $OUT/suite.txt 2>&1; echo "rc $?"
tail -5 $OUT/suite.txt
date +%T
timeout -s INT 120 python3 tools/dev/profile_step.py --doc-median 1100 --ids shuffled --num-pad-tokens 1000 --fa3 > $OUT/profile-fa3-lognormal.txt 2>&1; echo "rc $?"
grep -E "^[a-zA-Z].*ms of GPU" $OUT/profile-fa3-lognormal.txt
sed -n 1,20p $OUT/profile-fa3-lognormal.txt
date +%T
timeout -s INT 150 python3 tools/dev/per_call.py --out $OUT/percall --rows 1,0 --configs 64x128x2p --public --turns 40 --bursts 8 > $OUT/percall.txt 2>&1; echo "rc $?"
grep -E "alternate|bursts  " $OUT/percall.txt
rm -f $OUT/percall/smi.csv
date +%T
