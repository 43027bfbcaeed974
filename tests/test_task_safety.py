"""Hostile task files: each is refused by the real `evolve run` with exit code 2 and one line
on stderr naming the file, before anything would read, expand or execute what it points at.

What makes each refusal fast is asserted instead of its wall time: a file over the cap is
refused by its size, a stream that never ends is read only up to the cap, and an alias bomb
or deep nesting is refused at the node that crosses a limit, long before the rest exists.
The times are printed (pytest -s) for docs/benchmarks.md.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from evolve.evaluators import task_files
from evolve.plugin.taskpaths import DEFAULT_MAX_BYTES, MAX_BYTES_ENV, read_bounded
from evolve.store import Store, default_url
from evolve.task.loading import TaskFileError, changed_files, load_task, parse_task
from evolve.task.yaml_limits import MAX_DEPTH, MAX_NODES
from evolve.task.yaml_limits import load as load_yaml
from tests.conftest import ROOT, write_synthetic_task

TASKS = ROOT / "tasks"


def evolve_run(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`timeout` is far above any refusal (only expanding the bomb would get near the
    default), so that a loader that hangs fails the test instead of stalling it."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "evolve", "run", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    print(f"\n{time.perf_counter() - started:.2f} s: {done.stderr.strip()[:160]}")
    return done


def refusal(done: subprocess.CompletedProcess[str], path: Path) -> str:
    """The one line of a refusal, checked to name the task file."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: {path}"), lines[0]
    return lines[0]


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "task.yaml"
    path.write_text(text)
    return path


def alias_bomb(levels: int) -> str:
    """Ten aliases per level to the level below: 10**levels strings from a few hundred bytes."""
    lines = ["lol0: &lol0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        aliases = ", ".join([f"*lol{level - 1}"] * 10)
        lines.append(f"lol{level}: &lol{level} [{aliases}]")
    return "\n".join(lines) + "\n"


# -- the file itself ---------------------------------------------------------------


@pytest.mark.system
def test_a_recursive_alias_is_refused_at_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\nseed: &loop [prog.py, *loop]\n")
    line = refusal(evolve_run(path, cwd=tmp_path), path)
    assert line == f"error: {path}:2: seed[1]: alias *loop is inside the node it names"


@pytest.mark.parametrize("levels", [4, 9, 30])
@pytest.mark.system
def test_an_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path, levels: int) -> None:
    """30 levels stand for 10**30 nodes: finishing at all shows nothing was expanded."""
    path = write(tmp_path, alias_bomb(levels))
    line = refusal(evolve_run(path, cwd=tmp_path), path)
    # 10**4 strings plus the lists holding them cross the node cap on the fourth line.
    assert line.startswith(f"error: {path}:4: lol3[")
    assert f"more than {MAX_NODES} YAML nodes once alias *lol2 is expanded" in line


def test_merge_keys_count_the_nodes_they_copy(tmp_path: Path) -> None:
    text = alias_bomb(3) + "big: &big {a: *lol2, b: *lol2}\n"
    text += "".join(f"m{i}: {{<<: *big, x: {i}}}\n" for i in range(40))
    with pytest.raises(TaskFileError) as caught:
        load_task(write(tmp_path, text))
    assert "YAML nodes once alias *big is expanded" in caught.value.message


def test_aliases_within_the_limits_still_work(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(
        "# EVOLVE-BLOCK-START\nX = 1  # @knob int 0..9\n# EVOLVE-BLOCK-END\n"
    )
    text = (
        "name: demo\nseed: prog.py\nevaluator: {name: synthetic, params: &p {target: 4}}\n"
        "objectives: [{name: distance, direction: minimize}]\nbudget: {candidates: 2}\n"
        "mutators: [{name: autotuner, params: {}}]\nx-unused: *p\n"
    )
    with pytest.raises(TaskFileError) as caught:  # the alias resolves; the key is unknown
        load_task(write(tmp_path, text))
    assert caught.value.field == "x-unused" and "unknown key" in caught.value.message
    task = load_task(write(tmp_path, text.replace("x-unused: *p\n", "")))
    assert task.spec.evaluator.params == {"target": 4}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 10_000, 200_000])
