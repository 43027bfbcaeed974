"""The trusted half of the CUDA protocol on host-side data: the verifier's rules, the
timing analysis and the run-level report. No GPU and no compiler: bytes in, verdicts out,
shaped exactly as the runner writes them (outputs and guard bands poisoned with 0xFF)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evolve.evaluators.cuda_kernel import clocks, counters, timing
from evolve.evaluators.cuda_kernel.problem import Problem, Round
from evolve.evaluators.cuda_kernel.report import summarise
from evolve.evaluators.cuda_kernel.tensors import encode
from evolve.evaluators.cuda_kernel.toolchain import parse_resource_usage
from evolve.evaluators.cuda_kernel.verify import GUARD_ELEMS, Tolerance, judge
from evolve.plugin.results import EvalResult
from evolve.plugin.stages import StageFailed

SOFTMAX = Path(__file__).resolve().parent.parent / "tasks" / "cuda_softmax" / "reference.py"
FP32 = Tolerance.for_dtype(np.float32, None, 1e-6, None)  # as tasks/cuda_softmax sets it


@pytest.fixture(scope="module")
def problem() -> Problem:
    return Problem(SOFTMAX.read_text(), str(SOFTMAX))


@pytest.fixture(scope="module")
def round_(problem: Problem) -> Round:
    return problem.make_round(5, 0, {"rows": 6, "cols": 50})


def runner_bytes(outputs: list[np.ndarray], guard: np.ndarray | None = None) -> bytes:
    """Outputs as the runner writes them: each followed by its (untouched) guard band."""
    poison = np.full(GUARD_ELEMS * 4, 0xFF, dtype=np.uint8).tobytes()
    parts = [y.astype(np.float32).tobytes() + (poison if guard is None else guard.tobytes())
             for y in outputs]  # fmt: skip
    return b"".join(parts)


def verdict(round_: Round, output: np.ndarray, inputs: list[np.ndarray] | None = None) -> str:
    back = b"".join(x.tobytes() for x in (inputs or round_.inputs))
    return judge(round_, runner_bytes([output]), back, FP32) or "accepted"


def test_defaults_are_1e4_for_fp32_and_1e2_for_half() -> None:
    fp32 = Tolerance.for_dtype(np.float32, None, None, None)
    assert (fp32.rtol, fp32.atol, fp32.rel_l2) == (1e-4, 1e-4, pytest.approx(1e-5))
    half = Tolerance.for_dtype(np.float16, None, None, None)
    assert (half.rtol, half.atol) == (1e-2, 1e-2)
    assert Tolerance.for_dtype(np.float32, 1e-3, 1e-6, None).rel_l2 == pytest.approx(1e-4)


def test_the_reference_itself_is_accepted(round_: Round) -> None:
    assert verdict(round_, round_.expected[0]) == "accepted"


def test_an_error_within_atol_plus_rtol_passes_and_one_beyond_fails(round_: Round) -> None:
    expected = round_.expected[0].astype(np.float64)
    bound = FP32.atol + FP32.rtol * abs(expected[2, 3])
    close = expected.copy()
    close[2, 3] += 0.5 * bound
    assert verdict(round_, close) == "accepted"
    far = expected.copy()
    far[2, 3] += 3 * bound
    said = verdict(round_, far)
    assert "1 of 300 values differ" in said and "index (2, 3)" in said


def test_a_uniform_drift_inside_each_tolerance_fails_the_whole_tensor_bound(
    round_: Round,
) -> None:
    drifted = round_.expected[0].astype(np.float64) * (1 + 5e-5)
    assert "whole-tensor relative error" in verdict(round_, drifted)


@pytest.mark.parametrize(("value", "word"), [(np.nan, "NaN or Inf"), (np.inf, "NaN or Inf")])
def test_nan_and_inf_are_rejected(round_: Round, value: float, word: str) -> None:
    bad = round_.expected[0].copy()
    bad[1, 1] = value
    assert word in verdict(round_, bad)


def test_all_zeros_is_rejected_when_the_reference_is_not(round_: Round) -> None:
    assert "all zeros" in verdict(round_, np.zeros_like(round_.expected[0]))


def test_returning_the_input_is_named_as_such(round_: Round) -> None:
    assert "copy of input 0" in verdict(round_, round_.inputs[0])


def test_a_modified_input_is_rejected_even_with_a_right_answer(round_: Round) -> None:
    scribbled = round_.inputs[0].copy()
    scribbled[4, 7] = 0.0
    said = verdict(round_, round_.expected[0], [scribbled])
    assert "modified input 0" in said and "index (4, 7)" in said


def test_unwritten_values_and_writes_past_the_end_mean_a_wrong_shape(round_: Round) -> None:
    partial = round_.expected[0].copy()
    partial.reshape(-1).view(np.uint32)[5:] = 0xFFFFFFFF  # still the runner's poison
    assert "295 of 300 values were never written" in verdict(round_, partial)
    guard = np.full(GUARD_ELEMS, 0xFFFFFFFF, dtype=np.uint32)
    guard[0] = 0
    out = runner_bytes(round_.expected, guard)
    back = round_.inputs[0].tobytes()
    assert "wrote past its end" in (judge(round_, out, back, FP32) or "")


def test_a_short_file_is_rejected(round_: Round) -> None:
    assert "holds 12 bytes" in (judge(round_, b"x" * 12, round_.inputs[0].tobytes(), FP32) or "")


def test_rounds_alternate_randn_and_a_wide_distribution(problem: Problem) -> None:
    rounds = [problem.make_round(1, k, {"rows": 64, "cols": 64}) for k in range(4)]
    assert [r.distribution for r in rounds] == ["randn", "uniform(-8, 8)"] * 2
    assert all(r.inputs[0].min() < 0 for r in rounds)  # never only [0, 1)
    assert np.abs(rounds[1].inputs[0]).max() > 4
    assert not np.array_equal(rounds[0].inputs[0], rounds[2].inputs[0])


def test_the_manifest_lists_dims_and_element_counts(problem: Problem) -> None:
    rounds = [problem.make_round(1, k, {"rows": 3, "cols": 5}) for k in range(2)]
    files = encode(rounds, ["rows", "cols"])
    assert files["manifest.txt"] == b"2 2 1 1\n3 5 15 15\n3 5 15 15\n"
    assert len(files["in_1.bin"]) == 15 * 4


# -- timing --------------------------------------------------------------------------------


def table(cand_event: float, cand_wall: float, ref_event: float, ref_wall: float) -> np.ndarray:
    rng = np.random.default_rng(0)
    rows = [
        [k % 2, *(v * (1 + 0.01 * rng.standard_normal()) for v in
                  (cand_event, cand_wall, ref_event, ref_wall))]
        for k in range(20)
    ]  # fmt: skip
    return np.array(rows)


def test_an_honest_kernel_gets_median_spread_and_fast_p() -> None:
    result = timing.assess(
        table(0.5, 0.52, 1.0, 1.02), floor_ms=0.01, speedup_flag=10, outside_wall_s=10
    )
    m = result.metrics
    assert result.flags == [] and m["flagged"] == 0
    assert m["time_p10_ms"] <= m["time_ms"] <= m["time_p90_ms"]
    assert m["speedup"] == pytest.approx(2.0, rel=0.05)
    assert (m["fast_1"], m["fast_1.5"]) == (1.0, 1.0)


def test_work_hidden_from_the_events_is_flagged_and_timed_by_the_wall_clock() -> None:
    result = timing.assess(
        table(0.01, 0.62, 1.0, 1.02), floor_ms=None, speedup_flag=10, outside_wall_s=10
    )
    assert any("hidden work" in flag for flag in result.flags)
    assert result.metrics["time_ms"] == pytest.approx(0.6, rel=0.05)
    assert result.metrics["speedup"] < 2


def test_huge_speedups_and_times_under_the_roofline_are_flagged() -> None:
    result = timing.assess(
        table(0.05, 0.07, 1.0, 1.02), floor_ms=0.2, speedup_flag=10, outside_wall_s=10
    )
    assert len(result.flags) == 2 and result.metrics["flagged"] == 1
    assert "exceeds 10x" in result.flags[0] and "roofline" in result.flags[1]


def test_times_longer_than_the_whole_run_are_not_real() -> None:
    with pytest.raises(StageFailed, match="not real"):
        timing.assess(table(50, 51, 50, 51), floor_ms=None, speedup_flag=10, outside_wall_s=1)


def test_parse_times_wants_every_rep_and_every_set() -> None:
    good = b"".join(f"{k % 2} 1 1.1 2 2.1\n".encode() for k in range(6))
    assert timing.parse_times(good, 6, 2).shape == (6, 5)
    with pytest.raises(StageFailed, match="expected 7"):
        timing.parse_times(good, 7, 2)
    with pytest.raises(StageFailed, match="every input set"):
        timing.parse_times(good, 6, 3)
    with pytest.raises(StageFailed, match="non-positive"):
        timing.parse_times(b"0 0 1 1 1\n", 1, 1)


def test_the_roofline_floor_comes_from_device_attributes() -> None:
    h100 = {"cc": "9.0", "sms": "132", "clock_khz": "1980000", "mem_clock_khz": "2619000",
            "bus_bits": "5120"}  # fmt: skip
    gflops, gbps = timing.detected_peaks(h100)
    assert gflops == pytest.approx(66908, rel=0.01) and gbps == pytest.approx(3352, rel=0.01)
    memory_bound = timing.roofline_ms(1e6, 3.352e9, h100, None, None)
    assert memory_bound == pytest.approx(1.0, rel=0.01)
    assert timing.roofline_ms(1e6, 1e6, {}, None, None) is None
    assert timing.roofline_ms(2e9, 0, {}, 1000.0, 1.0) == pytest.approx(2.0)


# -- what the tools print ------------------------------------------------------------------

PTXAS = """\
ptxas info    : Compiling entry function '_Z4tilePKfS0_Pfiii' for 'sm_80'
ptxas info    : Function properties for _Z4tilePKfS0_Pfiii
    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 8192 bytes smem, 388 bytes cmem[0]
