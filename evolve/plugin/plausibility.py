"""What no machine can do: the roofline floor under a kernel's time, and the wording that
marks a result as suspect.

Every evaluator flags the same way, so that the engine and the views read one convention:
metric `flagged` is 1.0 and each reason is a feedback line that starts with `FLAGGED: `.
"""

from __future__ import annotations

from collections.abc import Iterable

FLAG_PREFIX = "FLAGGED: "
FLAGGED_METRIC = "flagged"


def roofline_floor_s(
    flops: float, bytes_moved: float, gflops: float | None, gbps: float | None
) -> float | None:
    """The least time the work can take: max(FLOPs / peak, bytes / bandwidth). A peak that
    is unknown drops its term, since the other alone still bounds the time from below;
    None when both are unknown."""
    terms = [work / (peak * 1e9) for work, peak in ((flops, gflops), (bytes_moved, gbps)) if peak]
    return max(terms) if terms else None


def bandwidth_applies(bytes_moved: float, llc_bytes: int | None) -> bool:
    """Whether DRAM bandwidth bounds a CPU kernel's calls: only when its working set
    overflows the last-level cache, because repeated calls on data that fits are served by
    the cache, legitimately faster than DRAM. An unknown cache size proves nothing."""
    return llc_bytes is not None and bytes_moved > llc_bytes


def roofline_flag(time_s: float, floor_s: float, basis: str = "") -> str:
    """The reason, without the prefix, for a time under the roofline floor; `basis` says
    where the peaks came from."""
    where = f"; {basis}" if basis else ""
    return (
        f"{_duration(time_s)} beats the roofline floor {_duration(floor_s)} (the larger of "
        f"FLOPs / peak and bytes / bandwidth{where}): physically implausible"
    )


def flag_lines(reasons: Iterable[str]) -> list[str]:
    return [FLAG_PREFIX + reason for reason in reasons]


def flag_reasons(feedback: str) -> list[str]:
    """The reasons flagged in a feedback text, wherever a stage's prefix put their lines."""
    return [line.split(FLAG_PREFIX, 1)[1] for line in feedback.splitlines() if FLAG_PREFIX in line]


def _duration(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"
