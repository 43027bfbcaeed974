"""One line per failure, and it must be the right one: the failing stage's own message with
its numbers, a raised exception's type and message, and a limit said with its value and the
task key that sets it."""

from __future__ import annotations

import pytest

from evolve.plugin.failure_line import event_line, exception_line, headline, what_failed
from evolve.plugin.limits import (
    CPU,
    FILE_SIZE,
    MEMORY,
    PROCESSES,
    TASK_KEYS,
    TIME,
    limit_said,
    sign_in,
)
from evolve.plugin.results import EvalResult, StageResult
from evolve.plugin.sandbox import Limits
from evolve.task.schema import SandboxSpec

BUILD_NOTE = "code_bytes 485: the executable sections of the candidate's object"
TIMED_OUT = (
    "the trusted timer, timing 16 calls (0.5 MB of inputs in, 0.25 MB out): ran past its time "
    "limit of 20 s (sandbox.timeout_s) and was killed after 20.1 s\nstderr:\nlast words"
)
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "evaluator.py", line 9, in evaluate\n'
    "    raise ValueError(f'radius {r} < 0')\n"
    "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "ValueError: radius -1 < 0\n"
)


def timed_out_in_measure() -> EvalResult:
    """Passed stages that said something (a build's note) ahead of the stage that failed."""
    return EvalResult.from_stages(
        [
            StageResult("build", True, 0.4, BUILD_NOTE),
            StageResult("check", True, 0.1),
            StageResult("measure", False, 20.1, TIMED_OUT, timed_out=True),
        ]
    )


def test_a_failure_event_quotes_the_failing_stage_not_the_first_note() -> None:
    result = timed_out_in_measure()
    assert result.status == "timeout"
    assert result.feedback.startswith(f"[build] {BUILD_NOTE}")  # what a first line would show
    line = event_line(result.stages, result.feedback, 200)
    assert line == f"[measure] {TIMED_OUT.splitlines()[0]}"
    assert "code_bytes" not in line
    clipped = event_line(result.stages, result.feedback, 60)
    assert len(clipped) == 60 and clipped.endswith("…") and clipped.startswith("[measure] ")


def test_without_a_failed_stage_the_whole_feedback_speaks() -> None:
    crash = f"evaluator crashed:\n{TRACE}"
    assert what_failed((), crash) == ("", crash)
    assert event_line((), crash, 200) == "ValueError: radius -1 < 0"
    watchdog = "the evaluation exceeded its deadline of 95 s (...)"
    assert event_line((), watchdog, 200) == watchdog
    assert event_line((), "", 200) == "no feedback"


def test_a_headline_is_the_first_line_unless_it_only_introduces_a_traceback() -> None:
    assert headline("\n  knob sum 71 exceeds 64\nmore\n") == "knob sum 71 exceeds 64"
    assert headline(f"importing policy.py raised:\n{TRACE}") == "ValueError: radius -1 < 0"
    assert headline(TRACE) == "ValueError: radius -1 < 0"
    said = f"evaluate(program_path) raised ValueError: radius -1 < 0\n{TRACE}"
    assert headline(said) == "evaluate(program_path) raised ValueError: radius -1 < 0"
    assert headline("   \n") == ""


def test_the_exception_line_follows_the_last_frame_of_a_chain() -> None:
    chained = (
        f"{TRACE}\nDuring handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "runner.py", line 3, in main\n'
        "    evaluate()\nRuntimeError: evaluate failed\n  a second line of its message\n"
    )
    assert exception_line(chained) == "RuntimeError: evaluate failed"
    syntax = '  File "seed.py", line 2\n    def f(:\n          ^\nSyntaxError: invalid syntax\n'
    assert exception_line(syntax) == "SyntaxError: invalid syntax"
    assert exception_line("Traceback (most recent call last):\n  File x\nKeyError: 'k'") == (
        "KeyError: 'k'"
    )
    assert exception_line("no traceback here") == "no traceback here"


def test_each_limit_is_said_with_its_value_and_the_task_key_that_sets_it() -> None:
    limits = SandboxSpec(timeout_s=20, memory_mb=1024, max_processes=32, max_file_mb=64).limits()
    assert limit_said(limits, TIME) == "its time limit of 20 s (sandbox.timeout_s)"
    assert limit_said(limits, CPU).startswith("its CPU time limit, 20 s of CPU (sandbox.timeout_s")
    assert limit_said(limits, MEMORY) == "its memory limit of 1024 MB (sandbox.memory_mb)"
    assert limit_said(limits, FILE_SIZE) == (
        "its file size limit of 64 MB per file (sandbox.max_file_mb)"
    )
    assert limit_said(limits, PROCESSES) == (
        "its limit of 32 processes and threads (sandbox.max_processes)"
    )
    counted = Limits(timeout_s=120, timeout_key="evaluator.params.counter_timeout_s")
    assert limit_said(counted, TIME) == (
        "its time limit of 120 s (evaluator.params.counter_timeout_s)"
    )


def test_the_named_keys_are_the_task_files_and_set_those_limits() -> None:
    """Each key a message names is a real `sandbox:` key, and setting it moves that limit."""
    keys = {**TASK_KEYS, TIME: Limits().timeout_key}
    fields = SandboxSpec.model_fields
    assert all(key.startswith("sandbox.") and key[8:] in fields for key in keys.values())
    default = SandboxSpec().limits()
    for limit, key in keys.items():
        field = key.removeprefix("sandbox.")
        moved = SandboxSpec(**{field: getattr(SandboxSpec(), field) * 2}).limits()
        changed = [name for name in keys if getattr(moved, name) != getattr(default, name)]
        assert changed == [limit], key


@pytest.mark.parametrize(
    ("said", "limit"),
    [
        (b'  File "x.py", line 1\nMemoryError\n', MEMORY),
        (b"terminate called after throwing an instance of 'std::bad_alloc'\n", MEMORY),
        (b"==12==ERROR: AddressSanitizer: hard rss limit exhausted (1024Mb vs 1030Mb)\n", MEMORY),
        (b"cc1: out of memory allocating 65536 bytes: Cannot allocate memory\n", MEMORY),
        (b"OSError: [Errno 27] File too large\n", FILE_SIZE),
        (b"BlockingIOError: [Errno 11] Resource temporarily unavailable\n", PROCESSES),
        (b"sh: 0: Cannot fork\n", PROCESSES),
        (b"CUDA error: out of memory\n", None),  # the GPU's memory: no limit of the sandbox
        (b"Segmentation fault\n", None),
    ],
)
def test_a_jobs_output_shows_the_limit_it_ran_into(said: bytes, limit: str | None) -> None:
    assert sign_in(said) == limit
