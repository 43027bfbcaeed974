"""Where a run's files live, and how runs are named so they can be found again."""

from __future__ import annotations

import re
import time
from pathlib import Path

from evolve.plugin.program import Program

# A task's or a run's name: it names the run's folder under the results, so it must be one
# path component that climbs nowhere.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


def is_run_name(name: str) -> bool:
    """Whether `name` may name a run (a store may hold others, written by hand or by an
    older version: the views then do not use it as a folder)."""
    return re.fullmatch(NAME_PATTERN, name) is not None


def new_run_name(task_name: str) -> str:
    return f"{task_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def run_dir(results: Path, run_name: str) -> Path:
    return results / run_name


def write_best(results: Path, run_name: str, candidate_id: int, program: Program) -> Path:
    """Write the best program as plain files, so it is usable without the store."""
    folder = run_dir(results, run_name) / "best"
    for path, text in program.files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (folder / "CANDIDATE").write_text(f"{candidate_id}\n")
    return folder
