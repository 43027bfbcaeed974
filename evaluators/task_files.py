"""What evaluators read from a task's folder: its files, and its trusted Python reference."""

from __future__ import annotations

import functools
import types
from pathlib import Path


def read_task_file(task_dir: Path, relative: str, what: str) -> str:
    """ValueError, naming the file, when it is missing: the task loader reports it with the
    task file's line."""
    path = task_dir / relative
    if not path.is_file():
        raise ValueError(f"{what} file not found: {path}")
    return path.read_text()


@functools.lru_cache(maxsize=16)
def load_reference(text: str, filename: str, required: tuple[str, ...]) -> types.ModuleType:
    """The reference module run from its text, so a pickled evaluator carries it to workers;
    cached, since every evaluation asks for it again."""
    module = types.ModuleType(f"reference_{Path(filename).stem}")
    module.__file__ = filename
    exec(compile(text, filename, "exec"), module.__dict__)
    missing = [name for name in required if not callable(getattr(module, name, None))]
    if missing:
        raise ValueError(f"{filename} must define {', '.join(missing)}")
    return module
