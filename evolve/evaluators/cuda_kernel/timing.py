"""Turn the runner's timings into honest numbers and flags.

Each repetition times the candidate and the reference alternately, both with CUDA events
and with the host clock around a full device synchronisation. The events see only the
legacy default stream; the synchronisation waits for every stream. The reference does no
hidden work, so its (wall - event) gap is the launch-and-sync overhead of this machine;
a candidate whose gap is much larger left work the events did not see, and is timed by
the wall clock instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from evolve.plugin.plausibility import FLAGGED_METRIC, roofline_flag, roofline_floor_s
from evolve.plugin.stages import StageFailed

HIDDEN_FLOOR_MS = 0.02  # below this, a gap is launch jitter, not work
HIDDEN_SHARE = 0.25  # ... and below this share of the kernel's own time
FAST_P = (1.0, 1.5, 2.0)


@dataclass(frozen=True)
class Spread:
    median: float
    p10: float
    p90: float

    @classmethod
    def of(cls, values: np.ndarray) -> Spread:
        p10, median, p90 = np.percentile(values, [10, 50, 90])
        return cls(float(median), float(p10), float(p90))


def parse_times(data: bytes | None, reps: int, sets: int) -> np.ndarray:
    """times.txt as a reps x 5 array (set, cand event, cand wall, ref event, ref wall; ms)."""
    if data is None:
        raise StageFailed("the timed run wrote no times.txt")
    try:
        rows = [[float(v) for v in line.split()] for line in data.decode().splitlines() if line]
    except (UnicodeDecodeError, ValueError):
        raise StageFailed("times.txt holds something other than numbers") from None
    if len(rows) != reps or any(len(row) != 5 for row in rows):
        raise StageFailed(f"times.txt holds {len(rows)} rows, expected {reps} of 5 numbers")
    table = np.array(rows)
    if not np.isfinite(table).all() or (table[:, 1:] <= 0).any():
        raise StageFailed("times.txt holds non-positive or non-finite times")
    if set(table[:, 0].astype(int)) != set(range(sets)):
        raise StageFailed("times.txt does not time every input set")
    return table


def parse_device(data: bytes | None) -> dict[str, str]:
    if data is None:
        return {}
    pairs = (line.split("=", 1) for line in data.decode(errors="replace").splitlines())
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def fp32_lanes(capability: str) -> int:
    """FP32 lanes per SM: 64 on Volta, Turing and A100 (7.x, 8.0), 128 since (8.6 on)."""
    return 64 if capability.startswith("7.") or capability == "8.0" else 128


def detected_peaks(device: Mapping[str, str]) -> tuple[float | None, float | None]:
    """(GFLOP/s, GB/s) from the runner's device.txt: lanes x SMs x 2 x clock, and
    2 (double data rate) x memory clock x bus width; None where an attribute is missing."""
    try:
        gflops = fp32_lanes(device["cc"]) * int(device["sms"]) * 2 * int(device["clock_khz"]) / 1e6
    except (KeyError, ValueError):
        gflops = None
    try:
        gbps = 2 * int(device["mem_clock_khz"]) * int(device["bus_bits"]) / 8 / 1e6
    except (KeyError, ValueError):
        gbps = None
    return gflops, gbps


def roofline_ms(
    flops: float,
    bytes_moved: float,
    device: Mapping[str, str],
    peak_gflops: float | None,
    peak_gbps: float | None,
) -> float | None:
    """The roofline floor in ms; the task's peaks win over detected ones."""
    detected = detected_peaks(device)
    floor_s = roofline_floor_s(
        flops, bytes_moved, peak_gflops or detected[0], peak_gbps or detected[1]
    )
    return None if floor_s is None else floor_s * 1e3


@dataclass(frozen=True)
class Verdict:
    metrics: dict[str, float]
    flags: list[str]


def assess(
    table: np.ndarray, *, floor_ms: float | None, speedup_flag: float, outside_wall_s: float
) -> Verdict:
    """Metrics and flags from the timing table; StageFailed when the times cannot be real."""
    total_ms = float(table[:, 2].sum() + table[:, 4].sum())
    if total_ms > outside_wall_s * 1e3:
        raise StageFailed(
            f"the reported times add up to {total_ms:.1f} ms, more than the {outside_wall_s:.2f}"
            " s the whole run took measured from outside the sandbox: they are not real"
        )
    cand_event, cand_wall, ref_event, ref_wall = (table[:, i] for i in range(1, 5))
    overhead = float(np.median(ref_wall - ref_event))
    hidden = float(np.median(cand_wall - cand_event)) - overhead
    flags: list[str] = []
    candidate = Spread.of(cand_event)
    if hidden > max(HIDDEN_FLOOR_MS, HIDDEN_SHARE * candidate.median):
        flags.append(
            f"hidden work: the host clock saw {hidden:.3f} ms per call more than the events "
            "(work on another stream?); the candidate is timed by the wall clock instead"
        )
        candidate = Spread.of(np.maximum(cand_wall - overhead, cand_event))
    reference = Spread.of(ref_event)
    speedup = reference.median / candidate.median
    if speedup > speedup_flag:
        flags.append(f"speedup {speedup:.1f}x exceeds {speedup_flag:g}x: check it by hand")
    if floor_ms is not None and candidate.median < floor_ms:
        flags.append(roofline_flag(candidate.median / 1e3, floor_ms / 1e3))
    metrics = {
        "time_ms": candidate.median,
        "time_p10_ms": candidate.p10,
        "time_p90_ms": candidate.p90,
        "ref_time_ms": reference.median,
        "ref_time_p10_ms": reference.p10,
        "ref_time_p90_ms": reference.p90,
        "speedup": speedup,
        "hidden_ms": max(hidden, 0.0),
        "reps": float(len(table)),
        FLAGGED_METRIC: float(bool(flags)),
        **{f"fast_{p:g}": float(speedup > p) for p in FAST_P},
    }
    if floor_ms is not None:
        metrics["roofline_floor_ms"] = floor_ms
    return Verdict(metrics, flags)
