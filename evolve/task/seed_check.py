"""`evolve check`: the seed set up, built, checked and measured once, the way a worker would,
but in this process and without Ray or a store, so a task author learns in seconds whether
the task works and what the evaluator will say about a program.

It goes through the same calls as a run's worker (`prepare`, then `evaluate`) in the same
sandbox, so a task that passes here fails a run only for reasons of scale.
"""

from __future__ import annotations

import logging
import tempfile
import time
import traceback
from pathlib import Path

import yaml
from rich.markup import escape
from rich.table import Table

from evolve.engine.scoring import score
from evolve.engine.verification import WORD
from evolve.plugin.evaluator import Evaluator
from evolve.plugin.failure_line import failed_stage, headline
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Sandbox
from evolve.runtime.sandbox_choice import usable_sandbox
from evolve.task.loading import LoadedTask, make_evaluator
from evolve.task.missing_tools import advice, missing
from evolve.task.openevolve import EXTENDS, looks_like_openevolve
from evolve.task.yaml_limits import YAMLLimitError
from evolve.task.yaml_limits import load as load_yaml
from evolve.ui.console import console, errors
from evolve.views.objective_terms import Terms

log = logging.getLogger("evolve.check")

CHECK_SEED = 0  # the evaluation seed: inputs are still fresh, from the evaluator's own salt
OK, BROKEN, NO_SANDBOX = 0, 2, 1


def check_seed(task: LoadedTask, backend: str | None) -> int:
    """The exit code: OK when the seed passes every stage, BROKEN when the task or its seed
    does not work (said in one line, details below it), NO_SANDBOX when the sandbox cannot
    be opened here."""
    task = usable_sandbox(task, backend)
    spec = task.spec
    console.print(
        f"checking {task.path}: evaluator {spec.evaluator.name}, "
        f"sandbox {spec.sandbox.backend}, seed {', '.join(task.seed.files)}",
        highlight=False,
    )
    if task.unverified:
        errors.print(
            f"[yellow]warning:[/yellow] {escape(str(task.path))}: its scores are "
            f"{WORD}: {escape(task.unverified)}",
            highlight=False,
        )
    evaluator = make_evaluator(task)
    evaluator.limits = spec.sandbox.limits()
    started = time.monotonic()
    try:
        sandbox = spec.sandbox.open()
    except Exception as exc:
        _fail(task, f"the {spec.sandbox.backend} sandbox cannot start here: {exc}")
        return NO_SANDBOX
    try:
        with tempfile.TemporaryDirectory(prefix="evolve-check-") as workdir:
            if not _set_up(evaluator, task, sandbox, Path(workdir)):
                return BROKEN
            result = evaluator.evaluate(task.seed, sandbox, seed=CHECK_SEED)
    except Exception as exc:
        _fail(task, f"the evaluator crashed on the seed: {type(exc).__name__}: {exc}")
        errors.print(traceback.format_exc(), highlight=False, markup=False)
        return BROKEN
    finally:
        sandbox.close()
    took = time.monotonic() - started
    _show(result, task)
    lacking = _lacking(result, task)
    if not result.ok:
        _fail(task, f"the seed fails: {_first_failure(result)}")
        _say(task, "the seed's output says", lacking)
        return BROKEN
    value = score(result.metrics, spec.objectives)
    if value is None:
        names = ", ".join(o.name for o in spec.objectives)
        _fail(task, f"the seed passes, but the evaluator reported no finite value for {names}")
        _say(task, "the seed's output says", lacking)
        return BROKEN
    if value == 0:
        _say(task, "the seed scores 0, and its output says", lacking)
    for line in evaluator.advice(result):
        errors.print(f"[yellow]warning:[/yellow] {task.path}: {escape(line)}", highlight=False)
    unverified = f" ({WORD})" if task.unverified else ""
    terms = Terms(tuple(spec.objectives), spec.evaluator.name)
    console.print(
        f"[green]ok[/green]: the seed passes; {escape(terms.figure(value))}{unverified}, "
        f"{terms.better} (in {took:.1f}s)"
    )
    return OK


