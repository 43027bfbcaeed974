"""Run candidate code in a warm, locked-down Docker container: the default sandbox.

Each sandbox keeps one container (no network, read-only root, tmpfs work dir, cgroup
limits, no capabilities, non-root) and one server in it: a single `exec` of `python3 -c
<supervise.py>`, started on first use, that runs job after job. A job's files go in framed
on the exec's stdin; the report, the capped output and the collected files come back framed
on its stdout. One exec per container rather than per job saves the engine's round trips
and Python's start-up on every job. There are no bind mounts, and `docker cp` cannot reach
a tmpfs under a read-only root anyway.

The container runs as uid 1001 (`keeper`, under docker-init) and the server and its jobs as
uid 1000, so a job's `kill -9 -1` cannot stop the container, and after each job the server
kills every other uid-1000 process and empties every dir that uid can write. A job's
signals cannot reach the server (the job's seccomp filter, evolve/sandboxes/supervise.py); should
the server die all the same, the job fails, and the next job gets a fresh server in the
same container, unless a process of the job outlived the server (it could tamper with a new
one as it starts), in which case the container is replaced. A server whose own limits, nice
value, affinity or scheduling a job changed (same uid: prlimit and friends reach it) exits
rather than pass them on, with the same outcome.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container
from docker.types import DeviceRequest

from evolve.plugin.limits import MEMORY, TIME
from evolve.plugin.sandbox import Limits, RunResult, SandboxUnavailable, WarmPython
from evolve.sandboxes import supervise
from evolve.sandboxes.images.build import JOB_USER, KEEPER_USER, image_status, image_tag
from evolve.sandboxes.images.derived import REPOSITORY as PACKAGES_REPOSITORY
from evolve.sandboxes.images.derived import build_derived
from evolve.sandboxes.server_client import failure, frame_job, frame_warm_job, receive
from evolve.sandboxes.supervise import ACCEPTED, checked_path

log = logging.getLogger("evolve.plugin.sandbox")

LABEL = "evolve.plugin.sandbox"
OWNER_PID, OWNER_HOST = "evolve.owner.pid", "evolve.owner.host"
JOB_UID, KEEPER_UID = str(JOB_USER[0]), str(KEEPER_USER[0])
WORK = "/work"
SERVER = ("python3", "-I", "-S", "-c", Path(supervise.__file__).read_text())
API_TIMEOUT_S = 30  # every engine call gives up by then: a dead daemon never hangs a worker
REAP_TIMEOUT_S = 5  # clean-up runs before every command: it waits for no stuck daemon
MEMORY_HEADROOM = 128 * 1024**2  # the supervisor and docker-init, beside the job's own limit
PIDS_HEADROOM = 8  # docker-init, sleep, the exec'd server
MUX_HEADER = struct.Struct(">BxxxI")  # an attached exec's stream: stream id, payload size
RECV_BYTES = 1024**2
STDERR_KEPT = 4096  # of the server's stderr: what it says as it dies comes last
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


def docker_available() -> tuple[bool, str]:
    """Whether `open_sandbox("docker")` can work here, and a sentence saying why or why not."""
    try:
        client = docker.from_env(timeout=5)
        version = client.version()["Version"]
        status = image_status(client)
    except ENGINE_ERRORS as exc:
        return False, f"the docker engine is unreachable ({exc}): start it, or install Docker"
    if not status.present:
        return False, f"docker {version} lacks the image {status.tag}: run `evolve sandbox build`"
    return True, f"docker {version} with image {status.tag}"


def reap_stale(client: docker.DockerClient) -> int:
    """Remove sandbox containers on this host whose owning process is gone; how many."""
    host = socket.gethostname()
    reaped = 0
    # Sparse: the listing's own labels, with no inspection of each container, which another
    # host process may remove between the listing and the inspection.
    listed = client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL}=1"})
    for container in listed:
        labels = container.attrs.get("Labels") or {}
        if labels.get(OWNER_HOST) == host and not _alive(int(labels.get(OWNER_PID, "0"))):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
                reaped += 1
    return reaped


def open_sandbox(*, image: str | None = None, gpus: bool = False) -> DockerSandbox:
    """An image of the task's own is checked when it is first used, not here."""
    ok, why = docker_available()
    if not ok and image is None:
        raise SandboxUnavailable(why)
    return DockerSandbox(image, gpus=gpus)


