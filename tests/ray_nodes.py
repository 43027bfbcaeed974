"""A Ray cluster whose worker nodes are Docker containers, so that a test or a bench script
can lose a node for real (`docker kill`: every process of the node dies at once, as when a
machine loses power) and watch what the run does about it.

Layout. The worker nodes are containers of the sandbox image (a Debian like the host) on a
bridge network made for this cluster alone, `--internal` so that nothing in them reaches
past this host. The repository, and with it its .venv, is mounted read-only at the same
path inside them, with the Python installation the venv points at, so every node runs the
very code under test without an image of its own. Each worker node offers Ray exactly one
CPU: one evaluation worker per node, so that killing a node takes away a worker and leaves
no free CPU to replace it on.

The head is not a container but a `ray start --head` on this host, bound to the network's
gateway address, with no CPUs. A driver joins a cluster through a raylet on its own machine:
`ray.init(address=...)` looks for one among this host's processes, where a head container's
raylet shows up too (its processes are this host's processes), picks that one as the head,
and then cannot reach its sockets inside the container (tried: "Failed to connect to socket
at .../sockets/raylet"). With the head here, `evolve run --ray-address` on this host works
as it does on a user's head machine, and the store on 127.0.0.1 stays reachable to the
driver alone. No CPUs on the head, so that no evaluation worker lands on the node the
driver needs, and the cluster's CPUs are exactly the worker nodes'.

The head's GCS is told to give up on a silent node in seconds rather than Ray's default
half minute (HEALTH_CHECKS), so that what a test measures after a kill is the run's own
reaction, not Ray's patience.

The cluster uses Ray's token authentication with a token of its own, in a file that the
head, the nodes (mounted read-only) and the drivers (`driver_env`) are pointed at: whether
Ray would otherwise turn authentication on depends on whether some earlier `ray.init` on
this host left a ~/.ray/auth_token, which a test must not depend on. For the same reason
nothing here opens a Ray client in the calling process, whose Ray settings another test's
local instance may have set: a node has joined once its `ray start` says so, which it does
only after the head has registered it.

Clean-up. Everything is named `evolve-rn-<id>` and labelled with its owner (this process's
pid and start time): `stop` removes it all, and every start first removes what an owner
that has since died left behind (a crashed test), never what a live owner, another test
running beside this one, still uses.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from evolve.plugin.secrets import secret_names
from evolve.runtime.processes import PROC, ProcessId, kill, start_time
from evolve.sandboxes.images.build import image_tag

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "evolve-rn-"
OWNER_LABEL = "evolve.raynodes.owner"
OWNER_FILE = "owner.json"  # in the head's temp dir, for the sweep after a crash
TOKEN_FILE = "auth_token"  # in the head's temp dir
NODE_TOKEN = "/run/ray_auth_token"  # where a worker node sees it
STARTED = "Ray runtime started."  # what `ray start` prints once the head counts the node

SHM_SIZE = "512m"  # Ray's object store lives in /dev/shm; Docker's default is 64 MB
OBJECT_STORE_BYTES = 100 * 1024**2  # Ray's minimum is 75 MB; the tests move kilobytes
HEALTH_CHECKS = {  # read by the head's GCS (ray_config_def.h): a dead node is known in ~5 s
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "4",
}
START_TIMEOUT_S = 120.0  # for a node to join: `ray start` takes 10-30 s on a loaded machine
STOP_GRACE_S = 10.0
DOCKER_TIMEOUT_S = 120.0


class ClusterUnavailable(RuntimeError):
    """This host cannot run the container cluster (no Docker engine, no sandbox image)."""


@dataclass(frozen=True)
class WorkerNode:
    """`name` is the container's name and its hostname, so also the `host` that each
    evaluation on it stores under sandbox.node."""

    name: str
    ip: str


@dataclass
class RayNodes:
    """One cluster: start it with `running()`, which always takes it down again."""

    id: str = field(default_factory=lambda: secrets.token_hex(4))
    image: str = field(default_factory=image_tag)
    workers: dict[str, WorkerNode] = field(default_factory=dict)  # every one started
    killed: set[str] = field(default_factory=set)
    gateway: str = ""
    port: int = 0
    _head: subprocess.Popen[bytes] | None = None
    _head_log: IO[bytes] | None = None
    _started: int = 0  # worker containers so far, for their names

    @property
    def network(self) -> str:
        return f"{PREFIX}{self.id}"

    @property
    def address(self) -> str:
        """What `evolve run --ray-address` takes."""
        return f"{self.gateway}:{self.port}"

    @property
    def temp_dir(self) -> Path:
        """The head's Ray files. Short: Ray's socket paths below it must fit in 107 bytes."""
        return Path(tempfile.gettempdir()) / f"{PREFIX}{self.id}"

    @classmethod
    @contextlib.contextmanager
    def running(cls, workers: int = 2) -> Iterator[RayNodes]:
        nodes = cls()
        try:
            nodes.start(workers)
            yield nodes
        finally:
            nodes.stop()

    def start(self, workers: int) -> None:
        _require_docker(self.image)
        sweep()
        self._make_network()
        self._start_head()
        for _ in range(workers):
            self.add_worker()

    def add_worker(self) -> WorkerNode:
        """Start one more worker node and wait until the head counts it alive."""
        self._started += 1
        name = f"{self.network}-w{self._started}"
        _docker(
            "run", "--detach", "--name", name, "--hostname", name,
            "--network", self.network, "--init", "--shm-size", SHM_SIZE,
            "--user", "0:0",  # the mounted interpreter may sit in root's home (pyenv)
            "--label", f"{OWNER_LABEL}={_owner()}",
            *[arg for path in _mounts() for arg in ("--volume", f"{path}:{path}:ro")],
            "--volume", f"{self.temp_dir / TOKEN_FILE}:{NODE_TOKEN}:ro",
            "--env", "RAY_AUTH_MODE=token", "--env", f"RAY_AUTH_TOKEN_PATH={NODE_TOKEN}",
            self.image,
            str(_venv_bin("ray")), "start", "--address", self.address,
            "--num-cpus", "1", "--num-gpus", "0",
            "--object-store-memory", str(OBJECT_STORE_BYTES),
            "--disable-usage-stats", "--block",
        )  # fmt: skip
        where = f'{{{{(index .NetworkSettings.Networks "{self.network}").IPAddress}}}}'
        ip = _docker("inspect", "--format", where, name).strip()
        self._wait_started(f"worker node {name}", container=name)
        node = WorkerNode(name, ip)
        self.workers[name] = node
        return node

    @property
    def live(self) -> list[str]:
        """The worker nodes not killed, oldest first."""
        return [name for name in self.workers if name not in self.killed]

    def kill(self, name: str) -> None:
        """The node dies at once, all its processes with it; the head finds out by itself."""
        _docker("kill", name)
        self.killed.add(name)

    def driver_env(self) -> dict[str, str]:
        """The environment for a driver (`evolve run --ray-address`) on this cluster: this
        process's, with the cluster's token."""
        env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"}
        env.update(self._auth())
        return env

    def logs(self, name: str) -> str:
        """What a worker node's `ray start` said, for a failure's message."""
        done = subprocess.run(
            ["docker", "logs", "--tail", "60", name],
            capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S, check=False,
        )  # fmt: skip
        return done.stdout + done.stderr

    def stop(self) -> None:
        """Everything this cluster started, gone; safe to call on a half-started one."""
        try:
            _remove_owned(
                lambda name, _: name == self.network or name.startswith(f"{self.network}-")
            )
        finally:
            if self._head is not None:
                _end_group(self._head)
                self._head = None
            if self._head_log is not None:
                self._head_log.close()
                self._head_log = None
            _end_processes_under(self.temp_dir)
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _make_network(self) -> None:
        """Internal, so that the containers reach this host's gateway address and each other
        but nothing beyond; a plain bridge where the engine refuses that, or where this
        host gets no address on an internal network (the head must bind one)."""
        owner = f"{OWNER_LABEL}={_owner()}"
        with contextlib.suppress(ClusterUnavailable):
            _docker("network", "create", "--internal", "--label", owner, self.network)
            if self._gateway_here():
                return
            _docker("network", "rm", self.network)
        _docker("network", "create", "--label", owner, self.network)
        if not self._gateway_here():
            raise ClusterUnavailable(f"this host has no address on network {self.network}")

    def _gateway_here(self) -> bool:
        self.gateway = _docker(
            "network", "inspect", "--format", "{{(index .IPAM.Config 0).Gateway}}", self.network
        ).strip()
        try:
            return bool(self.gateway) and _free_port(self.gateway) > 0
        except (OSError, ValueError):
            return False

    def _start_head(self) -> None:
        self.temp_dir.mkdir(parents=True)
        (self.temp_dir / OWNER_FILE).write_text(_owner())
        token = self.temp_dir / TOKEN_FILE
        token.touch(mode=0o600)
        token.write_text(secrets.token_hex(32))  # as `ray get-auth-token --generate` makes one
        self.port = _free_port(self.gateway)
        drop = {"RAY_ADDRESS", "RAY_AUTH_TOKEN", *secret_names(os.environ)}
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env.update(HEALTH_CHECKS)
        env.update(self._auth())
        self._head_log = (self.temp_dir / "head.log").open("wb")
        # Every port the head opens is chosen here, on the gateway address: Ray's fixed
        # default (52365) would collide with another cluster started beside this one.
        self._head = subprocess.Popen(
            [
                str(_venv_bin("ray")), "start", "--head",
                "--node-ip-address", self.gateway, "--port", str(self.port),
                "--dashboard-agent-listen-port", str(_free_port(self.gateway)),
                "--num-cpus", "0", "--num-gpus", "0", "--include-dashboard", "false",
                "--object-store-memory", str(OBJECT_STORE_BYTES),
                "--temp-dir", str(self.temp_dir), "--disable-usage-stats", "--block",
            ],
            env=env, stdout=self._head_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: `stop` ends all of Ray's at once
        )  # fmt: skip
        self._wait_started("the head")

    def _auth(self) -> dict[str, str]:
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.temp_dir / TOKEN_FILE)}

    def _wait_started(self, what: str, container: str | None = None) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self._head is not None and self._head.poll() is not None:
                raise ClusterUnavailable(f"the head exited:\n{self._head_text()}")
            if container is not None:
                if not _running(container):
                    raise ClusterUnavailable(f"{what} exited:\n{self.logs(container)}")
                if STARTED in self.logs(container):
                    return
            elif STARTED in (self.temp_dir / "head.log").read_text(errors="replace"):
                return
            if time.monotonic() > deadline:
                said = self.logs(container) if container else self._head_text()
                raise ClusterUnavailable(f"{what} did not join in {START_TIMEOUT_S:.0f} s:\n{said}")
            time.sleep(0.5)

    def _head_text(self) -> str:
        with contextlib.suppress(OSError):
            return (self.temp_dir / "head.log").read_text(errors="replace")[-4000:]
        return "(no log)"


def sweep() -> None:
    """Remove what clusters whose owner has died left behind: containers, networks, and
    the head's processes and files."""
    _remove_owned(lambda _, labels: _owner_gone(labels.get(OWNER_LABEL)))
    for folder in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            owner = (folder / OWNER_FILE).read_text()
        except OSError:
            continue
        if _owner_gone(owner):
            _end_processes_under(folder)
            shutil.rmtree(folder, ignore_errors=True)


