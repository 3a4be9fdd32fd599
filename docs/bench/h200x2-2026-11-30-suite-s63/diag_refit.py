# Session 63 diagnosis: test_builds_over_shared_memory_take_fewer_stages[float32-64] saw the
# backward refitted twice ([2, 2]); print every backward build asked at 3 stages, with its args.
import sys, pytest
sys.path.insert(0, "packages/kvax-core/tests")
import test_attention as t
from kvax._src.attention import triton_launch
import jax_triton.triton_lib as jtl
triton_launch.install()
inner = jtl.get_or_create_triton_kernel
def spy(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw):
    name = triton_launch.kernel_name(fn) if triton_launch.ours(fn) else "?"
    if name == "_bwd_kernel":
        print("ASK", kw.get("num_stages"), list(arg_dtypes), list(scalar_args),
              sorted(dict(kw.get("metaparams") or {}).items()), flush=True)
    return inner(backend_init_func, platform, fn, arg_dtypes, scalar_args, **kw)
jtl.get_or_create_triton_kernel = spy
mp = pytest.MonkeyPatch()
try:
    t.test_builds_over_shared_memory_take_fewer_stages(mp, "float32", 64)
    print("PASS", triton_launch.refitted)
except AssertionError as e:
    print("FAIL", str(e)[:300])
