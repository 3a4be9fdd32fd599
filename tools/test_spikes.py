"""The Mosaic GPU spikes in tools/dev lower for CUDA on any machine (Mosaic GPU's own passes and
its shared-memory check run without a GPU), so they are ready to run when device time is; and
the other tools/dev measurements run on CPU."""

import dataclasses
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "dev"))

# the spikes' --lower-only line for a config, after "CONFIG: " (spike_mosaic.py) or "WORKLOAD
# CONFIG: " (spike_mosaic_bwd.py)
LOWERED_ONE_CALL = r"lowered in [\d.]+ s, mosaic_gpu calls 1, \d+ characters"


def test_mosaic_backward_spike_lowers(capsys):
    """Both rules of the backward's masked steps ("r": key ranks)."""
    import spike_mosaic_bwd

    spike_mosaic_bwd.main(["--lower-only", "--configs", "240/24,240/24r"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(re.fullmatch(r"\S+ \S+: " + LOWERED_ONE_CALL, line)
                                   for line in lines), lines
    assert [config.rank_rule for config in spike_mosaic_bwd._configs("240/24,232/40/3r").values()
            ] == [False, True]


def test_mosaic_forward_spike_lowers(capsys):
    """Every forward configuration the spike names, soft-capped too (the overlapped one among
    them, query heads packed: two per program in the check's first workload, either rule, and
    capped bfloat16 with the row maxima, not the default fixed reference)."""
    import spike_mosaic

    spike_mosaic.main(["--lower-only", "--configs",
                       "64x128x2,64x128x2t,64x128x2o,64x64x3o,64x128x2/4,64x128x2o/4,"
                       "64x128x2pr,64x128x2pn,64x128x2pm",
                       "--logits-soft-cap", "30"])
    assert spike_mosaic.parse_config("64x128x2o/4", group=2).pack == 2
    assert [spike_mosaic.parse_config(f"64x128x2p{x}").rank_rule for x in ("", "r", "n")] == [
        None, True, False]
    assert [spike_mosaic.parse_config(f"64x128x2p{x}").fixed_reference for x in ("", "m")] == [
        True, False]
    with pytest.raises(ValueError, match=r"'64x128x2pa': unknown letters \['a'\]"):
        spike_mosaic.parse_config("64x128x2pa")  # a trial's letter, its patch gone
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 9 and all(re.fullmatch(r"\S+: " + LOWERED_ONE_CALL, line)
                                   for line in lines)


def test_mosaic_forward_spike_takes_a_named_copys_kernel(monkeypatch, capsys):
    """A "~NAME" config's kernel comes from mosaic_fwd_ab_NAME (a copy of mosaic_fwd.py beside
    it: a change timed before and after in one process), soft-capped after the name too; --sms
    sets the SM count it runs its persistent workers on."""
    import types

    import spike_mosaic
    from kvax._src.attention import mosaic_fwd

    configs = []
    copy = types.ModuleType("kvax._src.attention.mosaic_fwd_ab_t")
    copy.MosaicConfig, copy.pack_heads = mosaic_fwd.MosaicConfig, mosaic_fwd.pack_heads
    copy.schedule = mosaic_fwd.schedule

    def forward(*args, **kwargs):
        configs.append((kwargs["config"], kwargs["logits_soft_cap"]))
        return mosaic_fwd.forward(*args, **kwargs)

    copy.forward = forward
    monkeypatch.setitem(sys.modules, copy.__name__, copy)
    monkeypatch.setattr(spike_mosaic, "SMS", None)
    spike_mosaic.main(["--lower-only", "--sms", "5", "--configs", "64x128x2p~t@30"])
    assert [(c.persistent, cap) for c, cap in configs] == [(True, 30.0)]
    assert copy.device_sms() == 5  # --sms: each persistent worker takes many programs
    (line,) = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"64x128x2p~t@30: " + LOWERED_ONE_CALL, line), line


def test_mosaic_forward_spike_checks_a_config_interpreted_on_cpu(monkeypatch, capsys):
    """--interpret: the small check (two of its workloads) on CPU under jax's GPU interpret
    mode, the persistent kernel on 3 SMs, against the float64 reference."""
    import spike_mosaic
    from kvax._src.attention import mosaic_fwd

    monkeypatch.setattr(spike_mosaic, "SMS", None)
    monkeypatch.setattr(spike_mosaic, "INTERPRET", False)
    monkeypatch.setattr(mosaic_fwd, "device_sms", mosaic_fwd.device_sms)  # --sms replaces it
    spike_mosaic.main(["--interpret", "--sms", "3", "--configs", "64x128x2p"])
    assert mosaic_fwd.device_sms() == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "interpreted on CPU (small check, 2 workloads):"
    assert len([line for line in lines if line.endswith(" ok")]) == 2, lines
    assert lines[-1] == "check passed"


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
    sass_loops.main([str(path), "--min", "1", "--top", "1", "--count", "MUFU,LDL"])
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "0x00010-0x00040: 4 instructions; FFMA 1; MUFU 1; LDL 0"


def _range_words(ranges):
    """The stamps of ranges in order: a range is (name id, enter, exit) or (name id, enter, exit,
    the ranges nested inside it)."""
    words = []
    for name, enter, exit_, *inner in ranges:
        words += [name, enter] + _range_words(inner[0] if inner else ()) + [name | 1 << 31, exit_]
    return words


def _profile_entries(init, ranges, stale=(), space=16):
    """One warpgroup's profiler entries: a 3-word header, Init's two stamps, the ranges' stamps
    in order (_range_words), then stale words."""
    words = [0, 0, 4, 0, init[0], 1 << 31, init[1]] + _range_words(ranges) + list(stale)
    return words + [0] * (space * 4 - len(words))


def test_profile_timeline_reads_only_each_blocks_own_stamps(capsys):
    """Two SMs, three blocks each; the middle block on SM 0 has no work, so past its Init its
    shared memory still holds the block before's stamps, which must not count. Each block takes
    1000 cycles of loop; blocks start 2000 cycles apart."""
    import numpy as np
    import profile_timeline

    names = {"Init": 0, "prologue": 1, "first_key": 2, "loop": 3, "epilogue": 4,
             "store_wait": 5, "producer": 6, "q_wait": 7, "store_read": 8, "meet": 9}
    blocks = []
    for b in range(6):
        sm, k = b % 2, b // 2
        c0 = 10_000 + 2000 * k + 13 * sm
        wgs = []
        for wg in range(3):
            if sm == 0 and k == 1:  # no work: Init, then the earlier block's loop
                words = _profile_entries((c0, c0 + 50), [], stale=[3, c0 - 1900, 3 | 1 << 31,
                                                                  c0 - 900])
            elif wg < 2:
                words = _profile_entries((c0, c0 + 50), [(1, c0 + 100, c0 + 300,
                                                          [(7, c0 + 150, c0 + 250)]),
                                                         (3, c0 + 300, c0 + 1300),
                                                         (4, c0 + 1300, c0 + 1400)])
            else:
                words = _profile_entries((c0, c0 + 50), [(6, c0 + 100, c0 + 1200)])
            words[0], words[1] = 1000 * k + sm, sm  # start (ns at 2 cycles a ns), SM
            wgs.append(words)
        blocks.append(wgs)
    buffer = np.array(blocks, np.uint32).ravel()
    stamps = profile_timeline.parse(buffer, names, 16)
    assert stamps[2][0][2] == {"Init": [(12_000, 12_050)]}  # the stale loop dropped
    assert stamps[0][0][2]["loop"] == [(10_300, 11_300)]
    items = np.array([[0, 0, 128, 0, 2, 0, 1]] * 6)  # steps 2, one of them full
    profile_timeline.summarize(stamps, items, "made up")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("made up: 5 programs with work in 5 blocks, 1 blocks without, on 2 "
                             "SMs")
    loop = next(line for line in out if line.strip().startswith("loop "))
    assert loop.split()[-2] == "500"  # ns a program: 1000 cycles at 2 GHz
    q_wait = next(line for line in out if line.strip().startswith("q_wait"))
    prologue = next(line for line in out if line.strip().startswith("prologue"))
    assert q_wait.split()[-2] == "50" and prologue.split()[-2] == "50"  # the 200 split in two
    shares = [float(line.split("%")[0].split()[-1]) for line in out[1:] if "%" in line]
    assert abs(sum(shares) - 100) < 0.5


def test_profile_timeline_splits_persistent_programs_into_phases(capsys):
    """The persistent forward: two workers (blocks) take 4 row blocks x 2 heads in rounds. Each
    program's stamps are made up from its item: gap 50 cycles (a range "ahead" of 12 in it),
    prologue 60 (q_wait 20,
    first_key 10, store_read 5 and meet 8 in it), loop 100 + 1000 a full step + 1500 a masked
    one, epilogue 200. The summary must find each phase again and fit the loop exactly."""
    import jax.numpy as jnp
    import numpy as np
    import profile_timeline
    from kvax._src.attention import mosaic_fwd

    names = {"Init": 0, "prologue": 1, "first_key": 2, "loop": 3, "epilogue": 4,
             "store_wait": 5, "producer": 6, "q_wait": 7, "store_read": 8, "meet": 9,
             "ahead": 10}
    # [first8, own_start, own_end, k08, steps, f_lo, f_hi]: 1-4 steps, 0-3 of them full
    items = np.array([[[0, 0, 128, 0, 1, 0, 0], [16, 128, 256, 0, 2, 0, 1],
                       [32, 256, 384, 0, 3, 1, 2], [48, 384, 512, 0, 4, 0, 3]]], np.int32)
    work = np.asarray(mosaic_fwd.persistent_work(jnp.asarray(items))).reshape(-1)
    taken = profile_timeline.persistent_programs(items, work, workers=2, heads=2)
    assert sorted(len(t) for t in taken) == [4, 4]
    space = 64
    blocks = []
    for worker in range(2):
        wgs = []
        for wg in range(3):
            c = 10_000
            ranges = []
            for batch, item in taken[worker] if wg < 2 else []:
                steps, full = items[batch, item, 4], items[batch, item, 6] - items[batch, item, 5]
                ranges.append((10, c + 20, c + 32, []))
                c += 50
                ranges.append((1, c, c + 60, [(7, c + 5, c + 25), (2, c + 30, c + 40),
                                              (8, c + 42, c + 47), (9, c + 50, c + 58)]))
                c += 60
                loop = 100 + 1000 * full + 1500 * (steps - full)
                ranges += [(3, c, c + loop), (4, c + loop, c + loop + 200)]
                c += loop + 200
            words = _profile_entries((9_900, 10_000), ranges, space=space)
            words[0], words[1] = 0, worker
            wgs.append(words)
        blocks.append(wgs)
    buffer = np.array(blocks, np.uint32).ravel()
    records = profile_timeline.persistent_records(buffer, names, space, taken)
    assert len(records) == 2 * 2 * 4  # every program, both consumers
    profile_timeline.summarize_persistent(records, items[0], "made up")
    out = capsys.readouterr().out
    means = {line.split()[0]: float(line.split()[2]) for line in out.splitlines()[1:11]}
    later = [items[0, item] for _, _, index, (_, item), _ in records if index > 0]
    loop = np.mean([100 + 1000 * (i[6] - i[5]) + 1500 * (i[4] - i[6] + i[5]) for i in later])
    assert means == {"gap": 38, "ahead": 12, "landed": 0, "prologue": 17, "q_wait": 20,
                     "first_key": 10, "store_read": 5, "meet": 8,
                     "loop": pytest.approx(loop, abs=0.5), "epilogue": 200}
    assert "loop fit: 100 cycles + 1000 a full step + 1500 a masked step" in out
    gap_line = out.splitlines()[1]
    assert "consumer 0 p50     38 p90     38  consumer 1 p50     38 p90     38" in gap_line
    assert ("from each consumer's program 3 on (4): gap 38, prologue 17, epilogue 200, outside "
            "the loop 310 cycles") in out


def test_per_call_matches_calls_with_the_clock_samples_taken_while_they_ran(tmp_path, capsys):
    """per_call.py's summary from made-up calls and nvidia-smi samples: each pass's statistics,
    the bursts' medians, and single calls matched with the samples inside them (slower calls at
    the lower clock: a negative correlation)."""
    import per_call

    smi = tmp_path / "smi.csv"
    smi.write_text("2026/11/25 06:00:00.000, 1980 MHz, 150.00 W, 0x0\n"
                   "2026/11/25 06:00:01.000, 1500 MHz, 690.00 W, 0x4\n"
                   "not a sample\n")
    samples = per_call.smi_samples(str(smi))
    assert [s[1:] for s in samples] == [(1980.0, 150.0), (1500.0, 690.0)]
    t0 = samples[0][0]
    calls = []
    for i in range(4):  # ours: fast at the high clock, slow at the low one; FA3 never sampled
        start = t0 if i % 2 == 0 else t0 + 1.0
        calls.append(("alternate", i, "64x128x2", 0, start, 2.0 if i % 2 == 0 else 3.0))
        calls.append(("alternate", i, "fa3", 0, t0 + 5.0, 1.0))
    calls += [("bursts", 0, name, j, t0 + 9, ms) for name, ms in (("64x128x2", 4.0), ("fa3", 5.0))
              for j in range(3)]
    calls += [("queued", 0, "fa3", 0, t0 + 9, 0.5)]  # ours has no queued burst: no line
    per_call.summarise("row", calls, samples)
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["row", "alternate", "64x128x2", "calls"]
    assert "median   2.50" in out[0] and "median   1.00" in out[1]
    assert out[4].split()[1:3] == ["queued", "fa3"] and "median   0.50" in out[4]
    assert "bursts' medians: 4.00" in out[5] and "bursts' medians: 5.00" in out[7]
    assert "64x128x2 single calls with clock samples 4: corr(ms, MHz) -1.00" in out[6]
    assert len(out) == 8  # no clock line for FA3: none of its calls met a sample


def test_clocks_reads_each_windows_samples_after_its_first_fifth_second(tmp_path, capsys):
    """clocks.py's summary from made-up windows and nvidia-smi samples: the clock, power and
    memory utilisation are medians of the samples inside an entry's windows, past their first
    0.2 s (the first sample here is inside that and left out); Mcycles is ms x MHz / 1000; the
    throttle reasons are those of the samples taken while the entry ran."""
    import clocks

    smi = tmp_path / "smi.csv"
    smi.write_text("2026/11/28 07:00:00.100, 1980 MHz, 150.00 W, 5 %, 0x0000000000000001\n"
                   "2026/11/28 07:00:00.500, 1500 MHz, 690.00 W, 30 %, 0x0000000000000004\n"
                   "2026/11/28 07:00:00.900, 1600 MHz, 700.00 W, 40 %, 0x0000000000000000\n"
                   "not a sample\n"
                   "2026/11/28 07:00:05.500, 1800 MHz, 600.00 W, 20 %, 0x0000000000000020\n")
    t0 = clocks.smi_rows(str(smi))[0][0, 0] - 0.1
    windows = {("det", "fwd"): [(t0, t0 + 1.0, [2.0, 4.0, 3.0]), (t0 + 3, t0 + 4, [5.0])],
               ("fa3", "fwd"): [(t0 + 5, t0 + 6, [1.0])]}
    clocks.summarise("row", windows, str(smi))
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:8] == ["row", "det", "fwd", "4.000", "1550", "695", "35", "6.2"]
    assert out[0].endswith("; 0x0000000000000000 0x0000000000000004")
    assert out[1].split()[:8] == ["row", "fa3", "fwd", "1.000", "1800", "600", "20", "1.8"]
    assert out[1].endswith("; 0x0000000000000020") and len(out) == 2


