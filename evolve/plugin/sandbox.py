"""The contract between evaluators and the places where untrusted candidate code runs.

Files travel in and out through `run` itself (never through shared host paths), so a
backend whose work dir is wiped between jobs (a container's tmpfs) fits the same shape
as a local subprocess.
"""

from __future__ import annotations

import functools
import hashlib
import json
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from evolve.plugin import registry
from evolve.plugin.limits import Limits, limit_said, oom_said, sign_in, stopped

# The backends are plugins, by the name a task gives them (evolve/plugin/registry.py). The core
# reaches a backend only through `backend`, so that importing `evolve` loads neither Docker's
# SDK nor bubblewrap's probes.


class SandboxUnavailable(RuntimeError):
    """What a backend needs (the Docker engine, an image) is missing or down: a failure of
    the machine, never the candidate's, so its job waits rather than fails."""


@dataclass
class RunResult:
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    stdout: bytes
    stderr: bytes
    wall_s: float
    peak_memory_bytes: int
    timed_out: bool = False
    output_truncated: bool = False
    files: dict[str, bytes] = field(default_factory=dict)  # the `collect`ed outputs that exist
    # Processes still alive when the job's own process exited, "PID (name)": since killed.
    # A job must wait for what it starts; one that does not fails, whatever its exit code,
    # because what it left could have gone on writing its outputs or loading the machine.
    left_behind: list[str] = field(default_factory=list)
    cpu_s: float = 0.0  # CPU time of the job's process and of the processes it waited for
    # The limit that stopped the job, where the sandbox knows it did (evolve/plugin/limits.py),
    # and the limits it ran under, which the sandbox records so that the job's end can be
    # said in their terms.
    limit: str | None = None
    limits: Limits | None = None
    oom_kills: int = 0  # processes of the job killed for memory, where the sandbox counts them

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.left_behind

    def describe(self) -> str:
        """One line for feedback text: how the process ended, and the limit that ended it
        (its value, and the task key that sets it) where the sandbox or the job's output
        shows one did."""
        limits = self.limits
        if self.limit is not None and limits is not None:
            how = stopped(limits, self.limit, self.wall_s, self.cpu_s)
        elif self.timed_out:
            how = f"timed out after {self.wall_s:.1f} s and was killed"
        elif self.signal is not None:
            how = f"killed by signal {self.signal} ({_signal_name(self.signal)})"
            if self.signal == signal.SIGKILL and limits is not None:
                how += (
                    " from outside the sandbox's limits: by a process of the job, or by "
                    "the system running out of memory"
                )
        else:
            how = f"exited with code {self.exit_code}"
        failed = self.exit_code != 0 and self.limit is None
        if failed and limits is not None and self.oom_kills:
            how += f"; {oom_said(limits, self.oom_kills)}"
        elif failed and limits is not None and (met := sign_in(self.stderr)):
            how += f"; its output shows it ran into {limit_said(limits, met)}"
        if self.left_behind:
            how += f"; it left processes behind, since killed: {', '.join(self.left_behind)}"
        return how


def _signal_name(number: int) -> str:
    return signal.strsignal(number) or "unknown signal"


@dataclass(frozen=True)
class WarmPython:
    """A trusted Python module that a job runs, which a sandbox may keep imported between
    jobs: `warm(*setup)` once, then `main(args)` for each job in a fresh process forked from
    the one that imported it (see evolve/sandboxes/supervise.py). The module is the task's own code,
    never a candidate's: it is imported beside `files` alone, less those a job replaces."""

    module: str  # its path in the work dir
    setup: tuple[str, ...]  # what its warm() is given
    files: Mapping[str, bytes]  # what its import needs, itself included, by path in the work dir

    @functools.cached_property
    def key(self) -> str:
        """The same module, setup and files give the same key: what a server has imported."""
        digest = hashlib.sha256(json.dumps([self.module, self.setup]).encode())
        for name in sorted(self.files):
            digest.update(b"\0" + name.encode() + b"\0" + self.files[name])
        return digest.hexdigest()[:16]

    def argv(self, python: str, args: Sequence[str]) -> list[str]:
        """The same job as one command, for a sandbox that keeps nothing warm."""
        return [python, "-I", "-B", self.module, *self.setup, *args]


class Sandbox(Protocol):
    name: str
    # Whether /tmp and /dev/shm are the job's own and start empty: then a file there is the
    # job's doing, and a measurement may treat it as a cache planted between calls.
    private_scratch: bool
    python: str  # a Python 3 that a job can run, for trusted helpers shipped with it

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        """Run argv in a fresh work dir holding `files`; return the `collect`ed paths that exist."""
        ...

    def run_python(
        self,
        warm: WarmPython,
        args: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        """What `run(warm.argv(self.python, args), files={**warm.files, **files}, ...)` gives,
        with the module kept imported between jobs where this sandbox can."""
        ...

    def close(self) -> None: ...


class Backend(Protocol):
    """What a backend's module offers the core."""

    def open_sandbox(self, *, image: str | None, gpus: bool) -> Sandbox:
        """Raises SandboxUnavailable, naming the fix, where it cannot work here."""
        ...

    def readiness(self) -> tuple[bool, str]:
        """Whether it can run (and isolate) jobs here, and one line saying how or why not."""
        ...

    def reap_orphans(self) -> int:
        """Remove what the jobs of drivers that are gone left running on this host; how many."""
        ...

    def provision(
        self,
        *,
        image: str | None,
        packages: Sequence[str],
        pip: Sequence[str],
        progress: Callable[[str], None],
    ) -> str | None:
        """What `open_sandbox(image=...)` takes so that jobs have the Debian `packages` and
        the PyPI requirements `pip`, built first where this host lacks it; None where the
        backend installs nothing (its jobs use the host's own). Raises RuntimeError, saying
        why, where it cannot be built."""
        ...


def backend(name: str) -> Backend:
    """The backend module registered under `name` (evolve/plugin/registry.py); ValueError lists
    those installed where none is."""
    try:
        return cast(Backend, registry.load("sandbox backend", name))
    except registry.UnknownPlugin as exc:
        raise ValueError(str(exc)) from None


def open_sandbox(name: str, *, image: str | None = None, gpus: bool = False) -> Sandbox:
    """`image` and `gpus` apply to Docker: the process sandbox passes the host's GPUs through."""
    return backend(name).open_sandbox(image=image, gpus=gpus)
