"""`evolve check` says what the sandbox lacks when the seed scores 0 or fails because a
command or a Python module is missing, and which task key adds it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evolve.sandboxes.isolation import detect
from evolve.task.missing_tools import Missing, advice, missing

EVOLVE = [sys.executable, "-m", "evolve"]
SEED = "# EVOLVE-BLOCK-START\nN = 3  # @knob int 1..5\n# EVOLVE-BLOCK-END\n"


@pytest.mark.parametrize(
    ("said", "found"),
    [
        ("sh: 1: cargo: not found", Missing("command", "cargo")),
        ("/bin/sh: 1: Rscript: not found\n", Missing("command", "Rscript")),
        ("bash: line 1: rustc: command not found", Missing("command", "rustc")),
        ("bash: node: command not found", Missing("command", "node")),
        ("zsh: command not found: go", Missing("command", "go")),
        ("env: 'julia': No such file or directory", Missing("command", "julia")),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: 'Rscript'",
            Missing("command", "Rscript"),
        ),
        ("ModuleNotFoundError: No module named 'pywt'", Missing("module", "pywt")),
        ("No module named 'scipy.signal'", Missing("module", "scipy")),
        ("No module named 'google.protobuf'", Missing("module", "google.protobuf")),
    ],
)
def test_what_the_output_says_is_missing(tmp_path: Path, said: str, found: Missing) -> None:
    assert missing(["first line", said], tmp_path) == [found]


@pytest.mark.parametrize(
    "said",
    [
        "[Errno 2] No such file or directory: 'data.csv'",  # a data file, not a command
        "KeyError: not found",
        "error: key not found",
        "No module named 'helpers'",  # the task's own module (helpers.py is in the folder)
    ],
)
def test_what_is_not_a_missing_tool_is_passed_over(tmp_path: Path, said: str) -> None:
    (tmp_path / "helpers.py").write_text("")
    assert missing([said], tmp_path) == []


def test_each_missing_thing_is_named_once_in_the_order_said(tmp_path: Path) -> None:
    texts = ["sh: 1: cargo: not found", "No module named 'pywt'", "bash: cargo: command not found"]
    assert missing(texts, tmp_path) == [Missing("command", "cargo"), Missing("module", "pywt")]


def test_the_advice_names_the_key_that_adds_it() -> None:
    cargo, unknown, pywt = (
        Missing("command", "cargo"),
        Missing("command", "mytool"),
        Missing("module", "pywt"),
    )
    assert advice(cargo, "docker", None) == (
        "command `cargo` is not in the sandbox: add cargo to `sandbox.packages` in the task file"
    )
    assert advice(cargo, "docker", "config.yaml") == (
        "command `cargo` is not in the sandbox: add cargo to the image with a task.yaml beside "
        "config.yaml holding `openevolve: config.yaml` and `sandbox: {packages: [cargo]}`"
    )
    assert "so install cargo here" in advice(cargo, "process", "config.yaml")
    assert "add the Debian package that provides `mytool` to `sandbox.packages`" in advice(
        unknown, "docker", None
    )
    assert advice(pywt, "docker", "config.yaml").endswith(
        "add PyWavelets to requirements.txt beside config.yaml"
    )
    assert advice(pywt, "process", None).endswith(
        "add PyWavelets to `sandbox.pip` in the task file"
    )


def openevolve_folder(root: Path, evaluator: str) -> Path:
    root.mkdir()
    (root / "config.yaml").write_text("max_iterations: 2\nevaluator: {timeout: 20}\n")
    (root / "initial_program.py").write_text(SEED)
    (root / "evaluator.py").write_text(evaluator)
    return root


def check(folder: Path) -> subprocess.CompletedProcess[str]:
    if detect().tool is None:
        pytest.skip(detect().detail)
    return subprocess.run(
        [*EVOLVE, "check", str(folder), "--sandbox", "process"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.system
def test_check_warns_when_the_seed_scores_0_for_want_of_a_command(tmp_path: Path) -> None:
    folder = openevolve_folder(
        tmp_path / "rusty",
        "import subprocess\n\n\ndef evaluate(program_path):\n"
        "    built = subprocess.run('evolve-absent-tool build', shell=True, capture_output=True,"
        " text=True)\n"
        "    return {'combined_score': 0.0, 'stderr': built.stderr}\n",
    )
    done = check(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok: the seed passes; combined_score 0 (unverified), higher is better" in done.stdout
    assert (
        f"warning: {folder / 'config.yaml'}: the seed scores 0, and its output says command "
        "`evolve-absent-tool` is not in the sandbox: the process sandbox runs this host's "
        "software, so install the Debian package that provides `evolve-absent-tool` here"
    ) in " ".join(done.stderr.split())


@pytest.mark.system
def test_check_says_which_module_a_failing_seed_lacks(tmp_path: Path) -> None:
    folder = openevolve_folder(
        tmp_path / "wavelets",
        "def evaluate(program_path):\n    import evolve_absent_module\n    return {}\n",
    )
    done = check(folder)
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    # The exception is on the error line itself, not only in the traceback above it.
    error = (
        f"error: {folder / 'config.yaml'}: the seed fails: evaluate: evaluate(program_path) "
        "raised ModuleNotFoundError: No module named 'evolve_absent_module'"
    )
    assert error in said
    assert (
        "the seed's output says Python module `evolve_absent_module` is not installed in the "
        "sandbox: add evolve_absent_module to requirements.txt beside config.yaml"
    ) in said


@pytest.mark.system
def test_a_seed_that_scores_well_gets_no_warning(tmp_path: Path) -> None:
    folder = openevolve_folder(
        tmp_path / "fine",
        "def evaluate(program_path):\n"
        "    return {'combined_score': 1.0, 'log': 'sh: 1: cargo: not found'}\n",
    )
    done = check(folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is not in the sandbox" not in done.stderr
