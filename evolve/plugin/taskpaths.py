"""Reading the files a task names: confined to its folder, bounded in size, and fingerprinted.

A task file comes from whoever wrote it, and what it names is read by trusted code: a
reference is executed, a harness is compiled and its errors are shown. So every path a
task gives, whichever part of the task gives it, goes through `confine` here, which refuses
absolute paths, `..` and symlinks that lead out of the task folder. Reads are bounded before
they start, so a huge or endless file is refused at once instead of filling memory, and
only a regular file is read at all, so a FIFO or a device cannot keep the loader waiting
forever. Every file read through `read_task_file` (text) or `read_task_bytes` (any file)
while `recording` is active is fingerprinted, so a resumed run can tell that the files it
was started with have changed.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

MAX_BYTES_ENV = "EVOLVE_MAX_TASK_BYTES"
DEFAULT_MAX_BYTES = 1024 * 1024

_recorded: ContextVar[dict[str, str] | None] = ContextVar("task_files_read", default=None)


class TaskPathError(ValueError):
    """A file the task names cannot be used; `param` is the key that named it, so the task
    loader can point at that key's line."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(param, message)  # args that rebuild it, so it survives pickling
        self.param, self.message = param, message

    def __str__(self) -> str:
        return f"{self.param}: {self.message}"


def max_task_bytes() -> int:
    """The cap on the task file and on each file it names: EVOLVE_MAX_TASK_BYTES, else 1 MiB."""
    raw = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BYTES
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{MAX_BYTES_ENV} must be a positive number of bytes, not {raw!r}")
    return int(raw)


def check_size(size: int, limit: int) -> None:
    """ValueError, saying how to raise the cap, when `size` bytes are over it."""
    if size > limit:
        raise ValueError(f"{size} bytes, over the {limit}-byte cap ({MAX_BYTES_ENV} sets it)")


def read_bounded(path: Path, limit: int) -> str:
    """The file's text, reading at most `limit` + 1 bytes whatever the file claims to hold.

    ValueError when it is not a regular file (see `read_bytes_bounded`), is larger than
    `limit`, holds a NUL byte (a binary file) or is not UTF-8; OSError when it cannot be
    opened.
    """
    return _as_text(read_bytes_bounded(path, limit))


def read_bytes_bounded(path: Path, limit: int) -> bytes:
    """The file's bytes, reading at most `limit` + 1 bytes whatever the file claims to hold.

    Only a regular file is read: opening a FIFO blocks until something writes to it, and a
    device or socket may never end or never answer, so either would hang the loader. The
    kind is checked before opening (opening some devices does something) and again on the
    open descriptor, which is opened without blocking and without becoming a terminal's, so
    a file swapped in between is caught too. ValueError when it is not a regular file or is
    larger than `limit`; OSError when it cannot be opened.
    """
    _check_regular(os.stat(path).st_mode)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags), "rb") as stream:
        status = os.fstat(stream.fileno())
        _check_regular(status.st_mode)
        check_size(status.st_size, limit)
        data = stream.read(limit + 1)  # /proc files and growing ones report a small size
    if len(data) > limit:
        raise ValueError(f"more than the {limit}-byte cap ({MAX_BYTES_ENV} sets it)")
    return data


def _as_text(data: bytes) -> str:
    """`data` decoded; ValueError for a NUL byte (a binary file) or bytes that are not UTF-8."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise ValueError(f"a binary file, not text (NUL byte at offset {nul})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (bad byte at offset {exc.start})") from None


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _check_regular(mode: int) -> None:
    """ValueError naming the kind of file, unless `mode` is a regular file's."""
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "a special file")
        raise ValueError(f"not a regular file ({kind})")


def confine(task_dir: Path, relative: str, param: str) -> Path:
    """`relative` resolved inside the task folder; TaskPathError if it leads anywhere else,
    or if it cannot be resolved at all (a NUL byte, a lone surrogate, a symlink loop), so
    that a hostile path is an error at its key rather than a traceback."""
    if not relative:
        raise TaskPathError(param, "the path is empty")
    if "\0" in relative:
        raise TaskPathError(param, f"{relative!r} holds a NUL byte, which no file name can")
    if Path(relative).is_absolute():
        raise TaskPathError(
            param, f"{relative!r} is absolute; give it relative to the task file's folder"
        )
    try:
        root = task_dir.resolve()
        target = (root / relative).resolve()
    except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise TaskPathError(param, f"cannot resolve {relative!r}: {exc}") from None
    if not target.is_relative_to(root):
        how = "" if ".." in Path(relative).parts else " (through a symlink)"
        raise TaskPathError(param, f"{relative!r} lies outside the task folder {root}{how}")
    return target


def read_task_file(task_dir: Path, relative: str, param: str) -> str:
    """The text of a file the task names under `param`, confined and bounded; TaskPathError
    says why it cannot be read."""
    data = read_task_bytes(task_dir, relative, param, max_task_bytes())
    try:
        return _as_text(data)
    except ValueError as exc:
        raise TaskPathError(param, f"cannot use {relative!r}: {exc}") from None


def read_task_bytes(task_dir: Path, relative: str, param: str, limit: int) -> bytes:
    """The bytes of a file the task names under `param`, confined and at most `limit` long;
    TaskPathError says why it cannot be read. A file's fingerprint is the sha256 of its
    bytes, read as text or not."""
    target = confine(task_dir, relative, param)
    try:
        data = read_bytes_bounded(target, limit)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        message = f"cannot read {relative!r} (looked for {target}): {reason}"
        raise TaskPathError(param, message) from None
    except ValueError as exc:
        raise TaskPathError(param, f"cannot use {relative!r}: {exc}") from None
    seen = _recorded.get()
    if seen is not None:
        name = target.relative_to(task_dir.resolve()).as_posix()
        seen[name] = hashlib.sha256(data).hexdigest()
    return data


@contextmanager
def recording() -> Iterator[dict[str, str]]:
    """Within the block, each file read through `read_task_file` or `read_task_bytes` is
    noted in the dict yielded, as its path in the task folder and the sha256 of its bytes."""
    seen: dict[str, str] = {}
    token = _recorded.set(seen)
    try:
        yield seen
    finally:
        _recorded.reset(token)
