"""Hardware-event counts for a command in any sandbox: perf where the CPU's counters are
readable, valgrind's cachegrind (simulated, deterministic) where they are not.

Counting needs nothing from a backend beyond `Sandbox.run`: the argv is wrapped in the
counting tool and the file the tool writes comes back through `collect`. So the tool must
be installed in the sandbox, and `detect_source` asks the sandbox, not the host.

Trust: only the tool's own output file is parsed, never the candidate's stdout. Its name is
random per run, so a candidate cannot plant a forged file in advance, and the tool writes
it after the candidate has finished. A counted run that did not exit cleanly yields no
counters at all: cachegrind writes partial totals even for a client it saw crash, and perf
exits 0 for a command killed by a signal (see `perf_saw_a_signal`).
This stops forgery by a candidate that only guesses; one that reads its parent's argv in
/proc, or (under valgrind, which shares its process) corrupts the tool's memory, can still
lie. Counters are diagnostics for feedback, so that residue is accepted, not scored.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from evolve.plugin.results import Counter
from evolve.plugin.sandbox import Limits, RunResult, Sandbox

PERF = "perf"
CACHEGRIND = "cachegrind"
NONE = "none"

# Our counter name -> the cachegrind events summed into it.
CACHEGRIND_COUNTERS: dict[str, tuple[str, ...]] = {
    "instructions": ("Ir",),
    "data_reads": ("Dr",),
    "data_writes": ("Dw",),
    "I1_misses": ("I1mr",),
    "D1_read_misses": ("D1mr",),
    "D1_write_misses": ("D1mw",),
    "LL_misses": ("ILmr", "DLmr", "DLmw"),
}

_detected: WeakKeyDictionary[Sandbox, dict[tuple[str, ...], str]] = WeakKeyDictionary()


@dataclass(frozen=True)
class CounterSpec:
    """The perf events to count; cachegrind ignores them and counts its fixed set."""

    events: tuple[str, ...] = ("instructions", "cycles", "cache-misses", "branch-misses")

    def __post_init__(self) -> None:
        bad = [event for event in self.events if not event or "," in event]
        if not self.events or bad:
            raise ValueError(f"perf events must be non-empty names without commas, got {bad}")


DEFAULT_SPEC = CounterSpec()
PROBE = CounterSpec(("instructions",))


@dataclass
class CountedRun:
    """The wrapped run, its counters, and why there are none when `counters` is empty."""

    result: RunResult
    counters: dict[str, Counter]
    problem: str | None = None


def parse_perf_csv(text: str) -> dict[str, float]:
    """Counts from `perf stat -x,` output: `value,unit,event,run time,percent[,metric,unit]`.

    Events perf could not count (`<not supported>`, `<not counted>`) are left out rather
    than read as zero. Modifiers (`instructions:u`) and hybrid PMU prefixes
    (`cpu_core/instructions/`) are dropped, and the cores' counts of one event are summed.
    """
    counts: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.strip().split(",")
        if len(fields) < 3 or fields[0].startswith("#"):
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        event = fields[2]
        if event.count("/") >= 2:
            event = event.split("/")[1]
        event = event.split(":")[0]
        counts[event] = counts.get(event, 0.0) + value
    return counts


def parse_cachegrind(text: str) -> dict[str, float]:
    """Our counters from a cachegrind out file's `events:` and `summary:` lines.

    Raises ValueError naming what is missing; counters whose events were not simulated
    (say, misses under --cache-sim=no) are left out.
    """
    events: list[str] | None = None
    totals: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            totals = line.split()[1:]
    if events is None or totals is None:
        raise ValueError("the cachegrind file has no events: or no summary: line")
    if len(events) != len(totals):
        raise ValueError(f"cachegrind lists {len(events)} events but {len(totals)} totals")
    by_event = dict(zip(events, (float(total) for total in totals), strict=True))
    return {
        name: sum(by_event[part] for part in parts)
        for name, parts in CACHEGRIND_COUNTERS.items()
        if all(part in by_event for part in parts)
    }


def perf_saw_a_signal(stderr: bytes, program: str) -> bool:
    """perf stat exits 0 when its command dies by a signal: it only psignal()s it to stderr.

    A candidate that floods stderr past the sandbox's cap can hide that line; callers that
    need more certainty check the command's own output, as c_kernel does.
    """
    lines = set(stderr.decode(errors="replace").splitlines())
    return any(f"{program}: {signal.strsignal(number)}" in lines for number in signal.Signals)


def measure_counters(
    sandbox: Sandbox,
    argv: Sequence[str],
    *,
    files: Mapping[str, bytes],
    limits: Limits,
    source: str,
    spec: CounterSpec = DEFAULT_SPEC,
    collect: Sequence[str] = (),
) -> CountedRun:
    """Run argv under `source`'s tool; the candidate misbehaving gives a `problem`, not a raise.

    `limits` bound the whole wrapped run: allow for cachegrind being 20-100x slower.
    """
    if source == PERF:
        out = f".counters-{uuid.uuid4().hex}.csv"
        tool = ["perf", "stat", "-x,", "-o", out, "-e", ",".join(spec.events), "--"]
    elif source == CACHEGRIND:
        out = f".counters-{uuid.uuid4().hex}.cg"
        tool = ["valgrind", "-q", "--tool=cachegrind", "--cache-sim=yes"]
        tool += [f"--cachegrind-out-file={out}", "--"]
    else:
        raise ValueError(f"unknown counter source {source!r} (known: {PERF}, {CACHEGRIND})")
    result = sandbox.run([*tool, *argv], files=files, limits=limits, collect=[*collect, out])
    written = result.files.pop(out, None)
    if source == PERF and result.ok and perf_saw_a_signal(result.stderr, argv[0]):
        return CountedRun(result, {}, f"{argv[0]} was killed by a signal under perf")
    if not result.ok:
        problem = f"the run under {source} {result.describe()}"
        if source == CACHEGRIND and result.signal == signal.SIGILL:
            problem += " (valgrind cannot decode some instructions, AVX-512 among them)"
        return CountedRun(result, {}, problem)
    if written is None:
        return CountedRun(result, {}, f"{source} wrote no counts")
    text = written.decode(errors="replace")
    try:
        values = parse_perf_csv(text) if source == PERF else parse_cachegrind(text)
    except ValueError as error:
        return CountedRun(result, {}, str(error))
    if not values:
        return CountedRun(result, {}, f"{source} could count none of its events here")
    return CountedRun(result, {name: Counter(value, source) for name, value in values.items()})


def _counts_instructions(sandbox: Sandbox, limits: Limits, source: str) -> bool:
    """Whether `source` counts `true`'s instructions here; a backend may raise when the tool
    is missing (a local exec) where another exits 127 (a container), so both mean no."""
    try:
        probe = measure_counters(
            sandbox, ["true"], files={}, limits=limits, source=source, spec=PROBE
        )
    except FileNotFoundError:
        return False
    return "instructions" in probe.counters


def detect_source(
    sandbox: Sandbox, limits: Limits, sources: tuple[str, ...] = (PERF, CACHEGRIND)
) -> str:
    """The first of `sources` that counts real instructions in this sandbox, else none: by
    default perf where the CPU's counters are readable, else cachegrind if it runs.

    The answer is cached per sandbox object, since what a sandbox can run does not change.
    """
    known = _detected.setdefault(sandbox, {})
    if sources not in known:
        found = (s for s in sources if _counts_instructions(sandbox, limits, s))
        known[sources] = next(found, NONE)
    return known[sources]
