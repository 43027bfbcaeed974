"""Sanitize stage (ParEVO's sanitizer feedback): rebuild the candidate instrumented, run the
check under the instrumentation on fresh inputs, and tell the model what it found.

A read past an array that lands in readable memory, a read of memory never written, or a
signed overflow can all pass the check and still be bugs that break on other inputs or at
other flags. AddressSanitizer and UndefinedBehaviorSanitizer (gcc) find
the first and the last; MemorySanitizer (clang-19 only, and only where the sandbox has it)
finds reads of uninitialised memory, which ASan cannot. Each report is trimmed to the lines
that point into the candidate's own file, since the full one is mostly shadow-memory dumps.

The stage builds through build() with a variant: the runtime options are linked in as one
more trusted source (the sandbox's environment is fixed, so ASAN_OPTIONS cannot carry
them), and MSan's origin tracking defines `__msan_track_origins` in the candidate's object,
which the symbol vetting admits by exact name (a prefix would let a candidate interpose
`__ubsan_handle_*` and silence the checks).

This is feedback, not a security boundary: the check stage is what guards correctness.
Source that opts out of the sanitizers is refused all the same, so that a model cannot learn
to silence a report rather than fix the bug.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from weakref import WeakKeyDictionary

from evolve.evaluators.c_kernel.build import CompileFailed, Variant, build
from evolve.evaluators.c_kernel.check import check_argv
from evolve.evaluators.c_kernel.compare import compare
from evolve.evaluators.c_kernel.harness_gen import Harness
from evolve.evaluators.c_kernel.oracle import Trial
from evolve.evaluators.c_kernel.params import CKernelParams
from evolve.evaluators.c_kernel.sanitizer_report import REPORT_CHARS, trim_report
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits, RunResult, Sandbox
from evolve.plugin.stages import Runner, StageFailed, excerpt

MSAN_COMPILER = "clang-19"
DEBUG_FLAGS = ("-g", "-fno-omit-frame-pointer", "-fno-lto")  # -fno-lto: plain objects for nm
OPTIONS_FILE = "sanitizer_options.c"

OPT_OUT = re.compile(
    r"no_sanitize\w*|__SANITIZE_\w*|\w+_sanitizer\b|__(?:a|m|ub)san_\w*|__sanitizer_\w*"
    r"|disable_sanitizer_instrumentation"
)
SYMBOLIZER = re.compile(r"^/[\w./+-]+$")

MSAN_PROBE = {"probe.c": b"int main(void) { return 0; }\n"}
MSAN_PROBE_SCRIPT = (
    f"{MSAN_COMPILER} -fsanitize=memory probe.c -o probe && ./probe "
    f"&& {MSAN_COMPILER} -print-prog-name=llvm-symbolizer"
)


@dataclass(frozen=True)
class Sanitizer:
    """One instrumented build: its compiler (None: the task's), flags and runtimes."""

    compiler: str | None
    flags: tuple[str, ...]
    runtimes: tuple[str, ...]  # each reads its options from `__NAME_default_options`
    emitted: frozenset[str] = frozenset()  # globals the instrumentation defines in candidate.o


ADDRESS_UNDEFINED = Sanitizer(
    None,
    ("-fsanitize=address,undefined", "-fno-sanitize-recover=all"),
    ("asan", "ubsan"),
)
MEMORY = Sanitizer(
    MSAN_COMPILER,
    ("-fsanitize=memory", "-fsanitize-memory-track-origins"),
    ("msan",),
    frozenset({"__msan_track_origins"}),
)


@dataclass(frozen=True)
class MemorySupport:
    """Whether MSan runs in a sandbox: the symbolizer its reports need, or why it cannot."""

    symbolizer: str | None
    why_not: str = ""


_memory_support: WeakKeyDictionary[Sandbox, MemorySupport] = WeakKeyDictionary()


def sanitize(
    run: Runner, program: Program, params: CKernelParams, harness: Harness, trial: Trial
) -> str:
    """The stage's line for a clean candidate; StageFailed with the trimmed report otherwise.

    `trial` must be inputs of its own (oracle.SANITIZED) that no other run has seen.
    """
    opted_out = sorted({m[0] for text in program.files.values() for m in OPT_OUT.finditer(text)})
    if opted_out:
        raise StageFailed(
            "the candidate may not opt out of or steer the sanitizers "
            f"({', '.join(opted_out)}): fix what they report instead"
        )
    sanitized = Runner(run.sandbox, replace(run.limits, address_space_bytes=0), run.runs)
    _run_check(run, sanitized, program, params, harness, trial, ADDRESS_UNDEFINED)
    support = memory_support(sanitized.sandbox, sanitized.limits)
    clean = "sanitizers: address, undefined clean on fresh inputs"
    if support.symbolizer is None:
        return f"{clean}; memory not run: {support.why_not}"
    try:
        _run_check(run, sanitized, program, params, harness, trial, MEMORY, support.symbolizer)
    except _NotBuilt as failure:
        why = excerpt(failure.feedback.encode(), limit=400)
        return f"{clean}; memory not run: {MSAN_COMPILER} could not build the candidate: {why}"
    return "sanitizers: address, undefined and memory clean on fresh inputs"


class _NotBuilt(StageFailed):
    """MSan's compiler is not the task's, so its failing to build a candidate is no verdict."""


def memory_support(sandbox: Sandbox, limits: Limits) -> MemorySupport:
    """Whether MSan builds and runs in `sandbox`, probed once per sandbox object, since what
    a sandbox can run does not change. `limits` must leave the address space unlimited."""
    if sandbox not in _memory_support:
        probe = sandbox.run(["sh", "-c", MSAN_PROBE_SCRIPT], files=MSAN_PROBE, limits=limits)
        _memory_support[sandbox] = _judge_probe(probe)
    return _memory_support[sandbox]


def _judge_probe(probe: RunResult) -> MemorySupport:
    if probe.exit_code == 127:
        return MemorySupport(None, f"{MSAN_COMPILER} is not in the sandbox")
    if not probe.ok:
        said = excerpt(probe.stderr, tail=True, limit=300)
        return MemorySupport(None, f"MemorySanitizer does not run in this sandbox: {said}")
    path = probe.stdout.decode(errors="replace").strip()
    if not SYMBOLIZER.match(path):
        return MemorySupport(None, f"{MSAN_COMPILER} has no llvm-symbolizer for its reports")
    return MemorySupport(path)


def options_source(sanitizer: Sanitizer, memory_bytes: int, symbolizer: str | None) -> bytes:
    """The runtimes' options as C, to be linked in. The RSS cap stands in for RLIMIT_AS,
    which a sanitized run cannot have; leak checking is off because it needs ptrace, which
    the sandboxes forbid, and a leak does not change a kernel's answer."""
    megabytes = max(memory_bytes // 1024**2, 1)
    memory = (
        "detect_leaks=0:halt_on_error=1:abort_on_error=0"
        f":hard_rss_limit_mb={megabytes}:max_allocation_size_mb={megabytes}"
    )
    options = {
        "asan": memory,
        "msan": memory + (f":external_symbolizer_path={symbolizer}" if symbolizer else ""),
        "ubsan": "halt_on_error=1:print_stacktrace=1",
    }
    return "".join(
        f'const char *__{runtime}_default_options(void) {{ return "{options[runtime]}"; }}\n'
        for runtime in sanitizer.runtimes
    ).encode()


def sanitized_build(
    run: Runner,
    program: Program,
    params: CKernelParams,
    harness: Harness,
    sanitizer: Sanitizer,
    options: bytes,
) -> bytes:
    """The kernel built under `sanitizer`, vetted as build() vets it, its options linked in.
    A compiler other than the task's failing to build it is no verdict: _NotBuilt."""
    variant = Variant(
        sanitizer.compiler,
        (*sanitizer.flags, *DEBUG_FLAGS),
        sanitizer.emitted,
        {OPTIONS_FILE: options},
    )
    try:
        return build(run, program, params, harness, variant)
    except CompileFailed as failure:
        if sanitizer.compiler is None:
            raise
        raise _NotBuilt(failure.feedback) from None


def _run_check(
    run: Runner,
    sanitized: Runner,
    program: Program,
    params: CKernelParams,
    harness: Harness,
    trial: Trial,
    sanitizer: Sanitizer,
    symbolizer: str | None = None,
) -> None:
    """Build with `run`, run the check once with `sanitized` (its address space unlimited),
    and compare its answer: a wrong one fails here as in the check stage."""
    options = options_source(sanitizer, run.limits.memory_bytes, symbolizer)
    binary = sanitized_build(run, program, params, harness, sanitizer, options)
    argv = check_argv(trial, params, params.sizes)
    result = sanitized(argv, {"kernel": binary, "inputs.bin": trial.inputs}, ["output.bin"])
    built = f"built with {' '.join(sanitizer.flags)}"
    if not result.ok:
        raise _stopped(result, built)
    output = result.files.get("output.bin")
    problem = compare(output, trial.expected)
    if problem:
        raise StageFailed(f"the kernel {built} gave a wrong answer on fresh inputs: {problem}")


def _stopped(result: RunResult, built: str) -> StageFailed:
    """The failure of a sanitized run: its trimmed report, else how it ended and its stderr."""
    report = trim_report(result.stderr)
    if report is None:
        said = excerpt(result.stderr, tail=True, limit=REPORT_CHARS)
        feedback = f"the kernel {built} {result.describe()}" + (
            f"\nstderr:\n{said}" if said else ""
        )
        return StageFailed(feedback, timed_out=result.timed_out)
    feedback = f"a sanitizer stopped the kernel {built}, on fresh inputs:\n{report}"
    if "driver.c" in report or "harness.c" in report:
        feedback += (
            "\n(driver.c and harness.c are the evaluator's: they read the inputs, call the "
            "kernel once and write its output)"
        )
    return StageFailed(feedback, timed_out=result.timed_out)
