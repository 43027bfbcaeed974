"""What the metrics our evaluators report mean, so a prompt can say it.

A model shown `time_spread 0.86` reads a number; told that it is the spread of the timed
calls, 86% of their median, it reads noise, and stops chasing a 5% gain inside it. A name is
looked up exactly first (per evaluator, where one means something else by a common name
such as `speedup`), then by its pattern (`*_per_s`, `text.*`, `*_ms`). A pattern may give
only a unit; a metric found nowhere is shown as its bare number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Meaning:
    label: str  # how the legend names it: the metric, or its pattern ("text.<file>")
    unit: str  # written after the value; "" for a plain number, "x" for a ratio of times
    text: str = ""  # one line: what it measures; "" where the name and unit say it all
    fraction: bool = False  # a share, shown as a percentage too

    def value(self, number: float, digits: int = 6) -> str:
        """`number` with its unit, to `digits` significant digits: `0.0123 s`, `2.1x`,
        `0.86 (86%)`, `5120 B`."""
        shown = _number(number, digits)
        if self.fraction:
            return f"{shown} ({number:.0%})"
        if self.unit == "x":
            return f"{shown}x"
        return f"{shown} {self.unit}" if self.unit else shown


def _number(value: float, digits: int = 6) -> str:
    """Six significant digits by default (llvm_inline's size ratios move in the fifth);
    whole numbers, byte counts mostly, in full rather than in exponent form."""
    value = float(value)  # an evaluator of the task's own may report ints
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.{digits}g}"


def _spread(what: str) -> str:
    return f"relative spread of the {what}, (max - min) / median: 0.86 means 86% noise"


def _floor(unit: str) -> Meaning:
    return Meaning(f"roofline_floor_{unit}", unit, "the least time a call can take at peak")


SHARED = {
    m.label: m
    for m in (
        Meaning(
            "speedup",
            "x",
            "the seed's time / this program's, both timed in the same job; above 1 is faster",
        ),
        Meaning("time_s", "s", "median time of one call"),
        Meaning("time_spread", "", _spread("timed calls"), fraction=True),
        Meaning("speedup_spread", "", _spread("per-pair speedups"), fraction=True),
        Meaning("wall_time_s", "s", "median wall-clock time of one call"),
        Meaning("seed_time_s", "s", "median time of one call of the seed, in the same job"),
        Meaning("gbps", "GB/s", "bytes moved per call / time"),
        Meaning("gflops", "GFLOP/s", "floating-point operations per call / time"),
        Meaning("flagged", "", "1: the result looks implausible; the feedback says why"),
        _floor("s"),
        _floor("ms"),
        Meaning("est_cycles", "cycles", "cachegrind's cost estimate of one call"),
        Meaning("code_bytes", "B", "machine code in the compiled object, every executable section"),
        Meaning("est_speedup", "x", "the seed's est_cycles / this program's: no timing noise"),
        Meaning("time_ms", "ms", "median time of one call"),
        Meaning("ref_time_ms", "ms", "median time of one call of the reference kernel"),
        Meaning("hidden_ms", "ms", "per call, host-clock time beyond the GPU events"),
        Meaning("reps", "calls", "how many calls were timed"),
        Meaning("correct", "", "1: the outputs matched the reference in every round"),
        Meaning("registers", "per thread", "registers of the hungriest kernel"),
        Meaning("spill_bytes", "B", "registers spilled to local memory; 0 is best"),
        Meaning("clocks_locked", "", "1: the GPU clocks were held fixed while timed"),
        Meaning(
            "size_ratio",
            "",
            "geometric mean over the training files of .text size / the reference level's "
            "(-Oz unless the task says otherwise); lower is smaller, 1 matches it",
        ),
        Meaning("heldout_ratio", "", "size_ratio on files the search never scores by"),
        Meaning("fast_ratio", "", "size_ratio on the fast tier, a few files"),
        Meaning("compile_s", "s", "clang's CPU time compiling the training files"),
        Meaning("run_wall_s", "s", "wall time of the run job, measured outside the sandbox"),
        Meaning("combined_score", "", "the task evaluator's own score"),
        Meaning("distance", "", "how far the knobs are from the target; lower is better"),
        Meaning("knob_sum", "", "the sum of the numeric knobs"),
    )
}
BY_EVALUATOR = {
    "cuda_kernel": {
        "speedup": Meaning(
            "speedup", "x", "the task's reference kernel's time / this program's, same session"
        ),
    },
}

Pattern = tuple[re.Pattern[str], Callable[[re.Match[str]], Meaning]]


def _pattern(regex: str, make: Callable[[re.Match[str]], Meaning]) -> Pattern:
    return re.compile(regex), make


# code_layout's counts, each from callgrind's simulation of the workloads.
LAYOUT_MEASURES = {
    "i1": "I1 misses",
    "ll": "last-level instruction misses",
    "lines": "distinct 64 B lines of the program's text where an executed instruction starts",
    "pages": "distinct 4 KiB pages of the program's text where an executed instruction starts",
}


def _layout_ratio(match: re.Match[str]) -> Meaning:
    split = "held-out" if match[1] else "training"
    what = LAYOUT_MEASURES[match[2]]
    return Meaning(
        match[0], "", f"geomean over the {split} workloads of {what} / the default order's"
    )


PATTERNS = (
    _pattern(r"^text\..+$", lambda m: Meaning("text.<file>", "B", ".text bytes of that file")),
    _pattern(r"^(heldout_)?(i1|ll|lines|pages)_ratio$", _layout_ratio),
    _pattern(
        r"^(train|heldout)_(i1|ll|lines|pages)$",
        lambda m: Meaning(m[0], "", f"{LAYOUT_MEASURES[m[2]]}, summed over the {m[1]} workloads"),
    ),
    _pattern(
        r"^(\w+)_text_bytes$", lambda m: Meaning(m[0], "B", f"total .text bytes, {m[1]} files")
    ),
    _pattern(
        r"^fast_[\d.]+$", lambda m: Meaning("fast_<p>", "", "1 when speedup is above p, else 0")
    ),
    _pattern(
        r"^(ref_)?time_p(10|90)_ms$",
        lambda m: Meaning(
            "time_p10_ms, time_p90_ms",
            "ms",
            "10th and 90th percentile call times (ref_: the reference kernel's)",
        ),
    ),
    _pattern(r"^(\w+)_per_s$", lambda m: Meaning(m[0], f"{m[1]}/s", f"{m[1]} per call / time")),
    _pattern(r"^\w+_pct$", lambda m: Meaning(m[0], "%")),
    _pattern(r"^\w+_mhz$", lambda m: Meaning(m[0], "MHz")),
    _pattern(r"^\w+_bytes$", lambda m: Meaning(m[0], "B")),
    _pattern(r"^\w+_ms$", lambda m: Meaning(m[0], "ms")),
    _pattern(r"^\w+_ns$", lambda m: Meaning(m[0], "ns")),
    _pattern(r"^\w+_s$", lambda m: Meaning(m[0], "s")),
)


def meaning(name: str, evaluator: str = "") -> Meaning | None:
    """The unit and meaning of metric `name` as `evaluator` reports it; None when unknown."""
    exact = BY_EVALUATOR.get(evaluator, {}).get(name) or SHARED.get(name)
    if exact is not None:
        return exact
    for regex, make in PATTERNS:
        found = regex.match(name)
        if found:
            return make(found)
    return None


def shown(name: str, value: float, evaluator: str = "") -> str:
    """`name = value unit`, the way a prompt writes one metric."""
    known = meaning(name, evaluator)
    return f"{name} = {known.value(value) if known else _number(value)}"


def legend(names: Iterable[str], evaluator: str = "") -> str:
    """One line per meaning the metrics `names` have, each once (`text.<file>` covers every
    file); empty when none of them has one."""
    lines: dict[str, str] = {}
    for name in names:
        known = meaning(name, evaluator)
        if known is not None and known.text and known.label not in lines:
            unit = f" ({known.unit})" if known.unit and known.unit != "x" else ""
            lines[known.label] = f"- {known.label}{unit}: {known.text}"
    return "\n".join(lines.values())
