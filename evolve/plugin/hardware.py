"""A factual description of the machine that evaluates candidates, for prompts and for
each evaluation's record (its physical peaks are in evolve/plugin/peaks.py).

A model writes faster code when it knows the vector width, the cache sizes and the GPU it
is tuning for. Each part is read from Linux's own files or from `nvidia-smi`; a part that
cannot be had is left out, so describing the hardware never fails. Evaluation workers
import this module for `cpu_model`, so it loads nothing heavy.
"""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from pathlib import Path

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
CACHE_KIND = {"Data": "d", "Instruction": "i", "Unified": ""}
# The fullest query first; older drivers know fewer fields.
GPU_QUERIES = ("name,memory.total,compute_cap,clocks.max.sm", "name,memory.total")
GPU_FIELD_NAMES = ("", "memory", "compute capability", "max SM clock")


@functools.cache
def describe_hardware() -> str:
    """One line per known part: CPU, ISA extensions, caches, memory, GPUs."""
    info = cpuinfo()
    parts = (_cpu(info), _isa(info), _caches(), _memory(), *_gpus())
    return "\n".join(p for p in parts if p)


def llc_bytes() -> int | None:
    """The largest data or unified cache that cpu0 sees."""
    sizes: list[int] = []
    for index in CACHE_DIR.glob("index*"):
        try:
            if (index / "type").read_text().strip() != "Instruction":
                sizes.append(size_bytes((index / "size").read_text().strip()))
        except (OSError, ValueError):
            continue
    return max(sizes, default=None)


def usable_cores() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def cpu_model() -> str:
    """This machine's CPU as /proc/cpuinfo names it (or the platform's word for it)."""
    info = cpuinfo()
    return info.get("model name") or info.get("Hardware") or platform.processor() or "unknown"


def cpuinfo() -> dict[str, str]:
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
    usable = usable_cores()
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
            size = size_bytes((index / "size").read_text().strip())
            sharing = _count_cpus((index / "shared_cpu_list").read_text().strip())
        except (OSError, ValueError):
            continue
        shared = f" shared by {sharing} CPUs" if sharing > 1 else ""
        sizes.append(f"L{level}{kind} {human_size(size)}{shared}")
    return "Caches: " + ", ".join(sizes) if sizes else ""


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"Memory: {human_size(int(line.split()[1]) * 1024)}"
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


def size_bytes(size: str) -> int:
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


def human_size(size: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    k = 0
    while size >= 1024 and k < len(units) - 1:
        size, k = size / 1024, k + 1
    return f"{size:.4g} {units[k]}"
