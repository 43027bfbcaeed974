"""The task's files that go into the sandbox beside a candidate, chosen by globs.

Shared by the evaluators that ship task files (python, command): a glob must stay inside the
task folder and match something (a typo would otherwise fail every evaluation, far from its
cause), the task's trusted judge (verify.py, check.py) never goes whatever a glob says, and
what goes is capped, since it travels inside the pickled evaluator to every worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from evolve.taskpaths import TaskPathError

MAX_SHIPPED_BYTES = 16 * 1024**2


def matching(root: Path, patterns: Sequence[str], secret: Path | None, secret_is: str) -> list[str]:
    """The regular files each glob matches, as paths relative to `root`; TaskPathError (on
    `files`) for a glob that leaves the folder, matches nothing, or matches `secret`, which
    `secret_is` names for the message."""
    names: list[str] = []
    for pattern in patterns:
        pure = PurePosixPath(pattern)
        if not pattern or pure.is_absolute() or ".." in pure.parts:
            raise TaskPathError(
                "files", f"{pattern!r}: give globs relative to the task folder, inside it"
            )
        matched = sorted(path for path in root.glob(pattern) if path.is_file())
        if not matched:
            raise TaskPathError("files", f"{pattern!r} matches no file in {root}")
        for path in matched:
            if path.resolve() == secret:
                raise TaskPathError("files", f"{pattern!r} matches {secret_is}")
            names.append(path.relative_to(root).as_posix())
    return names


def check_cap(files: Mapping[str, bytes], hint: str = "") -> None:
    total = sum(len(data) for data in files.values())
    if total > MAX_SHIPPED_BYTES:
        raise TaskPathError(
            "files",
            f"the files to ship into the sandbox hold {total} bytes, over the "
            f"{MAX_SHIPPED_BYTES // 1024**2} MiB cap{hint}",
        )
