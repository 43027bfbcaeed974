"""Counters stage: count one kernel call's events with perf or cachegrind.

The counted run is the driver's `check` mode, a single call on inputs of its own. Its output
is compared with the reference as well, so a kernel that takes a cheap wrong path when it
notices the tool gets no counters. Nothing here fails a candidate.

Under cachegrind the stage also reports `est_cycles`, a deterministic cost: the same binary
on the same inputs counts the same every run, so a loaded machine can still rank candidates
by it. It is the usual cycle estimate for cachegrind's counts, one cycle per instruction,
10 per first-level miss and 100 per last-level miss:

    est_cycles = Ir + 10 (I1mr + D1mr + D1mw) + 100 (ILmr + DLmr + DLmw)

and `est_speedup` is the seed's est_cycles over the candidate's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from evolve.evaluators.c_kernel.check import check_argv
from evolve.evaluators.c_kernel.compare import compare
from evolve.evaluators.c_kernel.oracle import Trial
from evolve.evaluators.c_kernel.params import CKernelParams
from evolve.plugin.counters import CACHEGRIND, NONE, measure_counters
from evolve.plugin.results import Counter
from evolve.plugin.stages import Runner

# The counters worth a place in the feedback line, in its order; the rest stay in the record.
HEADLINE = (
    "instructions",
    "cycles",
    "D1_read_misses",
    "LL_misses",
    "cache-misses",
    "branch-misses",
)


def _number(value: float) -> str:
    return f"{value:.3g}".replace("e+0", "e").replace("e+", "e")


def _label(name: str) -> str:
    return name.replace("_", " ")


def _context(name: str, counters: Mapping[str, Counter]) -> str:
    """A ratio that makes a raw count readable: IPC beside cycles, the D1 read miss rate."""
    values = {key: counter.value for key, counter in counters.items()}
    if name == "cycles" and values.get("instructions") and values[name]:
        return f" (IPC {values['instructions'] / values[name]:.2f})"
    if name == "D1_read_misses" and values.get("data_reads"):
        return f" ({values[name] / values['data_reads']:.1%} of reads)"
    return ""


def describe(
    counters: Mapping[str, Counter],
    source: str,
    sizes: Mapping[str, int],
    seed: Mapping[str, Counter],
) -> str:
    """One feedback line, e.g. `counters (cachegrind, simulated, n=128, one call):
    instructions 1.52e7, ...; vs seed: instructions -61.0%`."""
    how = f"{source}, simulated" if source == CACHEGRIND else source
    where = ", ".join(f"{key}={value}" for key, value in sizes.items())
    shown = [name for name in HEADLINE if name in counters]
    readings = [f"{_label(n)} {_number(counters[n].value)}{_context(n, counters)}" for n in shown]
    line = f"counters ({how}, {where}, one call): {', '.join(readings)}"
    changes = [
        f"{_label(name)} {counters[name].value / seed[name].value - 1:+.1%}"
        for name in shown
        if name in seed and seed[name].value
    ]
    return f"{line}; vs seed: {', '.join(changes)}" if changes else line


L1_MISS_CYCLES, LL_MISS_CYCLES = 10, 100
L1_MISSES = ("I1_misses", "D1_read_misses", "D1_write_misses")


def estimated_cycles(counters: Mapping[str, Counter]) -> float | None:
    """The cycle estimate above, or None unless cachegrind counted every term."""
    needed = ("instructions", *L1_MISSES, "LL_misses")
    if any(counters.get(n) is None or counters[n].source != CACHEGRIND for n in needed):
        return None
    l1 = sum(counters[name].value for name in L1_MISSES)
    return (
        counters["instructions"].value
        + L1_MISS_CYCLES * l1
        + LL_MISS_CYCLES * (counters["LL_misses"].value)
    )


def cost_metrics(counters: Mapping[str, Counter], seed: Mapping[str, Counter]) -> dict[str, float]:
    estimate = estimated_cycles(counters)
    if estimate is None:
        return {}
    metrics = {"est_cycles": estimate}
    seed_estimate = estimated_cycles(seed)
    if seed_estimate and estimate:
        metrics["est_speedup"] = seed_estimate / estimate
    return metrics


def count(
    run: Runner,
    binary: bytes,
    trial: Trial,
    params: CKernelParams,
    source: str,
    seed: Mapping[str, Counter],
    sizes: Mapping[str, int],
) -> tuple[dict[str, Counter], str]:
    """The counters of one call on `trial` (made at `sizes`), and the feedback line."""
    if source == NONE:
        return {}, "no counters: perf cannot read this CPU's counters and valgrind is absent"
    counted = measure_counters(
        run.sandbox,
        check_argv(trial, params, sizes),
        files={"kernel": binary, "inputs.bin": trial.inputs},
        limits=replace(
            run.limits,
            timeout_s=params.counter_timeout_s,
            cpu_s=None,
            timeout_key="evaluator.params.counter_timeout_s",
        ),
        source=source,
        collect=["output.bin"],
    )
    if counted.problem:
        return {}, f"no counters: {counted.problem}"
    output = counted.result.files.get("output.bin")
    wrong = compare(output, trial.expected)
    if wrong:
        return {}, f"counters discarded: the counted call's output is wrong: {wrong}"
    return counted.counters, describe(counted.counters, source, sizes, seed)
