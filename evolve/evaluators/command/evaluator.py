"""The command evaluator: programs in any language, of any number of files, scored by what
a shell command reports.

A task gives shell commands, `build` (optional) and `run`, each run with `sh -c` in the
sandbox, in a work dir holding all the candidate's files and the task files that `files`
names. Build and run are jobs of their own, so a compile error is told apart from a crash
and each has the whole time limit. Every job starts in a fresh, empty work dir, so the build
job ends by packing the work dir as it left it (binaries, generated files, modes and
folders kept) with tar, and the run job starts by unpacking it.

The run reports its metrics (report.py). The sandbox adds `run_wall_s`, the run job's wall
time as the sandbox measured it from outside the job: the one number here that the
candidate cannot make up. Everything else the run reports is a claim, which a task's
trusted check.py (checker.py) can judge from the files the run wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from evolve.evaluators.command.checker import Checker
from evolve.evaluators.command.files import gather
from evolve.evaluators.command.params import BUILD_TAR, METRICS_FILE, RESERVED, CommandParams
from evolve.evaluators.command.report import reported
from evolve.evaluators.python.outcome import Shown, describe, stored
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.plugin.sandbox import Limits, RunResult, Sandbox
from evolve.plugin.stages import Runner, StageFailed, excerpt, require_ok, stage
from evolve.plugin.watchdog import sandbox_time

RUN_WALL = "run_wall_s"
CHECK_S = 10.0  # allowed for check.py and this process's own work, beyond the sandbox runs
LOG_BYTES = 1500  # of each job's stderr (and of stdout, when it fails) kept and shown
# The build job: the task's build command, then the work dir packed for the run job.
PACK = f'sh -c "$1" build && exec tar -cf {BUILD_TAR} --exclude=./{BUILD_TAR} .'
# The run job after a build: the work dir unpacked (less any metrics.json the build left,
# which the run would seem to have written), then the run command, the seed as its $1.
UNPACK = f'tar -xf {BUILD_TAR} && rm -f {BUILD_TAR} {METRICS_FILE} && exec sh -c "$1" run "$2"'


class CommandEvaluator(Evaluator):
    """Stages `build` (when the task has one), `run`, then `check` (when it has one).
    Metrics are what the run reports plus `run_wall_s`, or what check.py returns instead;
    non-numeric values and the jobs' stderr become artifacts."""

    name = "command"
    Params = CommandParams  # what the task loader checks a typo against

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        self.params = CommandParams.model_validate(dict(params))
        self.checker = Checker(task_dir, self.params.check) if self.params.check else None
        self.files = gather(task_dir, self.params.files, self.params.check)
        self.limits = Limits()

    def metric_problem(self, name: str) -> str | None:
        """None: the metrics are whatever the run reports, known only when it runs."""
        return None

    def unverified(self) -> str | None:
        """Without check.py, what the run reports (all but run_wall_s) is the candidate's
        claim, and nothing judges whether its output is right."""
        if self.checker is not None:
            return None
        return (
            "scores come from what the run reports from inside the sandbox, where the "
            "candidate runs (only run_wall_s is timed outside), and nothing checks its output: "
            "a candidate can forge them; add a check.py (see the README) to judge them outside"
        )

    def prompt_rules(self) -> str:
        """How the task builds, runs and judges a program, for the model's prompt."""
        p = self.params
        built = f"built by `{p.build}`, then " if p.build else ""
        lines = [
            f"- The program's files are {built}run by `{p.run}` in a fresh work dir. The run "
            f"reports its metrics as JSON, the last line of stdout or {METRICS_FILE}; "
            f"{RUN_WALL} is timed from outside the sandbox."
        ]
        if self.checker:
            lines.append("- The task's trusted check.py judges what the run wrote and scores it.")
        return "\n".join(lines)

    def worst_case_s(self, limits: Limits) -> float:
        """The build's and the run's jobs, each up to its limit, and check.py's time."""
        return sandbox_time(2 if self.params.build else 1, limits) + CHECK_S

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        """Only a check: no program file may take a name the evaluator uses in the job."""
        clash = sorted(RESERVED.intersection(seed.files))
        if clash:
            raise RuntimeError(f"the program's files may not be named {', '.join(clash)}")

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """`seed` reaches the run command as $1, for a run that draws fresh inputs."""
        run = Runner(sandbox, self.limits)
        stages: list[StageResult] = []
        artifacts: dict[str, str] = {}
        files = {**self.files, **program.as_bytes()}  # a program file wins over a task file
        argv = ["sh", "-c", self.params.run, "run", str(seed)]
        with suppress(StageFailed):
            if self.params.build is not None:
                with stage(stages, "build") as building:
                    packed = _build(run, self.params.build, files, building, artifacts)
                files = {BUILD_TAR: packed}
                argv = ["sh", "-c", UNPACK, "evolve", self.params.run, str(seed)]
            with stage(stages, "run") as running:
                result, claimed = self._run(run, argv, files, running, artifacts)
            if self.checker is not None:
                with stage(stages, "check") as checking:
                    outputs = {n: result.files[n] for n in self.params.outputs if n in result.files}
                    _check(self.checker, outputs, claimed, checking)
        return EvalResult.from_stages(stages, artifacts=stored(artifacts), sandbox=run.summary())

    def _run(
        self,
        run: Runner,
        argv: list[str],
        files: dict[str, bytes],
        current: StageResult,
        artifacts: dict[str, str],
    ) -> tuple[RunResult, dict[str, float]]:
        """The run's job and its metrics, `run_wall_s` added; they score only where no
        check.py judges them. StageFailed when the run failed or reported none."""
        result = run(argv, files, [METRICS_FILE, *self.params.outputs])
        logs = _keep_stderr(artifacts, "run", result)
        _require_ok(result, "the run", tail=True)
        found = reported(result)
        metrics = {**found.metrics, RUN_WALL: result.wall_s}
        artifacts.update(found.artifacts)
        if self.checker is None:
            current.metrics = metrics
        label = "claimed metrics (check.py decides)" if self.checker else "metrics"
        shown = Shown().artifacts({**found.artifacts, **logs})
        current.feedback = f"{label}: {describe(metrics)}" + (f"\n{shown}" if shown else "")
        return result, metrics


