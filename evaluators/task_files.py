"""A task's trusted Python reference, run from its text.

Evaluators read the task's files with evolve.taskpaths.read_task_file, which keeps them
inside the task folder; this module runs the reference they read that way.
"""

from __future__ import annotations

import functools
import types
from pathlib import Path


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