def _lacking(result: EvalResult, task: LoadedTask) -> list[str]:
    """What the result's feedback and artifacts say the sandbox lacks, with what to add."""
    texts = [result.feedback, *result.artifacts.values(), *(s.feedback for s in result.stages)]
    config = _openevolve_config(task)
    backend = task.spec.sandbox.backend
    return [advice(found, backend, config) for found in missing(texts, task.root)]


def _openevolve_config(task: LoadedTask) -> str | None:
    """The config's name where the task is an OpenEvolve config itself (not a task.yaml that
    extends one): it takes no keys of evolve's."""
    try:
        data = load_yaml(task.text)[1]
    except (yaml.YAMLError, YAMLLimitError, ValueError):
        return None
    if isinstance(data, dict) and EXTENDS not in data and looks_like_openevolve(data, task.root):
        return task.path.name
    return None


def _say(task: LoadedTask, lead: str, lacking: list[str]) -> None:
    for line in lacking:
        errors.print(
            f"[yellow]warning:[/yellow] {task.path}: {lead} {escape(line)}", highlight=False
        )


def _set_up(evaluator: Evaluator, task: LoadedTask, sandbox: Sandbox, workdir: Path) -> bool:
    """The worker's set-up (for most evaluators the seed's own baseline); False, said in
    one line with the evaluator's details under it, when it fails."""
    try:
        evaluator.prepare(task.seed, sandbox, workdir)
    except Exception as exc:
        headline, _, details = str(exc).partition("\n")
        _fail(task, f"the evaluator's set-up failed on the seed: {_complete(headline, details)}")
        if details.strip():
            errors.print(details.rstrip(), highlight=False, markup=False)
        log.debug("set-up failed", exc_info=True)
        return False
    return True


def _complete(headline: str, details: str) -> str:
    """A headline that ends in a colon finished with the details' first error line (a
    compiler's `file:line: error: ...`), so the one line says what broke."""
    lines = [line.strip() for line in details.splitlines() if line.strip()]
    if not headline.endswith(":") or not lines:
        return headline
    error = next((line for line in lines if _says_what(line)), lines[0])
    return f"{headline} {error}"


def _says_what(line: str) -> bool:
    """A compiler's or linker's line naming the fault, not the driver's summary of it."""
    if line.startswith("collect2:"):
        return False
    return "error" in line.lower() or "undefined reference" in line


def _first_failure(result: EvalResult) -> str:
    """The failed stage and the line of what it said that names the fault."""
    stage = failed_stage(result.stages)
    if stage is None:
        return result.status
    return f"{stage.name}: {headline(stage.feedback) or 'no feedback'}"


def _show(result: EvalResult, task: LoadedTask) -> None:
    """Every stage, metric and counter, then the feedback the model would be shown."""
    stages = Table(title="stages", title_justify="left")
    for column in ("stage", "result", "seconds"):
        stages.add_column(column)
    for stage in result.stages:
        verdict = "ok" if stage.ok else ("timed out" if stage.timed_out else "FAILED")
        stages.add_row(stage.name, verdict, f"{stage.seconds:.2f}")
    console.print(stages)
    if result.metrics or result.counters:
        objectives = {o.name: o.direction for o in task.spec.objectives}
        metrics = Table(title="metrics", title_justify="left")
        for column in ("name", "value", "source"):
            metrics.add_column(column)
        for name, value in result.metrics.items():
            aim = f" ({objectives[name]}: objective)" if name in objectives else ""
            metrics.add_row(name + aim, f"{value:.6g}", "evaluator")
        for name, counter in result.counters.items():
            metrics.add_row(name, f"{counter.value:.6g}", counter.source)
        console.print(metrics)
    if result.feedback:
        console.print("feedback (what a model is shown):", style="bold")
        console.print(result.feedback, highlight=False, markup=False)


def _fail(task: LoadedTask, message: str) -> None:
    errors.print(f"[red]error:[/red] {task.path}: {message}", highlight=False)
