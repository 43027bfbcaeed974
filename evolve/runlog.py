"""The run's own log, results/RUN/run.log: what an operator needs after the fact.

The dashboard shows a run as it goes and the store keeps every result; neither keeps why a
worker was replaced, what was retried, or the traceback of a mutator or an evaluator that
crashed. Every module logs under the `evolve` logger, and for the length of a run its
records go to this file at the level `--log-level` asks for (INFO by default), and no
longer to the terminal, where they would tear the dashboard.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextmanager
def run_log(folder: Path, level: str = "INFO") -> Iterator[Path]:
    """Within the block, the `evolve` logger writes to folder/run.log (appended to, so a
    resumed run continues its file) at `level`."""
    path = folder / "run.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    logger = logging.getLogger("evolve")
    before = logger.level, logger.propagate
    logger.setLevel(level)
    logger.propagate = False  # Ray gives the root logger a terminal handler
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before[0])
        logger.propagate = before[1]
        handler.close()
