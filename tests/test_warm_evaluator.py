"""The warm python evaluator on both real sandboxes: evaluator.py is imported once per sandbox
server and each stage is a child forked from it, and a candidate can reach neither that
parent nor the candidates after it."""

from __future__ import annotations

import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from evolve.evaluators.python import PythonEvaluator
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.plugin.sandbox import Limits, Sandbox
from evolve.sandboxes.isolation import detect, with_environment
from evolve.sandboxes.process import ProcessSandbox
from tests.conftest import open_backend

BACKENDS = ["process", pytest.param("docker", marks=pytest.mark.docker)]

# Records, when imported, the pid that imported it; each call says which process it runs in.
EVALUATOR = """\
import importlib.util
import os
import sys

IMPORTED_BY = os.getpid()
STATE = {"calls": 0}


def evaluate(program_path):
    STATE["calls"] += 1
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {
        "combined_score": float(getattr(module, "SCORE", 0.0)),
        "calls": STATE["calls"],
        "imported_by": IMPORTED_BY,
        "runs_in": os.getpid(),
        "parent": os.getppid(),
        "asyncio_loaded": "asyncio" in sys.modules,
        "said": str(getattr(module, "SAID", "")),
    }
"""


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    box = open_backend(request.param)
    yield box
    box.close()


@pytest.fixture
def evaluator(tmp_path: Path) -> PythonEvaluator:
    (tmp_path / "evaluator.py").write_text(EVALUATOR)
    made = PythonEvaluator({}, tmp_path)
    made.limits = Limits(timeout_s=20)
    return made


def candidate(body: str) -> Program:
    block = textwrap.dedent(body).strip()
    return Program({"initial_program.py": f"# EVOLVE-BLOCK-START\n{block}\n# EVOLVE-BLOCK-END\n"})


def run(evaluator: PythonEvaluator, sandbox: Sandbox, body: str) -> EvalResult:
    return evaluator.evaluate(candidate(body), sandbox, seed=0)


def test_the_evaluator_is_imported_once_and_each_stage_forks_from_the_importer(
    evaluator: PythonEvaluator, sandbox: Sandbox
) -> None:
    first = run(evaluator, sandbox, "SCORE = 0.5")
    second = run(evaluator, sandbox, "SCORE = 0.75")
    for result in (first, second):
        assert result.status == "ok", result.feedback
        assert result.metrics["calls"] == 1  # the module's state is the import's, every time
        assert result.metrics["parent"] == result.metrics["imported_by"]
        assert result.metrics["runs_in"] != result.metrics["imported_by"]
        assert result.metrics["asyncio_loaded"] == 0.0  # only a coroutine evaluator needs it
    assert second.metrics["combined_score"] == 0.75
    assert first.metrics["imported_by"] == second.metrics["imported_by"]
    assert first.metrics["runs_in"] != second.metrics["runs_in"]


def test_what_a_candidate_changes_in_the_evaluator_or_leaves_behind_never_reaches_the_next(
    evaluator: PythonEvaluator, sandbox: Sandbox
) -> None:
    tamper = """
    import os, subprocess, sys
    evaluator = sys.modules["evaluator"]
    evaluator.STATE["calls"] = 1000
    evaluator.evaluate = lambda path: {"combined_score": 99.0}
    forged = {"metrics": {"combined_score": 99.0}, "artifacts": {}}
    sys.modules["__evolve_warm__"].normalise = lambda returned: forged
    for path in ("planted.txt", "/tmp/planted.txt", "/dev/shm/planted.txt"):
        open(path, "w").write("left for the next candidate")
    subprocess.Popen(["sleep", "61"], start_new_session=True)
    SCORE = 0.25
    """
    run(evaluator, sandbox, tamper)
    probe = """
    import os
    found = [p for p in ("planted.txt", "/tmp/planted.txt", "/dev/shm/planted.txt")
             if os.path.exists(p)]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/cmdline", "rb").read() == b"sleep\\x0061\\x00":
                found.append(f"sleep {pid}")
        except OSError:
            pass
    SAID = ",".join(found)
    SCORE = 0.5
    """
    after = run(evaluator, sandbox, probe)
    assert after.status == "ok", after.feedback
    assert after.metrics["combined_score"] == 0.5
    assert after.metrics["calls"] == 1
    assert after.artifacts["said"] == ""


