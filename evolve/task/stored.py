"""The task as the run stored it: its objectives and budget, read from the stored YAML.

The views of a finished run (its report, a lineage) read the text the run kept, not the
file on disk, which may have changed or gone since. The text is not loaded as a task (that
would read the seed files and check the evaluator): only its schema is applied. A text the
schema refuses (an OpenEvolve config, a task from an older version) still gives what the
run recorded in its settings: its objectives, and no budget.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import yaml
from pydantic import ValidationError

from evolve.store import RunRecord
from evolve.task.schema import Budget, ChampionSpec, Objective, TaskSpec
from evolve.task.yaml_limits import YAMLLimitError, load

log = logging.getLogger("evolve.task.stored")


@dataclass(frozen=True)
class TaskInfo:
    name: str
    evaluator: str
    strategy: str
    objectives: tuple[Objective, ...]
    budget: Budget | None
    operators: tuple[str, ...] = field(default_factory=tuple)
    champion: ChampionSpec = field(default_factory=ChampionSpec)  # how the run crowned


def task_info(run: RunRecord) -> TaskInfo:
    """The run's task as far as its stored YAML says; see the module's docstring."""
    try:
        data = load(run.task_yaml)[1]
    except (yaml.YAMLError, YAMLLimitError, ValueError) as exc:  # ValueError: a bad date
        log.info("run %s: its stored task is not YAML (%s)", run.name, exc)
        return _from_settings(run, None)
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        # Informational only: an OpenEvolve run stores its own config here, every time.
        log.info("run %s: its stored task does not parse as a task (%s)", run.name, exc)
        return _from_settings(run, data)
    return TaskInfo(
        name=spec.name,
        evaluator=spec.evaluator.name,
        strategy=spec.search.strategy,
        objectives=tuple(spec.objectives),
        budget=_recorded_budget(run.settings.get("budget")) or spec.budget,
        operators=tuple(mutator.name for mutator in spec.mutators),
        champion=spec.champion,
    )


def _from_settings(run: RunRecord, data: object) -> TaskInfo:
    """The objectives the stored text names where they still parse (the rest of it may be
    from an older version), else the ones `evolve run` recorded beside the text; and the
    strategy."""
    objectives = _written_objectives(data)
    if objectives is None:
        objectives = _recorded_objectives(run.settings.get("objectives"))
    return TaskInfo(
        name=run.name,
        evaluator="?",
        strategy=str(run.settings.get("strategy", "?")),
        objectives=objectives,
        budget=None,
    )


def _written_objectives(data: object) -> tuple[Objective, ...] | None:
    listed = data.get("objectives") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return None
    try:
        return tuple(Objective.model_validate(item) for item in listed)
    except ValidationError:
        return None


def _recorded_objectives(pairs: object) -> tuple[Objective, ...]:
    """The (name, direction) pairs `evolve run` recorded; none where they are not that."""
    if not isinstance(pairs, list):
        return ()
    try:
        return tuple(Objective(name=name, direction=direction) for name, direction in pairs)
    except (TypeError, ValueError):  # not pairs, or refused (ValidationError is a ValueError)
        return ()


def _recorded_budget(recorded: object) -> Budget | None:
    """The budget `evolve run` recorded, overrides included (a run from before it did so
    has none: then the text's)."""
    try:
        return Budget.model_validate(recorded) if isinstance(recorded, dict) else None
    except ValueError:
        return None
