"""Loading task.yaml so that every mistake is caught before a run starts, with file, line, field.

TaskSpec says what is valid; this module says *where* something is invalid, by mapping
each pydantic error location back onto the YAML node it came from. It also checks what
the schema cannot see: files on disk, installed plugins, evaluator params, knob syntax.
All problems found at one stage are reported together, so one edit can fix them all.

A task file may come from anyone, so loading it is bounded: the file is refused unread
when over the size cap, its YAML within limits (taskyaml.py), and every file it names is
read through taskpaths.py, which keeps it inside the task folder and fingerprints it.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from evolve.evaluator import Evaluator, evaluator_class
from evolve.knobs import find_knobs
from evolve.mutators import LLM_OPERATORS, MUTATORS
from evolve.mutators.llm import model_config
from evolve.program import Program, ProgramError
from evolve.task import TaskSpec
from evolve.taskpaths import (
    TaskPathError,
    check_size,
    confine,
    max_task_bytes,
    read_bounded,
    read_task_file,
    recording,
)
from evolve.taskyaml import YAMLLimitError
from evolve.taskyaml import load as load_yaml

Loc = Sequence[str | int]


@dataclass(frozen=True)
class Problem:
    line: int | None  # 1-based; None when the file as a whole is at fault
    field: str  # dotted, list indexes as [i]; "" for the file itself
    message: str

    def render(self, path: Path) -> str:
        where = str(path) if self.line is None else f"{path}:{self.line}"
        field = f"{self.field}: " if self.field else ""
        return f"{where}: {field}{self.message}"


class TaskFileError(Exception):
    """Everything wrong with one task file; the first problem is mirrored as attributes."""

    def __init__(self, path: Path, problems: Sequence[Problem]) -> None:
        super().__init__(path, tuple(problems))  # args that rebuild it, so it survives pickling
        self.path = path
        self.problems = tuple(problems)
        first = self.problems[0]
        self.line, self.field, self.message = first.line, first.field, first.message

    def __str__(self) -> str:
        return "\n".join(problem.render(self.path) for problem in self.problems)


@dataclass(frozen=True)
class LoadedTask:
    """A task proven loadable; plain data, so it pickles to Ray workers and rebuilds on resume."""

    spec: TaskSpec
    path: Path  # absolute
    root: Path  # the task file's folder; relative paths in the task start here
    text: str  # the file as written, stored with the run for --resume
    seed: Program  # keys are the seed paths as written in the task
    notes: str
    files: Mapping[str, str]  # every file the task names, by path in its folder: sha256

    @property
    def digest(self) -> str:
        """The task's fingerprint: sha256 over its text and every file it names."""
        named = [f"{digest}  {name}" for name, digest in sorted(self.files.items())]
        lines = [f"{hashlib.sha256(self.text.encode()).hexdigest()}  (task)", *named]
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def load_task(path: Path) -> LoadedTask:
    """The task at `path`, read only if within the size cap (taskpaths.max_task_bytes)."""
    try:
        text = read_bounded(path, max_task_bytes())
    except OSError as exc:
        raise TaskFileError(path, [Problem(None, "", f"cannot read it: {_reason(exc)}")]) from None
    except ValueError as exc:
        raise TaskFileError(path, [Problem(None, "", f"refused: {exc}")]) from None
    return parse_task(text, path)


def changed_files(task: LoadedTask, recorded: Mapping[str, str]) -> list[str]:
    """The files the task names that differ from the fingerprints `recorded` when its run
    began: added, removed or edited since."""
    return sorted(n for n in {*task.files, *recorded} if task.files.get(n) != recorded.get(n))


def parse_task(text: str, path: Path) -> LoadedTask:
    """Load from stored text; `path` only names the file in errors and anchors relative paths.
    The size cap holds here too, for text stored by a run from before there was one."""
    try:
        check_size(len(text.encode()), max_task_bytes())
    except ValueError as exc:
        raise TaskFileError(path, [Problem(None, "", f"refused: {exc}")]) from None
    tree, data = _parse_yaml(text, path)
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise TaskFileError(path, list(_schema_problems(exc, tree, (), TaskSpec))) from None
    absolute = path.resolve()
    check = _Checks(spec, absolute.parent, tree)
    with recording() as files:
        seed = check.seed()
        notes = check.notes()
        check.evaluator()
        check.mutators()
        check.llm()
        check.objectives()
    if check.problems or seed is None:
        raise TaskFileError(path, check.problems)
    return LoadedTask(spec, absolute, absolute.parent, text, seed, notes, files)


def make_evaluator(task: LoadedTask) -> Evaluator:
    """A fresh evaluator for the task; loading it already proved that this succeeds."""
    spec = task.spec.evaluator
    return evaluator_class(spec.name)(spec.params, task.root)


