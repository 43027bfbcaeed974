"""The local executor's actors with real processes and threads: a ProcessActor
(evolve/executors/process_actor.py, its child evolve/executors/actor_process.py) answers in
order, ends what it had not answered WorkerLost when its child ends however it ends, keeps
the secrets out of the child's environment, and takes the child down with the driver; a
ThreadActor (evolve/executors/local.py) waits for its build and turns calls away once
stopped; an evaluation worker of LocalExecutor runs the python evaluator in a real sandbox.

The tests that start a child process are system tests (tests/lanes.py)."""

from __future__ import annotations

import copy
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from evolve.engine.workers import Finished, Placement
from evolve.executors import WorkerLost
from evolve.executors.local import LocalExecutor, ThreadActor
from evolve.executors.process_actor import ProcessActor
from evolve.plugin.program import Program
from evolve.plugin.secrets import is_secret
from evolve.sandboxes.isolation import detect
from evolve.task.loading import load_task, make_evaluator
from tests.helpers.guessing import PROGRAM, folder_with, primary_secondary

# The test's actor classes travel to the child by value, as a task's own classes do: the
# child needs no import of this module (nor of pytest) to build them.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

ANSWER_S = 60.0  # the most any call here waits for its answer: far more than it needs


class Tally:
    """An actor for these tests: it keeps the numbers it is given, in the order given."""

    def __init__(self, first: int = 0) -> None:
        self.given: list[int] = [first]

    def add(self, number: int) -> int:
        self.given.append(number)
        return len(self.given)

    def told(self) -> list[int]:
        return list(self.given)

    def pid(self) -> int:
        return os.getpid()

    def fail(self, why: str) -> None:
        raise LookupError(why)

    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    def wait_for(self, event: threading.Event) -> bool:
        return event.wait(ANSWER_S)

    def exit(self, code: int) -> None:
        os._exit(code)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., ProcessActor]]:
    """Starts a Tally in a child process (printing to tmp_path/workers.log); every child
    started is killed after the test."""
    started: list[ProcessActor] = []

    def start_one(name: str = "tally", withhold: tuple[str, ...] = ()) -> ProcessActor:
        actor = ProcessActor(name, Tally, (100,), tmp_path / "workers.log", withhold)
        started.append(actor)
        return actor

    yield start_one
    for actor in started:
        actor.kill()
        actor.process.wait(ANSWER_S)


def lost(future: Future[Any]) -> str:
    """The message of the WorkerLost that `future` ended with (failing if it ended otherwise)."""
    with pytest.raises(WorkerLost) as raised:
        future.result(ANSWER_S)
    return str(raised.value)


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(") ")[2].split()[0] != "Z"


# -- ProcessActor ---------------------------------------------------------------------------


@pytest.mark.system
def test_a_process_actor_answers_in_order_and_a_methods_exception_comes_back_as_it(
    start: Callable[..., ProcessActor],
) -> None:
    actor = start()
    child = actor.call("pid").result(ANSWER_S)
    assert child == actor.pid != os.getpid(), "the actor does not run in its child"
    added = [actor.call("add", number) for number in range(50)]
    assert [future.result(ANSWER_S) for future in added] == list(range(2, 52))
    assert actor.call("told").result(ANSWER_S) == [100, *range(50)]

    with pytest.raises(LookupError, match="no row 7") as raised:
        actor.call("fail", "no row 7").result(ANSWER_S)
    assert type(raised.value) is LookupError
    assert any("in fail" in note for note in raised.value.__notes__), "no child traceback"
    assert actor.call("add", 50).result(ANSWER_S) == 52, "an exception ended the actor"


@pytest.mark.system
def test_a_killed_process_actor_ends_what_it_had_not_answered_and_turns_later_calls_away(
    start: Callable[..., ProcessActor],
) -> None:
    actor = start("doomed")
    actor.call("pid").result(ANSWER_S)  # built and answering
    sleeping = actor.call("sleep", 600.0)
    queued = actor.call("add", 1)
    actor.kill()

    assert lost(sleeping) == lost(queued) == "doomed was stopped"
    later = actor.call("add", 2)
    assert later.done(), "a call to a stopped actor waited"
    assert lost(later) == "doomed was stopped"
    assert actor.process.poll() is not None


