"""The task's files that go into the work dir beside the candidate's, read once at load.

Only what `files` names goes: unlike an OpenEvolve folder, a command task has no
convention that says which files its commands need. Each file is read as bytes (data,
pictures, prebuilt helpers as well as sources) within the shipping caps of
evolve/evaluators/shipped_files.py, stays inside the task folder, and is fingerprinted for
`--resume`; the bytes travel inside the pickled evaluator. The check file never goes,
whatever `files` says: a candidate that could read it would know what it checks.
"""

from __future__ import annotations

from pathlib import Path

from evolve.evaluators.command.params import RESERVED
from evolve.evaluators.shipped_files import matching, read_shipped
from evolve.plugin.taskpaths import TaskPathError, confine


def gather(task_dir: Path, patterns: list[str], check: str | None) -> dict[str, bytes]:
    """The files the globs match, by path in the work dir; TaskPathError names the param
    (`files`, or `check` when its path is bad) and the file that cannot go."""
    root = task_dir.resolve()
    secret = confine(task_dir, check, "check") if check else None
    secret_is = "the check file, which never enters the sandbox"
    names = matching(root, patterns, secret, secret_is)
    for name in names:
        if name in RESERVED:
            raise TaskPathError("files", f"{name!r} is a name the evaluator uses in the job")
    files: dict[str, bytes] = {}
    read_shipped(task_dir, names, files, ": name fewer with `files: [...]`")
    return files
