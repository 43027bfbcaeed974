"""Where in task.yaml something is wrong: a file, a line and a dotted field for each problem.

TaskSpec says what is valid; this module says *where* something is invalid, by mapping
each error location back onto the YAML node it came from, and rewords pydantic's messages
where they would not tell a task author how to fix the file.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Loc = Sequence[str | int]
Placement = Callable[[Loc], Loc]  # a field of the task to where it was written in the file


def as_written(loc: Loc) -> Loc:
    """A task.yaml holds each field where the task has it."""
    return loc


@dataclass(frozen=True)
class Problem:
    line: int | None  # 1-based; None when the file as a whole is at fault
    field: str  # dotted, list indexes as [i]; "" for the file itself
    message: str
    file: Path | None = None  # where the task was written in more than one file: this one

    def render(self, path: Path) -> str:
        path = self.file or path
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
class Layout:
    """Where a task's fields were written: the YAML tree of a file, and `place`, which maps a
    field of the task to its key in that file; `file` names the file where it is not the
    task file that was loaded."""

    tree: MappingNode
    place: Placement = as_written
    file: Path | None = None

    def node(self, loc: Loc) -> Node:
        return locate(self.tree, self.place(loc))[0]

    def problem(self, loc: Loc, message: str) -> Problem:
        written = self.place(loc)
        return Problem(locate(self.tree, written)[1], field_path(written), message, self.file)


@dataclass(frozen=True)
class Overlay:
    """A task written in two files: `own` (a task.yaml, whose data is `written`) over `base`
    (the config it extends). A field is placed in `own` where `own` gives it, or gives a
    value (a list, a scalar) above it that it replaces whole; else in `base`."""

    own: Layout
    written: Mapping[str, Any]
    base: Layout

    def _holder(self, loc: Loc) -> Layout:
        value: Any = self.written
        for part in loc:
            if not isinstance(value, Mapping):
                return self.own
            if part not in value:
                return self.base
            value = value[part]
        return self.own

    def node(self, loc: Loc) -> Node:
        return self._holder(loc).node(loc)

    def problem(self, loc: Loc, message: str) -> Problem:
        return self._holder(loc).problem(loc, message)


def locate(tree: MappingNode, loc: Loc) -> tuple[Node, int]:
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


def field_path(loc: Loc) -> str:
    """`loc` as the task author writes it: `mutators[0].params`."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def schema_problems(
    error: ValidationError,
    layout: Layout | Overlay,
    prefix: Loc,
    model: type[BaseModel] | None,
) -> Iterator[Problem]:
    """One problem per pydantic error; `prefix` places a nested model's errors in the task,
    `layout` the task's fields in its files, and `model`, where known, lets an unknown key
    be answered with the keys allowed there."""
    for details in error.errors():
        yield layout.problem((*prefix, *details["loc"]), _explain(details, model))


def _child(node: Node, part: str | int) -> tuple[Node, Node] | None:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value == str(part):
                return key, value
    if isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        return node.value[part], node.value[part]
    return None


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
