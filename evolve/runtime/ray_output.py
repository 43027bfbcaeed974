"""What Ray prints while it starts or joins: kept off the terminal, handed to the run log.

Ray's C++ core writes its warnings straight to file descriptor 2 (a cluster that refuses
this machine's token: one `gcs_client.cc` line a second, for twenty seconds), below
anything `sys.stderr` or Python's logging could intercept. So for the length of one
`ray.init` the descriptor itself points at a file of our own, and is put back afterwards
even when `ray.init` raises. What Python prints meanwhile (Ray's logging handler, a
`warnings` warning) goes down the same descriptor and lands in the same file.

The lines then become records of the `evolve.runtime.cluster` logger, held until a run log opens
(evolve/runtime/runlog.py): Ray is started or joined before the run, and so its log, exists, and
a warning logged before then would reach the terminal through Python's last-resort
handler, which is the very thing this module is for. On a failed join no run log ever
opens; the file is kept instead and the one-line error names it.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from evolve.runtime import runlog

# "[2026-11-26 20:00:39,161 W 13519 13519] gcs_client.cc:210: ...": glog's severity letter.
CPP_SEVERITY = re.compile(r"^\[\S+ \S+ (?P<letter>[DIWEFC]) \d+ \d+\]")
WARNING_WORDS = re.compile(r"\b(WARNING|ERROR|CRITICAL|FATAL)\b|Warning:")


class Captured:
    """The file that descriptor 2 wrote to, once it is put back."""

    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: no file could be made, and nothing was captured

    def lines(self) -> list[str]:
        if self.path is None:
            return []
        try:
            return [line for line in self.path.read_text(errors="replace").splitlines() if line]
        except OSError:
            return []

    def discard(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None


@contextmanager
def captured() -> Iterator[Captured]:
    """Descriptor 2 goes to a fresh file within the block. Without a file to write to, the
    block runs uncaptured: Ray's noise is no reason to refuse to start."""
    try:
        fd, name = tempfile.mkstemp(prefix="evolve-ray-", suffix=".log")
    except OSError:
        yield Captured(None)
        return
    _flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield Captured(Path(name))
    finally:
        _flush()  # what Python buffered belongs in the file, not on the restored terminal
        os.dup2(saved, 2)
        os.close(saved)


def hand_to_log(lines: list[str], logger: logging.Logger) -> None:
    """Each line as a record of `logger`, written by the next run log to open: WARNING for
    what Ray marked a warning or worse, DEBUG for the rest."""
    for line in lines:
        level = logging.WARNING if _is_warning(line) else logging.DEBUG
        record = logger.makeRecord(
            logger.name, level, __file__, 0, "Ray printed: %s", (line,), None
        )
        runlog.hold(record)


def _is_warning(line: str) -> bool:
    severity = CPP_SEVERITY.match(line)
    if severity:
        return severity["letter"] in "WEFC"
    return bool(WARNING_WORDS.search(line))


def _flush() -> None:
    for stream in (sys.stderr, sys.__stderr__):
        if stream is not None:
            with suppress(OSError, ValueError):  # closed, or never a real stream
                stream.flush()