@pytest.mark.system
def test_deep_nesting_is_refused_at_the_level_past_the_limit(tmp_path: Path, depth: int) -> None:
    path = write(tmp_path, "name: demo\nseed: " + "[" * depth + "\n")
    line = refusal(evolve_run(path, cwd=tmp_path), path)
    assert line.startswith(f"error: {path}:2: seed[0][0][0][0][0][0][0]: ")
    assert line.endswith(f"nested more than {MAX_DEPTH} levels deep")


def test_aliases_cannot_nest_deeper_than_the_limit(tmp_path: Path) -> None:
    half = MAX_DEPTH // 2 + 1
    text = f"a: &a {'[' * half}1{']' * half}\nb: {'[' * half}*a{']' * half}\n"
    with pytest.raises(TaskFileError) as caught:
        load_task(write(tmp_path, text))
    assert caught.value.line == 2
    assert caught.value.message == f"alias *a nests the file more than {MAX_DEPTH} levels deep"


@pytest.mark.system
def test_a_50_mb_file_is_refused_by_its_size(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    size = 50 * 1024 * 1024
    path.write_bytes(os.urandom(size))
    line = refusal(evolve_run(path, cwd=tmp_path), path)
    assert line == (
        f"error: {path}: refused: {size} bytes, over the {DEFAULT_MAX_BYTES}-byte cap "
        f"({MAX_BYTES_ENV} sets it)"
    )


def test_a_file_that_claims_too_little_is_read_no_further_than_the_cap() -> None:
    """A /proc file is a regular file that claims 0 bytes and holds more: only a bounded
    read stops at the cap, as it would for a file that grows while it is read."""
    assert Path("/proc/self/maps").stat().st_size == 0
    with pytest.raises(ValueError, match="more than the 10-byte cap"):
        read_bounded(Path("/proc/self/maps"), 10)


@pytest.mark.system
def test_a_fifo_task_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    """Opening a FIFO that no one writes to would block forever: the timeout is the test."""
    path = tmp_path / "task.yaml"
    os.mkfifo(path)
    line = refusal(evolve_run(path, cwd=tmp_path, timeout=60), path)
    assert line == f"error: {path}: refused: not a regular file (a FIFO)"


def test_a_device_or_a_folder_without_a_task_is_refused(tmp_path: Path) -> None:
    """/dev/zero never ends and a terminal may wait for input: neither is read at all."""
    with pytest.raises(TaskFileError) as caught:
        load_task(Path("/dev/zero"))
    assert caught.value.message == "refused: not a regular file (a character device)"
    with pytest.raises(TaskFileError) as caught:
        load_task(tmp_path)
    assert caught.value.message.startswith("a folder without a task.yaml, and not an OpenEvolve")


def test_stored_text_over_the_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run stored before the cap existed may hold a larger task; resuming it is refused."""
    monkeypatch.setenv(MAX_BYTES_ENV, "10")
    with pytest.raises(TaskFileError, match=r"refused: 11 bytes, over the 10-byte cap"):
        parse_task("name: demo\n", Path("task.yaml"))


@pytest.mark.system
def test_a_binary_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_bytes(b"name: demo\n\x7fELF\x02\x01\x01\x00\x00")
    line = refusal(evolve_run(path, cwd=tmp_path), path)
    assert line == f"error: {path}: refused: a binary file, not text (NUL byte at offset 18)"
    path.write_bytes(b"name: d\xe9mo\n")
    with pytest.raises(TaskFileError, match=r"not UTF-8 text \(bad byte at offset 7\)"):
        load_task(path)


@pytest.mark.system
def test_the_cap_is_set_by_the_environment(tmp_path: Path) -> None:
    path = write_synthetic_task(tmp_path / "task")
    size = path.stat().st_size
    line = refusal(evolve_run(path, cwd=tmp_path, env={MAX_BYTES_ENV: str(size - 1)}), path)
    assert line.endswith(f"{size} bytes, over the {size - 1}-byte cap ({MAX_BYTES_ENV} sets it)")
    line = refusal(evolve_run(path, cwd=tmp_path, env={MAX_BYTES_ENV: "1MB"}), path)
    assert line.endswith(f"{MAX_BYTES_ENV} must be a positive number of bytes, not '1MB'")


def test_a_base_60_number_is_a_string(tmp_path: Path) -> None:
    """PyYAML reads `1:1:1` as base 60 in time quadratic in its length (45 s for 1 MiB);
    here it is a plain string, so the schema, wanting an int, names a string."""
    digits = "1:" * ((DEFAULT_MAX_BYTES - 100) // 2) + "1"
    path = write(tmp_path, f"name: demo\nbudget: {{candidates: {digits}}}\n")
    started = time.perf_counter()
    with pytest.raises(TaskFileError) as caught:
        load_task(path)
    print(f"\n{time.perf_counter() - started:.2f} s for {path.stat().st_size} bytes")
    (problem,) = [p for p in caught.value.problems if p.field == "budget.candidates"]
    assert problem.line == 2 and "unable to parse string as an integer" in problem.message
    assert load_yaml("a: 1:30\nb: 1:30.5\nc: 90\nd: 1.5\n")[1] == {
        "a": "1:30",
        "b": "1:30.5",
        "c": 90,
        "d": 1.5,
    }
    assert yaml.safe_load("a: 1:30") == {"a": 90}  # other loaders keep YAML 1.1


@pytest.mark.parametrize("tag", ["!!int", "!!float"])
def test_an_explicit_base_60_number_is_refused(tmp_path: Path, tag: str) -> None:
    path = write(tmp_path, f"name: demo\nwhen: {tag} {'1:' * 100_000}1\n")
    with pytest.raises(TaskFileError) as caught:
        load_task(path)
    assert caught.value.line == 2
    assert f"{tag} in base 60 (with ':') is not supported" in caught.value.message


def test_values_python_cannot_hold_are_errors_at_their_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\nbudget: {candidates: " + "9" * 5000 + "}\n")
    with pytest.raises(TaskFileError) as caught:
        load_task(path)
    assert caught.value.line == 2 and "Exceeds the limit (4300 digits)" in caught.value.message
    path.write_text("name: demo\nwhen: 2026-13-45\n")
    with pytest.raises(TaskFileError, match=r"month must be in 1\.\.12"):
        load_task(path)


# -- the files it names ------------------------------------------------------------


def task_copy(tmp_path: Path, name: str) -> Path:
    """A shipped task copied into tmp_path/task, with a folder beside it that holds a file
    which, if ever run as Python (a reference is), leaves tmp_path/executed behind."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(
        f"open({str(tmp_path / 'executed')!r}, 'w').close()\n"
    )
    folder = tmp_path / "task"
    shutil.copytree(TASKS / name, folder)
    return folder / "task.yaml"


