"""Loading task.yaml so that every mistake is caught before a run starts, with file, line, field.

Loading goes in stages, each reporting all its problems together: the file itself, its
YAML, the schema (TaskSpec, placed in the file by taskproblems.py), then what the schema
cannot see (taskchecks.py).

A task is a task.yaml, an OpenEvolve config (evolve/task/openevolve.py translates it), or a
task.yaml that extends an OpenEvolve config beside it: `openevolve: config.yaml` names the
config, and its other keys are laid over the config's translation (a mapping key by key,
anything else whole), so that a folder gains what its config cannot say (`sandbox.packages:
[cargo]`, `evaluator.params.files`) without an edit. Each problem then names the file and
line that gave the field.

A task file may come from anyone, so loading it is bounded: the file is refused unread
when over the size cap, its YAML within limits (taskyaml.py), and every file it names is
read through taskpaths.py, which keeps it inside the task folder and fingerprints it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from evolve.engine.verification import evaluator_reason
from evolve.plugin.evaluator import Evaluator, evaluator_class
from evolve.plugin.pip_requirements import RequirementsError
from evolve.plugin.program import Program
from evolve.plugin.taskpaths import (
    TaskPathError,
    check_size,
    max_task_bytes,
    read_bounded,
    read_task_file,
    recording,
)
from evolve.task.checks import TaskChecks
from evolve.task.openevolve import (
    EVALUATOR_FILE,
    EXTENDS,
    OpenEvolveError,
    Translation,
    find_config,
    looks_like_openevolve,
    translate,
)
from evolve.task.problems import (
    Layout,
    Overlay,
    Problem,
    TaskFileError,
    field_path,
    locate,
    schema_problems,
)
from evolve.task.schema import TaskSpec
from evolve.task.yaml_limits import YAMLLimitError
from evolve.task.yaml_limits import load as load_yaml


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
    warnings: tuple[str, ...] = ()  # said once when the task loads, e.g. ignored config keys
    unverified: str | None = None  # why its scores can be forged (evolve/engine/verification.py)

    @property
    def digest(self) -> str:
        """The task's fingerprint: sha256 over its text and every file it names."""
        named = [f"{digest}  {name}" for name, digest in sorted(self.files.items())]
        lines = [f"{hashlib.sha256(self.text.encode()).hexdigest()}  (task)", *named]
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def load_task(path: Path) -> LoadedTask:
    """The task at `path`, read only if within the size cap (taskpaths.max_task_bytes). A
    folder means its task.yaml, or the config of an OpenEvolve folder
    (evolve/task/openevolve.py)."""
    if path.is_dir():
        found = path / "task.yaml" if (path / "task.yaml").is_file() else find_config(path)
        if found is None:
            message = (
                "a folder without a task.yaml, and not an OpenEvolve folder "
                "(evaluator.py and config.yaml)"
            )
            raise TaskFileError(path, [Problem(None, "", message)])
        path = found
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
    absolute = path.resolve()
    with recording() as files:
        data, layout, translation = _task_data(data, tree, path)
        try:
            spec = TaskSpec.model_validate(data)
        except ValidationError as exc:
            raise TaskFileError(path, list(schema_problems(exc, layout, (), TaskSpec))) from None
        check = TaskChecks(spec, absolute.parent, layout)
        seed = check.seed()
        notes = check.notes()
        check.evaluator()
        check.mutators()
        check.llm()
        check.objectives()
        check.sandbox()
    if check.problems or seed is None:
        raise TaskFileError(path, check.problems)
    warnings = tuple(translation.warnings()) if translation else ()
    beside = absolute.parent / "task.yaml"
    if isinstance(layout, Layout) and translation and beside != absolute and beside.is_file():
        warnings += (f"the task.yaml beside {path.name} is not read: run the folder to use it",)
    unverified = evaluator_reason(check.made)
    return LoadedTask(
        spec, absolute, absolute.parent, text, seed, notes, files, warnings, unverified
    )


def _task_data(
    data: Any, tree: MappingNode, path: Path
) -> tuple[Any, Layout | Overlay, Translation | None]:
    """What the task holds, where each field of it was written, and the translation of the
    OpenEvolve config it is or extends."""
    if isinstance(data, Mapping) and EXTENDS in data:
        return _extended(data, tree, path)
    if looks_like_openevolve(data, path.resolve().parent):
        translation = _translated(data, tree, path)
        return translation.task, Layout(tree, translation.place), translation
    return data, Layout(tree), None


def _extended(
    data: Mapping[str, Any], tree: MappingNode, path: Path
) -> tuple[dict[str, Any], Overlay, Translation]:
    """A task.yaml that extends an OpenEvolve config: the config's translation with the
    task.yaml's other keys laid over it."""
    root = path.resolve().parent
    name = _config_name(data[EXTENDS], tree, path)
    config_path = path.parent / name
    try:
        config_text = read_task_file(root, name, EXTENDS)
    except TaskPathError as exc:
        raise TaskFileError(path, [_extends_problem(tree, exc.message)]) from None
    if not (root / EVALUATOR_FILE).is_file():
        message = f"{name} is an OpenEvolve config only beside its {EVALUATOR_FILE}, not in {root}"
        raise TaskFileError(path, [_extends_problem(tree, message)])
    config_tree, config = _parse_yaml(config_text, config_path)
    own = {key: value for key, value in data.items() if key != EXTENDS}
    translation = _translated(config, config_tree, config_path, own_llm="llm" in own)
    base = Layout(config_tree, translation.place, config_path)
    return _laid_over(translation.task, own), Overlay(Layout(tree), own, base), translation


def _config_name(value: Any, tree: MappingNode, path: Path) -> str:
    if isinstance(value, str) and value and Path(value).name == value and value not in {".", ".."}:
        return value
    message = f"must name the OpenEvolve config beside this file, e.g. config.yaml, not {value!r}"
    raise TaskFileError(path, [_extends_problem(tree, message)])


def _extends_problem(tree: MappingNode, message: str) -> Problem:
    return Problem(locate(tree, (EXTENDS,))[1], EXTENDS, message)


def _laid_over(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `over` laid on it: mappings merge key by key, any other value replaces."""
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = _laid_over(below, value)
        else:
            merged[key] = value
    return merged


def _translated(data: Any, tree: MappingNode, path: Path, *, own_llm: bool = False) -> Translation:
    try:
        return translate(data, path.resolve().parent, own_llm=own_llm)
    except OpenEvolveError as exc:
        problem = Problem(locate(tree, exc.loc)[1], field_path(exc.loc), str(exc))
        raise TaskFileError(path, [problem]) from None
    except RequirementsError as exc:
        problem = Problem(exc.line, "", exc.message)
        raise TaskFileError(path.parent / exc.file, [problem]) from None


def make_evaluator(task: LoadedTask) -> Evaluator:
    """A fresh evaluator for the task; loading it already proved that this succeeds."""
    spec = task.spec.evaluator
    return evaluator_class(spec.name)(spec.params, task.root)


def _parse_yaml(text: str, path: Path) -> tuple[MappingNode, Any]:
    """The data and its node tree, whose marks give lines; one parse yields both."""
    try:
        tree, data = load_yaml(text)
    except YAMLLimitError as exc:
        raise TaskFileError(path, [Problem(exc.line, field_path(exc.loc), exc.message)]) from None
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
                yield Problem(line, field_path((*loc, name)), message)
            seen.setdefault(name, line)
            yield from _duplicate_keys(value, (*loc, name))
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, (*loc, i))


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
