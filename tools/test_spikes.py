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


def test_mosaic_forward_spike_lowers(capsys):
    """Every forward configuration the spike names, soft-capped too (the overlapped one among
    them)."""
    import spike_mosaic

    spike_mosaic.main(["--lower-only", "--configs", "64x128x2,64x128x2t,64x128x2o,64x64x3o",
                       "--logits-soft-cap", "30"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all("lowered, mosaic_gpu calls 1" in line for line in lines)
