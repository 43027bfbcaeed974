"""A run's records, out of the store, in formats other tools read: JSON lines (everything),
CSV (a row per candidate) and a folder (each candidate's program, with a manifest).

JSON lines and the folder are written record by record as the store pages them in, so a
run of any size exports in the memory of one page of programs. The CSV has no code, so it
reads the run's outlines (every candidate without its files) and each candidate's metrics
at once, to name them all in its header; its times are ISO 8601 in UTC. Nothing is
assembled into one string first.

The folder format writes paths that come from the store, which a hostile task or a
tampered database can fill: a path that is absolute or climbs out with `..` is refused
rather than written, so an export never writes outside its folder. In the same way, the
CSV's text comes from models and evaluators: a cell that a spreadsheet would run as a
formula (one that starts with `=`, `+`, `-`, `@`, a tab or a carriage return) is written
with a `'` before it, which spreadsheets show as text. Numbers are written as they are.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, TextIO

from evolve.store import CandidateRecord, RunRecord, Store
from evolve.store.records import CandidateOutline

CSV_COLUMNS = [
    "id",
    "parent_ids",
    "island",
    "generation",
    "status",
    "score",
    "measurements",
    "operator",
    "model",
    "summary",
    "created_at",
]
MANIFEST = "manifest.json"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _line(kind: str, record: Any) -> str:
    return json.dumps(_strict({"type": kind, **asdict(record)})) + "\n"


def _strict(value: Any) -> Any:
    """`value` with each NaN or infinite float as the string Python would print for it:
    an evaluator may report one, and JSON has no such number, so `json.dumps` would write
    a bare `NaN` that strict parsers refuse."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value


def write_jsonl(store: Store, run: RunRecord, out: TextIO) -> None:
    """The run, then its candidates, evaluations, proposals, model calls and migrations,
    each with every field its record has, one JSON object a line named by `type`."""
    out.write(_line("run", run))
    sections: list[tuple[str, Iterator[Any]]] = [
        ("candidate", store.each_candidate(run.name)),
        ("evaluation", store.each_evaluation(run.name)),
        ("proposal", store.each_proposal(run.name)),
        ("llm_call", store.each_llm_call(run.name)),
        ("migration", store.each_migration(run.name)),
    ]
    for kind, records in sections:
        for record in records:
            out.write(_line(kind, record))


def _operator(candidate: CandidateRecord | CandidateOutline) -> str:
    return str(candidate.mutation.get("operator") or ("" if candidate.parent_ids else "seed"))


def write_csv(store: Store, run: RunRecord, out: TextIO) -> None:
    """A row per candidate, with a column per metric of the evaluation that gave each its
    score (empty where it has none): the metrics are read before the rows, since the
    header has to name them all."""
    metrics = store.scoring_metrics(run.name)
    names = sorted({name for values in metrics.values() for name in values})
    writer = csv.writer(out)
    writer.writerow([_inert(name) for name in CSV_COLUMNS + names])
    for candidate in store.candidate_outlines(run.name):  # no code: the CSV has none
        mutation = candidate.mutation
        measured = metrics.get(candidate.id, {})
        cells = [
            candidate.id,
            " ".join(str(parent) for parent in candidate.parent_ids),
            candidate.island,
            candidate.generation,
            candidate.status,
            "" if candidate.score is None else candidate.score,
            candidate.measurements,
            _operator(candidate),
            mutation.get("model") or "",
            mutation.get("summary") or "",
            iso_utc(candidate.created_at),
            *(measured.get(name, "") for name in names),
        ]
        writer.writerow([_inert(cell) for cell in cells])


def iso_utc(stamp: float) -> str:
    """A stored epoch time as ISO 8601 in UTC, to the millisecond: what a spreadsheet or a
    person reads as a time, where the float is a count of seconds since 1970."""
    moment = datetime.fromtimestamp(stamp, tz=UTC).isoformat(timespec="milliseconds")
    return moment.replace("+00:00", "Z")


def _inert(cell: object) -> object:
    """A text cell that a spreadsheet would take for a formula, quoted as text."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return "'" + cell
    return cell


def safe_path(path: str) -> PurePosixPath | None:
    """The stored path as a relative path that stays below its folder; None for one that
    is absolute, climbs with `..`, names no file, or holds a NUL byte."""
    pure = PurePosixPath(path)
    if "\0" in path or pure.is_absolute() or ".." in pure.parts or not pure.parts:
        return None
    return pure


def write_dir(
    store: Store, run: RunRecord, folder: Path, warn: Callable[[str], None]
) -> tuple[int, int]:
    """Each candidate's files under `folder/<id>/`, and `folder/manifest.json` naming the
    run and, per candidate, what it is and the files written. `folder` must not exist or be
    empty. A path refused by `safe_path`, or one that cannot be written (a file where
    another path needs a folder), is skipped and `warn` says so. (candidates, files)."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FileExistsError(f"{folder} exists and is not an empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    candidates = files = 0
    with (folder / MANIFEST).open("w", encoding="utf-8") as manifest:
        manifest.write('{"run": ' + json.dumps(_strict(asdict(run))))
        manifest.write(', "candidates": [')
        for candidate in store.each_candidate(run.name):
            written = _write_program(folder / str(candidate.id), candidate, warn)
            entry = {
                "id": candidate.id,
                "parents": list(candidate.parent_ids),
                "status": candidate.status,
                "score": candidate.score,
                "operator": _operator(candidate),
                "summary": candidate.mutation.get("summary") or "",
                "files": written,
            }
            manifest.write(("\n" if not candidates else ",\n") + json.dumps(_strict(entry)))
            candidates, files = candidates + 1, files + len(written)
        manifest.write("\n]}\n")
    return candidates, files


def _write_program(
    home: Path, candidate: CandidateRecord, warn: Callable[[str], None]
) -> list[str]:
    """The candidate's files below `home`; the paths written."""
    written = []
    for path, text in candidate.program.files.items():
        relative = safe_path(path)
        if relative is None:
            warn(f"candidate #{candidate.id}: refused the path {path!r}: it leaves its folder")
            continue
        target = home.joinpath(*relative.parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        except (OSError, ValueError) as exc:
            warn(f"candidate #{candidate.id}: could not write {path!r}: {exc}")
            continue
        written.append(str(relative))
    return written
