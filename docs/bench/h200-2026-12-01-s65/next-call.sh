# Prepared in session 65, not run (the session's device time was spent): the Triton backward's
# blocks at head dim 256 (Gemma's shape), where Hopper runs it and forward+backward is 0.57-0.58x
# cuDNN's (calls 4 and 5). At head dim 256 its kernel tiles are at most 64 rows (32 KiB of an
# operand, triton_common.choose_tiles) and 2 stages; a dK/dV program's float32 dK and dV take 128
# registers a thread at 8 warps. Built for sm_90a on CPU (ptxas -v, session 65's README here), the
# default blocks spill 820 bytes a thread at head dim 256; 64x32 at 8 warps 24, 16x128 at 8 warps
# 44, 16x64 at 8 warps 56, 32x32 at 4 warps 80, 32x128 at 8 warps 184. Each candidate's gradients
# are compared with the default's (rel_diff); the forward is the default Mosaic one throughout.
# One H200, about 5 minutes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
for rows in "--num-segments 8 --num-pad-tokens 2000" "--doc-median 1100 --num-pad-tokens 1000"; do
  timeout -s INT 250 python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 $rows \
    --repeats 5 --fwd --bwd 64,32,8,2 16,128,8,2 16,64,8,2 32,32,4,2 32,128,8,2 64,64,8,2 \
    --out $OUT/tune-hd256-$(echo $rows | cut -d' ' -f2).json 2>&1 | grep -v "^[WI]0000 "
done
echo "done at $SECONDS s"
