source tools/gpu_env.sh
date +%T
MOSAIC_GPU_DUMP_PTXAS=1 timeout -s INT 260 python3 tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2pc --rows 1,2 --rounds 3 --repeats 10 --fa3 > $OUT/spike.txt 2>&1; echo "rc $?"
grep -E "spill stores" $OUT/spike.txt | grep -v warning | sort | uniq -c
grep -vE "spill|ptxas|^ *$|Compiling|Function prop|bytes gmem|registers" $OUT/spike.txt | tail -40
date +%T
timeout -s INT 280 python3 tools/dev/per_call.py --out $OUT/percall --rows 1,0,2,4 --configs 64x128x2p,64x128x2pc --turns 30 --bursts 8 > $OUT/percall.txt 2>&1; echo "rc $?"
grep -vE "^\s*$" $OUT/percall.txt | tail -40
rm -f $OUT/percall/smi.csv
date +%T
