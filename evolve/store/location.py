"""Which store a command means, and where its runs keep their files.

A run writes its store where it is started (`results/evolve.db` under the current folder),
but a user looks at it from wherever they are: a command that only reads walks up from the
current folder to the nearest `results/evolve.db`, as git finds its repository. A command
that reads must never create a store: an empty one would only answer "no such candidate"
about a run that exists one folder up.

Precedence: `--db`, then the `EVOLVE_DB` variable (a URL, or the path of a SQLite file),
then `--results` when given, then (for reading) the walk up, else `./results`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from evolve.store import default_url

ENV = "EVOLVE_DB"
DEFAULT_RESULTS = Path("results")
STORE_FILE = "evolve.db"


class StoreNotFound(Exception):
    """No store where the user pointed, or none above the current folder."""


@dataclass(frozen=True)
class StoreLocation:
    url: str
    results: Path  # where each run's folder (best program, run.log) goes


def for_writing(db: str | None, results: Path | None) -> StoreLocation:
    """The store a new run writes (created if missing), and its results folder: beside a
    named SQLite store, so that reading commands find the run's files where they find it."""
    url = db or _from_env()
    if url is None:
        folder = results or DEFAULT_RESULTS
        return StoreLocation(default_url(folder), folder)
    return StoreLocation(url, results or _results_beside(url))


def for_reading(db: str | None, results: Path | None, start: Path | None = None) -> StoreLocation:
    """The existing store a command that reads means; StoreNotFound says where it looked."""
    url = db or _from_env()
    if url is not None:
        _require_file(url, "--db" if db else ENV)
        return StoreLocation(url, results or _results_beside(url))
    if results is not None:
        location = StoreLocation(default_url(results), results)
        _require_file(location.url, "--results")
        return location
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / DEFAULT_RESULTS / STORE_FILE
        if candidate.is_file():
            return StoreLocation(default_url(candidate.parent), candidate.parent)
    raise StoreNotFound(
        f"no store here: no {DEFAULT_RESULTS / STORE_FILE} in {here} or any folder above it. "
        f"Run the command where `evolve run` ran, or name the store with --db URL or {ENV}"
    )


def _from_env() -> str | None:
    """EVOLVE_DB as a URL; a bare path means a SQLite file."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    if "://" in value:
        return value
    return URL.create("sqlite", database=str(Path(value).expanduser())).render_as_string()


def _sqlite_file(url: str) -> Path | None:
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def _require_file(url: str, given_by: str) -> None:
    """A SQLite store to read must exist; a server's database is the server's to know."""
    path = _sqlite_file(url)
    if path is not None and not path.is_file():
        raise StoreNotFound(f"no store at {path} (from {given_by}): nothing has run there yet")


def _results_beside(url: str) -> Path:
    """A SQLite store's runs keep their files beside it; a server's in ./results."""
    path = _sqlite_file(url)
    return path.parent if path is not None else DEFAULT_RESULTS