def test_a_candidate_cannot_trace_read_or_write_through_the_warm_parent(
    evaluator: PythonEvaluator, sandbox: Sandbox
) -> None:
    """The parent is not dumpable (no ptrace, no /proc/PID/mem or fd of it), and the child
    holds none of its descriptors, so nothing can be written into the server's reports. The
    job's own result channel, the one descriptor it may hold past stderr, is left alone here
    (writing to it fails the stage: tests/test_python_evaluator.py)."""
    attack = """
    import ctypes, os, sys
    frame, own = sys._getframe(), None
    while frame:  # the runner's frame below this import holds its channel
        own = frame.f_locals.get("channel", own)
        frame = frame.f_back
    assert isinstance(own, int), "the runner's channel was not found"
    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getppid()
    found = []
    if libc.ptrace(16, parent, None, None) == 0:  # PTRACE_ATTACH
        found.append("ptrace")
    for name in ("mem", "environ", "fd"):
        try:
            target = f"/proc/{parent}/{name}"
            os.listdir(target) if name == "fd" else open(target, "rb").read(1)
            found.append(name)
        except OSError:
            pass
    for fd in set(range(3, 256)) - {own}:
        try:
            os.write(fd, b"\\0\\0\\0\\0\\0\\0\\0\\x02{}")
            found.append(f"fd {fd}")
        except OSError:
            pass
    SAID = ",".join(found)
    SCORE = 0.5
    """
    result = run(evaluator, sandbox, attack)
    assert result.status == "ok", result.feedback
    assert result.artifacts["said"] == ""
    assert run(evaluator, sandbox, "SCORE = 0.75").metrics["combined_score"] == 0.75


def test_a_candidate_can_neither_kill_nor_stop_the_warm_parent(
    evaluator: PythonEvaluator, sandbox: Sandbox
) -> None:
    for how in ("SIGKILL", "SIGSTOP"):
        code = f"import os, signal\nos.kill(os.getppid(), signal.{how})"
        meddled = run(evaluator, sandbox, code)
        assert meddled.status != "ok"
        assert "PermissionError: [Errno 1] Operation not permitted" in meddled.feedback
    after = run(evaluator, sandbox, "SCORE = 0.75")
    assert after.status == "ok", after.feedback
    assert after.metrics["combined_score"] == 0.75
    assert after.metrics["parent"] == after.metrics["imported_by"]  # the same server, warm