def escaping(task: Path, how: str, folder: bool) -> str:
    """A path that leads out of the task folder, spelled `how`."""
    target = task.parent.parent / "outside" / ("" if folder else "secret.txt")
    if how == "absolute":
        return str(target)
    if how == "dotdot":
        return "../outside" if folder else "../outside/secret.txt"
    (task.parent / "inside").symlink_to(target)
    return "inside"


# (shipped task, the key's YAML text, its field, names a folder)
PARAMS = {
    "c_kernel harness": ("stencil_c", "harness: harness.c", "evaluator.params.harness", False),
    "c_kernel reference": (
        "matmul_c",
        "reference: reference.py",
        "evaluator.params.reference",
        False,
    ),
    "cuda_kernel reference": (
        "cuda_gelu",
        "reference: reference.py",
        "evaluator.params.reference",
        False,
    ),
    "cuda_kernel reference_kernel": (
        "cuda_gelu",
        "reference_kernel: reference.cu",
        "evaluator.params.reference_kernel",
        False,
    ),
    "cuda_kernel launch": ("cuda_gelu", "launch: launch.h", "evaluator.params.launch", False),
    "llvm_inline corpus_dir": (
        "llvm_inline_size",
        "decision_timeout_ms: 50",
        "evaluator.params.corpus_dir",
        True,
    ),
    "seed": ("matmul_c", "seed: seed.c", "seed", False),
    "notes": ("matmul_c", "notes: notes.md", "notes", False),
    "llm templates": ("matmul_c", "notes: notes.md", "llm.templates", True),
}


