"""evolve.api: a run, a check and the store from Python, with no process exit; and the
commands that only read, which open the store read-only and load neither Ray nor the engine."""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.exc import DBAPIError

from evolve import api
from evolve.store import Store
from tests.conftest import ROOT, write_synthetic_task

EVOLVE = [sys.executable, "-m", "evolve"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    """One small synthetic run made through the API, and where its store is."""
    folder = tmp_path_factory.mktemp("api")
    task = write_synthetic_task(folder / "task", candidates=6)
    finished = api.run(task, results=folder / "results", workers=1, name="by-api")
    yield folder / "results", finished


@pytest.mark.system
def test_a_run_from_python_returns_its_best_and_stores_it(
    finished_run: tuple[Path, api.Finished],
) -> None:
    results, finished = finished_run
    assert finished.run_name == "by-api"
    assert (finished.folder / "best").is_dir()
    with api.open_store(results=results) as store:
        run = store.get_run("by-api")
        best = store.candidate(finished.best_id)
    assert run is not None and run.status == "finished"
    assert best is not None and best.score == finished.best_score


def test_a_broken_task_raises_its_line_and_a_bad_run_raises_its_exit_code(
    tmp_path: Path,
) -> None:
    task = write_synthetic_task(tmp_path / "task")
    task.write_text(task.read_text().replace("candidates: 30", "candidates: lots"))
    with pytest.raises(api.TaskFileError) as broken:
        api.load(task)
    assert "budget.candidates" in str(broken.value)
    task.write_text(task.read_text().replace("candidates: lots", "candidates: 3"))
    with pytest.raises(api.Ended) as misnamed:
        api.run(task, results=tmp_path / "results", name="../elsewhere")
    assert misnamed.value.exit_code == 2 and "a run's name" in misnamed.value.message
    (task.parent / "seed.py").write_text("# EVOLVE-BLOCK-START\nA = 1\n# EVOLVE-BLOCK-END\n")
    with pytest.raises(api.Ended) as refused:
        api.run(task, results=tmp_path / "results")
    assert refused.value.exit_code == 2 and "no @knob values" in refused.value.message
    assert not (tmp_path / "results").exists()  # refused before anything was written


def test_a_store_that_is_not_there_is_not_made_by_reading(tmp_path: Path) -> None:
    with pytest.raises(api.StoreNotFound):
        api.open_store(results=tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()


def test_no_library_module_exits_the_process() -> None:
    """Only the command line (evolve/cli/) and `python -m evolve` end the process; the rest
    raise, so that evolve.api can be called from a program. The plugins' programs that run
    as jobs in a sandbox (evolve/evaluators/, evolve/sandboxes/) end their own processes."""
    found = []
    for path in (ROOT / "evolve").rglob("*.py"):
        inside = path.relative_to(ROOT / "evolve").parts
        if inside[0] in ("cli", "__main__.py", "evaluators", "sandboxes") or "migrations" in inside:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("sys.exit", "exit"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


@pytest.mark.system
def test_show_reads_a_store_no_one_may_write_and_changes_nothing(
    finished_run: tuple[Path, api.Finished],
) -> None:
    """A copy of the store in a folder no one may write, read by another user: `show`,
    `runs` and `leaderboard` work, the file's bytes stay as they were, and nothing is
    created beside it."""
    results, finished = finished_run
    usable = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         "import evolve.cli.commands"],
        cwd=ROOT, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    if usable.returncode != 0:
        pytest.skip(f"this checkout cannot be run as nobody: {usable.stderr[-200:]!r}")
    copy = Path(tempfile.mkdtemp(prefix="evolve-ro-"))
    try:
        shutil.copy(results / "evolve.db", copy / "evolve.db")
        copy.chmod(0o755)
        (copy / "evolve.db").chmod(0o444)
        before = hashlib.sha256((copy / "evolve.db").read_bytes()).hexdigest()
        copy.chmod(0o555)
        for command in (["show", str(finished.best_id)], ["runs"], ["leaderboard", "by-api"]):
            shown = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *EVOLVE,
                 *command, "--db", f"sqlite:///{copy / 'evolve.db'}"],
                cwd=copy, capture_output=True, text=True, timeout=60,
                env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(copy)},
            )  # fmt: skip
            assert shown.returncode == 0, (command, shown.stderr)
            assert "by-api" in shown.stdout or f"#{finished.best_id}" in shown.stdout
        assert sorted(p.name for p in copy.iterdir()) == ["evolve.db"]
        assert hashlib.sha256((copy / "evolve.db").read_bytes()).hexdigest() == before
    finally:
        copy.chmod(0o755)
        shutil.rmtree(copy)


@pytest.mark.system
def test_the_reading_commands_load_neither_ray_nor_the_engine(
    finished_run: tuple[Path, api.Finished],
) -> None:
    results, finished = finished_run
    db = f"sqlite:///{results / 'evolve.db'}"
    probe = f"""
import sys
from evolve.cli.commands import main
try:
    main(["show", {str(finished.best_id)!r}, "--db", {db!r}])
except SystemExit as ended:
    assert not ended.code, ended.code
loaded = [m for m in sys.modules if m == "ray" or m.startswith(("ray.", "evolve.engine.loop"))]
print("LOADED", loaded)
"""
    shown = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert "LOADED []" in shown.stdout, shown.stdout[-500:]


@pytest.mark.postgres
def test_a_read_only_store_on_postgresql_reads_and_refuses_writes(postgres_url: str) -> None:
    """The read-only session keeps the URL's own options (its search_path): it sees the
    runs a writer made, and the server refuses a write."""
    with Store(postgres_url) as writer:
        writer.create_run("pg-run", task_path="t", task_yaml="name: t\n", seed=0, settings={})
    with Store(postgres_url, read_only=True) as reader:
        assert [run.name for run in reader.list_runs()] == ["pg-run"]
        with pytest.raises(DBAPIError, match="read-only transaction"):
            reader.create_run("other", task_path="t", task_yaml="name: t\n", seed=0, settings={})
