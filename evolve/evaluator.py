"""The evaluator plugin contract and its discovery through entry points.

Params are validated by the constructor, so a bad param fails at load time with the task
file's line (an optional `Params` class attribute, the pydantic model of the params, lets
the loader answer a mistyped key with the nearest one); and `prepare` runs on each
evaluation worker with that worker's sandbox, because baselines (like the seed's binary)
belong to the machine that measures, which differs across a Ray cluster.
docs/ARCHITECTURE.md shows where this contract sits.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from evolve.program import Program
from evolve.results import EvalResult
from evolve.sandbox import Limits, Sandbox

GROUP = "evolve.evaluators"


class Evaluator(Protocol):
    name: str
    # The limits of the task's `sandbox:` section, assigned by whoever runs the evaluator
    # (each evaluation worker, the agent's draft tool) before `prepare` or `evaluate`, so
    # the evaluator's sandbox runs are bounded by the same limits the driver's deadline
    # for it was worked out from. The constructor sets a default `Limits()` until then.
    limits: Limits

    def __init__(self, params: Mapping[str, Any], task_dir: Path) -> None: ...

    def prepare(self, seed: Program, sandbox: Sandbox, workdir: Path) -> None:
        """Once per worker before its first evaluation: build baselines, cache inputs."""
        ...

    def evaluate(self, program: Program, sandbox: Sandbox, *, seed: int) -> EvalResult:
        """Run the cascade; `seed` makes this evaluation's random inputs fresh and reproducible."""
        ...

    # Optional: `metric_problem(name) -> str | None` says why an objective named `name`
    # cannot be scored (an unknown metric, a setting it needs), so the task fails to load
    # with that reason on the objective's line instead of failing every evaluation.
    # Optional: `draft(program, sandbox, *, seed) -> EvalResult` runs only the cheap stages
    # (build and check) for the agent's drafts, without `prepare`'s baselines. An evaluator
    # without it has its whole cascade run on each draft, which must then not need them.
    # Optional: `worst_case_s(limits) -> float`, the longest one evaluation can take with
    # every sandbox run at its limit; the driver's deadline for it (evolve/watchdog.py).
    # Optional: `prompt_rules() -> str`, what a candidate may use (allowed compiler flags,
    # headers, the entry's signature), as "- " lines for the model's prompt, so a model
    # learns the allowlists before a proposal fails on them. Called once, in the driver,
    # when the run starts; an evaluator without it gives the prompt no rules of its own.
    # Optional: `unverified() -> str | None`, why a candidate could forge its scores (they
    # are computed where the candidate runs, and nothing outside re-checks them), in one
    # line; None, or no such method, when trusted code measures or re-checks every score.
    # The views mark an unverified run's scores (evolve/verification.py).


def available_evaluators() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def evaluator_class(name: str) -> type[Evaluator]:
    """The plugin class registered under `name`; KeyError lists what is installed."""
    found = available_evaluators()
    if name not in found:
        known = ", ".join(sorted(found)) or "none"
        raise KeyError(f"no evaluator plugin named {name!r} (installed: {known})")
    return found[name].load()