def readiness() -> tuple[bool, str]:
    return docker_available()


def provision(
    *,
    image: str | None,
    packages: Sequence[str],
    pip: Sequence[str],
    progress: Callable[[str], None],
) -> str:
    """`image` (or the sandbox image) with `packages` and the PyPI requirements `pip` added:
    evolve/sandboxes/images/derived.py."""
    return build_derived(image, packages, pip=pip, progress=progress)


def reap_orphans() -> int:
    """Quietly nothing where Docker is absent or does not answer: no command waits for it."""
    try:
        return reap_stale(docker.from_env(timeout=REAP_TIMEOUT_S))
    except ENGINE_ERRORS:
        return 0


class DockerSandbox:
    """One warm container, one job at a time (a lock serialises callers).

    Raises SandboxUnavailable when the engine fails or the image is missing; the next run
    after the engine is back starts a fresh container. A job that kills its container (out
    of memory, past the host's deadline) gets a failed RunResult and a new container; one
    that kills only the server gets a failed RunResult and a new server.
    """

    name = "docker"
    private_scratch = True
    python = "python3"  # the image's

    def __init__(
        self,
        image: str | None = None,
        *,
        cpus: float = 1.0,
        work_bytes: int = 1024**3,
        grace_s: float = 15.0,
        gpus: bool = False,
    ) -> None:
        self.image = image or image_tag()
        self.gpus = gpus  # needs the NVIDIA container toolkit on the host
        self.cpus = cpus
        self.work_bytes = work_bytes  # the tmpfs: a job's files count against its memory too
        self.grace_s = grace_s  # past the job's timeout, the host kills the whole container
        self._client: docker.DockerClient | None = None
        self._warm = _Warm()
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, self._warm.discard_quietly)  # and at exit

    @property
    def container_id(self) -> str | None:
        return self._warm.container.id if self._warm.container else None

    def run(
        self,
        argv: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        for name in (*files, *collect):
            checked_path(name)
        return self._locked(frame_job(argv, files, limits, collect), limits)

    def run_python(
        self,
        warm: WarmPython,
        args: Sequence[str],
        *,
        files: Mapping[str, bytes],
        limits: Limits,
        collect: Sequence[str] = (),
    ) -> RunResult:
        """The container's server imports warm's module once and forks a child per job."""
        for name in (*warm.files, *files, *collect):
            checked_path(name)
        payload = frame_warm_job(warm, args, self.python, files, limits, collect)
        return self._locked(payload, limits, warm.key)

    def _locked(self, payload: bytes, limits: Limits, warm_key: str | None = None) -> RunResult:
        with self._lock:
            try:
                return self._run(payload, limits, warm_key)
            except ENGINE_ERRORS as exc:
                self._warm.shape = None  # a job may still run in it: replace it when we can
                if self.gpus and "capabilities: [[gpu]]" in str(exc):
                    raise SandboxUnavailable(
                        "docker cannot pass a GPU into the sandbox: install the NVIDIA "
                        f"container toolkit on this host ({exc})"
                    ) from exc
                raise SandboxUnavailable(f"docker daemon unreachable or failing: {exc}") from exc

    def close(self) -> None:
        self._finalizer()

    def _run(
        self, payload: bytes, limits: Limits, warm_key: str | None, *, retry: bool = True
    ) -> RunResult:
        server = self._server(limits)
        if warm_key is not None and server.warmed not in (None, warm_key):
            self._warm.drop_server()  # it keeps another module: a fresh server imports this one
            server = self._server(limits)
        started = time.monotonic()
        deadline = started + limits.timeout_s + self.grace_s
        if warm_key is not None and server.warmed != warm_key:
            deadline += limits.timeout_s  # the server imports the module first, within this
        accepted = False
        try:
            server.send(payload, deadline)
            server.take(len(ACCEPTED), deadline)
            accepted = True
            result = receive(server.take, deadline, limits)
            server.warmed = warm_key or server.warmed
            return result
        except TimeoutError:
            self._warm.discard()
            why = f"the job outlived its timeout by {self.grace_s:g}s, so its container was killed"
            return failure(time.monotonic() - started, why, limits, limit=TIME)
        except EOFError:
            why, limit = self._lost(server)
        if accepted:
            return failure(time.monotonic() - started, why, limits, limit=limit)
        if retry:  # it died before the job (its container killed, say): a successor takes it
            return self._run(payload, limits, warm_key, retry=False)
        self._warm.discard()
        why = f"no sandbox server would take the job: {why}"
        return failure(time.monotonic() - started, why, limits)

    def _server(self, limits: Limits) -> _Server:
        """The warm container's server, first starting it (and the container) if need be."""
        container = self._container(limits)
        if self._warm.server is None:
            try:
                self._warm.server = self._serve(container)
            except docker.errors.APIError as exc:
                if exc.status_code not in (404, 409):
                    raise
                self._warm.discard()  # stopped or removed from outside: start afresh
                self._warm.server = self._serve(self._container(limits))
        return self._warm.server

    def _serve(self, container: Container) -> _Server:
        api = self._docker().api
        exec_id = api.exec_create(container.id, SERVER, stdin=True, user=JOB_UID)["Id"]
        return _Server(exec_id, api.exec_start(exec_id, socket=True))

    def _lost(self, server: _Server) -> tuple[str, str | None]:
        """Why the server's stream ended, and the limit that ended it where one did (the
        container's memory). The server goes; its container goes too if it died, or if a
        process of the job outlived the server and could tamper with its successor."""
        self._warm.drop_server()
        container = self._warm.container
        if container is None:
            raise RuntimeError("a sandbox server outlived its container, which cannot happen")
        container.reload()
        state = container.attrs["State"]
        if not state["Running"]:
            self._warm.discard()
            limit = MEMORY if state.get("OOMKilled") else None
            return "the sandbox container died during the job; it will be replaced", limit
        code = self._docker().api.exec_inspect(server.exec_id)["ExitCode"]
        said = server.stderr.decode(errors="replace")[-2000:].strip()
        why = (
            "the sandbox's supervisor died"
            + (f" with exit code {code}" if code is not None else "")
            + " (did the job kill it?)"
            + (f": {said}" if said else "")
        )
        if _job_processes(container):
            self._warm.discard()
            why += "; a process of the job outlived it, so its container will be replaced"
        return why, None

    def _docker(self) -> docker.DockerClient:
        if self._client is None:
            self._client = docker.from_env(timeout=API_TIMEOUT_S)
        return self._client

    def _container(self, limits: Limits) -> Container:
        """The warm container, first replacing one whose cgroup limits differ from `limits`."""
        shape = (limits.memory_bytes, limits.max_processes)
        if self._warm.container is not None and self._warm.shape == shape:
            return self._warm.container
        self._warm.discard()
        client = self._docker()
        reap_stale(client)
        memory = limits.memory_bytes + MEMORY_HEADROOM
        try:
            container = client.containers.create(  # create never pulls, unlike run
                self.image,
                ["sleep", "infinity"],
                init=True,
                user=KEEPER_UID,
                working_dir=WORK,
                environment={},
                network_mode="none",
                read_only=True,
                tmpfs={
                    WORK: f"rw,exec,nosuid,nodev,size={self.work_bytes},uid={JOB_UID},mode=0700"
                },
                mem_limit=memory,
                memswap_limit=memory,
                nano_cpus=int(self.cpus * 1e9),
                pids_limit=limits.max_processes + PIDS_HEADROOM,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])]
                if self.gpus
                else None,
                labels={LABEL: "1", OWNER_PID: str(os.getpid()), OWNER_HOST: socket.gethostname()},
            )
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(
                f"the sandbox image {self.image} is missing: {_how_to_build(self.image)}"
            ) from exc
        self._warm.container, self._warm.shape = container, shape
        container.start()
        return container


