"""The task's files that go into the sandbox beside a candidate, chosen by globs or by walking
the task folder, and read as bytes.

Shared by the evaluators that ship task files (python, command): a glob must stay inside the
task folder and match something (a typo would otherwise fail every evaluation, far from its
cause), the task's trusted judge (verify.py, check.py) never goes whatever a glob says, and
what goes is capped in bytes and in files, since it travels inside the pickled evaluator to
every worker and into every job.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from evolve.plugin.taskpaths import TaskPathError, confine, read_task_bytes

MAX_SHIPPED_BYTES = 16 * 1024**2
MAX_SHIPPED_FILES = 1000
# Folders a walk never enters besides hidden ones: Python's bytecode caches and OpenEvolve's
# own output (its checkpoints), which it writes inside the task folder by default.
SKIPPED_FOLDERS = frozenset({"__pycache__", "openevolve_output"})
STORE_FILE = "evolve.db"  # a folder holding it is a results folder of evolve's: never shipped


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


def walk(root: Path, hint: str) -> list[str]:
    """Every regular file under `root`, as sorted paths relative to it, less hidden files and
    folders, SKIPPED_FOLDERS and evolve's results folders. Symlinked folders are not entered.
    TaskPathError (on `files`), ending with `hint`, past MAX_SHIPPED_FILES files."""
    found: list[str] = []
    for folder, subfolders, names in os.walk(root):
        here = Path(folder)
        subfolders[:] = sorted(name for name in subfolders if _enters(here / name))
        for name in names:
            if not name.startswith(".") and (here / name).is_file():
                found.append((here / name).relative_to(root).as_posix())
        if len(found) > MAX_SHIPPED_FILES:
            raise TaskPathError("files", _too_many(found, hint))
    return sorted(found)


def _enters(folder: Path) -> bool:
    return (
        not folder.name.startswith(".")
        and folder.name not in SKIPPED_FOLDERS
        and not folder.is_symlink()
        and not (folder / STORE_FILE).is_file()
    )


def _too_many(found: list[str], hint: str) -> str:
    busiest, count = Counter(name.partition("/")[0] for name in found).most_common(1)[0]
    return (
        f"the task folder holds more than the {MAX_SHIPPED_FILES} files that may go into the "
        f"sandbox ({count} of them in {busiest}){hint}"
    )


def read_shipped(task_dir: Path, names: Sequence[str], files: dict[str, bytes], hint: str) -> None:
    """Each of `names` (paths in the task folder) read as bytes into `files`, where a name is
    not there already. TaskPathError (on `files`, ending with `hint`) when together they
    would pass MAX_SHIPPED_BYTES or MAX_SHIPPED_FILES, naming the largest; the sizes are
    looked at before anything is read, and each read is bounded by what is left."""
    wanted = [name for name in dict.fromkeys(names) if name not in files]
    if len(files) + len(wanted) > MAX_SHIPPED_FILES:
        raise TaskPathError("files", _too_many([*files, *wanted], hint))
    sizes = {name: _size(task_dir, name) for name in wanted}
    held = sum(len(data) for data in files.values())
    if held + sum(sizes.values()) > MAX_SHIPPED_BYTES:
        raise TaskPathError("files", _too_large(held + sum(sizes.values()), sizes, hint))
    for name in wanted:
        left = MAX_SHIPPED_BYTES - held
        try:
            files[name] = read_task_bytes(task_dir, name, "files", left)
        except TaskPathError as exc:  # grown past what is left since its size was taken
            raise TaskPathError("files", f"{exc.message}{hint}") from None
        held += len(files[name])


def _size(task_dir: Path, name: str) -> int:
    try:
        return confine(task_dir, name, "files").stat().st_size
    except OSError as exc:
        raise TaskPathError("files", f"cannot read {name!r}: {exc.strerror or exc}") from None


def _too_large(total: int, sizes: Mapping[str, int], hint: str) -> str:
    largest = sorted(sizes, key=lambda name: -sizes[name])[:3]
    named = ", ".join(f"{name} ({_mib(sizes[name])})" for name in largest)
    return (
        f"the files to ship into the sandbox hold {_mib(total)}, over the "
        f"{_mib(MAX_SHIPPED_BYTES)} cap (the largest: {named}){hint}"
    )


def _mib(size: int) -> str:
    return f"{size / 1024**2:.1f} MiB"
