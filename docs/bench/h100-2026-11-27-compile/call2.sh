source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# cold first calls on the two-round loops (call 1 had three loops), one fresh process each
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for c in "auto --forward-only" "auto"; do
  timeout -s INT 100 $F --backend $c --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? $c: $(tail -1 $OUT/fc.txt)"
done; date +%T
# two rounds against three loops in one process: compile seconds, then times in turns
S="python3 tools/dev/spike_step_copies.py --rounds 16 --repeats 3"
sp() { t=$1; name=$2; shift 2; timeout -s INT $t $S "$@" > $OUT/spike-$name.txt 2>&1; echo "== $name rc $?"; grep -E "compile|bitwise|\(" $OUT/spike-$name.txt | grep -v "^round"; date +%T; }
sp 150 lognormal --doc-median 1100 --layers 8
sp 150 docs8 --num-segments 8 --layers 8
sp 170 causal1 --num-segments 1 --num-pad-tokens 0 --layers 2