def test_step_copies_spike_variants_run_the_backwards_steps_in_one_order():
    """The spike's backward loops (flat, nested, three loops) and the kernel's head_steps visit
    the same steps in the same order, masked or not: so the spike can ask for bitwise equal
    results."""
    import jax
    import jax.numpy as jnp
    import spike_step_copies as spike

    from kvax._src.attention import mosaic_bwd, mosaic_fwd

    def order(loops, group, per_head, lf, uf):
        def record(flag):
            def step(i, g, carry):  # step i of the group's head g
                seen, n = carry
                return seen.at[n].set(jnp.stack([i, jnp.int32(flag), g])), n + 1
            return step

        seen, n = jax.jit(lambda *b: loops(group, *b, record(1), record(0), (
            jnp.full((32, 3), -1, jnp.int32), jnp.int32(0))))(
                *map(jnp.int32, (per_head, lf, uf)))
        return jnp.asarray(seen[:int(n)]).tolist()

    variants = (spike.flat, spike.per_head(mosaic_fwd.masked_full_masked),
                spike.per_head(spike.three_loops))
    for group, per_head, lf, uf in ((3, 5, 1, 3), (2, 4, 0, 4), (1, 6, 6, 6), (4, 3, 0, 0)):
        expected = order(mosaic_bwd.head_steps, group, per_head, lf, uf)
        assert len(expected) == group * per_head
        assert sum(flag == 0 for _, flag, _ in expected) == group * (uf - lf)
        assert [i for i, _, _ in expected] == list(range(group * per_head))
        assert [g for _, _, g in expected] == [i // per_head for i in range(group * per_head)]
        for loops in variants:
            assert order(loops, group, per_head, lf, uf) == expected


def test_mask_compile_times_a_part_in_a_fresh_process(capsys):
    import mask_compile

    rows = mask_compile.main(["--part", "dkdv", "--seq-len", "512", "--doc-median", "60",
                              "--num-pad-tokens", "10"])
    assert [r["part"] for r in rows] == ["dkdv"]
    assert rows[0]["compile_s"] > 0 and rows[0]["hlo_ops"] > 0 and rows[0]["sorts"] == 0
    assert "dkdv: lower" in capsys.readouterr().out


def test_second_jit_times_both_jits_of_one_process(capsys):
    """On CPU (the XLA path, no Mosaic kernels): two jits, each first call timed, nothing
    compiled ahead or reused, and --as-before runs too."""
    import second_jit

    for switch in ([], ["--as-before"]):
        second_jit.main(["--seq-len", "512", "--num-segments", "3", "--num-pad-tokens", "10",
                         *switch])
        out = capsys.readouterr().out.splitlines()
        assert [line.split(" (")[0].strip() for line in out] == ["first jit", "second jit"]
        assert all("compiled ahead 0, read from disk 0; lowerings reused 0" in line
                   for line in out)
        assert ("as before" in out[0]) == bool(switch)


def test_compile_profile_sums_a_cold_steps_ranges_by_phase(tmp_path, capsys):
    """On CPU the step's XLA compile appears in its phase, longest ranges first, with each
    range's start kept in the JSON."""
    import json

    import compile_profile

    compile_profile.main(["--seq-len", "512", "--num-segments", "3", "--num-pad-tokens", "10",
                          "--min-ms", "5", "--out", str(tmp_path)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("auto: masks apart 0.00 s, lower") and "compiled ahead: 0" in out[0]
    with open(tmp_path / "compile_profile_auto.json") as f:
        result = json.load(f)
    xla = [g for g in result["summary"] if g["phase"] == "xla"]
    assert "backend_compile_and_load" in [g["name"] for g in xla]
    assert [g["total_ms"] for g in xla] == sorted((g["total_ms"] for g in xla), reverse=True)
    phases = [g["phase"] for g in result["summary"]]
    assert phases == sorted(phases, key=["inputs", "lower", "xla", "first_run", "other"].index)
    assert all(r["start_ms"] >= 0 for r in result["ranges"] if r["phase"] != "other")


def test_layout_args_spike_times_three_ways(monkeypatch, capsys):
    import spike_layout_args
    from workloads import Workload

    monkeypatch.setattr(spike_layout_args, "LAYOUTS", {"tiny": Workload(
        256, num_segments=3, num_pad_tokens=7, num_heads=2, num_kv_heads=1, head_dim=16)})
    spike_layout_args.main(["--layouts", "tiny", "--rounds", "1", "--repeats", "1",
                            "--layers", "2"])
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("compiled tiny") for line in out) == 6
    table = out[out.index("tiny:") + 1:]
    assert [line.split()[0] for line in table] == ["args", "layout", "all"]
    assert "(+0.00%)" in table[0]


def test_det_bwd_spike_times_the_configurations_that_compile(monkeypatch, capsys):
    """A configuration that fails to compile (a variant past the shared memory, say) is reported
    and left out; the others are still compiled, compared and timed (here on the CPU path)."""
    import kvax
    import spike_det_bwd
    from workloads import Workload

    monkeypatch.setattr(spike_det_bwd, "LAYOUTS", {"tiny": Workload(
        256, num_segments=3, num_pad_tokens=7, num_heads=2, num_kv_heads=1, head_dim=16)})
    attention = kvax.ops.flash_attention

    def nondet_fails(*args, deterministic=True, **kwargs):
        if not deterministic:
            raise ValueError("Mosaic GPU kernel exceeds available shared memory\nmore")
        return attention(*args, deterministic=deterministic, **kwargs)

    monkeypatch.setattr(kvax.ops, "flash_attention", nondet_fails)
    spike_det_bwd.main(["--layouts", "tiny", "--configs", "mosaic det,mosaic nondet",
                        "--rounds", "1", "--repeats", "1"])
    out = capsys.readouterr().out.splitlines()
    assert ("could not compile tiny mosaic nondet: ValueError: Mosaic GPU kernel exceeds "
            "available shared memory") in out
    assert any(line.startswith("compiled tiny mosaic det: reruns bitwise equal True")
               for line in out)
    table = out[out.index("median of 1 rounds: f+b ms (TF/s, against `triton det`)") + 1:]
    assert [line.split()[:3] for line in table] == [["tiny", "mosaic", "det"]]


def test_det_bwd_spike_variant_patches_the_apis_config_only():
    """--variant "NAME:FIELD=INT,...": while its patch is on, the API's backward config has
    those fields (deterministic=0 makes it a nondeterministic run); BackwardConfig itself and
    its defaults are left alone."""
    import spike_det_bwd

    from kvax._src.attention import mosaic_bwd

    name, deterministic, patch = spike_det_bwd.variant("fast:stages=3,deterministic=0")
    assert (name, deterministic) == ("fast", False)
    default = mosaic_bwd.chosen_config()
    with patch:
        assert mosaic_bwd.chosen_config() == dataclasses.replace(default, stages=3)
        assert mosaic_bwd.BackwardConfig() == default
    assert mosaic_bwd.chosen_config() == default


def test_det_bwd_spike_evict_last_rewrites_only_the_reduce_adds(monkeypatch):
    """--evict-last's patch gives Mosaic GPU's TMA reduce-adds an L2 evict-last policy, leaves
    other inline PTX alone, and refuses a reduce-add it does not recognise (so that a changed
    jax cannot make the trial a silent no-op)."""
    import spike_det_bwd
    from jax.experimental.mosaic.gpu import launch_context

    seen = []
    monkeypatch.setattr(launch_context.llvm, "inline_asm",
                        lambda result, operands, asm, constraints, **kw: seen.append(asm))
    reduce = ("@$0 cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group "
              "[$2,{$3,$4}], [$1];")
    with spike_det_bwd.evict_last_reduce():
        launch_context.llvm.inline_asm(None, [], reduce, "b,r,l,r,r")
        launch_context.llvm.inline_asm(None, [], "cp.async.bulk.commit_group;", "")
        with pytest.raises(ValueError, match="does not know"):
            launch_context.llvm.inline_asm(None, [], "cp.reduce.async.bulk.tensor [$1];", "")
    assert seen == [
        "{ .reg .b64 policy; createpolicy.fractional.L2::evict_last.b64 policy, 1.0; "
        "@$0 cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"
        ".L2::cache_hint [$2,{$3,$4}], [$1], policy; }",
        "cp.async.bulk.commit_group;"]


def test_cubin_ab_runs_both_kinds_in_turns(capsys):
    """On CPU (the XLA path: no Triton kernel, so none carries a cubin): both kinds run in
    fresh processes, in turns, with their medians."""
    import cubin_ab

    rows = cubin_ab.main(["--seq-len", "512", "--num-segments", "3", "--num-pad-tokens", "10",
                          "--backend", "auto", "--rounds", "2", "--calls", "2"])
    assert [row["kind"] for row in rows] == ["kvax", "jaxlib", "jaxlib", "kvax"]
    assert all(row["images"] == 0 and row["median_ms"] > 0 for row in rows)
    assert "kvax: medians" in capsys.readouterr().out


def test_gpu_suite_split_takes_the_latest_times_and_balances(tmp_path):
    """split_gpu_suite reads each test's time from the latest report that ran it (skips ignored)
    and deals tests longest first; untimed tests cost the median."""
    import split_gpu_suite

    def report(name, date, rows):
        lines = [f"- date: {date}", "", "| test | outcome | time | detail |", "|---|---|---|---|"]
        lines += [f"| `{test}` | {outcome} | {seconds}s |  |" for test, outcome, seconds in rows]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        return str(tmp_path / name)

    new = report("b.md", "2026-11-30T02:00:00+00:00", [("t.py::a", "passed", "50.0"),
                                                       ("t.py::c", "skipped", "0.1")])
    old = report("a.md", "2026-11-29T02:00:00+00:00", [("t.py::a", "passed", "10.0"),
                                                       ("t.py::b", "failed", "30.5"),
                                                       ("t.py::c", "passed", "20.0")])
    times = split_gpu_suite.report_times([new, old])
    assert times == {"t.py::a": 50.0, "t.py::b": 30.5, "t.py::c": 20.0}
    parts = split_gpu_suite.split(["t.py::a", "t.py::b", "t.py::c", "t.py::d"], times, 2)
    assert parts == [["t.py::a", "t.py::c"], ["t.py::b", "t.py::d"]]  # d: the median, 30.5


def test_tune_times_a_backward_config_beside_the_default(monkeypatch, tmp_path):
    """tune.py --bwd-config: the default blocks again with the Mosaic backward's config
    (chosen_config's) changed while that candidate is traced, and only then, its gradients
    compared with the default's (here on the CPU path)."""
    import json

    import kvax
    import tune
    from kvax._src.attention import mosaic_bwd

    stages = []  # chosen_config(256).stages whenever the API is traced
    attention = kvax.ops.flash_attention

    def traced(*args, **kwargs):
        stages.append(mosaic_bwd.chosen_config(256).stages)
        return attention(*args, **kwargs)

    monkeypatch.setattr(kvax.ops, "flash_attention", traced)
    chosen = mosaic_bwd.chosen_config
    out = tmp_path / "tune.json"
    monkeypatch.setattr(sys, "argv", [
        "tune.py", "--seq-len", "300", "--num-segments", "3", "--num-pad-tokens", "7",
        "--heads", "2", "--kv-heads", "1", "--head-dim", "16", "--repeats", "1", "--fwd",
        "--bwd", "--bwd-config", "stages=3+keys_per_wg=32", "--out", str(out)])
    tune.main()
    assert mosaic_bwd.chosen_config is chosen
    records = json.loads(out.read_text())["records"]
    assert [(r["backward"], r["name"].rsplit(")", 1)[1]) for r in records] == [
        (False, ""), (True, ""), (True, " stages=3+keys_per_wg=32")]
    assert records[-1]["rel_diff"] == 0.0
    assert set(stages[:-2]) == {2} and stages[-2:] == [3, 3]  # the forward's and the step's


def test_softcap_spike_takes_the_shape(monkeypatch, capsys):
    """spike_softcap.py --head-dim/--heads/--kv-heads: its workload has that shape; each
    configuration is timed against no cap (here on the CPU path)."""
    import spike_softcap

    shapes = []
    inputs = spike_softcap.inputs
    monkeypatch.setattr(spike_softcap, "inputs", lambda w: shapes.append(
        (w.head_dim, w.num_heads, w.num_kv_heads)) or inputs(w))
    monkeypatch.setattr(sys, "argv", [
        "spike_softcap.py", "--seq-len", "256", "--head-dim", "32", "--heads", "2",
        "--kv-heads", "1", "--rounds", "1", "--repeats", "1", "--caps", "30"])
    spike_softcap.main()
    assert shapes == [(32, 2, 1)]
    table = capsys.readouterr().out.split("cost against no cap): ")[1].splitlines()
    assert table[0] == "fwd | f+b | f+b nondet"
    assert [line.split()[:2] for line in table[1:]] == [["no", "cap"], ["cap", "30"]]
