# Prepared in session 67, not run (its device time was spent): fresh fuzz seeds through the
# kernels, now that head dim 256's backward is the Mosaic channel split. `mosaic` draws head dim
# 256 in a quarter of its cases (fuzz.py mosaic_case), so it takes most of the processes;
# `variants` (head dims up to 128) keeps the rest. One H200, about 9 minutes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_fuzz $OUT/mosaic.txt 520 mosaic --seeds 6300:7800 --jobs 5 --time-limit 470 &
gpu_fuzz $OUT/variants.txt 520 variants --seeds 16800:17700 --jobs 2 --time-limit 470 &
wait
echo "done at $SECONDS s"
