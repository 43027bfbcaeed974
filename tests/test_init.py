"""`evolve init`: every starter is a task that loads, and the python one runs as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evolve.cli.scaffold import starters
from evolve.store import Store
from evolve.task.loading import load_task

pytestmark = pytest.mark.system


def init(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evolve", "init", str(folder), *extra],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("starter", ["python", "c_kernel", "command", "llvm_inline"])
def test_each_starter_writes_a_task_that_loads(tmp_path: Path, starter: str) -> None:
    assert starter in starters()
    folder = tmp_path / f"my-{starter}"
    made = init(folder, "--template", starter)
    assert made.returncode == 0, made.stderr
    assert f"evolve run {folder}/task.yaml" in made.stdout
    task = load_task(folder / "task.yaml")
    assert task.spec.name == f"my-{starter}"
    assert task.spec.evaluator.name == starter
    text = (folder / "task.yaml").read_text()
    keys = [line for line in text.splitlines() if line and not line.lstrip().startswith("#")]
    assert all("#" in line or line.startswith(" ") for line in keys), "every key is explained"


def test_a_folder_that_holds_files_is_never_written_into(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    made = init(folder)
    assert made.returncode == 2
    assert "is not an empty folder" in made.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]
    unknown = init(tmp_path / "other", "--template", "fortran")
    assert unknown.returncode == 2 and not (tmp_path / "other").exists()


def test_the_python_starter_runs_offline_and_improves(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    assert init(folder).returncode == 0
    results = tmp_path / "results"
    ran = subprocess.run(
        [sys.executable, "-m", "evolve", "run", str(folder / "task.yaml"), "--plain",
         "--sandbox", "process", "--workers", "1", "--results", str(results)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    store = Store(f"sqlite:///{results / 'evolve.db'}")
    (run,) = store.list_runs()
    seed = store.seed_candidate(run.name)
    best = store.top(run.name, 1)[0]
    assert seed is not None and seed.score is not None
    assert best.score is not None and best.score > seed.score
