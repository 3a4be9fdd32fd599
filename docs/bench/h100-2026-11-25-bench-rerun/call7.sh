source tools/gpu_env.sh
date +%T
timeout -s INT 160 python3 tools/dev/profile_step.py --doc-median 1100 --ids shuffled --num-pad-tokens 1000 --fa3 > $OUT/profile-fa3-lognormal.txt 2>&1; echo "rc $?"
grep -E "^[a-zA-Z].*ms of GPU" $OUT/profile-fa3-lognormal.txt
date +%T
timeout -s INT 160 python3 tools/dev/profile_step.py --num-segments 8 --fa3 > $OUT/profile-fa3-docs8.txt 2>&1; echo "rc $?"
grep -E "^[a-zA-Z].*ms of GPU" $OUT/profile-fa3-docs8.txt
date +%T
