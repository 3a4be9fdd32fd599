"""The Mosaic GPU spikes in tools/dev lower for CUDA on any machine (Mosaic GPU's own passes and
its shared-memory check run without a GPU), so they are ready to run when device time is."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dev"))


def test_mosaic_backward_spike_lowers(capsys):
    import spike_mosaic_bwd

    spike_mosaic_bwd.main(["--lower-only"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all("lowered, mosaic_gpu calls 1" in line for line in lines)
