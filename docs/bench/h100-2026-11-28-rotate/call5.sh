# Call 5 (session 39): the backward's fully visible query tiles rotated per program
# (BackwardConfig.rotate, rotate.patch) against the default, one bidirectional 16k document and
# 8 documents.
set -x
source tools/gpu_env.sh
timeout -s KILL 420 python3 tools/dev/spike_det_bwd.py --layouts bidir16k,docs8 \
  --configs "mosaic det,mosaic nondet" --variant "rot1:rotate=1" --rounds 4 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/5-spike-rotate.txt
