"""The distribution as a user installs it: a wheel built from this checkout, under its own
name on PyPI, carries everything a run needs outside the repository (the runner, the C
driver, the migrations, the starters, the image recipe), and works from another folder."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.system

NAME = "evolve_programs"  # the distribution "evolve-programs": "evolve" on PyPI is another's


def test_a_built_wheel_installs_and_runs_a_first_task_away_from_the_checkout(
    tmp_path: Path,
) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path / "wheel"), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheel").glob(f"{NAME}-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "evolve/evaluators/python/runner.py",
        "evolve/evaluators/c_kernel/driver/driver.c",
        "evolve/store/alembic.ini",
        "evolve/store/migrations/versions/0005_charges.py",
        "evolve/cli/starters/python/task.yaml",
        "evolve/sandboxes/images/Dockerfile",
    ):
        assert needed in names, needed
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith("-info")}
    assert tops == {"evolve"}, tops  # no generic top-level package beside it
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
         str(tmp_path / "site"), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    away = tmp_path / "away"
    away.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    for command in (["init", "first"], ["check", "first", "--sandbox", "process"]):
        done = subprocess.run(
            [sys.executable, "-m", "evolve", *command],
            cwd=away, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    assert "the seed passes" in done.stdout
    where = subprocess.run(
        [sys.executable, "-c", "import evolve.evaluators; print(evolve.__file__)"],
        cwd=away, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(tmp_path / "site")), where.stdout
