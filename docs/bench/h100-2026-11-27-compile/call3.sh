source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# flat (head_rounds) / nested / three loops in one process: compile seconds, then times in turns
S="python3 tools/dev/spike_step_copies.py --repeats 3"
sp() { t=$1; name=$2; shift 2; timeout -s INT $t $S "$@" > $OUT/spike-$name.txt 2>&1; echo "== $name rc $?"; grep -E "compile|bitwise|\(" $OUT/spike-$name.txt | grep -v "^round"; date +%T; }
sp 150 lognormal --doc-median 1100 --layers 8 --rounds 16
sp 170 docs8 --num-segments 8 --layers 8 --rounds 12
sp 200 causal1 --num-segments 1 --num-pad-tokens 0 --layers 2 --rounds 10
