"""The whole task folder goes into the sandbox as files: pictures, data and compiled helpers
as their bytes, subfolders included, within caps that name `files:` when passed; only what
evolve parses (the evaluator, the seed, configs) must be text, and every file shipped is
fingerprinted for --resume."""

from __future__ import annotations

import hashlib
import os
import textwrap
from pathlib import Path

import pytest

from evolve.evaluators.python import PythonEvaluator
from evolve.evaluators.shipped_files import MAX_SHIPPED_BYTES, MAX_SHIPPED_FILES
from evolve.plugin.program import Program
from evolve.plugin.sandbox import Limits
from evolve.sandboxes import ProcessSandbox
from evolve.sandboxes.isolation import detect
from evolve.task.loading import TaskFileError, changed_files, load_task

# A picture's first bytes (NUL among them) and bytes that are no text in any encoding.
PICTURE = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
HELPER = b"\x7fELF\x02\x01\x01\x00" + os.urandom(512)  # starts like a compiled program

SEED = "# EVOLVE-BLOCK-START\nN = 1  # @knob int 1..5\n# EVOLVE-BLOCK-END\n"
# Reports every file beside the candidate with the sha256 of its bytes, and the mode bits.
EVALUATOR = """\
import hashlib
import os


def evaluate(program_path):
    here = os.path.dirname(program_path)
    seen = {}
    for folder, _, names in os.walk(here):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as stream:
                seen[os.path.relpath(path, here)] = hashlib.sha256(stream.read()).hexdigest()
    helper = os.path.join(here, "bin", "helper")
    return {
        "combined_score": 1.0,
        "seen": " ".join(f"{name}={digest}" for name, digest in sorted(seen.items())),
        "helper_runs": os.access(helper, os.X_OK),
    }
"""


