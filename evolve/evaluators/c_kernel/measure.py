"""Measure stage: the candidate timed beside the seed by a trusted timer, every output checked.

The timer (timer.py) runs in the sandbox as its own process and owns the clock; this module
sends it the two binaries and fresh inputs for every call, then trusts only what the timer
printed on its stdout (which no kernel holds) and checks every call's output here, against
the reference, whether the candidate's or the seed's. The speedup is the median over pairs
of calls, one of each program, made back to back in random order: a machine that is slow
for a moment is slow for both calls of a pair.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evolve.evaluators.c_kernel import layout
from evolve.evaluators.c_kernel.compare import compare
from evolve.evaluators.c_kernel.metrics import throughput, throughput_line
from evolve.evaluators.c_kernel.oracle import RETIMED, TIMED, Trial
from evolve.evaluators.c_kernel.params import CKernelParams
from evolve.plugin.limits import oom_said
from evolve.plugin.peaks import CpuPeak
from evolve.plugin.plausibility import (
    bandwidth_applies,
    flag_lines,
    roofline_flag,
    roofline_floor_s,
)
from evolve.plugin.stages import Runner, StageFailed, excerpt, require_ok

TIMER = Path(__file__).with_name("timer.py").read_bytes()
CANDIDATE, REFERENCE = "candidate", "reference"
WAITING_MARGIN = 0.5  # more of each call off the CPU than the seed, by this share: suspect


@dataclass(frozen=True)
class Timing:
    """What one timed job established: metrics and the lines that explain them."""

    metrics: dict[str, float]
    lines: list[str]
    flags: list[str]


def sets_needed(params: CKernelParams) -> int:
    """Distinct input sets for one timed job: one per call of either program."""
    return 2 * (params.warmup + params.reps)


def schedule(params: CKernelParams, rng: random.Random) -> list[tuple[str, int, int | None]]:
    """(program, input set, pair) per call: the seed's warm-up first (its time sets the
    give-up limit), then the candidate's, then each pair in a random order."""
    calls: list[tuple[str, int, int | None]] = []
    warm = params.warmup
    calls += [(REFERENCE, i, None) for i in range(warm)]
    calls += [(CANDIDATE, warm + i, None) for i in range(warm)]
    for pair in range(params.reps):
        both = [(REFERENCE, 2 * warm + 2 * pair, pair), (CANDIDATE, 2 * warm + 2 * pair + 1, pair)]
        rng.shuffle(both)
        calls += both
    return calls


def measure(
    run: Runner,
    binary: bytes,
    reference: bytes,
    params: CKernelParams,
    draw: Callable[[int], list[Trial]],
    peak: CpuPeak,
    order: str,
) -> tuple[dict[str, float], str]:
    """The measure stage: time the candidate beside the seed (`reference`) on sets from
    `draw(purpose)`. A time under the roofline is timed again on fresh inputs, and flagged
    if the second timing is under it too. `order` seeds the random order of each pair."""
    watch_scratch = run.sandbox.private_scratch  # elsewhere /dev/shm is not the job's own

    def timed(purpose: int) -> tuple[Timing, Trial]:
        trials = draw(purpose)
        rng = random.Random(f"{order}:{purpose}")
        timing = time_pair(run, binary, reference, trials, params, rng, watch_scratch)
        return timing, trials[0]

    timing, trial = timed(TIMED)
    floor_s, basis = _floor(trial, params, peak)
    flags = list(timing.flags)
    lines = list(timing.lines)
    if floor_s is not None and timing.metrics["time_s"] < floor_s:
        first = timing.metrics["time_s"]
        timing, _ = timed(RETIMED)
        lines, flags = list(timing.lines), list(timing.flags)
        if timing.metrics["time_s"] < floor_s:
            flags.append(roofline_flag(timing.metrics["time_s"], floor_s, basis))
            lines.append(f"timed twice on fresh inputs: {first:.4g}s, then as above")
        else:
            lines.append(
                f"a first timing ({first:.4g}s) beat the roofline floor ({floor_s:.4g}s); "
                "a second on fresh inputs did not, and is the one reported"
            )
    metrics = {**timing.metrics, "flagged": float(bool(flags))}
    if floor_s is not None:
        metrics["roofline_floor_s"] = floor_s
    return metrics, "\n".join([*lines, *flag_lines(flags)])


