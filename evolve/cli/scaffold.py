"""`evolve init`: a complete task folder to start from, runnable at once and offline.

Each starter under evolve/cli/starters/ is a real task folder (its task.yaml has every key
explained in a comment), so what a new user copies is what the tests run. The folder's
name becomes the task's name.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

STARTERS = Path(__file__).with_name("starters")
NAME_TOKEN = "__NAME__"
UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def starters() -> list[str]:
    return sorted(p.name for p in STARTERS.iterdir() if (p / "task.yaml").is_file())


def scaffold(folder: Path, starter: str) -> list[Path]:
    """Write the starter into `folder` (new, or empty); the files written. ValueError names
    what is wrong, and nothing is written then."""
    if starter not in starters():
        raise ValueError(f"no starter {starter!r} (there are: {', '.join(starters())})")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValueError(f"{folder} exists and is not an empty folder: choose another name")
    name = UNSAFE.sub("-", folder.resolve().name).strip("-._") or "task"
    source = STARTERS / starter
    written = []
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        target = folder / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.name == "task.yaml":
            target.write_text(path.read_text().replace(NAME_TOKEN, name))
        else:
            shutil.copyfile(path, target)
        written.append(target)
    return written
