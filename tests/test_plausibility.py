"""The roofline floor and the flag convention that every evaluator shares."""

from __future__ import annotations

import pytest

from evolve.plugin.plausibility import (
    bandwidth_applies,
    flag_lines,
    flag_reasons,
    roofline_flag,
    roofline_floor_s,
)

MIB = 1024**2


def test_the_floor_is_the_slower_of_compute_and_memory() -> None:
    # 2 GFLOP at 1000 GFLOP/s takes 2 ms; 1 GB at 10 GB/s takes 100 ms.
    assert roofline_floor_s(2e9, 1e9, 1000.0, 10.0) == pytest.approx(0.1)
    assert roofline_floor_s(2e9, 1e3, 1000.0, 10.0) == pytest.approx(0.002)


def test_an_unknown_peak_drops_its_term_and_two_leave_no_floor() -> None:
    assert roofline_floor_s(2e9, 1e9, None, 10.0) == pytest.approx(0.1)
    assert roofline_floor_s(2e9, 1e9, 1000.0, None) == pytest.approx(0.002)
    assert roofline_floor_s(2e9, 1e9, None, None) is None


def test_bandwidth_binds_only_a_working_set_beyond_the_last_level_cache() -> None:
    assert bandwidth_applies(64 * MIB, 32 * MIB)
    assert not bandwidth_applies(3 * MIB, 32 * MIB)
    assert not bandwidth_applies(64 * MIB, None)


def test_a_roofline_flag_reads_back_from_any_feedback() -> None:
    reason = roofline_flag(50e-6, 2e-4, "fp32 peak from avx2+fma")
    assert reason.startswith("50 us beats the roofline floor 200 us")
    assert "fp32 peak from avx2+fma" in reason and "physically implausible" in reason
    feedback = "[time] 0.05 ms\n" + "\n".join(flag_lines([reason, "speedup 80x"]))
    assert flag_reasons(feedback) == [reason, "speedup 80x"]
    assert flag_reasons("[time] FLAGGED: first line of a stage") == ["first line of a stage"]
    assert flag_reasons("[time] 1.2 ms, nothing odd") == []
