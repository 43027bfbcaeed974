"""The fast lane and the system tests: which test is which, how pytest-xdist spreads them,
and a watch that keeps the lane free of what it must not start.

A system test needs something outside the test process that is slow to start or shared:
Ray, Docker, PostgreSQL, the `evolve` command in a subprocess, or a job in a real sandbox
(bubblewrap or a container). `pytest -m "not system"` runs the others, the fast lane.

Most system tests are found by what they use, so that a new test is sorted without a
marker of its own: a `docker`, `postgres` or `gpu` marker, or a fixture that starts Ray
(`ray_session`), opens PostgreSQL (`postgres_url`) or hands out a sandbox (`sandbox`, the
name every test module gives its sandbox fixture). The rest say `@pytest.mark.system`
themselves: a test that runs the `evolve` command, or makes its sandbox in its body.

Under pytest-xdist (pyproject's addopts) the tests that use Docker run one after another on
one worker, and so do those that share the session's Ray instance, each group beside the
rest: the other tests are dealt out one at a time to whichever worker is free.

A session that holds no system test, the fast lane, watches each test as it runs: one that
starts the `evolve` command, bubblewrap, Docker or Ray, or reaches Docker's socket or the
PostgreSQL server, fails at teardown naming what it reached, so that a test that should be
marked cannot hide in the lane. A session with system tests in it does not watch, since a
system test's processes may still be at work while the next test runs."""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Generator, Sequence
from typing import Any

import pytest

from evolve.sandboxes.isolation import detect

log = logging.getLogger("tests.lanes")

SYSTEM_MARKERS = ("docker", "postgres", "gpu")
SYSTEM_FIXTURES = frozenset({"ray_session", "postgres_url", "sandbox"})

# Programs a fast-lane test never starts: the sandboxes and Ray's own processes. The
# `evolve` command is found by its name or by `python -m evolve...`.
SYSTEM_PROGRAMS = frozenset({"bwrap", "docker", "dockerd", "ray", "raylet", "gcs_server"})


def is_system(item: pytest.Item) -> bool:
    """Whether `item` needs a system: a marker that says so, or a fixture that starts one."""
    if any(item.get_closest_marker(name) for name in ("system", *SYSTEM_MARKERS)):
        return True
    return not SYSTEM_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


def xdist_group(item: pytest.Item) -> str | None:
    """The group whose tests one xdist worker runs in order, or None for a test that any
    worker may take: Docker's tests share one engine, and Ray's one local instance."""
    if item.get_closest_marker("docker"):
        return "docker"
    if "ray_session" in getattr(item, "fixturenames", ()):
        return "ray"
    return None


def started_program(args: Any) -> str | None:
    """What a `subprocess.Popen` of `args` starts, where a fast-lane test must not: the
    `evolve` command or one of SYSTEM_PROGRAMS; None for anything else."""
    argv = [os.fsdecode(args)] if isinstance(args, str | bytes | os.PathLike) else list(args)
    words = [os.fsdecode(word) for word in argv if isinstance(word, str | bytes | os.PathLike)]
    if not words:
        return None
    program = os.path.basename(words[0].split(" ")[0])
    if program in SYSTEM_PROGRAMS or program == "evolve":
        return program
    if "-m" in words[:-1]:
        module = words[words.index("-m") + 1]
        if module == "evolve" or module.startswith("evolve."):
            return f"python -m {module}"
    return None


def docker_socket(address: Any) -> bool:
    """Whether a socket `address` is the Docker engine's: its default socket, or the one
    DOCKER_HOST names."""
    if not isinstance(address, str | bytes):
        return False
    path = os.fsdecode(address)
    named = os.environ.get("DOCKER_HOST", "").removeprefix("unix://")
    return path.endswith("docker.sock") or (bool(named) and path == named)


class LaneWatch:
    """The watch on a fast-lane session: what each test reached that a system test needs."""

    def __init__(self) -> None:
        self.current: str | None = None  # the node id of the test running now
        self.reached: list[str] = []

    def note(self, what: str) -> None:
        """Set down that the running test reached `what` (outside a test: nothing)."""
        if self.current is not None and what not in self.reached:
            self.reached.append(what)

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        """The audit hook (sys.addaudithook): new processes and socket connections."""
        if self.current is None:
            return
        if event == "subprocess.Popen":
            program = started_program(args[1])
            if program is not None:
                self.note(f"started {program}")
        elif (
            event == "socket.connect"
            and args[0].family == socket.AF_UNIX
            and docker_socket(args[1])
        ):
            self.note("connected to Docker's socket")


_watch: LaneWatch | None = None


def reaching(what: str) -> None:
    """Called where a test helper reaches a system that no audit event shows (PostgreSQL,
    through libpq): in a watched fast lane, the running test fails for it."""
    if _watch is not None:
        _watch.note(what)


class LanesPlugin:
    """The hooks: sort the tests, group them for xdist, and watch a fast-lane session."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: Sequence[pytest.Item]
    ) -> None:
        # tryfirst: the markers must be on before `-m` deselects by them.
        grouped = config.pluginmanager.hasplugin("xdist")
        for item in items:
            if is_system(item):
                item.add_marker(pytest.mark.system)
            group = xdist_group(item) if grouped else None
            if group is not None:
                item.add_marker(pytest.mark.xdist_group(group))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        global _watch
        lane = bool(session.items) and not any(
            item.get_closest_marker("system") for item in session.items
        )
        if lane and _watch is None:
            # The host's one probe of bubblewrap (cached for the process) is made before any
            # test: a test that only asks whether jobs can be isolated here needs no mark,
            # and which test would ask first depends on the order the tests run in.
            detect()
            _watch = LaneWatch()
            sys.addaudithook(_watch.audit)  # stays for the process; idle outside a test
            log.info("fast lane: watching %d tests for Ray, Docker, PostgreSQL", len(session.items))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        if _watch is None:
            return (yield)
        _watch.current, _watch.reached = item.nodeid, []
        try:
            return (yield)
        finally:
            _watch.current = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if _watch is not None and call.when == "teardown" and _watch.reached:
            report.outcome = "failed"
            report.longrepr = (
                f"{item.nodeid} is in the fast lane but {', '.join(_watch.reached)}: "
                "mark it @pytest.mark.system (see tests/lanes.py)"
            )
        return report