def with_escape(task: Path, case: str, path: str) -> int:
    """Point the case's key at `path`; the line it is on."""
    _, key_text, field, _ = PARAMS[case]
    text = task.read_text()
    assert key_text in text
    key = field.rsplit(".", 1)[-1]
    if case == "llvm_inline corpus_dir":
        replacement = f"{key_text}\n    corpus_dir: {path}"
    elif case == "llm templates":
        model = '{model: local, base_url: "http://127.0.0.1:9/v1"}'
        replacement = f"{key_text}\nllm:\n  models: [{model}]\n  templates: {path}"
    else:
        replacement = key_text.split(":")[0] + f": {path}"
    text = text.replace(key_text, replacement)
    task.write_text(text)
    return next(i for i, line in enumerate(text.splitlines(), 1) if f"{key}: {path}" in line)


@pytest.mark.parametrize("case", PARAMS)
@pytest.mark.system
def test_every_path_param_is_confined_to_the_task_folder(tmp_path: Path, case: str) -> None:
    """Through the real command, with a symlink: the subtlest of the three ways out."""
    name, _, field, folder = PARAMS[case]
    task = task_copy(tmp_path, name)
    line_number = with_escape(task, case, escaping(task, "symlink", folder))
    line = refusal(evolve_run(task, cwd=tmp_path), task)
    assert line.startswith(f"error: {task}:{line_number}: {field}: 'inside' lies outside")
    assert line.endswith("(through a symlink)")
    assert not (tmp_path / "executed").exists()


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
@pytest.mark.parametrize("case", PARAMS)
def test_no_path_param_leaves_the_task_folder_any_way(tmp_path: Path, case: str, how: str) -> None:
    name, _, field, folder = PARAMS[case]
    task = task_copy(tmp_path, name)
    path = escaping(task, how, folder)
    line_number = with_escape(task, case, path)
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    error = caught.value
    assert len(error.problems) == 1, str(error)
    assert (error.line, error.field) == (line_number, field), str(error)
    assert ("is absolute" if how == "absolute" else "lies outside the task folder") in error.message
    assert not (tmp_path / "executed").exists()


