"""The trusted products made once per program and workload set, kept in the user cache:
the objects, the profile, and the measurements of the reference layouts.

Each is keyed by everything that decides it (the sources, flags and tool versions for
objects; the objects, workloads and driver for the profile), so a changed input is made
anew rather than read stale. Writes go through a rename, so a crash leaves no half file
and racing workers at worst make the same thing twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from evolve.evaluators.llvm_inline.corpus import user_cache

log = logging.getLogger(__name__)


def cache_root() -> Path:
    return user_cache() / "code_layout" / "v1"


def key(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()[:24]


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(scratch, path)


def cached_json(path: Path, make: Callable[[], Any]) -> Any:
    """The JSON at `path`, made by `make()` and saved first if absent."""
    if path.exists():
        try:
            return json.loads(path.read_text())
        except ValueError:
            log.warning("code_layout: %s is damaged; making it again", path, exc_info=True)
    value = make()
    _write(path, json.dumps(value).encode())
    return value


def cached_files(
    folder: Path, names: Iterable[str], make: Callable[[], dict[str, bytes]]
) -> dict[str, bytes]:
    """The files `names` under `folder`, made by `make()` and saved first if any is absent."""
    names = list(names)
    if all((folder / name).exists() for name in names):
        return {name: (folder / name).read_bytes() for name in names}
    made = make()
    for name in names:
        _write(folder / name, made[name])
    return {name: made[name] for name in names}
