"""This machine's physical peaks, for telling a fast program from an impossible one: fp32
flop/s from the ISA and the clock, and DRAM bandwidth, which no file states and a copy
measures (with numpy, which only the evaluators that judge plausibility load).
"""

from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np

from evolve.plugin.hardware import cpuinfo, human_size, llc_bytes, usable_cores

MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")  # kHz
# fp32 flops per cycle per core, by the widest vector extension a core has: lanes x 2 (a
# fused multiply-add counts two) x 2 pipes (before FMA, an add pipe and a multiply pipe).
# No x86 core issues more than two vector FMAs a cycle, many issue one, and Zen 4 splits
# AVX-512 into 256-bit halves, so each figure bounds its core from above. Arm's widest
# cores (Neoverse V2, Apple's) issue four 128-bit FMAs and A64FX two 512-bit SVE ones,
# hence 32 and 64 there. A bound and not an estimate, because it decides what is
# physically impossible, and no honest program may be called that.
FLOPS_PER_CYCLE: tuple[tuple[frozenset[str], int], ...] = (
    (frozenset({"avx512f"}), 64),
    (frozenset({"avx2", "fma"}), 32),
    (frozenset({"avx"}), 16),
    (frozenset({"sse"}), 8),
    (frozenset({"sve"}), 64),
    (frozenset({"asimd"}), 32),
    (frozenset({"neon"}), 32),
)
# Without cpufreq (as in most VMs) /proc/cpuinfo shows the base clock, and server parts
# turbo to nearly twice theirs (Xeon Platinum 8480+: 2.0 to 3.8 GHz).
TURBO_HEADROOM = 2.0
# The bandwidth copy is larger than the last-level cache, so that it streams from DRAM, but
# capped so that measuring stays cheap: a cache larger than the cap serves part of the
# copy, which errs high, the safe side for a bound.
COPY_MIN_BYTES = 64 * 1024**2
COPY_MAX_BYTES = 128 * 1024**2
COPY_ROUNDS = 6  # the first faults the pages in, so it is never the best
# A copy's stores read each line first (write-allocate), so DRAM moves three bytes for the
# two counted, and kernels with streaming stores or better prefetching beat numpy's copy.
BANDWIDTH_HEADROOM = 2.0


@dataclass(frozen=True)
class CpuPeak:
    """What some cores of this machine can do at most; None where a figure is unknown."""

    gflops: float | None  # fp32
    gbps: float | None  # DRAM
    llc_bytes: int | None  # a working set below this is served by the cache, not by DRAM
    basis: str  # how each figure was obtained, in one line for feedback


@functools.cache
def cpu_peak(threads: int = 1) -> CpuPeak:
    """Upper bounds for `threads` cores (at most those usable): fp32 flop/s from the ISA and
    the clock, DRAM bandwidth from a copy timed once per process. The copy is trusted code
    in the caller's process, never a candidate's, so a candidate cannot slow it down."""
    cores = max(1, min(threads, usable_cores() or 1))
    llc = llc_bytes()
    gflops, flops_basis = _peak_gflops(cpuinfo(), cores)
    gbps, memory_basis = _peak_gbps(cores, llc)
    cache_basis = f"LLC {human_size(llc)} from sysfs" if llc else "LLC unknown"
    return CpuPeak(gflops, gbps, llc, "; ".join((flops_basis, memory_basis, cache_basis)))


def _peak_gflops(info: dict[str, str], cores: int) -> tuple[float | None, str]:
    flags = set((info.get("flags") or info.get("Features") or "").split())
    widest = next(((ext, n) for ext, n in FLOPS_PER_CYCLE if ext <= flags), None)
    if widest is None:
        return None, "fp32 peak unknown (no vector extension in /proc/cpuinfo)"
    ghz, clock_basis = _max_ghz(info)
    if ghz is None:
        return None, "fp32 peak unknown (no clock in sysfs or /proc/cpuinfo)"
    extension, per_cycle = widest
    gflops = per_cycle * ghz * cores
    return gflops, (
        f"fp32 peak {gflops:.4g} GFLOP/s = {per_cycle} flop/cycle "
        f"({'+'.join(sorted(extension))}, 2 pipes) x {ghz:.3g} GHz ({clock_basis}) "
        f"x {cores} core{'s' if cores > 1 else ''}"
    )


def _max_ghz(info: dict[str, str]) -> tuple[float | None, str]:
    try:
        return int(MAX_FREQ.read_text()) / 1e6, "cpufreq max"
    except (OSError, ValueError):
        pass
    try:
        mhz = float(info["cpu MHz"])
    except (KeyError, ValueError):
        return None, ""
    if mhz <= 0:
        return None, ""
    return mhz * TURBO_HEADROOM / 1e3, f"cpu MHz {mhz:.0f} x {TURBO_HEADROOM:g} for turbo"


def _peak_gbps(cores: int, llc: int | None) -> tuple[float | None, str]:
    size = min(max(4 * (llc or 0), COPY_MIN_BYTES), COPY_MAX_BYTES)
    measured = _copy_gbps(cores, size)
    if measured is None:
        return None, "memory bandwidth unknown (no memory for the copy)"
    gbps = measured * BANDWIDTH_HEADROOM
    return gbps, (
        f"memory {gbps:.4g} GB/s = {BANDWIDTH_HEADROOM:g} x {measured:.4g} GB/s measured by "
        f"a {cores}-thread copy of {human_size(size)}"
    )


@functools.cache
def _copy_gbps(threads: int, size: int) -> float | None:
    """The best of a few timed copies, reads and writes both counted. numpy lets go of the
    GIL while it copies, so each thread streams its own slice at once."""
    try:
        source = np.ones(size // 4, dtype=np.float32)
        target = np.zeros_like(source)
    except MemoryError:
        return None
    bounds = np.linspace(0, source.size, threads + 1).astype(int)
    slices = [(target[a:b], source[a:b]) for a, b in pairwise(bounds)]
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(COPY_ROUNDS):
            started = time.perf_counter()
            list(pool.map(lambda pair: np.copyto(*pair), slices))
            best = min(best, time.perf_counter() - started)
    return 2 * source.nbytes / best / 1e9
