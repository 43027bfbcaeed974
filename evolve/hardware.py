"""A factual description of the machine that evaluates candidates, for prompts, and its
physical peaks, for telling a fast program from an impossible one.

A model writes faster code when it knows the vector width, the cache sizes and the GPU it
is tuning for. Each part is read from Linux's own files or from `nvidia-smi`, except memory
bandwidth, which no file states and a copy measures; a part that cannot be had is left
out, so describing the hardware never fails.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np

# The instruction-set extensions that change how a kernel should be written.
ISA_OF_INTEREST = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "neon",
    "asimd",
    "asimdhp",
    "sve",
    "sve2",
)
CPUINFO = Path("/proc/cpuinfo")
CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")  # kHz
CACHE_KIND = {"Data": "d", "Instruction": "i", "Unified": ""}
# The fullest query first; older drivers know fewer fields.
GPU_QUERIES = ("name,memory.total,compute_cap,clocks.max.sm", "name,memory.total")
GPU_FIELD_NAMES = ("", "memory", "compute capability", "max SM clock")

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
def describe_hardware() -> str:
    """One line per known part: CPU, ISA extensions, caches, memory, GPUs."""
    info = _cpuinfo()
    parts = (_cpu(info), _isa(info), _caches(), _memory(), *_gpus())
    return "\n".join(p for p in parts if p)


@functools.cache
def cpu_peak(threads: int = 1) -> CpuPeak:
    """Upper bounds for `threads` cores (at most those usable): fp32 flop/s from the ISA and
    the clock, DRAM bandwidth from a copy timed once per process. The copy is trusted code
    in the caller's process, never a candidate's, so a candidate cannot slow it down."""
    cores = max(1, min(threads, _usable_cores() or 1))
    llc = _llc_bytes()
    gflops, flops_basis = _peak_gflops(_cpuinfo(), cores)
    gbps, memory_basis = _peak_gbps(cores, llc)
    cache_basis = f"LLC {_human(llc)} from sysfs" if llc else "LLC unknown"
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
        f"a {cores}-thread copy of {_human(size)}"
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


def _llc_bytes() -> int | None:
    """The largest data or unified cache that cpu0 sees."""
    sizes: list[int] = []
    for index in CACHE_DIR.glob("index*"):
        try:
            if (index / "type").read_text().strip() != "Instruction":
                sizes.append(_bytes((index / "size").read_text().strip()))
        except (OSError, ValueError):
            continue
    return max(sizes, default=None)


def _usable_cores() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def cpu_model() -> str:
    """This machine's CPU as /proc/cpuinfo names it (or the platform's word for it)."""
    info = _cpuinfo()
    return info.get("model name") or info.get("Hardware") or platform.processor() or "unknown"


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields from /proc/cpuinfo (the rest repeat them)."""
    fields: dict[str, str] = {}
    try:
        text = CPUINFO.read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _cpu(info: dict[str, str]) -> str:
    model = info.get("model name") or info.get("Hardware") or platform.processor()
    machine = platform.machine()
    name = f"{model} ({machine})" if model and machine else model or machine
    total = os.cpu_count()
    usable = _usable_cores()
    cores = ""
    if usable:
        cores = f"{usable} cores usable" + (f" of {total}" if total and total != usable else "")
    described = ", ".join(p for p in (name, cores) if p)
    return f"CPU: {described}" if described else ""


def _isa(info: dict[str, str]) -> str:
    flags = set((info.get("flags") or info.get("Features") or "").split())
    found = [f for f in ISA_OF_INTEREST if f in flags]
    return "ISA extensions: " + ", ".join(found) if found else ""


def _caches() -> str:
    sizes: list[str] = []
    for index in sorted(CACHE_DIR.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = CACHE_KIND.get((index / "type").read_text().strip(), "")
            size = _bytes((index / "size").read_text().strip())
            sharing = _count_cpus((index / "shared_cpu_list").read_text().strip())
        except (OSError, ValueError):
            continue
        shared = f" shared by {sharing} CPUs" if sharing > 1 else ""
        sizes.append(f"L{level}{kind} {_human(size)}{shared}")
    return "Caches: " + ", ".join(sizes) if sizes else ""


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"Memory: {_human(int(line.split()[1]) * 1024)}"
    except (OSError, ValueError, IndexError):
        pass
    return ""


def _gpus() -> list[str]:
    """One line per kind of GPU that `nvidia-smi` reports, with a count when several."""
    for query in GPU_QUERIES:
        try:
            done = subprocess.run(
                ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.SubprocessError):
            return []
        if done.returncode == 0:
            break
    else:
        return []
    lines: dict[str, int] = {}
    for row in done.stdout.splitlines():
        values = [v.strip() for v in row.split(",")]
        pairs = zip(GPU_FIELD_NAMES, values, strict=False)
        text = ", ".join(f"{name} {value}".strip() for name, value in pairs if value)
        if text:
            lines[text] = lines.get(text, 0) + 1
    return [f"GPU: {n} x {text}" if n > 1 else f"GPU: {text}" for text, n in lines.items()]


def _bytes(size: str) -> int:
    """Bytes in a sysfs size such as `48K` or `2048K`."""
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if size[-1:].upper() in units:
        return int(size[:-1]) * units[size[-1].upper()]
    return int(size)


def _count_cpus(cpu_list: str) -> int:
    """How many CPUs a sysfs list such as `0-3,8` names."""
    count = 0
    for part in cpu_list.split(","):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def _human(size: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    k = 0
    while size >= 1024 and k < len(units) - 1:
        size, k = size / 1024, k + 1
    return f"{size:.4g} {units[k]}"