def openevolve_folder(root: Path) -> Path:
    """An OpenEvolve folder with a picture, data in a subfolder, a compiled helper, and
    what never goes: hidden files and folders, bytecode, OpenEvolve's output, a store."""
    root.mkdir(parents=True)
    (root / "config.yaml").write_text("max_iterations: 2\n")
    (root / "initial_program.py").write_text(SEED)
    (root / "evaluator.py").write_text(EVALUATOR)
    (root / "evolution_plot.png").write_bytes(PICTURE)
    (root / "data" / "deep").mkdir(parents=True)
    (root / "data" / "points.csv").write_text("x,y\n1,2\n")
    (root / "data" / "deep" / "weights.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes(64))
    (root / "bin").mkdir()
    (root / "bin" / "helper").write_bytes(HELPER)
    for hidden in (".env", ".git/HEAD", "__pycache__/evaluator.cpython-311.pyc",
                   "data/__pycache__/x.pyc", "openevolve_output/checkpoint.json",
                   "results/evolve.db", "results/run.log", "data/.cache"):  # fmt: skip
        (root / hidden).parent.mkdir(parents=True, exist_ok=True)
        (root / hidden).write_bytes(b"not for the sandbox\x00")
    return root


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def shipped(folder: Path) -> dict[str, str]:
    """What the evaluator saw beside the seed, by path: sha256, in a real process sandbox."""
    if detect().tool is None:
        pytest.skip(detect().detail)
    task = load_task(folder)
    evaluator = PythonEvaluator(task.spec.evaluator.params, task.root)
    evaluator.limits = Limits(timeout_s=20)
    box = ProcessSandbox()
    try:
        result = evaluator.evaluate(task.seed, box, seed=0)
    finally:
        box.close()
    assert result.ok, result.feedback
    assert result.metrics["helper_runs"] == 1.0  # an ELF helper goes in executable
    pairs = (item.split("=") for item in result.artifacts["seen"].split())
    return {name: value for name, value in pairs if not name.startswith("__evolve_")}


@pytest.mark.system
def test_binary_files_and_subfolders_reach_the_sandbox_as_their_bytes(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "task")
    seen = shipped(folder)
    assert seen == {
        "evaluator.py": digest(EVALUATOR.encode()),
        "initial_program.py": digest(SEED.encode()),
        "evolution_plot.png": digest(PICTURE),
        "data/points.csv": digest(b"x,y\n1,2\n"),
        "data/deep/weights.npy": digest(b"\x93NUMPY\x01\x00" + bytes(64)),
        "bin/helper": digest(HELPER),
    }


def test_every_shipped_file_is_fingerprinted_by_its_bytes(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "task")
    task = load_task(folder)
    assert task.files["evolution_plot.png"] == digest(PICTURE)
    assert task.files["bin/helper"] == digest(HELPER)
    assert task.files["evaluator.py"] == digest(EVALUATOR.encode())
    assert not any(name.startswith(("results/", "openevolve_output/", ".")) for name in task.files)
    (folder / "data" / "deep" / "weights.npy").write_bytes(b"\x93NUMPY\x01\x00" + bytes(65))
    (folder / "data" / "new.bin").write_bytes(b"\x00\x01")
    assert changed_files(load_task(folder), task.files) == [
        "data/deep/weights.npy",
        "data/new.bin",
    ]


@pytest.mark.system
def test_files_names_what_goes_and_subfolders_by_glob(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "task")
    (folder / "task.yaml").write_text(
        "openevolve: config.yaml\n"
        "evaluator: {params: {files: ['data/**/*.npy', 'bin/*']}}\n"
        "sandbox: {backend: process}\n"
    )
    assert set(shipped(folder)) == {"evaluator.py", "initial_program.py",
                                    "data/deep/weights.npy", "bin/helper"}  # fmt: skip


def test_the_evaluator_itself_must_be_text(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "task")
    (folder / "evaluator.py").write_bytes(b"def evaluate(p):\n    return {}\n\x00")
    with pytest.raises(TaskFileError, match=r"cannot use 'evaluator\.py': a binary file, not text"):
        load_task(folder)


def test_too_many_bytes_names_the_cap_the_largest_files_and_files(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "task")
    big = folder / "data" / "frames.raw"
    with big.open("wb") as stream:  # sparse: cheap to write, read as zeros
        stream.truncate(MAX_SHIPPED_BYTES + 1)
    with pytest.raises(TaskFileError) as caught:
        load_task(folder)
    message = str(caught.value)
    assert f"over the {MAX_SHIPPED_BYTES / 1024**2:.1f} MiB cap" in message
    assert "the largest: data/frames.raw (16.0 MiB)" in message
    assert "`files: [...]` under evaluator.params" in message
    assert "a task.yaml beside config.yaml that holds `openevolve: config.yaml`" in message

    (folder / "task.yaml").write_text(
        "openevolve: config.yaml\nevaluator: {params: {files: ['data/*.csv']}}\n"
    )
    assert "data/frames.raw" not in load_task(folder).files  # named files only: it loads


def test_too_many_files_names_the_folder_that_holds_most(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "task")
    (folder / "frames").mkdir()
    for index in range(MAX_SHIPPED_FILES + 1):
        (folder / "frames" / f"{index}.txt").write_text("x")
    with pytest.raises(TaskFileError) as caught:
        load_task(folder)
    message = str(caught.value)
    assert f"more than the {MAX_SHIPPED_FILES} files that may go into the sandbox" in message
    assert "of them in frames)" in message and "`files: [...]`" in message


def test_a_link_out_of_the_folder_is_refused_and_a_linked_folder_not_entered(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host file")
    folder = openevolve_folder(tmp_path / "task")
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    assert not any(name.startswith("linked/") for name in load_task(folder).files)
    (folder / "data" / "secret.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(TaskFileError, match=r"'data/secret\.txt' lies outside the task folder"):
        load_task(folder)


@pytest.mark.system
def test_a_task_yaml_ships_its_subfolders_too(tmp_path: Path) -> None:
    folder = openevolve_folder(tmp_path / "task")
    (folder / "config.yaml").unlink()
    (folder / "task.yaml").write_text(
        textwrap.dedent("""\
            name: plain
            seed: initial_program.py
            evaluator: {name: python}
            objectives: [{name: combined_score, direction: maximize}]
            budget: {candidates: 2}
            sandbox: {backend: process}
        """)
    )
    assert "data/deep/weights.npy" in shipped(folder)
    assert Program({"initial_program.py": SEED}) == load_task(folder).seed