@pytest.mark.system
@pytest.mark.parametrize("how", ["exits", "killed from outside"])
def test_a_child_that_dies_by_itself_ends_its_calls_lost_with_its_exit_code(
    start: Callable[..., ProcessActor], how: str
) -> None:
    actor = start("fragile")
    pid = actor.call("pid").result(ANSWER_S)
    if how == "exits":
        dying, code = actor.call("exit", 3), 3
    else:
        dying, code = actor.call("sleep", 600.0), -signal.SIGKILL
    queued = actor.call("add", 1)
    if how == "killed from outside":
        os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would

    said = f"fragile ended (exit code {code}; what it printed: {actor.log_file})"
    assert lost(dying) == lost(queued) == said
    assert lost(actor.call("add", 2)) == said
    assert not actor.killed, "the executor did not stop it"


@pytest.mark.system
def test_the_childs_environment_holds_neither_the_secrets_nor_the_names_withheld(
    start: Callable[..., ProcessActor], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-5d1e-by-name")
    monkeypatch.setenv("NOTES_DB", "postgresql://notes:pw-by-value@db.example/notes")
    monkeypatch.setenv("GUESS_MODEL_ACCOUNT", "acct-withheld-9b2")  # a task's model key
    monkeypatch.setenv("EVOLVE_TEST_VISIBLE", "plain")
    assert not is_secret("GUESS_MODEL_ACCOUNT", "acct-withheld-9b2"), "only `withhold` hides it"
    actor = start(withhold=("GUESS_MODEL_ACCOUNT",))
    pid = actor.call("pid").result(ANSWER_S)

    # The child's initial environment, which a process it runs could read as well.
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    names = {entry.partition(b"=")[0].decode() for entry in environ.split(b"\0") if entry}
    assert "EVOLVE_TEST_VISIBLE" in names, "the child's environment was not read"
    assert not {"MY_SERVICE_TOKEN", "NOTES_DB", "GUESS_MODEL_ACCOUNT"} & names
    for value in (b"tok-5d1e-by-name", b"pw-by-value", b"acct-withheld-9b2"):
        assert value not in environ


# A driver that starts a child and keeps it busy: a child waiting for a call would end by
# itself when its parent's end of the socket closes, a busy one only by its death signal.
PARENT = """\
import sys, time
from pathlib import Path

from evolve.executors.process_actor import ProcessActor


class Sleeper:
    def sleep(self, seconds):
        time.sleep(seconds)


actor = ProcessActor("orphan", Sleeper, (), Path(sys.argv[1]))
actor.call("sleep", 0).result(60)  # the child is up, its death signal set
actor.call("sleep", 600)
print(actor.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.system
def test_the_child_is_in_a_session_of_its_own_and_dies_with_its_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(PARENT), str(tmp_path / "workers.log")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    child = 0
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"the parent said {line!r}"
        child = int(line)
        assert running(child)
        assert os.getsid(child) == child != os.getsid(parent.pid)

        parent.kill()
        parent.wait(ANSWER_S)
        deadline = time.monotonic() + 10
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(child), "the child outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(ANSWER_S)
        if child and running(child):
            os.kill(child, signal.SIGKILL)


# -- ThreadActor ----------------------------------------------------------------------------


def gated(build: Callable[[], Any]) -> tuple[threading.Event, Callable[[], Any]]:
    """`build`, held until the event returned is set."""
    gate = threading.Event()

    def held() -> Any:
        assert gate.wait(ANSWER_S), "the test never let the build go on"
        return build()

    return gate, held


def test_calls_made_while_a_thread_actor_is_built_wait_for_it() -> None:
    gate, build = gated(lambda: Tally(5))
    actor = ThreadActor("slow-start", build, threads=2)
    early = [actor.call("add", number) for number in (1, 2)]
    wait(early, timeout=0.2)
    assert not any(future.done() for future in early), "a call ran before the build ended"

    gate.set()
    assert sorted(future.result(ANSWER_S) for future in early) == [2, 3]
    assert sorted(actor.call("told").result(ANSWER_S)) == [1, 2, 5]
    actor.kill()


def test_a_thread_actor_whose_build_raises_ends_every_call_lost_naming_the_error() -> None:
    def broken() -> Tally:
        raise OSError("no SDK for this provider")

    gate, build = gated(broken)
    actor = ThreadActor("proposals", build, threads=2)
    early = actor.call("add", 1)
    gate.set()
    said = "proposals could not start: OSError: no SDK for this provider"
    assert lost(early) == said
    assert lost(actor.call("add", 2)) == said


def test_a_killed_thread_actor_ends_the_calls_waiting_and_turns_later_ones_away() -> None:
    actor = ThreadActor("reader", Tally, threads=1)
    assert actor.call("add", 1).result(ANSWER_S) == 2
    release = threading.Event()
    busy = actor.call("wait_for", release)  # holds the one thread
    waiting = actor.call("add", 2)
    actor.kill()
    release.set()

    assert lost(waiting) == "reader was stopped"
    later = actor.call("add", 3)
    assert later.done(), "a call to a stopped actor waited"
    assert lost(later) == "reader was stopped"
    wait([busy], timeout=ANSWER_S)


def test_a_deep_copy_of_a_thread_actor_is_the_actor_itself() -> None:
    """Each proposal thread's copy of the mutators shares the one store reader."""
    actor = ThreadActor("store-reader", Tally, threads=1)
    assert copy.deepcopy(actor) is actor
    mutators = {"agent": {"reader": actor, "notes": ["kept apart"]}}
    copied = copy.deepcopy(mutators)
    assert copied["agent"]["reader"] is actor
    assert copied["agent"]["notes"] is not mutators["agent"]["notes"]
    actor.kill()


# -- an evaluation worker of the local executor ------------------------------------------


@pytest.mark.system
def test_an_evaluation_worker_says_where_it_is_prepares_and_evaluates(tmp_path: Path) -> None:
    """The guessing task's python evaluator (an OpenEvolve folder), in the process sandbox."""
    isolation = detect()
    if isolation.tool is None:
        pytest.skip(isolation.detail)
    task = load_task(folder_with(tmp_path / "guess", primary_secondary()))
    sandbox = task.spec.sandbox.model_copy(update={"backend": "process"})
    executor = LocalExecutor(tmp_path)
    worker = executor.evaluation_worker(make_evaluator(task), sandbox, "worker-0")
    try:
        assert isinstance(worker, ProcessActor)
        assert executor.free_cpus() == executor.cpus() - 1
        host = socket.gethostname()
        placement = worker.call("where").result(ANSWER_S)
        assert isinstance(placement, Placement)
        assert (placement.name, placement.host, placement.node_id) == (
            f"worker-0@{host}",
            host,
            host,
        )

        assert worker.call("prepare", task.seed).result(ANSWER_S) is None
        right = Program({"initial_program.py": PROGRAM.replace("return 3", "return 42")})
        seed_run = worker.call("evaluate", task.seed, 0).result(ANSWER_S)
        right_run = worker.call("evaluate", right, 0).result(ANSWER_S)
    finally:
        worker.kill()
    for finished in (seed_run, right_run):
        assert isinstance(finished, Finished) and finished.worker == placement.name
        assert finished.result.ok, finished.result.feedback
        assert finished.result.sandbox["node"]["host"] == host
    assert seed_run.result.metrics["value"] == 3
    assert seed_run.result.metrics["combined_score"] == pytest.approx(1 / 40)
    assert right_run.result.metrics["combined_score"] == pytest.approx(1.0)
    assert executor.free_cpus() == executor.cpus()


def test_a_run_on_this_machine_loads_no_ray() -> None:
    """What a local run's driver and its evaluation workers import holds no Ray: the
    executor, the loop, the proposal workers, the command's launch and the worker's side."""
    modules = (
        "evolve.engine.launch", "evolve.engine.loop", "evolve.executors.local",
        "evolve.propose.workers",
        "evolve.executors.actor_process", "evolve.engine.workers", "evolve.mutators.factory",
    )  # fmt: skip
    probe = f"import sys, {', '.join(modules)}; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_an_evaluation_worker_loads_no_store() -> None:
    """An evaluation worker's process neither reads nor writes the store: its side of the
    executor, the worker and the python evaluator load no SQLAlchemy, whose import would
    cost each worker's start a fraction of a second and its memory tens of MB."""
    modules = (
        "evolve.executors.actor_process", "evolve.engine.workers", "evolve.evaluators.python",
    )  # fmt: skip
    probe = f"import sys, {', '.join(modules)}; print('sqlalchemy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
