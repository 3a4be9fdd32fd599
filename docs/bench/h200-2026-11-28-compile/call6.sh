# Call 6 (session 46, one H200; two were not lent, so kvax-dist's suite did not run): which
# fusion is the masks' slow LLVM module: XLA's LLVM IR of create_attention_mask
# (masks-no-schedule and masks), the largest functions of each module by lines.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
for part in masks-no-schedule masks; do
  XLA_FLAGS="--xla_dump_to=/tmp/d-$part --xla_gpu_dump_llvmir --xla_dump_hlo_as_text" \
    timeout 60 python3 tools/dev/mask_compile.py --part $part --profile
  python3 - /tmp/d-$part <<'PY'
import collections, glob, os, re, sys
for ll in sorted(glob.glob(sys.argv[1] + "/*.ll")):
    if "lambda" not in os.path.basename(ll):
        continue
    sizes, cur = collections.Counter(), None
    for line in open(ll):
        m = re.match(r"define .*@([\w.$-]+)\(", line)
        if m:
            cur = m.group(1)
        elif line.startswith("}"):
            cur = None
        elif cur:
            sizes[cur] += 1
    print(os.path.basename(ll), sum(sizes.values()), "lines")
    for name, n in sizes.most_common(6):
        print(f"   {n:7d} {name}")
PY
done > $OUT/6-llvm.txt 2>&1
cat $OUT/6-llvm.txt | grep -v "^ *$" | head -60
cd /tmp && tar czf $OUT/6-hlo.tgz $(ls d-masks/*lambda*after_optimizations.txt d-masks-no-schedule/*lambda*after_optimizations.txt 2>/dev/null)
echo "at $SECONDS s"
