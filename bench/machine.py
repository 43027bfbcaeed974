"""What the bench scripts print about where they ran: the CPU, its cores and its load,
since every figure they report depends on the machine."""

from __future__ import annotations

import os
import re
from pathlib import Path


def say(line: str = "") -> None:
    print(line, flush=True)


def cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return found[1].strip() if found else "unknown CPU"


def machine() -> str:
    return f"{cpu_model()}, {os.cpu_count()} cores"


def load_average() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def spread(values: list[float], form: str = ".2f", scale: float = 1.0) -> str:
    """The lowest and highest of alternated runs, "low-high", or one number when they agree
    at the precision shown."""
    low, high = format(min(values) * scale, form), format(max(values) * scale, form)
    return low if low == high else f"{low}-{high}"
