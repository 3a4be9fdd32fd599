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


def test_sass_loops_counts_a_backward_branchs_span(tmp_path, capsys):
    """A made-up listing in cuobjdump's format: one loop of four instructions (the branch back
    included), a forward branch that is no loop, and an instruction after."""
    import sass_loops

    listing = """
        Function : kernel
        /*0000*/                   MOV R1, c[0x0][0x28] ;                 /* 0x0 */
        /*0010*/                   FFMA R2, R2, R3, R4 ;                  /* 0x0 */
        /*0020*/              @!P0 FSEL R2, R2, -INF , P1 ;               /* 0x0 */
        /*0030*/                   MUFU.EX2 R2, R2 ;                      /* 0x0 */
        /*0040*/               @P2 BRA 0x10 ;                             /* 0x0 */
        /*0050*/                   BRA 0x70 ;                             /* 0x0 */
        /*0060*/                   EXIT ;                                 /* 0x0 */
    """
    path = tmp_path / "k.sass"
    path.write_text(listing)
    code = sass_loops.instructions(str(path))
    assert len(code) == 7 and sass_loops.opcode(code[2][1]) == "FSEL"
    assert sass_loops.loops(code) == [(1, 4)]
    sass_loops.main([str(path), "--min", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("0x00010-0x00040: 4 instructions; FFMA 1, FSEL 1, MUFU 1, BRA 1")
