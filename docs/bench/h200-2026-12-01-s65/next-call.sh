# Prepared in session 65, not run (the session's device time was spent): the Triton backward's
# blocks at head dim 256 (Gemma's shape), where Hopper runs it and forward+backward is 0.57-0.58x
# cuDNN's (calls 4 and 5). At head dim 256 its kernel tiles are at most 64 rows (32 KiB of an
# operand, triton_common.choose_tiles) and 2 stages; a dK/dV program's float32 dK and dV take 128
# registers a thread at 8 warps. Each candidate's gradients are compared with the default's
# (rel_diff); the forward is the default Mosaic one throughout. One H200, about 5 minutes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
for rows in "--num-segments 8 --num-pad-tokens 2000" "--doc-median 1100 --num-pad-tokens 1000"; do
  timeout -s INT 250 python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 $rows \
    --repeats 5 --fwd --bwd 64,128,8,2 64,128,4,2 32,128,8,2 32,128,4,2 64,64,8,2 32,64,4,2 \
    --out $OUT/tune-hd256-$(echo $rows | cut -d' ' -f2).json 2>&1 | grep -v "^[WI]0000 "
done
echo "done at $SECONDS s"
