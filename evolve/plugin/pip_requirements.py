"""The PyPI packages a task asks for: requirement strings checked as pip reads them, and the
requirements.txt of an OpenEvolve folder read the way pip reads it.

A requirement is PEP 508 (a name, extras, versions, an environment marker, or `name @ URL`)
and is kept in the form `packaging` writes it, which pip reads back the same, so that the
same list always makes the same sandbox. In a requirements file, `-r FILE` is followed (the
file must lie in the task folder too); every other option (an index, `--hash`, `-e`) is
passed over and named, since evolve installs from PyPI by name. A line pip would read as a
path or a bare URL is an error on its line: the sandbox's build cannot reach the host's
files, and a URL needs a name (`name @ URL`) to be checked here.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from evolve.plugin.taskpaths import TaskPathError, read_task_file

COMMENT = re.compile(r"(^|\s+)#.*$")
INCLUDE = ("-r", "--requirement")


class RequirementsError(ValueError):
    """A requirements file that cannot be used, with the file (in the task folder) and line."""

    def __init__(self, file: str, line: int | None, message: str) -> None:
        super().__init__(file, line, message)
        self.file, self.line, self.message = file, line, message

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


@dataclass
class Requirements:
    listed: list[str] = field(default_factory=list)  # canonical, each once, in file order
    passed_over: list[str] = field(default_factory=list)  # options evolve does not apply


def requirement(text: str) -> str:
    """`text` as a requirement pip reads, written the canonical way; ValueError saying why
    it is not one."""
    stripped = text.strip()
    if stripped.startswith("-"):
        raise ValueError(
            f"{text!r} is an option, not a requirement: give requirement strings such as "
            "'scipy>=1.11' or 'pywavelets; python_version >= \"3.9\"'"
        )
    try:
        return str(Requirement(stripped))
    except InvalidRequirement as exc:
        said = str(exc).splitlines()[0]  # the rest draws a caret under the text
        raise ValueError(
            f"{text!r} is not a requirement evolve can install ({said}); give a name with "
            "optional extras, versions and marker, or `name @ URL`"
        ) from None


def project(text: str) -> str:
    """The normalised project name of a requirement: `PyWavelets>=1` -> `pywavelets`."""
    return canonicalize_name(Requirement(text).name)


def read_requirements(task_dir: Path, relative: str) -> Requirements:
    """The requirements of the file at `relative` in the task folder, and of the files its
    `-r` lines include; RequirementsError names the file and line of what cannot be used."""
    found = Requirements()
    _read(task_dir, relative, found, (relative,))
    return found


def _read(task_dir: Path, relative: str, found: Requirements, chain: tuple[str, ...]) -> None:
    try:
        text = read_task_file(task_dir, relative, "requirements")
    except TaskPathError as exc:
        if len(chain) == 1:
            raise RequirementsError(relative, None, exc.message) from None
        raise ValueError(exc.message) from None  # placed on the including line
    for number, line in _logical_lines(text):
        try:
            if line.startswith("-"):
                _option(task_dir, relative, line, found, chain)
            else:
                _requirement_line(line, found)
        except ValueError as exc:
            if isinstance(exc, RequirementsError):
                raise
            raise RequirementsError(relative, number, str(exc)) from None


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """pip's lines: a trailing backslash joins the next line, comments go, blank lines go;
    each with the number of the line it starts on."""
    lines: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if raw.endswith("\\"):
            pending += raw[:-1]
            continue
        line = COMMENT.sub("", pending + raw).strip()
        pending = ""
        if line:
            lines.append((start, line))
    if pending.strip():
        lines.append((start, COMMENT.sub("", pending).strip()))
    return [(number, line) for number, line in lines if line]


def _option(
    task_dir: Path, relative: str, line: str, found: Requirements, chain: tuple[str, ...]
) -> None:
    """`-r FILE` is read in its turn; any other option is named as passed over."""
    words = shlex.split(line)
    name, _, attached = words[0].partition("=")
    if name.startswith("-r") and name not in INCLUDE:  # -rFILE
        name, attached = "-r", name[2:]
    if name not in INCLUDE:
        found.passed_over.append(line)
        return
    target = attached or (words[1] if len(words) > 1 else "")
    if not target:
        raise ValueError(f"{name} needs the file to read")
    included = os.path.normpath(str(PurePosixPath(relative).parent / target))
    if included in chain:
        raise ValueError(f"{target!r} includes itself (through {' -> '.join(chain)})")
    _read(task_dir, Path(included).as_posix(), found, (*chain, included))


def _requirement_line(line: str, found: Requirements) -> None:
    """A requirement, with any per-requirement options after it (`--hash=...`) passed over."""
    words = line.split()
    cut = next((i for i, word in enumerate(words) if word.startswith("-")), len(words))
    if cut < len(words):
        found.passed_over.append(" ".join(words[cut:]))
    wanted = requirement(" ".join(words[:cut]))
    if wanted not in found.listed:
        found.listed.append(wanted)
