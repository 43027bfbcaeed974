"""The evaluator plugin contract, and its lookup by name (evolve/plugin/registry.py).

An evaluator subclasses `Evaluator`: it must say how it `evaluate`s a program, and may
override the hooks whose defaults are written here (what a draft runs, how long one
evaluation can take, the rules a model is told, why an objective cannot be scored, whether
its scores can be forged). The core calls every hook directly, on any evaluator.

Params are validated by the constructor, so a bad param fails at load time with the task
file's line (an optional `Params` class attribute, the pydantic model of the params, lets
the loader answer a mistyped key with the nearest one); and `prepare` runs on each
evaluation worker with that worker's sandbox, because baselines (like the seed's binary)
belong to the machine that measures, which differs across a Ray cluster.
docs/ARCHITECTURE.md shows where this contract sits.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from evolve.plugin import registry
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.plugin.watchdog import DEFAULT_SANDBOX_RUNS, sandbox_time


class Evaluator(ABC):
    """The base of every evaluator plugin. A subclass's constructor takes the task's
    `evaluator.params` and the task folder, and raises (a pydantic ValidationError, or
    evolve.plugin.taskpaths.TaskPathError naming the param) on bad params."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel] | None] = None  # for "did you mean" on a mistyped key
    # The limits of the task's `sandbox:` section, assigned by whoever runs the evaluator
    # (each evaluation worker, the agent's draft tool) before `prepare` or `evaluate`, so
    # the evaluator's sandbox runs are bounded by the same limits the driver's deadline
    # for it was worked out from.
    limits: Limits = Limits()

    @abstractmethod
    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None: ...

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:  # noqa: B027
        """Once per worker before its first evaluation: build baselines, cache inputs."""

    @abstractmethod
    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """Run the cascade; `seed` makes this evaluation's random inputs fresh and reproducible."""

    def draft(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """What the agent's drafts run, without `prepare`'s baselines: the cheap stages
        (build and check) where an evaluator can stop there; by default the whole cascade,
        which must then not need the baselines."""
        return self.evaluate(program, sandbox, seed=seed)

    def metric_problem(self, name: str) -> str | None:
        """Why an objective (or a feature) named `name` cannot be scored (an unknown metric, a
        setting it needs), so the task fails to load on that line instead of failing every
        evaluation; None where it can be."""
        return None

    def worst_case_s(self, limits: Limits) -> float:
        """The longest one evaluation can take with every sandbox run at its limit: the
        driver's deadline for it (evolve/plugin/watchdog.py). By default DEFAULT_SANDBOX_RUNS
        runs."""
        return sandbox_time(DEFAULT_SANDBOX_RUNS, limits)

    def prompt_rules(self) -> str:
        """What a candidate may use (allowed compiler flags, headers, the entry's signature),
        as "- " lines for the model's prompt, so a model learns the allowlists before a
        proposal fails on them. Called once, in the driver, when the run starts."""
        return ""

    def advice(self, result: EvalResult) -> list[str]:
        """Lines for `evolve check` about the seed's passing `result`: what would cost a
        run's every candidate time it need not spend (a stage that takes longer than the
        timing, say), each naming the setting to change; none by default."""
        return []

    def unverified(self) -> str | None:
        """Why a candidate could forge its scores (they are computed where the candidate
        runs, and nothing outside re-checks them), in one line; None when trusted code
        measures or re-checks every score. The views mark an unverified run's scores
        (evolve/engine/verification.py)."""
        return None


def evaluator_class(name: str) -> type[Evaluator]:
    """The plugin class registered under `name`; KeyError lists what is installed, TypeError
    says that a registered class is no Evaluator."""
    return registry.load_class("evaluator", name, Evaluator)
