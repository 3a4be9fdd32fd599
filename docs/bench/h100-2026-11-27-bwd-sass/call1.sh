source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
# the backward kernels' PTX (default, deterministic=False, soft cap 30), one process and dump
# folder each, for their SASS beside FA3's backward (cuobjdump of its wheel)
S="python3 tools/dev/spike_det_bwd.py --layouts causal1 --rounds 1 --repeats 1"
for c in "det:mosaic det:" "nondet:mosaic nondet:" "cap:mosaic det:--cap 30"; do
  IFS=: read name config extra <<< "$c"
  mkdir -p /tmp/dump-$name
  MOSAIC_GPU_DUMP_TO=/tmp/dump-$name MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 \
    timeout -s INT 120 $S --configs "$config" $extra > $OUT/dump-$name.txt 2>&1; echo "rc $? $name"
  mkdir -p $OUT/$name; for f in /tmp/dump-$name/*.ptx; do gzip -c $f > $OUT/$name/$(basename $f).gz; done
  cp /tmp/dump-$name/*.ptxas* $OUT/$name/ 2>/dev/null; ls -la $OUT/$name
done; date +%T
# the baseline on this machine: forward+backward, default and deterministic=False
timeout -s INT 200 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal --configs "mosaic det,mosaic nondet" --rounds 3 > $OUT/spike.txt 2>&1; echo "rc $?"; tail -5 $OUT/spike.txt; date +%T
