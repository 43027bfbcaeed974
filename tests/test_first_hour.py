"""A new user's first hour with the `evolve` command: it explains itself, finds its store
from anywhere without ever creating one, takes a quick budget, checks a task without a
run, says why a run failed, and survives a Ray that will not start. Real subprocesses,
real Ray, a real SQLite file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evolve.engine.launch import RunOptions
from evolve.store import Store
from evolve.task.loading import load_task
from evolve.task.stored import task_info
from tests.conftest import ROOT, write_synthetic_task

EVOLVE = [sys.executable, "-m", "evolve"]


def evolve(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EVOLVE, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# -- a CLI that explains itself -----------------------------------------------------------


@pytest.mark.system
def test_version_and_help_that_is_not_cut_off(tmp_path: Path) -> None:
    version = evolve("--version", cwd=tmp_path)
    assert version.returncode == 0
    assert re.fullmatch(r"evolve, version \d+\.\d+\.\d+\S*\n", version.stdout)

    listing = evolve("--help", cwd=tmp_path)
    commands = listing.stdout.split("Commands:")[1].strip().splitlines()
    names = {line.split()[0] for line in commands}
    assert {"run", "check", "show", "leaderboard", "init", "sandbox"} <= names
    for line in commands:
        assert not line.rstrip().endswith("..."), f"summary cut off: {line!r}"

    run_help = evolve("run", "--help", cwd=tmp_path).stdout
    assert "Ctrl-C" in run_help and "--resume" in run_help
    assert "Exit codes" in run_help
    for code in ("0 ", "1 ", "2 ", "130"):
        assert f"  {code}" in run_help
    assert "--candidates" in run_help and "--wall-time" in run_help


@pytest.mark.system
def test_a_mistyped_evaluator_param_gets_did_you_mean(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task", params="{targte: 100}")
    done = evolve("check", task, cwd=tmp_path)
    assert done.returncode == 2
    assert "evaluator.params.targte: unknown key; did you mean 'target'?" in done.stderr


@pytest.mark.system
def test_a_bad_base_url_names_the_base_url_field(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task")
    text = task.read_text() + "llm:\n  models:\n    - model: qwen\n      base_url: localhost:8000\n"
    task.write_text(text)
    done = evolve("check", task, cwd=tmp_path)
    assert done.returncode == 2
    line = text.splitlines().index("      base_url: localhost:8000") + 1
    assert f"task.yaml:{line}: llm.models[0].base_url: 'localhost:8000' is not an http(s) URL" in (
        done.stderr
    )


# -- evolve check -------------------------------------------------------------------------


@pytest.mark.system
def test_check_prints_the_seeds_metrics_and_starts_no_run(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task")
    done = evolve("check", task, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "distance (minimize: objective)" in done.stdout and "97" in done.stdout
    assert "ok: the seed passes; distance 97, lower is better" in done.stdout
    assert not (tmp_path / "results").exists()


@pytest.mark.system
def test_check_of_a_failing_seed_says_why_in_one_line_and_exits_2(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task", params="{target: 100, fail_above: 1}")
    done = evolve("check", task, cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert error_lines(done.stderr) == [
        f"error: {task}: the seed fails: check: knob sum 3.0 exceeds 1.0"
    ]
    assert "Traceback" not in done.stderr


# -- a run: budgets from the command line, the store found from anywhere, made-by words ----


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run of 8 candidates (the task says 30: --candidates overrides it)."""
    project = tmp_path_factory.mktemp("project")
    task = write_synthetic_task(project / "task", candidates=30)
    done = evolve("run", task, "--name", "quick", "--candidates", "8", "--plain", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "finished: candidate budget reached (8)" in done.stdout
    return project


@pytest.mark.system
def test_candidates_overrides_the_budget(finished_run: Path) -> None:
    with Store(f"sqlite:///{finished_run / 'results' / 'evolve.db'}") as store:
        assert store.count_candidates("quick") == 8
        run = store.get_run("quick")
    assert run is not None
    budget = task_info(run).budget
    assert budget is not None and budget.candidates == 8, "the budget the run really had"


@pytest.mark.system
def test_a_run_name_that_is_a_path_is_refused_before_anything_starts(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task", candidates=2)
    refused = evolve("run", task, "--name", "../elsewhere", "--plain", cwd=tmp_path)
    assert refused.returncode == 2
    assert "a run's name is letters, digits" in refused.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path.parent / "elsewhere").exists()


def test_wall_time_and_candidates_replace_only_what_they_name(tmp_path: Path) -> None:
    task = load_task(write_synthetic_task(tmp_path / "task", candidates=30))
    timed = RunOptions(wall_time_s=5.0).budgeted(task).spec.budget
    assert (timed.wall_time_s, timed.candidates) == (5.0, 30)
    counted = RunOptions(candidates=4).budgeted(task).spec.budget
    assert (counted.wall_time_s, counted.candidates) == (None, 4)
    assert RunOptions().budgeted(task) is task


@pytest.mark.system
def test_reading_commands_find_the_store_from_a_subfolder(finished_run: Path) -> None:
    deep = finished_run / "task" / "more" / "deeper"
    deep.mkdir(parents=True)
    shown = evolve("show", "1", cwd=deep)
    assert shown.returncode == 0, shown.stderr
    assert "made by: seed" in shown.stdout
    board = evolve("leaderboard", "quick", cwd=deep)
    assert board.returncode == 0, board.stderr
    assert "run quick (finished)" in board.stdout
    assert not (deep / "results").exists()


@pytest.mark.system
def test_reading_commands_never_create_a_store(finished_run: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (("show", "1"), ("leaderboard",), ("run", "--resume")):
        done = evolve(*args, cwd=elsewhere)
        assert done.returncode == 2, args
        assert error_lines(done.stderr)[0].startswith("error: no store here: no results/evolve.db")
    missing = elsewhere / "nothing.db"
    done = evolve("show", "1", "--db", f"sqlite:///{missing}", cwd=elsewhere)
    assert done.returncode == 2 and f"no store at {missing} (from --db)" in done.stderr
    assert list(elsewhere.iterdir()) == []


@pytest.mark.system
def test_evolve_db_names_the_store_from_anywhere(finished_run: Path, tmp_path: Path) -> None:
    database = finished_run / "results" / "evolve.db"
    for value in (str(database), f"sqlite:///{database}"):
        done = evolve("show", "1", cwd=tmp_path, env={"EVOLVE_DB": value})
        assert done.returncode == 0, done.stderr
        assert "candidate #1  run quick" in done.stdout


@pytest.mark.system
def test_show_says_who_made_a_candidate_in_words(finished_run: Path) -> None:
    with Store(f"sqlite:///{finished_run / 'results' / 'evolve.db'}") as store:
        child = next(c for c in store.top("quick", 8) if c.parent_ids)
    shown = evolve("show", child.id, cwd=finished_run)
    made = next(line for line in shown.stdout.splitlines() if line.startswith("made by:"))
    operator = child.mutation["operator"]
    assert made.startswith(f"made by: {operator} (autotuner), from #{child.parent_ids[0]}")
    assert "changing seed.py:" in made and " -> " in made
    assert "{" not in made and "'operator'" not in made
    assert "seed)" in shown.stdout.split("lineage to the seed:")[1]


# -- runs that cannot go on ---------------------------------------------------------------


@pytest.mark.system
def test_a_run_whose_seed_fails_ends_failed_with_its_feedback(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task", params="{target: 100, fail_above: 1}")
    done = evolve("run", task, "--name", "broken", "--plain", cwd=tmp_path)
    assert done.returncode == 1
    assert "error: the seed #1 failed (check_failed), so there is nothing to evolve" in done.stderr
    assert "knob sum 3.0 exceeds 1.0" in done.stderr
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        run = store.get_run("broken")
        assert run is not None and run.status == "failed"
    board = evolve("leaderboard", cwd=tmp_path)
    assert "run broken (failed): 1 check_failed" in board.stdout
    assert "the seed #1 failed (check_failed): evolve show 1 says why" in board.stdout


@pytest.mark.system
def test_a_ray_that_will_not_start_is_retried_then_one_line(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = {"RAY_TMPDIR": str(blocker / "ray")}
    done = evolve("run", task, "--ray-address", "local", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.count("Ray did not start (try") == 2  # two retries announced
    [line] = error_lines(done.stderr)
    assert line.startswith("error: could not start or join a local Ray instance: Ray did not "
                           "start in 3 tries")  # fmt: skip


# -- evolve check on a real c_kernel task -------------------------------------------------


def _histogram(tmp_path: Path) -> Path:
    """The shipped histogram task, in the process sandbox (bubblewrap) to keep it quick."""
    folder = tmp_path / "histogram"
    shutil.copytree(ROOT / "tasks" / "histogram_c", folder)
    task = folder / "task.yaml"
    text = task.read_text().replace("backend: docker", "backend: process")
    task.write_text(text.replace("n: 4194304", "n: 65536").replace("n: 1048576", "n: 16384"))
    return folder


def check_broken(
    tmp_path: Path, file: str, old: str, new: str
) -> tuple[Path, str, subprocess.CompletedProcess[str]]:
    """`evolve check` of the small histogram task with `old` replaced by `new` in `file`,
    which must fail with exit 2, one `error:` line and no traceback: the task file, the line."""
    folder = _histogram(tmp_path)
    edited = folder / file
    edited.write_text(edited.read_text().replace(old, new))
    done = evolve("check", folder / "task.yaml", cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [line] = error_lines(done.stderr)
    return folder / "task.yaml", line, done


@pytest.mark.system
def test_check_of_a_c_kernel_task_prints_metrics_and_feedback(tmp_path: Path) -> None:
    task = _histogram(tmp_path) / "task.yaml"
    done = evolve("check", task, cwd=tmp_path, timeout=180)
    assert done.returncode == 0, done.stderr
    for stage in ("build", "check", "sanitize", "measure"):
        assert re.search(rf"│ {stage} +│ ok ", done.stdout), stage
    assert "speedup (maximize: objective)" in done.stdout and "bytes_per_s" in done.stdout
    assert "[measure] timed by a separate process" in done.stdout
    assert "ok: the seed passes" in done.stdout


@pytest.mark.system
def test_check_of_a_broken_reference_is_one_line_at_load(tmp_path: Path) -> None:
    _, line, _ = check_broken(tmp_path, "reference.py", "minlength=256", "minlength=undefined")
    assert "evaluator.params.reference" in line and "NameError" in line


@pytest.mark.system
def test_check_of_a_seed_that_does_not_build_says_so_and_shows_the_compiler(
    tmp_path: Path,
) -> None:
    task, line, done = check_broken(tmp_path, "seed.c", "counts[v] = total;", "counts[v] = total")
    assert line.startswith(
        f"error: {task}: the evaluator's set-up failed on the seed: "
        "the seed program does not build: candidate/seed.c:22:22: error: expected"
    )
    assert "counts[v] = total\n" in done.stderr  # the compiler's report follows the line


@pytest.mark.system
def test_check_of_a_seed_that_answers_wrong_names_the_output(tmp_path: Path) -> None:
    task, line, done = check_broken(
        tmp_path, "seed.c", "counts[v] = total;", "counts[v] = total + 1;"
    )
    assert line.startswith(f"error: {task}: the seed fails: check: ")
    assert "counts" in line
    assert re.search(r"│ check +│ FAILED ", done.stdout)


@pytest.mark.system
def test_check_of_a_broken_harness_fails_the_seeds_build(tmp_path: Path) -> None:
    folder = tmp_path / "stencil"
    shutil.copytree(ROOT / "tasks" / "stencil_c", folder)
    task = folder / "task.yaml"
    task.write_text(task.read_text().replace("backend: docker", "backend: process"))
    harness = folder / "harness.c"
    harness.write_text(harness.read_text().replace("evolve_setup(", "evolve_setup_typo("))
    done = evolve("check", task, cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    [line] = error_lines(done.stderr)
    assert "the seed program does not build: " in line and "evolve_setup" in line
