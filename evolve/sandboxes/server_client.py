"""The host's side of the sandbox server's protocol (evolve/sandboxes/supervise.py, `serve`): a job
framed out, its report read back. Both backends that keep a server warm speak it: Docker's
container and the process backend's bubblewrap namespace."""

from __future__ import annotations

import dataclasses
import json
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evolve.plugin.limits import TIME
from evolve.plugin.sandbox import Limits, RunResult, WarmPython
from evolve.sandboxes.supervise import FRAME

Take = Callable[[int, float], bytes]  # the next n bytes of the server's stdout, by a deadline


def frame_job(
    argv: Sequence[str],
    files: Mapping[str, bytes],
    limits: Limits,
    collect: Sequence[str],
    warm: Mapping[str, Any] | None = None,
) -> bytes:
    """One job, as `supervise.serve` reads it."""
    spec: dict[str, Any] = {
        "argv": list(argv),
        "limits": dataclasses.asdict(limits),
        "collect": list(collect),
        "files": [[name, len(content)] for name, content in files.items()],
    }
    if warm is not None:
        spec["warm"] = dict(warm)
    head = json.dumps(spec).encode()
    return b"".join([FRAME.pack(len(head)), head, *files.values()])


def frame_warm_job(
    warm: WarmPython,
    args: Sequence[str],
    python: str,
    files: Mapping[str, bytes],
    limits: Limits,
    collect: Sequence[str],
) -> bytes:
    """A job that the server may run as a call of `warm`'s module; its argv otherwise. The
    module is imported beside warm's files less those the job's own `files` replace (a
    candidate's program, say): what the trusted import sees is the task's alone."""
    spec = {
        "key": warm.key,
        "module": warm.module,
        "setup": list(warm.setup),
        "args": list(args),
        "files": [name for name in warm.files if name not in files],
    }
    every = {**warm.files, **files}
    return frame_job(warm.argv(python, args), every, limits, collect, spec)


def receive(take: Take, deadline: float, limits: Limits) -> RunResult:
    """The reply that `supervise.serve` frames after ACCEPTED, for a job run under `limits`.
    OSError where argv could not start, as ProcessSandbox raises it."""
    (size,) = FRAME.unpack(take(FRAME.size, deadline))
    report = json.loads(take(size, deadline))
    if "errno" in report:
        raise OSError(report["errno"], report["error"])
    stdout = take(report.pop("stdout"), deadline)
    stderr = take(report.pop("stderr"), deadline)
    files = {name: take(length, deadline) for name, length in report.pop("files")}
    return RunResult(**report, stdout=stdout, stderr=stderr, files=files, limits=limits)


def failure(wall_s: float, why: str, limits: Limits, *, limit: str | None = None) -> RunResult:
    """A job the sandbox lost (its server or container died, or it ran past the host's
    deadline), said in its stderr; `limit` is the limit that stopped it, where one did."""
    return RunResult(
        exit_code=None,
        signal=signal.SIGKILL,
        stdout=b"",
        stderr=why.encode(),
        wall_s=wall_s,
        peak_memory_bytes=0,
        timed_out=limit == TIME,
        limit=limit,
        limits=limits,
    )
