source tools/gpu_env.sh
date +%T
timeout -s INT 60 python3 .whl/fwd_hlo.py; echo "rc $?"
timeout -s INT 150 python3 tools/dev/profile_step.py --doc-median 1100 --ids shuffled --num-pad-tokens 1000 --fa3 > $OUT/profile-fa3-lognormal.txt 2>&1; echo "rc $?"
grep -E "^[a-zA-Z].*ms of GPU" $OUT/profile-fa3-lognormal.txt
date +%T
timeout -s INT 300 python3 tools/dev/per_call.py --out $OUT/percall --rows 1,0,2 --configs 64x128x2p --public --turns 40 --bursts 8 > $OUT/percall.txt 2>&1; echo "rc $?"
grep -E "alternate|bursts  " $OUT/percall.txt
rm -f $OUT/percall/smi.csv
date +%T