class _Warm:
    """The warm container and its server, held apart from the sandbox so that a finalizer can
    remove them."""

    container: Container | None = None
    shape: tuple[int, int] | None = None  # None: never reuse it, only remove it
    server: _Server | None = None

    def drop_server(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def discard(self) -> None:
        """Remove the container; if the engine fails, keep it to remove on the next attempt."""
        self.drop_server()
        if self.container is not None:
            with contextlib.suppress(docker.errors.NotFound):
                self.container.remove(force=True)
        self.container = self.shape = None

    def discard_quietly(self) -> None:
        with contextlib.suppress(*ENGINE_ERRORS):
            self.discard()


class _Server:
    """The server's end of one attached exec: its stdout and stderr, demultiplexed as they come.

    Raises EOFError when the stream ends (the server died) and TimeoutError at the deadline.
    """

    def __init__(self, exec_id: str, stream: socket.socket | socket.SocketIO) -> None:
        self.exec_id = exec_id
        self.warmed: str | None = None  # the key of the module it has imported for warm jobs
        self.stderr = bytearray()  # the end of what the server (and a module it imported) says
        self._stream = stream  # it holds the HTTP response whose socket this is: keep it alive
        self._sock: socket.socket = getattr(stream, "_sock", stream)
        self._raw = bytearray()  # received, not yet demultiplexed
        self._out = bytearray()  # stdout, not yet taken

    def send(self, payload: bytes, deadline: float) -> None:
        self._sock.settimeout(_left(deadline))
        try:
            self._sock.sendall(payload)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise EOFError("the sandbox server's stream is closed") from exc

    def take(self, size: int, deadline: float) -> bytes:
        """The next `size` bytes of the server's stdout."""
        while len(self._out) < size:
            self._sock.settimeout(_left(deadline))
            try:
                chunk = self._sock.recv(RECV_BYTES)
            except ConnectionResetError as exc:
                raise EOFError("the sandbox server's stream was reset") from exc
            if not chunk:
                raise EOFError("the sandbox server's stream ended")
            self._raw += chunk
            self._demux()
        taken = bytes(self._out[:size])
        del self._out[:size]
        return taken

    def close(self) -> None:
        """Hang up: the server reads EOF and exits, if it still runs."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # close alone waits for the response's refs
        self._sock.close()
        self._stream.close()

    def _demux(self) -> None:
        offset = 0
        while offset + MUX_HEADER.size <= len(self._raw):
            stream, size = MUX_HEADER.unpack_from(self._raw, offset)
            end = offset + MUX_HEADER.size + size
            if end > len(self._raw):
                break
            chunk = self._raw[offset + MUX_HEADER.size : end]
            if stream == 1:
                self._out += chunk
            else:
                self.stderr = (self.stderr + chunk)[-STDERR_KEPT:]
            offset = end
        del self._raw[:offset]


def _job_processes(container: Container) -> int:
    """How many live processes in the container are not the keeper's: with its server gone,
    they can only be what a job left."""
    top = container.top(ps_args="-o pid,uid,stat")
    uid, state = top["Titles"].index("UID"), top["Titles"].index("STAT")
    return sum(
        row[uid] != KEEPER_UID and not row[state].startswith("Z") for row in top["Processes"]
    )


def _how_to_build(image: str) -> str:
    if image == image_tag():
        return "run `evolve sandbox build`"
    if image.startswith(f"{PACKAGES_REPOSITORY}:"):  # a task's packages, built on another host
        return "run `evolve sandbox build --task TASK_FILE` on this host"
    return "build it (see evolve/sandboxes/images/)"


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.001)


def _alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie (dead, its parent yet to reap it) does not."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return False
    return stat.rpartition(") ")[2][:1] not in ("Z", "X")
