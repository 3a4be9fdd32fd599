# Session 66, call 1: session 65's next-call.sh as it was prepared (Triton backward blocks at head
# dim 256).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
for rows in "--num-segments 8 --num-pad-tokens 2000" "--doc-median 1100 --num-pad-tokens 1000"; do
  timeout -s INT 250 python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 $rows \
    --repeats 5 --fwd --bwd 64,32,8,2 16,128,8,2 16,64,8,2 32,32,4,2 32,128,8,2 64,64,8,2 \
    --out $OUT/tune-hd256-$(echo $rows | cut -d' ' -f2).json 2>&1 | grep -v "^[WI]0000 "
done
echo "done at $SECONDS s"
