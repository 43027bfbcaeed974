"""Which of the task's files go into the sandbox beside the candidate, read once at load.

The in-sandbox evaluator may need data files, pictures, helper modules or compiled helpers,
and an OpenEvolve folder does not say which, so by default every file under the task folder
goes, subfolders included, except the task's and OpenEvolve's configs, hidden files and
folders, bytecode caches, output folders (evolve/evaluators/shipped_files.py) and the verify file.
The verify file never goes, whatever `files` says: it is what a candidate must not be able
to read or change. Only the evaluator file is read as text (its stage functions are found in
it); the others go as bytes. Every file is read through evolve/plugin/taskpaths.py, so it stays
inside the task folder and is fingerprinted for `--resume`; the bytes travel inside the
pickled evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evolve.evaluators.python.params import PythonParams
from evolve.evaluators.shipped_files import matching, read_shipped, walk
from evolve.plugin.taskpaths import TaskPathError, confine, read_task_file

RUNNER = "__evolve_runner__.py"  # evolve/evaluators/python/runner.py, in the work dir
RESERVED = frozenset({RUNNER})
CONFIG_NAMES = frozenset({"task.yaml", "task.yml", "config.yaml", "config.yml"})
HINT = (
    ": name the files the evaluator needs with `files: [...]` under evaluator.params (for "
    "an OpenEvolve folder, in a task.yaml beside config.yaml that holds `openevolve: "
    "config.yaml` and `evaluator: {params: {files: [...]}}`)"
)


@dataclass(frozen=True)
class Shipment:
    evaluator: str  # the evaluator file's path in the work dir
    evaluator_text: str
    files: dict[str, bytes]  # by path in the work dir; the evaluator file included


def gather(task_dir: Path, params: PythonParams) -> Shipment:
    """The evaluator file and the files `params.files` names (or the default set), read and
    checked; TaskPathError names the param and the file that cannot go."""
    root = task_dir.resolve()
    evaluator_path = confine(task_dir, params.evaluator, "evaluator")
    text = read_task_file(task_dir, params.evaluator, "evaluator")
    secret = confine(task_dir, params.verify, "verify") if params.verify else None
    if secret == evaluator_path:
        raise TaskPathError("verify", "must be a file of its own: the evaluator file is shipped")
    evaluator = evaluator_path.relative_to(root).as_posix()
    if params.files is None:
        names = _default(root, secret)
    else:
        secret_is = (
            "the verify file, which must never reach the sandbox: a candidate could read it "
            "or change it there"
        )
        names = matching(root, params.files, secret, secret_is)
    files = {evaluator: text.encode()}
    clash = sorted(RESERVED.intersection(names))
    if clash:
        raise TaskPathError("files", f"{', '.join(clash)}: the evaluator's own names in the job")
    read_shipped(task_dir, names, files, HINT)
    return Shipment(evaluator, text, files)


def _default(root: Path, secret: Path | None) -> list[str]:
    """Every file under the folder (evolve/evaluators/shipped_files.py says which are passed over),
    less the configs beside the task and the verify file."""
    return [
        name
        for name in walk(root, HINT)
        if name not in CONFIG_NAMES and (root / name).resolve() != secret
    ]