def test_a_template_that_links_out_of_its_folder_is_refused(tmp_path: Path) -> None:
    task = task_copy(tmp_path, "matmul_c")
    (task.parent / "prompts").mkdir()
    (task.parent / "prompts" / "system.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    line_number = with_escape(task, "llm templates", "prompts")
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    assert (caught.value.line, caught.value.field) == (line_number, "llm.templates")
    assert "'prompts/system.txt' lies outside the task folder" in caught.value.message


def test_paths_that_stay_inside_load(tmp_path: Path) -> None:
    task = task_copy(tmp_path, "stencil_c")
    (task.parent / "parts").mkdir()
    shutil.move(task.parent / "harness.c", task.parent / "parts" / "harness.c")
    (task.parent / "harness.c").symlink_to(task.parent / "parts" / "harness.c")
    task.write_text(
        task.read_text().replace("reference: reference.py", "reference: parts/../reference.py")
    )
    loaded = load_task(task)
    # Each file is known by where it really is, so an edit through a link shows too.
    assert set(loaded.files) == {"seed.c", "notes.md", "parts/harness.c", "reference.py"}


def test_a_named_file_over_the_cap_is_refused_at_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = task_copy(tmp_path, "stencil_c")
    with (task.parent / "harness.c").open("a") as stream:
        stream.write("/* padding */\n" * 4096)
    size = (task.parent / "harness.c").stat().st_size
    monkeypatch.setenv(MAX_BYTES_ENV, str(size - 1))
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    assert caught.value.field == "evaluator.params.harness"
    assert caught.value.message == (
        f"cannot use 'harness.c': {size} bytes, over the {size - 1}-byte cap "
        f"({MAX_BYTES_ENV} sets it)"
    )


def key_line(task: Path, key_text: str) -> int:
    return next(i for i, line in enumerate(task.read_text().splitlines(), 1) if key_text in line)


@pytest.mark.parametrize("case", [case for case, (*_, folder) in PARAMS.items() if not folder])
@pytest.mark.system
def test_a_fifo_a_task_names_is_refused_not_waited_on(tmp_path: Path, case: str) -> None:
    """Through the real command, which would block for good on opening the FIFO."""
    name, key_text, field, _ = PARAMS[case]
    task = task_copy(tmp_path, name)
    file_name = key_text.split(": ")[1]
    (task.parent / file_name).unlink()
    os.mkfifo(task.parent / file_name)
    line = refusal(evolve_run(task, cwd=tmp_path, timeout=60), task)
    assert line == (
        f"error: {task}:{key_line(task, key_text)}: {field}: "
        f"cannot use {file_name!r}: not a regular file (a FIFO)"
    )


@pytest.mark.system
def test_a_fifo_among_the_templates_is_refused(tmp_path: Path) -> None:
    task = task_copy(tmp_path, "matmul_c")
    (task.parent / "prompts").mkdir()
    os.mkfifo(task.parent / "prompts" / "system.txt")
    line_number = with_escape(task, "llm templates", "prompts")
    line = refusal(evolve_run(task, cwd=tmp_path, timeout=60), task)
    assert line == (
        f"error: {task}:{line_number}: llm.templates: "
        "cannot use 'prompts/system.txt': not a regular file (a FIFO)"
    )


@pytest.mark.parametrize(
    ("kind", "make"),
    [
        ("a character device", lambda path: os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))),
        ("a folder", os.mkdir),
    ],
)
def test_a_device_or_folder_a_task_names_is_refused(
    tmp_path: Path, kind: str, make: Callable[[Path], None]
) -> None:
    """The device is a copy of /dev/zero, which a plain read would follow to the cap."""
    task = task_copy(tmp_path, "matmul_c")
    (task.parent / "seed.c").unlink()
    try:
        make(task.parent / "seed.c")
    except PermissionError:
        pytest.skip("no permission to make a device here")
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    assert caught.value.field == "seed"
    assert caught.value.message == f"cannot use 'seed.c': not a regular file ({kind})"


@pytest.mark.parametrize(
    ("key_text", "path", "field", "message"),
    [
        ("seed: seed.c", r'"seed\0.c"', "seed", "holds a NUL byte"),
        ("notes: notes.md", r'"a\0b"', "notes", "holds a NUL byte"),
        ("harness: harness.c", r'"h\0.c"', "evaluator.params.harness", "holds a NUL byte"),
        ("seed: seed.c", r'"\uD800.c"', "seed", "surrogates not allowed"),
        ("seed: seed.c", "loop", "seed", "Symlink loop"),
    ],
)
@pytest.mark.system
def test_a_path_no_file_can_have_is_refused_at_its_key(
    tmp_path: Path, key_text: str, path: str, field: str, message: str
) -> None:
    """Each once reached Path.resolve, whose ValueError or RuntimeError was a traceback."""
    task = task_copy(tmp_path, "stencil_c")
    (task.parent / "loop").symlink_to("loop")
    key = key_text.split(": ")[0]
    task.write_text(task.read_text().replace(key_text, f"{key}: {path}"))
    line = refusal(evolve_run(task, cwd=tmp_path), task)
    assert line.startswith(f"error: {task}:{key_line(task, f'{key}: {path}')}: {field}: ")
    assert message in line


# -- fingerprints for --resume ------------------------------------------------------