class _Checks:
    """What the schema cannot see, each failure collected with the line of its node."""

    def __init__(self, spec: TaskSpec, root: Path, tree: MappingNode) -> None:
        self.spec, self.root, self.tree = spec, root, tree
        self.problems: list[Problem] = []
        self.made: Evaluator | None = None  # the evaluator, once its params are known good

    def fail(self, loc: Loc, message: str) -> None:
        self.problems.append(Problem(_find(self.tree, loc)[1], _field(loc), message))

    def seed(self) -> Program | None:
        listed = isinstance(_find(self.tree, ("seed",))[0], SequenceNode)
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
        try:
            self.made = cls(spec.params, self.root)
        except ValidationError as exc:
            self.problems += _schema_problems(exc, self.tree, ("evaluator", "params"), None)
        except TaskPathError as exc:
            self.fail(("evaluator", "params", exc.param), exc.message)
        except (ValueError, OSError) as exc:
            self.fail(("evaluator", "params"), str(exc))

    def mutators(self) -> None:
        known = ", ".join(sorted(MUTATORS))
        for i, mutator in enumerate(self.spec.mutators):
            if mutator.name not in MUTATORS:
                message = f"unknown mutator {mutator.name!r} (known: {known})"
                self.fail(("mutators", i, "name"), message)
                continue
            if mutator.name in LLM_OPERATORS and self.spec.llm is None:
                message = f"{mutator.name!r} asks a model: add an `llm:` section naming one"
                self.fail(("mutators", i, "name"), message)
            try:
                MUTATORS[mutator.name].Params.model_validate(mutator.params)
            except ValidationError as exc:
                self.problems += _schema_problems(exc, self.tree, ("mutators", i, "params"), None)

    def llm(self) -> None:
        """Models must parse, and their keys must be there now rather than fail mid-run."""
        llm = self.spec.llm
        if llm is None:
            return
        if llm.templates is not None:
            self._templates(llm.templates)
        for i, spec in enumerate(llm.models):
            try:
                config = model_config(spec)
            except ValueError as exc:
                self.fail(("llm", "models", i, "model"), str(exc))
                continue
            if spec.base_url is None and not os.environ.get(config.key_env):
                self.fail(
                    ("llm", "models", i, "model"), f"set {config.key_env} to use {config.label}"
                )
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
            vet = getattr(self.made, "metric_problem", None)
            problem = vet(objective.name) if callable(vet) else None
            if problem:
                self.fail(("objectives", i, "name"), problem)

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
            return read_task_file(self.root, entry, _field(loc))
        except TaskPathError as exc:
            self.fail(loc, exc.message)
            return None


def _parse_yaml(text: str, path: Path) -> tuple[MappingNode, Any]:
    """The data and its node tree, whose marks give lines; one parse yields both."""
    try:
        tree, data = load_yaml(text)
    except YAMLLimitError as exc:
        raise TaskFileError(path, [Problem(exc.line, _field(exc.loc), exc.message)]) from None
    except yaml.MarkedYAMLError as exc:
        raise TaskFileError(path, [_syntax_problem(exc)]) from None
    except yaml.YAMLError as exc:
        raise TaskFileError(path, [Problem(None, "", f"invalid YAML: {exc}")]) from None
    if tree is None:
        required = ", ".join(n for n, f in TaskSpec.model_fields.items() if f.is_required())
        message = f"the file is empty; a task needs {required}"
        raise TaskFileError(path, [Problem(None, "", message)])
    if not isinstance(tree, MappingNode):
        kind = "a list" if isinstance(tree, SequenceNode) else "a single value"
        message = f"the top level must be a mapping of keys like `name: ...`, not {kind}"
        raise TaskFileError(path, [Problem(tree.start_mark.line + 1, "", message)])
    duplicates = list(_duplicate_keys(tree, ()))
    if duplicates:
        raise TaskFileError(path, duplicates)
    return tree, data


def _syntax_problem(exc: yaml.MarkedYAMLError) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    message = f"invalid YAML: {exc.problem or exc.context}"
    if exc.context and exc.context_mark and mark and exc.context_mark.line != mark.line:
        message += f" ({exc.context} started on line {exc.context_mark.line + 1})"
    return Problem(mark.line + 1 if mark else None, "", message)


def _duplicate_keys(node: Node, loc: tuple[str | int, ...]) -> Iterator[Problem]:
    """YAML keeps the last of two equal keys; we refuse, since the first would be ignored."""
    if isinstance(node, MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, ScalarNode) else str(key.value)
            line = key.start_mark.line + 1
            if name in seen:
                message = f"key given twice (first on line {seen[name]})"
                yield Problem(line, _field((*loc, name)), message)
            seen.setdefault(name, line)
            yield from _duplicate_keys(value, (*loc, name))
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, (*loc, i))


def _find(tree: MappingNode, loc: Loc) -> tuple[Node, int]:
    """The deepest node along `loc` and its 1-based line.

    A mapping value is placed on its key's line, so a missing field points at the key of
    the mapping that lacks it, and an unknown key points at itself.
    """
    node: Node = tree
    line = tree.start_mark.line
    for part in loc:
        step = _child(node, part)
        if step is None:
            break
        anchor, node = step
        line = anchor.start_mark.line
    return node, line + 1


def _child(node: Node, part: str | int) -> tuple[Node, Node] | None:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value == str(part):
                return key, value
    if isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part], node.value[part]
    return None


def _field(loc: Loc) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def _schema_problems(
    error: ValidationError, tree: MappingNode, prefix: Loc, model: type[BaseModel] | None
) -> Iterator[Problem]:
    """One problem per pydantic error; `prefix` places a nested model's errors in the file."""
    for details in error.errors():
        loc = (*prefix, *details["loc"])
        yield Problem(_find(tree, loc)[1], _field(loc), _explain(details, model))


def _explain(details: ErrorDetails, model: type[BaseModel] | None) -> str:
    """Pydantic's message, reworded where it would not tell a task author how to fix it."""
    if details["type"] == "missing":
        return "required but missing"
    if details["type"] == "extra_forbidden":
        *parent, key = details["loc"]
        allowed = _keys_at(model, parent) if model else []
        message = "unknown key"
        close = difflib.get_close_matches(str(key), allowed, n=1)
        if close:
            message += f"; did you mean {close[0]!r}?"
        if allowed:
            message += f" (allowed here: {', '.join(allowed)})"
        return message
    return details["msg"].removeprefix("Value error, ")


def _keys_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """The keys the schema accepts at `loc`, following nested models and lists of them."""
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if current else None
        current = _model_in(field.annotation) if field else None
    return list(current.model_fields) if current else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found:
            return found
    return None


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