def test_an_evaluator_that_fails_to_import_reports_its_error_at_every_stage(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    (tmp_path / "evaluator.py").write_text(
        "raise RuntimeError('no data file')\ndef evaluate(path):\n    return {}\n"
    )
    broken = PythonEvaluator({}, tmp_path)
    broken.limits = Limits(timeout_s=20)
    for _ in range(2):
        result = run(broken, sandbox, "SCORE = 1")
        assert result.status != "ok"
        assert "RuntimeError: no data file" in result.feedback


def test_a_coroutine_evaluator_runs_warm(tmp_path: Path, sandbox: Sandbox) -> None:
    (tmp_path / "evaluator.py").write_text(
        "import asyncio\n"
        "async def evaluate(path):\n"
        "    await asyncio.sleep(0)\n"
        "    return {'combined_score': 0.5}\n"
    )
    coroutine = PythonEvaluator({}, tmp_path)
    coroutine.limits = Limits(timeout_s=20)
    result = run(coroutine, sandbox, "SCORE = 1")
    assert result.status == "ok", result.feedback
    assert result.metrics["combined_score"] == 0.5


def test_a_warm_stage_is_still_killed_at_its_deadline(
    evaluator: PythonEvaluator, sandbox: Sandbox
) -> None:
    evaluator.limits = Limits(timeout_s=2)
    result = run(evaluator, sandbox, "while True:\n    pass")
    assert result.status == "timeout", result.feedback
    evaluator.limits = Limits(timeout_s=20)
    assert run(evaluator, sandbox, "SCORE = 0.25").metrics["combined_score"] == 0.25


def test_an_evaluator_that_keeps_a_file_open_from_its_import_runs_cold(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    """Each child would share that open file with the next: its stages import it afresh."""
    (tmp_path / "evaluator.py").write_text(EVALUATOR + "\nDATA = open(__file__, 'rb')\n")
    holding = PythonEvaluator({}, tmp_path)
    holding.limits = Limits(timeout_s=20)
    first, second = (run(holding, sandbox, "SCORE = 0.5") for _ in range(2))
    for result in (first, second):
        assert result.status == "ok", result.feedback
        assert result.metrics["runs_in"] == result.metrics["imported_by"]
    assert first.metrics["imported_by"] != second.metrics["imported_by"]


def test_an_evaluator_whose_import_hangs_times_its_stages_out_instead_of_the_run(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    (tmp_path / "evaluator.py").write_text(
        "while True:\n    pass\ndef evaluate(path):\n    return {}\n"
    )
    hanging = PythonEvaluator({}, tmp_path)
    hanging.limits = Limits(timeout_s=2)
    for _ in range(2):
        assert run(hanging, sandbox, "SCORE = 1").status == "timeout"


def test_an_evaluator_that_imports_the_program_at_its_top_sees_each_candidates_own(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    """The warm import never sees a program file (the seed's copy in the task folder
    included): such an evaluator runs cold, on each candidate's code, never the seed's."""
    (tmp_path / "evaluator.py").write_text(
        "import initial_program\n"
        "def evaluate(path):\n"
        "    return {'combined_score': float(initial_program.SCORE)}\n"
    )
    seed = candidate("SCORE = 0.5")
    (tmp_path / "initial_program.py").write_text(seed.files["initial_program.py"])
    importing = PythonEvaluator({}, tmp_path)
    importing.limits = Limits(timeout_s=20)
    assert run(importing, sandbox, "SCORE = 0.5").metrics["combined_score"] == 0.5
    assert run(importing, sandbox, "SCORE = 0.75").metrics["combined_score"] == 0.75


@pytest.mark.system
def test_a_read_only_folder_bound_under_tmp_survives_the_warm_servers_scrubs(
    tmp_path: Path,
) -> None:
    """A task's Python environment may live under /tmp, which is the namespace's own
    tmpfs: the server empties /tmp around it after every job, and the folder stays."""
    isolation = detect()
    if isolation.tool is None:
        pytest.skip(isolation.detail)
    outside = Path(tempfile.mkdtemp(dir="/tmp"))  # `nobody` reaches it when tests run as root
    outside.chmod(0o755)
    shown = outside / "environment" / "lib"
    shown.mkdir(parents=True)
    (shown / "kept.txt").write_text("still here")
    box = ProcessSandbox(with_environment(isolation, shown.parent, isolation.python))
    (tmp_path / "evaluator.py").write_text(EVALUATOR)
    reading = PythonEvaluator({}, tmp_path)
    reading.limits = Limits(timeout_s=20)
    probe = f"SAID = open({str(shown / 'kept.txt')!r}).read()\nSCORE = 0.5"
    try:
        for _ in range(2):
            result = run(reading, box, probe)
            assert result.status == "ok", result.feedback
            assert result.artifacts["said"] == "still here"
            assert result.metrics["parent"] == result.metrics["imported_by"]
    finally:
        box.close()
        shutil.rmtree(outside)


def test_a_candidate_can_write_no_shared_place_the_next_one_would_find(
    evaluator: PythonEvaluator, sandbox: Sandbox
) -> None:
    """The namespace's root and /dev are read-only, its message queues and /tmp are emptied,
    and no job may use the kernel's keyrings (which outlive it)."""
    plant = """
    import ctypes, os
    for path in ("/planted.txt", "/dev/planted.txt", "/dev/mqueue/planted", "/tmp/planted"):
        try:
            open(path, "w").close()
        except OSError:
            pass
    libc = ctypes.CDLL(None, use_errno=True)
    added = libc.syscall({"x86_64": 248, "aarch64": 217}[os.uname().machine],
                         b"user", b"planted", b"data", 4, -4)  # add_key to the user keyring
    SAID = "keyring" if added >= 0 else ""
    SCORE = 0.5
    """
    planted = run(evaluator, sandbox, plant)
    assert planted.status == "ok", planted.feedback
    assert planted.artifacts["said"] == ""
    look = """
    import os
    SAID = ",".join(p for p in ("/planted.txt", "/dev/planted.txt", "/dev/mqueue/planted",
                                "/tmp/planted") if os.path.exists(p))
    SCORE = 0.5
    """
    assert run(evaluator, sandbox, look).artifacts["said"] == ""


def test_an_evaluator_that_maps_shared_memory_at_import_runs_cold(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    shared = "\nimport mmap\nSHARED = mmap.mmap(-1, 4096)\n"
    (tmp_path / "evaluator.py").write_text(EVALUATOR + shared)
    sharing = PythonEvaluator({}, tmp_path)
    sharing.limits = Limits(timeout_s=20)
    result = run(sharing, sandbox, "SCORE = 0.5")
    assert result.status == "ok", result.feedback
    assert result.metrics["runs_in"] == result.metrics["imported_by"]


def test_the_warm_parent_never_imports_from_a_jobs_files(tmp_path: Path, sandbox: Sandbox) -> None:
    """A thread the evaluator started at import imports a module later, in the parent: a
    candidate's file of that name in the work dir must not be what it finds."""
    (tmp_path / "evaluator.py").write_text(
        EVALUATOR + "\nimport threading, time\n"
        "def later():\n"
        "    time.sleep(1)\n"
        "    try:\n"
        "        import planted_module\n"
        "    except ImportError:\n"
        "        pass\n"
        "threading.Thread(target=later, daemon=True).start()\n"
    )
    threaded = PythonEvaluator({}, tmp_path)
    threaded.limits = Limits(timeout_s=20)
    run(threaded, sandbox, "SCORE = 0.5")  # the server imports the evaluator: the thread starts
    plant = """
    import time
    with open("planted_module.py", "w") as module:
        module.write("import sys\\n"
                     "sys.modules['evaluator'].evaluate = lambda p: {'combined_score': 99.0}\\n")
    time.sleep(2)
    SCORE = 0.25
    """
    assert run(threaded, sandbox, plant).metrics["combined_score"] == 0.25
    after = run(threaded, sandbox, "SCORE = 0.75")
    assert after.status == "ok", after.feedback
    assert after.metrics["combined_score"] == 0.75


def test_a_task_with_a_verify_file_runs_each_stage_cold(tmp_path: Path, sandbox: Sandbox) -> None:
    """A warm server's freed memory may hold earlier candidates' outputs, which a verified
    task must keep out of a candidate's reach."""
    (tmp_path / "evaluator.py").write_text(EVALUATOR)
    (tmp_path / "verify.py").write_text("def verify(metrics, artifacts):\n    return metrics\n")
    verified = PythonEvaluator({"verify": "verify.py"}, tmp_path)
    verified.limits = Limits(timeout_s=20)
    result = run(verified, sandbox, "SCORE = 0.5")
    assert result.status == "ok", result.feedback
    assert result.metrics["runs_in"] == result.metrics["imported_by"]


def test_what_the_import_keeps_of_stdout_and_its_alarm_handler_still_work_in_each_stage(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    (tmp_path / "evaluator.py").write_text(
        "import signal, sys\n"
        "OUT = sys.stdout\n"
        "class Late(Exception):\n"
        "    pass\n"
        "def late(signum, frame):\n"
        "    raise Late()\n"
        "signal.signal(signal.SIGALRM, late)\n"
        "def evaluate(path):\n"
        "    OUT.write('printed through the import\\'s stdout\\n')\n"
        "    OUT.flush()\n"
        "    signal.setitimer(signal.ITIMER_REAL, 0.05)\n"
        "    try:\n"
        "        signal.pause()\n"
        "    except Late:\n"
        "        return {'combined_score': 1.0}\n"
        "    return {'combined_score': 0.0}\n"
    )
    keeping = PythonEvaluator({}, tmp_path)
    keeping.limits = Limits(timeout_s=20)
    for _ in range(2):
        result = run(keeping, sandbox, "SCORE = 1")
        assert result.status == "ok", result.feedback
        assert result.metrics["combined_score"] == 1.0


@pytest.mark.docker
def test_numpys_global_random_state_is_fresh_in_each_stage(tmp_path: Path) -> None:
    """The process sandbox's Python may have no numpy; Docker's image has it."""
    box = open_backend("docker")
    (tmp_path / "evaluator.py").write_text(
        "import numpy\n"
        "def evaluate(path):\n"
        "    return {'combined_score': float(numpy.random.rand())}\n"
    )
    drawing = PythonEvaluator({}, tmp_path)
    drawing.limits = Limits(timeout_s=20)
    try:
        draws = {run(drawing, box, "SCORE = 1").metrics["combined_score"] for _ in range(3)}
    finally:
        box.close()
    assert len(draws) == 3


def test_a_server_whose_import_was_not_used_never_imports_from_the_warm_dir(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    """The import keeps a file open, so its stages run cold; a thread it started imports
    later, in the server: a module a candidate planted where the import ran is not found."""
    (tmp_path / "evaluator.py").write_text(
        EVALUATOR + "\nDATA = open(__file__, 'rb')\n"
        "import threading, time\n"
        "def later():\n"
        "    time.sleep(1)\n"
        "    try:\n"
        "        import planted_module\n"
        "    except ImportError:\n"
        "        pass\n"
        "threading.Thread(target=later, daemon=True).start()\n"
    )
    threaded = PythonEvaluator({}, tmp_path)
    threaded.limits = Limits(timeout_s=20)
    run(threaded, sandbox, "SCORE = 0.5")
    plant = """
    import os, time
    os.makedirs("../warm", exist_ok=True)
    with open("../warm/planted_module.py", "w") as module:
        module.write("import sys\\n"
                     "main = sys.modules['__main__']\\n"
                     "clean = main.minimal_env\\n"
                     "main.minimal_env = lambda workdir: {**clean(workdir), 'PLANTED': '1'}\\n")
    time.sleep(2)
    SCORE = 0.25
    """
    run(threaded, sandbox, plant)
    after = run(threaded, sandbox, "import os\nSAID = os.environ.get('PLANTED', '')\nSCORE = 0.75")
    assert after.status == "ok", after.feedback
    assert after.artifacts["said"] == ""