def _remove_owned(wanted: Callable[[str, dict[str, str]], bool]) -> None:
    """Remove the containers, then the networks, that `wanted(name, labels)` picks among
    those of this harness: a network with containers on it cannot be removed."""
    for kind, listing, labels_at in (
        ("container", ("ps", "--all"), "{{json .Config.Labels}}"),
        ("network", ("network", "ls"), "{{json .Labels}}"),
    ):
        template = "{{.Names}}" if kind == "container" else "{{.Name}}"
        names = _docker(*listing, "--filter", f"label={OWNER_LABEL}", "--format", template)
        for name in names.split():
            labels = _labels(kind, name, labels_at)
            if name.startswith(PREFIX) and labels is not None and wanted(name, labels):
                with contextlib.suppress(ClusterUnavailable):  # removed meanwhile
                    _docker(
                        *(("rm", "--force") if kind == "container" else ("network", "rm")), name
                    )


def _labels(kind: str, name: str, template: str) -> dict[str, str] | None:
    try:
        return json.loads(_docker(kind, "inspect", "--format", template, name)) or {}
    except (ClusterUnavailable, ValueError):
        return None


def _owner() -> str:
    return json.dumps(ProcessId.here().to_json(), sort_keys=True)


def _owner_gone(owner: str | None) -> bool:
    if not owner:
        return False
    try:
        return ProcessId.from_json(json.loads(owner)).gone()
    except (ValueError, KeyError, TypeError):
        return False


