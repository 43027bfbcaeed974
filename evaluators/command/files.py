"""The task's files that go into the work dir beside the candidate's, read once at load.

Only what `files` names goes: unlike an OpenEvolve folder, a command task has no
convention that says which files its commands need. Each file is read through
read_task_file, so it stays inside the task folder, is text, and is fingerprinted for
`--resume`; the bytes travel inside the pickled evaluator. The check file never goes,
whatever `files` says: a candidate that could read it would know what it checks.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from evaluators.command.params import RESERVED
from evolve.taskpaths import TaskPathError, confine, read_task_file

MAX_SHIPPED_BYTES = 16 * 1024**2


def gather(task_dir: Path, patterns: list[str], check: str | None) -> dict[str, bytes]:
    """The files the globs match, by path in the work dir; TaskPathError names the param
    (`files`, or `check` when its path is bad) and the file that cannot go."""
    root = task_dir.resolve()
    secret = confine(task_dir, check, "check") if check else None
    files: dict[str, bytes] = {}
    for pattern in patterns:
        pure = PurePosixPath(pattern)
        if not pattern or pure.is_absolute() or ".." in pure.parts:
            raise TaskPathError(
                "files", f"{pattern!r}: give globs relative to the task folder, inside it"
            )
        matched = sorted(path for path in root.glob(pattern) if path.is_file())
        if not matched:  # a typo would otherwise fail every evaluation, far from its cause
            raise TaskPathError("files", f"{pattern!r} matches no file in {root}")
        for path in matched:
            if path.resolve() == secret:
                raise TaskPathError(
                    "files", f"{pattern!r} matches the check file, which never enters the sandbox"
                )
            name = path.relative_to(root).as_posix()
            if name in RESERVED:
                raise TaskPathError("files", f"{name!r} is a name the evaluator uses in the job")
            files.setdefault(name, read_task_file(task_dir, name, "files").encode())
    total = sum(len(data) for data in files.values())
    if total > MAX_SHIPPED_BYTES:
        raise TaskPathError(
            "files",
            f"the files hold {total} bytes, over the {MAX_SHIPPED_BYTES // 1024**2} MiB cap "
            "on what goes into the sandbox",
        )
    return files
