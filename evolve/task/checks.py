"""What the task schema cannot see, checked before a run starts: files on disk, installed
plugins, evaluator and mutator params, knob syntax, model keys. Every failure is collected
with the line of its node, so one edit can fix them all.

Every file the task names is read through taskpaths.py, which keeps it inside the task
folder and fingerprints it.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError
from yaml.nodes import SequenceNode

from evolve.llm.config import ModelSpecError
from evolve.llm.prices import BUILTIN_PRICES
from evolve.mutators import LLM_OPERATORS, Mutator
from evolve.mutators.llm import model_config
from evolve.plugin import registry
from evolve.plugin.evaluator import Evaluator, evaluator_class
from evolve.plugin.knobs import find_knobs
from evolve.plugin.program import Program, ProgramError
from evolve.plugin.taskpaths import TaskPathError, confine, read_task_file
from evolve.search.map_elites import CODE_LENGTH
from evolve.task.problems import Layout, Loc, Overlay, Problem, field_path, schema_problems
from evolve.task.schema import TaskSpec


class TaskChecks:
    """One task's checks, held together because a later one uses what an earlier one made:
    the objectives are vetted by the evaluator that `evaluator` built."""

    def __init__(self, spec: TaskSpec, root: Path, layout: Layout | Overlay) -> None:
        self.spec, self.root, self.layout = spec, root, layout
        self.problems: list[Problem] = []
        self.made: Evaluator | None = None  # the evaluator, once its params are known good

    def fail(self, loc: Loc, message: str) -> None:
        self.problems.append(self.layout.problem(loc, message))

    def seed(self) -> Program | None:
        listed = isinstance(self.layout.node(("seed",)), SequenceNode)
        files: dict[str, str] = {}
        for i, entry in enumerate(self.spec.seed):
            loc: Loc = ("seed", i) if listed else ("seed",)
            text = self._read(entry, loc)
            if entry in files:
                self.fail(loc, f"{entry!r} is listed twice")
            elif text is not None:
                files[entry] = text
        if len(files) < len(self.spec.seed):
            return None
        try:
            program = Program(files)
            find_knobs(program)
        except ProgramError as exc:
            self.fail(("seed",), str(exc))
            return None
        return program

    def notes(self) -> str:
        if self.spec.notes is None:
            return ""
        return self._read(self.spec.notes, ("notes",)) or ""

    def evaluator(self) -> None:
        spec = self.spec.evaluator
        try:
            cls = evaluator_class(spec.name)
        except KeyError as exc:
            self.fail(("evaluator", "name"), exc.args[0])
            return
        except (ImportError, AttributeError) as exc:
            self.fail(("evaluator", "name"), f"plugin {spec.name!r} is installed but broken: {exc}")
            return
        except TypeError as exc:
            self.fail(("evaluator", "name"), str(exc))
            return
        try:
            self.made = cls(spec.params, self.root)
        except ValidationError as exc:
            params_model = getattr(cls, "Params", None)  # for "did you mean" on a typo
            self.problems += schema_problems(
                exc, self.layout, ("evaluator", "params"), params_model
            )
        except TaskPathError as exc:
            self.fail(("evaluator", "params", exc.param), exc.message)
        except (ValueError, OSError) as exc:
            self.fail(("evaluator", "params"), str(exc))

    def mutators(self) -> None:
        for i, mutator in enumerate(self.spec.mutators):
            try:
                cls = registry.load_class("mutator", mutator.name, Mutator)
            except registry.UnknownPlugin:
                known = registry.known("mutator")
                message = f"unknown mutator {mutator.name!r} (known: {known})"
                self.fail(("mutators", i, "name"), message)
                continue
            except (ImportError, AttributeError) as exc:
                message = f"plugin {mutator.name!r} is installed but broken: {exc}"
                self.fail(("mutators", i, "name"), message)
                continue
            except TypeError as exc:
                self.fail(("mutators", i, "name"), str(exc))
                continue
            if mutator.name in LLM_OPERATORS and self.spec.llm is None:
                message = f"{mutator.name!r} asks a model: add an `llm:` section naming one"
                self.fail(("mutators", i, "name"), message)
            try:
                cls.Params.model_validate(mutator.params)
            except ValidationError as exc:
                self.problems += schema_problems(
                    exc, self.layout, ("mutators", i, "params"), cls.Params
                )

    def llm(self) -> None:
        """Models must parse, and their keys must be there now rather than fail mid-run.
        Under a USD budget every model needs a price: one counted as free would let the
        budget be overspent without a word."""
        llm = self.spec.llm
        if llm is None:
            return
        if llm.templates is not None:
            self._templates(llm.templates)
        for i, spec in enumerate(llm.models):
            try:
                config = model_config(spec)
            except ModelSpecError as exc:
                self.fail(("llm", "models", i, exc.field), str(exc))
                continue
            if spec.base_url is None and not os.environ.get(config.key_env):
                self.fail(
                    ("llm", "models", i, "model"), f"set {config.key_env} to use {config.label}"
                )
            priced = config.label in BUILTIN_PRICES or config.label in llm.prices
            if self.spec.budget.usd is not None and not priced:
                self.fail(("llm", "models", i, "model"), _unpriced(config.label))
            if config.provider == "anthropic" and llm.temperature is not None:
                message = "the anthropic SDK takes no temperature: remove it or the model"
                self.fail(("llm", "temperature"), message)

    def objectives(self) -> None:
        first: dict[str, int] = {}
        for i, objective in enumerate(self.spec.objectives):
            if objective.name in first:
                where = f"objectives[{first[objective.name]}]"
                self.fail(("objectives", i, "name"), f"{objective.name!r} is already {where}")
            first.setdefault(objective.name, i)
            problem = self._metric_problem(objective.name)
            if problem:
                self.fail(("objectives", i, "name"), problem)
        self._search_fits()

    def _search_fits(self) -> None:
        """The strategy's needs: pareto two objectives to trade off, map_elites features
        that every evaluation reports."""
        search = self.spec.search
        self._registered("strategy", search.strategy, ("search", "strategy"))
        if search.strategy == "pareto" and len(self.spec.objectives) < 2:
            message = (
                f"pareto trades objectives off against each other and this task has "
                f"{len(self.spec.objectives)}: add another objective, or use islands"
            )
            self.fail(("search", "strategy"), message)
        first: dict[str, int] = {}
        for i, feature in enumerate(search.features):
            if feature.name in first:
                where = f"search.features[{first[feature.name]}]"
                self.fail(("search", "features", i, "name"), f"{feature.name!r} is already {where}")
            first.setdefault(feature.name, i)
            problem = None if feature.name == CODE_LENGTH else self._metric_problem(feature.name)
            if problem:
                self.fail(("search", "features", i, "name"), problem)

    def sandbox(self) -> None:
        self._registered("sandbox backend", self.spec.sandbox.backend, ("sandbox", "backend"))

    def _registered(self, kind: registry.Kind, name: str, loc: Loc) -> None:
        if name not in registry.registered(kind):
            self.fail(loc, f"unknown {kind} {name!r} (known: {registry.known(kind)})")

    def _metric_problem(self, name: str) -> str | None:
        return None if self.made is None else self.made.metric_problem(name)

    def _templates(self, folder: str) -> None:
        """The prompt templates the task overrides: each one read now, so that one leading
        out of the folder is refused and an edit to one shows in the task's fingerprint."""
        loc = ("llm", "templates")
        try:
            found = confine(self.root, folder, "templates")
        except TaskPathError as exc:
            self.fail(loc, exc.message)
            return
        if not found.is_dir():
            self.fail(loc, f"{folder!r} is not a folder (looked for {found})")
            return
        for template in sorted(found.glob("*.txt")):
            self._read((Path(folder) / template.name).as_posix(), loc)

    def _read(self, entry: str, loc: Loc) -> str | None:
        """A file named in the task; confined to the task folder so a task is self-contained."""
        try:
            return read_task_file(self.root, entry, field_path(loc))
        except TaskPathError as exc:
            self.fail(loc, exc.message)
            return None


def _unpriced(label: str) -> str:
    """What to write for a model no price table knows; a local server's calls cost nothing."""
    if label.startswith("openai-compatible:"):
        rates, note = ("0", "0"), "for a free local server"
    else:
        rates, note = ("X", "Y"), "USD per million tokens, from the provider's price list"
    key = f'{{"{label}": {{input_per_mtok: {rates[0]}, output_per_mtok: {rates[1]}}}}}'
    return (
        f"{label} has no price, so budget.usd cannot count its calls: "
        f"set llm.prices: {key} ({note})"
    )
