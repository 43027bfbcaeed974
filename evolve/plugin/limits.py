"""The limits a sandbox job runs under, and how a job stopped by one is said.

A job stopped at a limit is said in the limit's own words: which limit, its value, and the
task key that sets it, so that the reader knows what to raise (or what the program must
stop doing). The sandbox's supervisor knows some stops for certain (its timer, a signal
that only a limit sends, a kill the memory cgroup counted); others a job's output shows
(`MemoryError`, `File too large`, a fork refused), and are said as what its output shows.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

# The limits a stop can be put down to, by their field in Limits ("cpu_s": the CPU time).
TIME, CPU, MEMORY, FILE_SIZE, PROCESSES = (
    "timeout_s",
    "cpu_s",
    "memory_bytes",
    "max_file_bytes",
    "max_processes",
)
# The task key that sets each limit (evolve/task/schema.py, SandboxSpec.limits); the timeout's is
# the job's own (Limits.timeout_key), since evaluators give some jobs timeouts of their own.
TASK_KEYS = {
    MEMORY: "sandbox.memory_mb",
    FILE_SIZE: "sandbox.max_file_mb",
    PROCESSES: "sandbox.max_processes",
    "max_output_bytes": "sandbox.max_output_kb",
}
MB = 1024**2

# What a job's output says when it ran into a limit that the supervisor cannot see: an
# allocation refused at RLIMIT_AS (or a sanitizer's RSS cap), a write past RLIMIT_FSIZE by
# a program that ignores SIGXFSZ (Python does), a fork or thread refused at RLIMIT_NPROC.
# Only the host's allocators' words: a GPU's "out of memory" is no limit of the sandbox's.
SIGNS = (
    (
        MEMORY,
        re.compile(
            rb"\bMemoryError\b|std::bad_alloc|Cannot allocate memory|\bENOMEM\b"
            rb"|hard rss limit exhausted|out of memory: allocator"
        ),
    ),
    (FILE_SIZE, re.compile(rb"File too large|\bEFBIG\b|\[Errno 27\]")),
    (
        PROCESSES,
        re.compile(rb"Resource temporarily unavailable|Cannot fork|fork: retry|\bEAGAIN\b"),
    ),
)


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 30.0
    cpu_s: float | None = None  # defaults to timeout_s: a busy loop dies even if the timer is lost
    memory_bytes: int = 2 * 1024**3
    # RLIMIT_AS: None means memory_bytes; 0 (or less) means none, for sanitized binaries, which
    # reserve terabytes of address space that they never touch. Memory then stays capped by
    # the container's cgroup under Docker, but the process backend relies on the sanitizer's
    # own RSS cap (hard_rss_limit_mb), which the c_kernel sanitize stage compiles in.
    address_space_bytes: int | None = None
    max_processes: int = 64
    max_output_bytes: int = 1024**2  # per stream; the rest is drained and dropped
    max_file_bytes: int = 256 * 1024**2
    # The task key that sets timeout_s, for the message of a job that ran past it: an
    # evaluator that gives a job a timeout of its own (a counted call's) names its key here.
    timeout_key: str = "sandbox.timeout_s"


def limit_said(limits: Limits, which: str) -> str:
    """`its memory limit of 2048 MB (sandbox.memory_mb)`: the limit, its value, its key."""
    if which == TIME:
        return f"its time limit of {limits.timeout_s:g} s ({limits.timeout_key})"
    if which == CPU:
        if limits.cpu_s is not None:
            return f"its CPU time limit of {limits.cpu_s:g} s"
        return (
            f"its CPU time limit, {limits.timeout_s:g} s of CPU ({limits.timeout_key}; "
            "the CPU time of all its threads counts)"
        )
    if which == MEMORY:
        return f"its memory limit of {_mb(limits.memory_bytes)} ({TASK_KEYS[MEMORY]})"
    if which == FILE_SIZE:
        return (
            f"its file size limit of {_mb(limits.max_file_bytes)} per file ({TASK_KEYS[FILE_SIZE]})"
        )
    if which == PROCESSES:
        return f"its limit of {limits.max_processes} processes and threads ({TASK_KEYS[PROCESSES]})"
    raise ValueError(f"no limit {which!r}")


def stopped(limits: Limits, which: str, wall_s: float, cpu_s: float) -> str:
    """How a job that the supervisor saw stopped at `which` ended, as a verb phrase."""
    if which == TIME:
        return f"ran past {limit_said(limits, TIME)} and was killed after {wall_s:.1f} s"
    if which == CPU:
        return f"used up {limit_said(limits, CPU)} and was killed after {cpu_s:.1f} s of CPU"
    if which == FILE_SIZE:
        return (
            f"was killed by signal {signal.SIGXFSZ.value} (SIGXFSZ) for writing a file past "
            f"{limit_said(limits, FILE_SIZE)}"
        )
    if which == MEMORY:
        return f"was killed by the out-of-memory killer at {limit_said(limits, MEMORY)}"
    raise ValueError(f"no stop at {which!r}")


def oom_said(limits: Limits, count: int) -> str:
    """What the out-of-memory killer did to a job that it did not end itself (it killed a
    process the job started, which the job then reported)."""
    processes = "1 of its processes" if count == 1 else f"{count} of its processes"
    return f"the out-of-memory killer killed {processes} at {limit_said(limits, MEMORY)}"


def sign_in(output: bytes) -> str | None:
    """The limit a failed job's output says it ran into, if it says so."""
    return next((which for which, sign in SIGNS if sign.search(output)), None)


def _mb(size: int) -> str:
    return f"{size / MB:g} MB" if size >= MB else f"{size} bytes"
