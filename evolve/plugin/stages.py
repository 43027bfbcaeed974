"""The stage plumbing every evaluator shares: running in the sandbox, failing a stage, and
quoting output back as feedback.

A stage raises `StageFailed` when the candidate is at fault; any other exception is a bug
in the evaluator and propagates. `stage` turns either outcome into a timed StageResult.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from evolve.plugin.results import StageResult
from evolve.plugin.sandbox import Limits, RunResult, Sandbox, WarmPython

FEEDBACK_BYTES = 2048


class StageFailed(Exception):
    def __init__(self, feedback: str, *, timed_out: bool = False) -> None:
        super().__init__(feedback)
        self.feedback = feedback
        self.timed_out = timed_out


@contextmanager
def stage(stages: list[StageResult], name: str) -> Iterator[StageResult]:
    """Record one stage in `stages`, failed if the body raises StageFailed (which propagates)."""
    result = StageResult(name, ok=True, seconds=0.0)
    started = time.perf_counter()
    try:
        yield result
    except StageFailed as failure:
        result.ok, result.feedback, result.timed_out = False, failure.feedback, failure.timed_out
        raise
    finally:
        result.seconds = time.perf_counter() - started
        stages.append(result)


@dataclass
class Runner:
    """Runs argv in the sandbox under fixed limits and keeps every RunResult for the record."""

    sandbox: Sandbox
    limits: Limits
    runs: list[RunResult] = field(default_factory=list)

    def __call__(
        self, argv: Sequence[str], files: Mapping[str, bytes], collect: Sequence[str] = ()
    ) -> RunResult:
        result = self.sandbox.run(argv, files=files, limits=self.limits, collect=collect)
        self.runs.append(result)
        return result

    def python(
        self,
        warm: WarmPython,
        args: Sequence[str],
        files: Mapping[str, bytes],
        collect: Sequence[str] = (),
    ) -> RunResult:
        """A trusted module's main(args) beside `files`, kept imported where the sandbox can
        (Sandbox.run_python)."""
        result = self.sandbox.run_python(
            warm, args, files=files, limits=self.limits, collect=collect
        )
        self.runs.append(result)
        return result

    def summary(self) -> dict[str, object]:
        return {
            "backend": self.sandbox.name,
            "runs": len(self.runs),
            "peak_memory_bytes": max((r.peak_memory_bytes for r in self.runs), default=0),
            "output_truncated": any(r.output_truncated for r in self.runs),
        }


def excerpt(data: bytes, *, tail: bool = False, limit: int = FEEDBACK_BYTES) -> str:
    """At most `limit` bytes of output as text: the head for compilers, the tail for crashes."""
    if len(data) <= limit:
        return data.decode(errors="replace").strip()
    kept = data[-limit:] if tail else data[:limit]
    text = kept.decode(errors="replace").strip()
    return f"[...]\n{text}" if tail else f"{text}\n[... {len(data) - limit} more bytes]"


def require_ok(result: RunResult, what: str, *, tail: bool = True) -> None:
    """Raise StageFailed, saying how `what` ended and what it printed, unless it exited 0."""
    if result.ok:
        return
    how = result.describe()
    stderr = excerpt(result.stderr, tail=tail)
    feedback = f"{what}: {how}" + (f"\nstderr:\n{stderr}" if stderr else "")
    raise StageFailed(feedback, timed_out=result.timed_out)
