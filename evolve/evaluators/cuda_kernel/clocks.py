"""The GPU's clocks during a measurement, read with nvidia-smi from inside the sandbox.

Timings from a GPU that boosts and throttles at will differ run to run; a kernel engineer
locks the clocks (`nvidia-smi -lgc`) before comparing. We record what the clocks were and,
best effort, whether they were held: the "applications clocks setting" event reason is set
while a lock or applications clocks hold them, and applications clocks that differ from the
defaults mean someone set them.
"""

from __future__ import annotations

from evolve.plugin.stages import Runner

FIELDS = (
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "clocks.applications.graphics",
    "clocks.default_applications.graphics",
)
REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")  # new, old drivers
APPLICATIONS_SETTING = 0x2


def parse(line: str) -> dict[str, float] | None:
    """Metrics from one `--format=csv,noheader,nounits` line of FIELDS plus a reason mask."""
    values = [value.strip() for value in line.split(",")]
    if len(values) != len(FIELDS) + 1:
        return None
    try:
        sm, mem, max_sm, app, default_app = (float(v) for v in values[:-1])
        reasons = int(values[-1], 16)
    except ValueError:
        return None
    held = bool(reasons & APPLICATIONS_SETTING) or app != default_app
    return {
        "sm_clock_mhz": sm,
        "mem_clock_mhz": mem,
        "max_sm_clock_mhz": max_sm,
        "clocks_locked": float(held),
    }


def read(run: Runner) -> tuple[dict[str, float], str]:
    """Clock metrics and a feedback line; no metrics where nvidia-smi is absent or too old."""
    for reasons in REASONS:
        query = f"--query-gpu={','.join((*FIELDS, reasons))}"
        result = run(["nvidia-smi", query, "--format=csv,noheader,nounits", "-i", "0"], {})
        clocks = parse(result.stdout.decode(errors="replace").strip()) if result.ok else None
        if clocks:
            state = "locked" if clocks["clocks_locked"] else "not locked (timings may drift)"
            return clocks, (
                f"clocks: SM {clocks['sm_clock_mhz']:.0f} MHz (max "
                f"{clocks['max_sm_clock_mhz']:.0f}), memory {clocks['mem_clock_mhz']:.0f} MHz, "
                f"{state}"
            )
    return {}, "clocks: unknown (nvidia-smi is not available in the sandbox)"