def _build(
    run: Runner,
    command: str,
    files: dict[str, bytes],
    current: StageResult,
    artifacts: dict[str, str],
) -> bytes:
    """The work dir as the build left it, packed; StageFailed with the compiler's first
    errors (the head of stderr: later errors tend to follow from the first)."""
    result = run(["sh", "-c", PACK, "evolve", command], files, [BUILD_TAR])
    _keep_stderr(artifacts, "build", result)
    _require_ok(result, "the build", tail=False)
    packed = result.files.get(BUILD_TAR)
    if packed is None:
        raise StageFailed(f"the build exited 0, but its work dir was not packed ({BUILD_TAR})")
    if result.stderr.strip():
        current.feedback = f"warnings:\n{excerpt(result.stderr, limit=LOG_BYTES)}"
    return packed


def _check(
    checker: Checker,
    outputs: dict[str, bytes],
    claimed: dict[str, float],
    current: StageResult,
) -> None:
    """check.py's verdict as the stage's metrics: the claimed ones it let stand, or those it
    returned instead, beside the sandbox's `run_wall_s` unless it returned its own."""
    replaced = checker(outputs, claimed)
    if replaced is None:
        current.metrics = claimed
        current.feedback = "check.py let the claimed metrics stand"
    else:
        current.metrics = {RUN_WALL: claimed[RUN_WALL], **replaced}
        current.feedback = f"metrics from check.py: {describe(current.metrics)}"


def _keep_stderr(artifacts: dict[str, str], stage_name: str, result: RunResult) -> dict[str, str]:
    """The tail of a job's stderr, kept as the artifact `STAGE.stderr`; that artifact alone."""
    tail = excerpt(result.stderr, tail=True, limit=LOG_BYTES)
    kept = {f"{stage_name}.stderr": tail} if tail else {}
    artifacts.update(kept)
    return kept


def _require_ok(result: RunResult, what: str, *, tail: bool) -> None:
    """require_ok, with the tail of stdout too: build tools and programs print their
    errors there as often as to stderr."""
    try:
        require_ok(result, what, tail=tail)
    except StageFailed as failed:
        stdout = excerpt(result.stdout, tail=True, limit=LOG_BYTES)
        if not stdout:
            raise
        raise StageFailed(
            f"{failed.feedback}\nstdout:\n{stdout}", timed_out=failed.timed_out
        ) from None