def test_the_fingerprint_covers_every_file_the_task_names(tmp_path: Path) -> None:
    task = task_copy(tmp_path, "cuda_gelu")
    loaded = load_task(task)
    assert set(loaded.files) == {"seed.cu", "notes.md", "reference.py", "launch.h", "reference.cu"}
    for name in sorted(loaded.files):
        with (task.parent / name).open("a") as stream:
            stream.write("\n// edited\n" if name.endswith((".cu", ".h")) else "\n# edited\n")
        again = parse_task(loaded.text, task)
        assert changed_files(again, loaded.files) == [name]
        assert again.digest != loaded.digest
        (task.parent / name).write_text((TASKS / "cuda_gelu" / name).read_text())
    assert parse_task(loaded.text, task).digest == loaded.digest


@pytest.mark.system
def test_resume_refuses_a_task_whose_files_changed(tmp_path: Path) -> None:
    task = write_synthetic_task(tmp_path / "task", candidates=2)
    evolve_run(task, "--name", "r1", "--workers", "1", "--plain", cwd=tmp_path)
    with Store(default_url(tmp_path / "results")) as store:
        record = store.get_run("r1")
    assert record is not None
    assert record.settings["task_sha256"] == load_task(task).digest
    with (task.parent / "seed.py").open("a") as stream:
        stream.write("# edited\n")
    done = evolve_run("--resume", "r1", "--plain", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"error: {task}: cannot resume r1: seed.py changed since it started; "
        "start a new run instead"
    )


HANGS = "import time\nwhile True:\n    time.sleep(0.01)\n"


@pytest.mark.parametrize(
    ("name", "relative", "field", "prefix"),
    [
        ("matmul_c", "reference.py", "reference", ""),  # loops at its top level
        ("circle_packing", "verify.py", "verify", ""),
        # loops only when the task calls it at load, at the task's sizes
        ("matmul_c", "reference.py", "reference", "def make_inputs(rng, sizes):\n    "),
    ],
)
def test_trusted_code_that_never_returns_fails_the_load_naming_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, relative: str, field: str,
    prefix: str,
) -> None:  # fmt: skip
    monkeypatch.setattr(task_files, "LOAD_DEADLINE_S", 1.0)
    task = task_copy(tmp_path, name)
    path = task.parent / relative
    body = HANGS.replace("\n", "\n    ").rstrip() if prefix else HANGS
    path.write_text(path.read_text() + f"\n\n{prefix}{body}\n")  # last: it wins
    with pytest.raises(TaskFileError) as caught:
        load_task(task)
    error = caught.value
    assert error.field == f"evaluator.params.{field}", str(error)
    assert f"{relative} did not finish loading within 1 s" in error.message


PROBE_OF_THE_COPY = """
import os, sys
from pathlib import Path
from evolve.evaluators.task_files import finishes_in_time

seen = Path(sys.argv[1])

def work():
    block = Path("/proc/self/environ").read_bytes()
    seen.write_bytes(block + b"|" + os.environ.get("EVOLVE_TEST_PROBE_API_KEY", "").encode()
                     + b"|" + os.environ.get("EVOLVE_TEST_KEPT", "").encode())

finishes_in_time(work, "probe", "reference", "reference.py")
"""


def test_the_copy_that_tries_trusted_code_holds_no_key(tmp_path: Path) -> None:
    """The driver's forked copy forgets its keys before it runs a task's code: neither its
    os.environ nor the environment /proc shows for it holds one; other variables stay."""
    seen = tmp_path / "seen"
    env = {**os.environ, "EVOLVE_TEST_PROBE_API_KEY": "sk-probe-b7e1", "EVOLVE_TEST_KEPT": "kept"}
    subprocess.run(
        [sys.executable, "-c", PROBE_OF_THE_COPY, str(seen)], env=env, cwd=ROOT, check=True
    )
    block, value, kept = seen.read_bytes().rsplit(b"|", 2)
    assert b"sk-probe-b7e1" not in block and value == b""
    assert kept == b"kept"
