"""The run's own log, results/RUN/run.log: what an operator needs after the fact.

The dashboard shows a run as it goes and the store keeps every result; neither keeps why a
worker was replaced, what was retried, or the traceback of a mutator or an evaluator that
crashed. Every module logs under the `evolve` logger, and for the length of a run its
records go to this file at the level `--log-level` asks for (INFO by default), and no
longer to the terminal, where they would tear the dashboard. Ray's own warnings (a
worker that died, an actor that cannot be placed) go to the same file instead of the
terminal; what Ray's worker processes print stays in Ray's session logs, whose folder the
run's log names (evolve/runtime/cluster.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
RAY_LEVEL = logging.WARNING  # Ray at INFO or DEBUG is noise, even to an operator
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Records made before any run log was open, for the next one to write first.
_held: list[logging.LogRecord] = []


def hold(record: logging.LogRecord) -> None:
    """Keep `record` for the next run log to open. Ray is started or joined before the run,
    and so its log, exists; logging what it printed then, the usual way, would put it on the
    terminal through Python's last-resort handler (evolve/runtime/ray_output.py)."""
    _held.append(record)


@contextmanager
def run_log(folder: Path, level: str = "INFO") -> Iterator[Path]:
    """Within the block, the `evolve` logger writes to folder/run.log (appended to, so a
    resumed run continues its file) at `level`."""
    path = folder / "run.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    ray_level = max(RAY_LEVEL, logging.getLevelName(level))
    with (
        _only_to(logging.getLogger("evolve"), handler, level),
        _only_to(logging.getLogger("ray"), handler, ray_level),
    ):
        _write_held()
        try:
            yield path
        finally:
            handler.close()


def _write_held() -> None:
    """The held records, at the levels the run log now keeps, with the times they were made."""
    while _held:
        record = _held.pop(0)
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


@contextmanager
def _only_to(logger: logging.Logger, handler: logging.Handler, level: str | int) -> Iterator[None]:
    """`logger` writes only to `handler` within the block: Ray gives the root logger and its
    own a terminal handler."""
    before = logger.level, logger.propagate, logger.handlers[:]
    logger.setLevel(level)
    logger.propagate = False
    logger.handlers = [handler]
    try:
        yield
    finally:
        logger.setLevel(before[0])
        logger.propagate = before[1]
        logger.handlers = before[2]
