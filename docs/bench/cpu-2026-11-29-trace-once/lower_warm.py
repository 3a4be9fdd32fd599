"""Lower the 64k log-normal Mosaic step for CUDA on CPU, as a warm process does (kvax's disk
cache filled by an earlier run); profile with cProfile."""
import cProfile, pstats, sys, time
from unittest import mock
sys.path.insert(0, "tools")
import jax
from kvax._src.attention import backends
from first_call import training_step
from workloads import Workload

w = Workload(seq_len=65536, num_segments=8, num_pad_tokens=1000, doc_median=1100)
H100 = lambda: "NVIDIA H100 80GB HBM3"
with mock.patch.object(backends, "_platform", lambda: "gpu"), \
        mock.patch("kvax._src.config.current_device_kind", H100), \
        mock.patch("kvax._src.attention.api.current_device_kind", H100), \
        mock.patch("kvax._src.attention.mask.wants_schedule", lambda: True):
    step, args, _ = training_step(w)
    prof = cProfile.Profile() if sys.argv[1:] == ["profile"] else None
    t0 = time.perf_counter()
    if prof: prof.enable()
    traced = step.trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower(lowering_platforms=("cuda",))
    t2 = time.perf_counter()
    if prof: prof.disable()
    print(f"trace {t1 - t0:.2f} s, lower {t2 - t1:.2f} s")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