"""

NCU = """\
==PROF== Connected to process 1
"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"
"0","k","gpu__time_duration.sum","usecond","2.00"
"0","k","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","80.0"
"0","k","launch__registers_per_thread","register/thread","40"
"1","k2","gpu__time_duration.sum","usecond","6.00"
"1","k2","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","40.0"
"1","k2","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","90.5"
"1","k2","launch__registers_per_thread","register/thread","32"
"""


def test_ptxas_registers_spills_and_shared_memory_are_read() -> None:
    (kernel,) = parse_resource_usage(PTXAS)
    assert (kernel.registers, kernel.spill_bytes, kernel.shared_bytes) == (255, 20, 8192)


def test_ncu_csv_becomes_per_call_counters() -> None:
    found = counters.parse_csv(NCU)
    assert found["duration_ns"].value == pytest.approx(8000)
    assert found["sm_throughput_pct"].value == pytest.approx(50.0)  # duration-weighted
    assert found["registers_per_thread"].value == 40
    assert {c.source for c in found.values()} == {"ncu"}
    assert "SM throughput 50%" in counters.describe(found)


def test_nvidia_smi_clocks_and_whether_they_are_held() -> None:
    free = clocks.parse("1980, 2619, 1980, 1755, 1755, 0x0000000000000000")
    assert free == {"sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "max_sm_clock_mhz": 1980,
                    "clocks_locked": 0.0}  # fmt: skip
    held = clocks.parse("1500, 2619, 1980, 1755, 1755, 0x0000000000000002")
    assert held is not None and held["clocks_locked"] == 1.0
    assert clocks.parse("[N/A], 2619") is None


# -- the run-level report ------------------------------------------------------------------


def test_correct_rate_speedup_spread_and_fast_p_over_a_run() -> None:
    results = [EvalResult("ok", metrics={"speedup": s}) for s in (0.8, 1.2, 1.6, 2.5)]
    results += [EvalResult("check_failed"), EvalResult("static_failed")]
    summary = summarise(results)
    assert summary["correct_rate"] == pytest.approx(4 / 6)
    assert summary["speedup_median"] == pytest.approx(1.4)
    assert (summary["fast_1"], summary["fast_1.5"], summary["fast_2"]) == pytest.approx(
        (3 / 6, 2 / 6, 1 / 6)
    )