def _floor(trial: Trial, params: CKernelParams, peak: CpuPeak) -> tuple[float | None, str]:
    """The least time a call can take on this machine, and where the peaks came from: the
    task's own figures first, else the CPU's (bandwidth only when the working set
    overflows the last-level cache)."""
    gflops = params.peak_gflops or peak.gflops
    gbps = params.peak_gbps
    if gbps is None and bandwidth_applies(trial.bytes_moved, peak.llc_bytes):
        gbps = peak.gbps
    stated = params.peak_gflops is not None or params.peak_gbps is not None
    basis = "the task's peaks" if stated else peak.basis
    if trial.flops is None:
        gflops = None  # no flops() in reference.py: the floor is the memory's alone
    return roofline_floor_s(trial.flops or 0.0, trial.bytes_moved, gflops, gbps), basis


def time_pair(
    run: Runner,
    candidate: bytes,
    reference: bytes,
    trials: list[Trial],
    params: CKernelParams,
    rng: random.Random,
    watch_scratch: bool,
) -> Timing:
    """One timer job; StageFailed names what went wrong, the candidate's doing or not."""
    calls = schedule(params, rng)
    size_in, size_out = len(trials[0].inputs), layout.total(trials[0].output_bytes)
    io = [*trials[0].io_args(), *params.size_args()]
    spec = {
        "input_bytes": size_in,
        "output_bytes": size_out,
        "programs": {
            CANDIDATE: ["./kernel", "serve", *io],
            REFERENCE: ["./reference", "serve", *io],
        },
        "start_order": [REFERENCE, CANDIDATE],  # the seed settles before the candidate starts
        "schedule": calls,
        "give_up": {"factor": params.give_up_factor, "floor_s": params.give_up_min_s},
        "watch_scratch": watch_scratch,
    }
    files = {
        "timer.py": TIMER,
        "timing.json": json.dumps(spec).encode(),
        "inputs.bin": b"".join(t.inputs for t in trials),
        "kernel": candidate,
        "reference": reference,
    }
    result = run([run.sandbox.python, "-I", "-S", "timer.py"], files, collect=["outputs.bin"])
    held = f"{_mb(len(files['inputs.bin']))} of inputs in, {_mb(size_out * len(calls))} out"
    require_ok(result, f"the trusted timer, timing {len(calls)} calls ({held})")
    try:
        report = json.loads(result.stdout)
    except ValueError:
        raise StageFailed(f"the timer's report is unreadable: {excerpt(result.stdout)}") from None
    killed = f" ({oom_said(run.limits, result.oom_kills)})" if result.oom_kills else ""
    _fail_on(report, params, killed)
    _judge(report["calls"], result.files.get("outputs.bin"), trials)
    return summarise(report, trials[0], params)


def _mb(size: int) -> str:
    return f"{size / 1024**2:.3g} MB"


def _fail_on(report: dict, params: CKernelParams, killed: str) -> None:
    """Turn what the timer saw go wrong into feedback that says what the kernel did;
    `killed` says what the out-of-memory killer did meanwhile, if anything."""
    failure = report["failure"]
    log = report["logs"].get(CANDIDATE, "").strip()
    said = f"\nthe kernel's output:\n{log}" if log else ""
    if failure is not None:
        call = failure["call"]
        if failure["kind"] == "files":
            raise StageFailed(
                f"{failure['message']}. Kernels may not create, change or remove files: the "
                "times and outputs are the timer's, and every call has fresh inputs, so no "
                f"cache can pay off{said}"
            )
        if failure["kind"] == "gave_up":
            raise StageFailed(
                f"gave up on the candidate at call {call + 1}: it ran past "
                f"{report.get('limit_s', 0):.3g}s, {params.give_up_factor:g}x the seed's "
                f"warm-up call (at least {params.give_up_min_s:g}s); a kernel this slow "
                "cannot win"
            )
        if failure["program"] == REFERENCE:
            raise StageFailed(
                f"the seed's process failed beside the candidate: {failure['message']}. "
                "Kernels may not signal, trace or re-prioritise other processes"
            )
        raise StageFailed(f"timed call {call + 1}: {failure['message']}{killed}{said}")


