"""The python evaluator: OpenEvolve task folders, run unchanged.

A task's evaluator.py scores a candidate through `evaluate(program_path)`, or a cascade of
`evaluate_stage1..3`. Each stage is one sandbox run in which the trusted runner
(runner.py) imports evaluator.py, calls the stage's function on the candidate's main file
and sends what it returned over the job's result channel, read here; the sandbox's timeout
bounds it and really kills. A warm sandbox imports the runner and evaluator.py once and
forks each stage from there (Sandbox.run_python), so a stage costs the evaluator's own
time. A task with a verify.py runs each stage cold instead: the warm server's memory keeps
what earlier stages sent and printed (freed, not cleared), which a candidate could read and
hand to verify.py as its own. The candidate shares the stage's process with the evaluator,
so it can change what the evaluator reports: that is the trust model, and verify.py, run
here outside the sandbox on what the evaluator returned, is the only defence against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from evolve.evaluators.python import cascade
from evolve.evaluators.python.outcome import (
    EvaluatorRaised,
    Returned,
    Shown,
    describe,
    read,
    stderr_tail,
    stored,
)
from evolve.evaluators.python.params import PythonParams
from evolve.evaluators.python.shipping import RESERVED, RUNNER, gather
from evolve.evaluators.python.verifier import Verifier
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.plugin.sandbox import Limits, Sandbox, WarmPython
from evolve.plugin.stages import Runner, StageFailed, stage
from evolve.plugin.watchdog import sandbox_time

RUNNER_SOURCE = Path(__file__).with_name("runner.py").read_bytes()
VERIFY_S = 10.0  # allowed for verify.py and this process's own work, beyond the sandbox runs


class PythonEvaluator(Evaluator):
    """Stages `stage1`..`stage3` (or `evaluate`), then `verify` when the task has one.
    Metrics are whatever the task's evaluator returns (verify's, with verify.py);
    non-numeric values and the jobs' stderr become artifacts."""

    name = "python"
    Params = PythonParams  # what the task loader checks a typo against

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None:
        self.params = PythonParams.model_validate(dict(params))
        shipment = gather(task_dir, self.params)
        self.evaluator_file = shipment.evaluator
        # The runner and the task's files: what a warm sandbox imports once (runner.py).
        self.warm = WarmPython(
            RUNNER, (self.evaluator_file,), {**shipment.files, RUNNER: RUNNER_SOURCE}
        )
        self.functions = cascade.functions(
            shipment.evaluator_text, self.params.evaluator, cascade=self.params.cascade
        )
        self.verifier = Verifier(task_dir, self.params.verify) if self.params.verify else None
        self.limits = Limits()

    def metric_problem(self, name: str) -> str | None:
        """None: the metrics are whatever evaluator.py returns, known only when it runs."""
        return None

    def unverified(self) -> str | None:
        """Without verify.py the scores are what evaluator.py says in the candidate's own
        process, which the candidate can make it say anything."""
        if self.verifier is not None:
            return None
        return (
            f"scores come from {self.evaluator_file}, which runs in the sandbox beside the "
            "candidate: a candidate can forge them; add a verify.py (see the README) to "
            "re-check them outside"
        )

    def prompt_rules(self) -> str:
        """How the task's evaluator judges a program, for the model's prompt."""
        stages = ", then ".join(f"`{name}`" for name in self.functions)
        lines = [f"- The task's {self.evaluator_file} runs {stages} on the program in a sandbox."]
        if len(self.functions) > 1:
            bars = self.params.cascade_thresholds[: len(self.functions) - 1]
            lines.append(
                f"- Each stage must reach {', '.join(f'{bar:g}' for bar in bars)} in turn "
                f"({cascade.SCORE}, else the mean of its metrics) for the next one to run."
            )
        if self.verifier:
            lines.append("- Only what the task's trusted verify.py returns is scored.")
        return "\n".join(lines)

    def worst_case_s(self, limits: Limits) -> float:
        """One sandbox run per stage, each up to its limit, one more for a warm server's
        import of the evaluator, and verify.py's time."""
        return sandbox_time(len(self.functions) + 1, limits) + VERIFY_S

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        """Only a check: no program file may take the name of a file the evaluator ships
        (which the candidate's would replace) or of the verify file."""
        taken = {*RESERVED, self.evaluator_file}
        if self.params.verify:
            taken.add(Path(self.params.verify).as_posix())
        clash = sorted(taken.intersection(seed.files))
        if clash:
            raise RuntimeError(f"the program's files may not be named {', '.join(clash)}")

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """`seed` is unused: an OpenEvolve evaluator draws its own inputs."""
        return self._cascade(program, sandbox, self.functions)

    def draft(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """The cascade's first stage (and verify.py), for the agent's drafts."""
        return self._cascade(program, sandbox, self.functions[:1])

    def _cascade(
        self, program: Program, sandbox: Sandbox, functions: tuple[str, ...]
    ) -> EvalResult:
        run = Runner(sandbox, self.limits)
        stages: list[StageResult] = []
        reached = Returned()  # the stages' metrics and artifacts merged, later ones winning
        logs: dict[str, str] = {}  # the jobs' stderr and tracebacks, by stage
        shown = Shown()
        files = program.as_bytes()
        with suppress(StageFailed):
            for index, function in enumerate(functions):
                name = cascade.stage_name(function)
                with stage(stages, name) as current:
                    returned = self._stage(run, files, program, function, name, logs)
                    reached.metrics.update(returned.metrics)
                    reached.artifacts.update(returned.artifacts)
                    if self.verifier is None:
                        current.metrics = returned.metrics
                    current.feedback = self._feedback(returned, logs, name, shown)
                    stopped = cascade.gate(reached.metrics, index, self.params.cascade_thresholds)
                    if stopped and index + 1 < len(functions):
                        following = cascade.stage_name(functions[index + 1])
                        current.feedback += (
                            f"\n{stopped}, so {following} did not run: the candidate is scored "
                            "on the stages it reached"
                        )
                        break
            if self.verifier is not None:
                with stage(stages, "verify") as checking:
                    checking.metrics = self.verifier(reached.metrics, reached.artifacts)
                    checking.feedback = f"verified metrics: {describe(checking.metrics)}"
        artifacts = stored({**reached.artifacts, **logs})
        result = EvalResult.from_stages(stages, artifacts=artifacts, sandbox=run.summary())
        _fill_combined_score(result)
        return result

    def _stage(
        self,
        run: Runner,
        files: dict[str, bytes],
        program: Program,
        function: str,
        name: str,
        logs: dict[str, str],
    ) -> Returned:
        args = [function, program.main_file]
        if self.verifier is None:
            result = run.python(self.warm, args, files)
        else:  # see the module's docstring: cold, so no other candidate's output is in reach
            argv = self.warm.argv(run.sandbox.python, args)
            result = run(argv, {**self.warm.files, **files})
        if tail := stderr_tail(result):
            logs[f"{name}.stderr"] = tail
        try:
            return read(result, f"{function}(program_path)")
        except EvaluatorRaised as raised:
            logs[f"{name}.traceback"] = raised.traceback
            raise

    def _feedback(self, returned: Returned, logs: dict[str, str], name: str, shown: Shown) -> str:
        label = "claimed metrics (not scored: verify.py decides)" if self.verifier else "metrics"
        own = {k: v for k, v in logs.items() if k.startswith(f"{name}.")}
        text = shown.artifacts({**returned.artifacts, **own})
        return f"{label}: {describe(returned.metrics)}" + (f"\n{text}" if text else "")


def _fill_combined_score(result: EvalResult) -> None:
    """OpenEvolve ranks a program by `combined_score`, or the mean of its metrics when the
    evaluator gives none; the same number is given that name here, so that a task (and any
    translated OpenEvolve config) can name it as its objective."""
    if not result.ok or cascade.SCORE in result.metrics:
        return
    found = cascade.score(result.metrics)
    if found is not None:
        result.metrics[cascade.SCORE] = found[0]
        result.feedback += f"\n\n{cascade.SCORE} {found[0]:.6g}: the {found[1]}"
