"""How the process backend walls a job off from the host: bubblewrap, when it works here.

Each job gets its own PID, mount, IPC, UTS, network and user namespaces, may not make
further user namespaces, and holds no capability. It sees only the host folders a program
needs to run (/usr and its links, /etc, /opt) and the Python it is given, all read-only:
no /run or /var, so no Docker or D-Bus socket, and no home folder. /tmp and /dev/shm are
private, empty and size-capped, /proc shows only the job's own processes, the root and /dev
are read-only, and the only writable host path is the job's work dir. The namespace's init is
evolve/sandboxes/namespace_init.py, so nothing the job starts outlives it, and bwrap dies with the
supervisor (--die-with-parent), so nothing outlives a killed worker either.

Run as root, evolve runs bwrap as `nobody` instead: inside a user namespace root keeps its
host uid for files and sysctls, and the kernel does not count its processes against
RLIMIT_NPROC. The job then gets the host's own `python3`, which `nobody` can run, rather
than this interpreter, which may live in root's home.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from evolve.plugin.sandbox import Limits

PROBE_TIMEOUT_S = 10.0
NOBODY = 65534
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"  # as evolve/sandboxes/supervise.py's minimal_env
PROBE_ENV = {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8"}
VISIBLE = ("/usr", "/etc", "/opt")  # read-only; /bin, /lib and the rest follow if real dirs
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


@dataclass(frozen=True)
class Isolation:
    """A way to isolate a job, or none (`tool` is None) and why not."""

    tool: str | None
    detail: str  # one line for `evolve sandbox check` and the run's banner
    user: int | None = None  # run bwrap as this uid and gid (root drops to nobody)
    python: str = sys.executable  # an interpreter the job can run
    shown: tuple[str, ...] = field(default=())  # the interpreter's folders, bound read-only

    def wrap(self, workdir: Path, limits: Limits) -> list[str]:
        """The argv prefix that runs a command isolated, with workdir as its only writable
        host path and its current dir; empty when there is no isolation."""
        if self.tool is None:
            return []
        work = str(workdir)
        scratch = str(max(limits.max_file_bytes, 1024**2))
        return [
            self.tool,
            "--die-with-parent",
            "--new-session",  # no TIOCSTI into a terminal we might have
            "--unshare-all",  # pid, mount, ipc, uts, net, cgroup
            "--unshare-user",
            "--disable-userns",
            "--cap-drop",
            "ALL",
            *_host_folders(),
            "--dev",
            "/dev",
            *_gpu(),
            "--proc",
            "/proc",
            "--size",
            scratch,
            "--tmpfs",
            "/tmp",
            "--size",
            scratch,
            "--tmpfs",
            "/dev/shm",
            "--mqueue",  # the namespace's own POSIX message queues, which a server empties
            "/dev/mqueue",
            # after the tmpfs mounts, which would hide a venv under /tmp
            *[arg for path in self.shown for arg in ("--ro-bind", path, path)],
            "--bind",
            work,
            work,
            # The root and /dev are bubblewrap's own tmpfs: read-only once every mount point
            # is made, so a job writes only its work dir, /tmp, /dev/shm and its queues, and
            # a server kept between jobs leaves nothing writable that it does not empty.
            "--remount-ro",
            "/",
            "--remount-ro",
            "/dev",
            "--chdir",
            work,
            "--as-pid-1",
            "--",
        ]


UNISOLATED = Isolation(None, "no isolation: jobs run as plain processes of this user")


def with_environment(isolation: Isolation, folder: Path, python: str) -> Isolation:
    """`isolation` whose jobs run `python`, of the Python environment at `folder` that holds
    a task's pip requirements (evolve/sandboxes/python_env.py), shown read-only to them."""
    return replace(isolation, python=python, shown=(*isolation.shown, str(folder)))


@functools.cache
def detect() -> Isolation:
    """bwrap if it can make the namespaces here (a container or a kernel setting can forbid
    it), else UNISOLATED, saying why. Probed once per process."""
    tool = shutil.which("bwrap")
    if tool is None:
        return Isolation(
            None, "bubblewrap is not installed (apt-get install bubblewrap): jobs are NOT isolated"
        )
    user = NOBODY if os.geteuid() == 0 else None
    python = _python(user)
    if python is None:
        return Isolation(None, "no python3 that `nobody` can run on the sandbox's PATH")
    candidate = Isolation(tool, "", user, python, _interpreter_folders(python, user))
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    try:
        done = subprocess.run(
            [*candidate.wrap(scratch, Limits()), python, "-I", "-S", "-c", "pass"],
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            env=PROBE_ENV,  # the caller's holds model keys: no process of ours gets them
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Isolation(None, f"bubblewrap does not start ({exc}): jobs are NOT isolated")
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        return Isolation(None, f"bubblewrap cannot isolate here ({said[0]}): jobs are NOT isolated")
    version = subprocess.run(
        [tool, "--version"],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
        env=PROBE_ENV,
    ).stdout.strip()
    who = ", as nobody" if user is not None else ""
    detail = (
        f"{version or 'bubblewrap'}{who}: PID, mount, network, IPC and user namespaces, "
        "private /tmp and /dev/shm, read-only /usr and /etc only, no capabilities"
    )
    return Isolation(tool, detail, user, python, candidate.shown)


def _python(user: int | None) -> str | None:
    """This interpreter; or, for a job run as `user`, the host's python3 if this one is in
    folders that user cannot enter."""
    if user is None or _reachable(Path(sys.executable)):
        return sys.executable
    found = shutil.which("python3", path=SANDBOX_PATH)
    return found if found is not None and _reachable(Path(found)) else None


def _interpreter_folders(python: str, user: int | None) -> tuple[str, ...]:
    """The folders of this Python (its venv, its installation) and of `python`, which the
    host-folder binds do not already show, outermost first; those `user` cannot reach are
    left out. Tools installed from PyPI (nvcc) live in the venv, so it is shown even where
    the job runs the host's python3."""
    needed = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(python).parent)}
    paths = sorted({Path(p) for p in needed} | {Path(os.path.realpath(p)) for p in needed})
    kept: list[Path] = []
    for path in paths:
        if any(path.is_relative_to(root) for root in (*map(Path, VISIBLE), *kept)):
            continue
        if path.is_dir() and (user is None or _reachable(path)):
            kept.append(path)
    return tuple(map(str, kept))


def _host_folders() -> list[str]:
    argv = [arg for path in VISIBLE for arg in ("--ro-bind-try", path, path)]
    for top in TOP_LINKS:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    return argv


def _gpu() -> list[str]:
    """The NVIDIA device nodes, and /sys for the driver to find them: a CUDA task on this
    backend needs the GPU."""
    nodes = sorted(glob.glob("/dev/nvidia*"))
    argv = [arg for node in nodes for arg in ("--dev-bind", node, node)]
    return [*argv, "--ro-bind", "/sys", "/sys"] if nodes else argv


def _reachable(path: Path) -> bool:
    """Whether any user may reach `path`: every folder on the way is world-searchable."""
    for folder in [*Path(os.path.realpath(path)).parents]:
        try:
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True