def _judge(calls: list[dict], outputs: bytes | None, trials: list[Trial]) -> None:
    """Every call's output, the seed's too, against the reference; a seed that fails was
    tampered with. The timer hashed each output as it copied it, so a rewritten file shows."""
    size = layout.total(trials[0].output_bytes)
    if outputs is None or len(outputs) != size * len(calls):
        raise StageFailed("the timer's outputs.bin is missing or the wrong size")
    seen: dict[str, int] = {}
    for number, call in enumerate(calls):
        output = outputs[number * size : (number + 1) * size]
        if hashlib.sha256(output).hexdigest() != call["sha256"]:
            raise StageFailed("outputs.bin differs from what the timer copied: it was rewritten")
        program = call["program"]
        seen[program] = seen.get(program, 0) + 1
        problem = compare(output, trials[call["set"]].expected)
        if problem is None:
            continue
        whose = "the seed's" if program == REFERENCE else "the candidate's"
        total = sum(c["program"] == program for c in calls)
        raise StageFailed(
            f"{whose} call {seen[program]} of {total} (every one on fresh inputs) gave a wrong "
            f"output: {problem}. An answer kept from an earlier call cannot fit a later one"
        )


def _spread(values: list[float]) -> float:
    """(max - min) / median: the whole range, no outlier hidden."""
    return (max(values) - min(values)) / statistics.median(values)


def summarise(report: dict, trial: Trial, params: CKernelParams) -> Timing:
    """Metrics from the timed pairs. A one-thread kernel is timed by its CPU time, which a
    busy machine barely changes (wall time also counts the wait for a CPU, which differs
    between the two calls of a pair); a threaded one by the wall clock. Either clock is
    read by the timer, outside the kernel. A candidate that spends much more of its calls
    off the CPU than the seed does is waiting for something: it is timed by the wall clock
    instead, and flagged."""
    timed = [c for c in report["calls"] if c["pair"] is not None]
    flags: list[str] = []
    clock = "cpu_seconds" if params.threads == 1 else "seconds"
    waiting = {
        program: statistics.median(
            1 - c["cpu_seconds"] / c["seconds"] for c in timed if c["program"] == program
        )
        for program in (CANDIDATE, REFERENCE)
    }
    if clock == "cpu_seconds" and waiting[CANDIDATE] > waiting[REFERENCE] + WAITING_MARGIN:
        clock = "seconds"
        flags.append(
            f"the candidate was off the CPU for {waiting[CANDIDATE]:.0%} of its calls, the seed "
            f"for {waiting[REFERENCE]:.0%}: waiting for something? Timed by the wall clock"
        )
    by_pair: dict[int, dict[str, float]] = {}
    for call in timed:
        by_pair.setdefault(call["pair"], {})[call["program"]] = call[clock]
    ratios = [pair[REFERENCE] / pair[CANDIDATE] for pair in by_pair.values()]
    mine = [c[clock] for c in timed if c["program"] == CANDIDATE]
    seed = [c[clock] for c in timed if c["program"] == REFERENCE]
    median = statistics.median(mine)
    speedup = statistics.median(ratios)
    metrics = {
        "time_s": median,
        "time_spread": _spread(mine),
        "wall_time_s": statistics.median(c["seconds"] for c in timed if c["program"] == CANDIDATE),
        "seed_time_s": statistics.median(seed),
        "speedup": speedup,
        "speedup_spread": _spread(ratios),
        **throughput(trial, params, median),
    }
    how = "CPU time" if clock == "cpu_seconds" else "wall-clock time"
    lines = [
        f"timed by a separate process ({how}): {len(mine)} calls of the candidate and "
        f"{len(seed)} of the seed, in pairs of random order, each call on fresh inputs, "
        "every output checked",
        f"candidate {median * 1e3:.4g} ms (spread {metrics['time_spread']:.0%}; wall "
        f"{metrics['wall_time_s'] * 1e3:.4g} ms), seed {metrics['seed_time_s'] * 1e3:.4g} ms: "
        f"speedup {speedup:.3g}x (pairs {min(ratios):.3g}x to {max(ratios):.3g}x)",
        throughput_line(trial, params, metrics),
    ]
    if not report.get("confined", True):
        lines.append("note: no seccomp filter on this CPU architecture; kernels were not confined")
    return Timing(metrics, lines, flags)