def _end_group(head: subprocess.Popen[bytes]) -> None:
    """SIGKILL, not SIGTERM: `ray start --block` and the GCS ignore SIGTERM, and the raylet
    takes ten seconds over it, for a cluster that holds nothing worth a clean stop."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGKILL)
    head.wait()


def _end_processes_under(folder: Path) -> None:
    """Any process of this host that names `folder` on its command line or holds a file
    open in it: a Ray worker retitles itself, but keeps its log files open."""
    mark = str(folder)
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            held = mark.encode() in (entry / "cmdline").read_bytes() or any(
                os.readlink(fd).startswith(mark + "/") for fd in (entry / "fd").iterdir()
            )
        except OSError:
            continue
        started = start_time(int(entry.name))
        if held and started is not None:
            found.append(ProcessId(socket.gethostname(), int(entry.name), started))
    kill(found, STOP_GRACE_S)


def _require_docker(image: str) -> None:
    if shutil.which("docker") is None:
        raise ClusterUnavailable("the docker command is not installed")
    try:
        _docker("image", "inspect", "--format", "{{.Id}}", image)
    except ClusterUnavailable as exc:
        raise ClusterUnavailable(
            f"no sandbox image {image} (run `evolve sandbox build`), or no engine: {exc}"
        ) from None


def _docker(*args: str) -> str:
    try:
        done = subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ClusterUnavailable(f"docker {args[0]} took over {DOCKER_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        raise ClusterUnavailable(f"docker {' '.join(args[:3])}: {done.stderr.strip()}")
    return done.stdout


def _running(container: str) -> bool:
    with contextlib.suppress(ClusterUnavailable):
        return _docker("inspect", "--format", "{{.State.Running}}", container).strip() == "true"
    return False


def _mounts() -> list[Path]:
    """The repository (with its .venv) and the Python installation the venv was made from,
    outermost only. A Debian python3 in /usr is left to the image's own, the same release's:
    mounting the host's /usr over the image's would replace the whole system."""
    wanted = {ROOT, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    kept: list[Path] = []
    for path in sorted(wanted, key=lambda p: len(p.parts)):
        if path == Path("/usr") or any(path.is_relative_to(k) for k in kept):
            continue
        kept.append(path)
    return kept


def _venv_bin(name: str) -> Path:
    return Path(sys.prefix) / "bin" / name


def _free_port(host: str) -> int:
    """A port free on `host` now; Ray binds it a moment later (a race lost only rarely)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])
