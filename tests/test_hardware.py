"""CPU peaks: read from Linux's files (here, files the test writes in their place) and a
bandwidth copy that really runs; a part that cannot be read is left out, never raised."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.plugin import hardware, peaks
from evolve.plugin.peaks import cpu_peak

USABLE = len(os.sched_getaffinity(0))


@pytest.fixture(autouse=True)
def fresh_peaks() -> Iterator[None]:
    """cpu_peak is cached per process; each test reads its own machine."""
    cpu_peak.cache_clear()
    yield
    cpu_peak.cache_clear()


def fake_machine(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    cpuinfo: str | None,
    *,
    max_khz: str | None = None,
    caches: tuple[tuple[str, str], ...] = (),
) -> None:
    """Points the module at files written here, in the layout Linux uses."""
    if cpuinfo is not None:
        (root / "cpuinfo").write_text(cpuinfo)
    if max_khz is not None:
        (root / "cpuinfo_max_freq").write_text(max_khz + "\n")
    for n, (kind, size) in enumerate(caches):
        index = root / "cache" / f"index{n}"
        index.mkdir(parents=True)
        (index / "type").write_text(kind + "\n")
        (index / "size").write_text(size + "\n")
    monkeypatch.setattr(hardware, "CPUINFO", root / "cpuinfo")
    monkeypatch.setattr(peaks, "MAX_FREQ", root / "cpuinfo_max_freq")
    monkeypatch.setattr(hardware, "CACHE_DIR", root / "cache")


def test_a_vm_without_cpufreq_gets_headroom_over_its_base_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_machine(tmp_path, monkeypatch, "flags\t: fpu sse avx avx2 fma\ncpu MHz\t\t: 2000.000\n")
    peak = cpu_peak()
    # 8 lanes x 2 (FMA) x 2 pipes, at 2 GHz x 2 for turbo, on one core.
    assert peak.gflops == pytest.approx(32 * 4.0)
    assert "32 flop/cycle (avx2+fma" in peak.basis and "cpu MHz 2000 x 2" in peak.basis


def test_the_cpufreq_maximum_wins_and_threads_multiply_up_to_the_usable_cores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_machine(
        tmp_path,
        monkeypatch,
        "flags : sse avx avx2 fma avx512f\ncpu MHz : 1000\n",
        max_khz="3500000",
    )
    one_core = 64 * 3.5
    assert cpu_peak().gflops == pytest.approx(one_core)
    assert cpu_peak(2).gflops == pytest.approx(one_core * min(2, USABLE))
    assert cpu_peak(10_000).gflops == pytest.approx(one_core * USABLE)
    assert "cpufreq max" in cpu_peak().basis


def test_arm_features_count_as_its_widest_cores_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_machine(tmp_path, monkeypatch, "Features\t: fp asimd evtstrm crc32\n", max_khz="3000000")
    assert cpu_peak().gflops == pytest.approx(32 * 3.0)


def test_the_last_level_cache_is_the_largest_data_or_unified_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    caches = (("Data", "48K"), ("Instruction", "64M"), ("Unified", "2048K"), ("Unified", "32M"))
    fake_machine(tmp_path, monkeypatch, "flags : sse\n", caches=caches)
    peak = cpu_peak()
    assert peak.llc_bytes == 32 * 1024**2 and "LLC 32 MiB" in peak.basis


def test_parts_that_cannot_be_read_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_machine(tmp_path, monkeypatch, None)
    peak = cpu_peak()
    assert (peak.gflops, peak.llc_bytes) == (None, None)
    assert "fp32 peak unknown" in peak.basis and "LLC unknown" in peak.basis
    assert peak.gbps is not None and peak.gbps > 0  # the copy needs no file

    fake_machine(tmp_path, monkeypatch, "flags : avx2 fma\n")
    cpu_peak.cache_clear()
    assert cpu_peak().gflops is None and "no clock" in cpu_peak().basis


def test_bandwidth_is_measured_once_by_a_real_copy() -> None:
    peak = cpu_peak()
    assert peak.gbps is not None and peak.gbps > 0
    assert "measured by a 1-thread copy" in peak.basis
    assert cpu_peak() is peak
