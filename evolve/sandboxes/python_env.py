"""The process backend's Python environments: a task's PyPI requirements installed with pip,
once per interpreter and list, into a folder on this host whose Python its jobs then run.

The process backend has no image to install into, and its jobs run `python -I`, which
ignores PYTHONPATH and the user's site folder, so the packages go into a virtual environment
made from the jobs' own interpreter. Its site-packages come first; a `.pth` file there then
adds the folders that interpreter already searched (evolve's own environment, where it runs
from one), and the system's site-packages follow, so a job finds everything it found
before, with the requirements in front, and pip counts what is there already as installed.
pip is evolve's own, run against the environment (`pip --python`), else the one the
interpreter has. It runs on the host as this user with a plain environment (no model keys;
proxies and PIP_* settings kept), as `pip install -r requirements.txt` would.

The folder is keyed by a hash of the interpreter and the sorted requirements, built under a
lock, marked complete last (a half-built one is rebuilt), readable by every user (a job run
as `nobody` must enter it) and shown read-only to the jobs (evolve/sandboxes/isolation.py). It lives
in EVOLVE_PYTHON_ENVS, else /var/cache/evolve/python for root, else
$XDG_CACHE_HOME/evolve/python (~/.cache). A requirement without a pinned version is resolved
when the folder is built, and not again; delete the folder to resolve it afresh.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from evolve.plugin.sandbox import SandboxUnavailable
from evolve.sandboxes.pip_output import PIP_FLAGS, PipLog

ROOT_ENV = "EVOLVE_PYTHON_ENVS"
MARKER = "evolve-environment.json"  # written last: a folder without it is rebuilt
INHERITED = "evolve-inherited.pth"  # the folders the jobs' interpreter searched before
PASSED_ENV = ("PATH", "HOME", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE")
PROBE_TIMEOUT_S = 60
# What the jobs' interpreter is and where it finds packages: the key's half that is not the
# requirements, and the folders the new environment must keep searching.
INTERPRETER = (
    "import json, os, site, sys; print(json.dumps([os.path.realpath(sys.executable), "
    "sys.version, sys.platform, site.getsitepackages()]))"
)
SITE_PACKAGES = "import sysconfig; print(sysconfig.get_path('purelib'))"


def environments_root() -> Path:
    chosen = os.environ.get(ROOT_ENV, "").strip()
    if chosen:
        return Path(chosen)
    if os.geteuid() == 0:
        return Path("/var/cache/evolve/python")
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache) / "evolve" / "python"


def provide(
    python: str, requirements: Sequence[str], progress: Callable[[str], None], user: int | None
) -> Path:
    """The environment for `python` holding `requirements`, built first unless it exists;
    RuntimeError says why it cannot be built (pip's error, naming the requirement), or why
    `user`, who runs the jobs, could not start its Python."""
    wanted = sorted(set(requirements))
    interpreter = _run([python, "-I", "-c", INTERPRETER], "ask the jobs' Python about itself")
    executable, version, platform, searched = json.loads(interpreter)
    recipe = json.dumps([executable, version, platform, searched, wanted])
    root = environments_root()
    folder = root / hashlib.sha256(recipe.encode()).hexdigest()[:16]
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{folder.name}.lock"):
        if (folder / MARKER).is_file():
            progress(f"{folder} (pip: {', '.join(wanted)}) is present; not reinstalling")
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        try:
            _build(folder, python, searched, wanted, progress)
            _open_to_all(folder)
            _check_runs(folder, user)
            (folder / MARKER).write_text(json.dumps({"python": executable, "pip": wanted}))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
    return folder


def environment(image: str | None) -> Path | None:
    """The environment `image` names, if it names one (a path, where a Docker image is a
    name); SandboxUnavailable where this host lacks it."""
    if image is None or not image.startswith("/"):
        return None
    folder = Path(image)
    if not (folder / MARKER).is_file():
        raise SandboxUnavailable(
            f"this host lacks the Python environment {folder} that holds the task's "
            "sandbox.pip: `evolve check TASK --sandbox process` on this host builds it"
        )
    return folder


def python_of(folder: Path) -> str:
    return str(folder / "bin" / "python")


def _build(
    folder: Path,
    python: str,
    searched: list[str],
    wanted: list[str],
    progress: Callable[[str], None],
) -> None:
    progress(f"building {folder}: {python} + pip: {', '.join(wanted)}, with pip from PyPI")
    started = time.monotonic()
    venv = [python, "-I", "-m", "venv", "--without-pip", "--system-site-packages", str(folder)]
    _run(venv, "make a virtual environment")
    site_packages = Path(_run([python_of(folder), "-I", "-c", SITE_PACKAGES], "find its site"))
    (site_packages / INHERITED).write_text("".join(f"{path}\n" for path in searched))
    _install(folder, wanted, progress)
    progress(f"built {folder} in {time.monotonic() - started:.0f} s")


def _install(folder: Path, wanted: list[str], progress: Callable[[str], None]) -> None:
    """pip install into the environment, its lines followed; RuntimeError from PipLog."""
    if importlib.util.find_spec("pip") is not None:
        pip = [sys.executable, "-m", "pip", "--python", python_of(folder)]
    else:
        pip = [python_of(folder), "-m", "pip"]
    argv = [*pip, "install", *PIP_FLAGS, *wanted]
    log = PipLog(progress)
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=pip_environment(),
    ) as proc:
        if proc.stdout is None:
            raise RuntimeError("pip's stdout is not a pipe despite stdout=PIPE")
        for line in proc.stdout:
            log.line(line)
    if proc.returncode != 0:
        raise RuntimeError(log.failure(wanted, proc.returncode))


def pip_environment() -> dict[str, str]:
    """This process's environment without its secrets: what pip needs to reach PyPI (a
    proxy, certificates, its own PIP_* settings) and nothing else."""
    return {
        name: value
        for name, value in os.environ.items()
        if name in PASSED_ENV or name.startswith("PIP_") or name.lower().endswith("_proxy")
    }


def _open_to_all(folder: Path) -> None:
    """Every folder enterable and every file readable by all: jobs may run as `nobody`."""
    for here, _, names in os.walk(folder):
        os.chmod(here, os.stat(here).st_mode | 0o555)
        for name in names:
            path = Path(here) / name
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o444)


def _check_runs(folder: Path, user: int | None) -> None:
    """RuntimeError unless the environment's Python starts as the jobs' user, which fails
    where a folder above it is closed to that user."""
    try:
        done = subprocess.run(
            [python_of(folder), "-I", "-c", "pass"],
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
        )
    except OSError as exc:
        done = subprocess.CompletedProcess([], 1, b"", str(exc).encode())
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise RuntimeError(
            f"the jobs' user cannot run the Python of {folder} ({said[0]}): set "
            f"{ROOT_ENV} to a folder every user can enter"
        )


def _run(argv: list[str], what: str) -> str:
    """The command's stdout, stripped; RuntimeError naming `what` and its error otherwise."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot {what} ({argv[0]}): {exc}") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise RuntimeError(f"cannot {what} ({' '.join(argv[:4])}): {said}")
    return done.stdout.strip()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Held by one process of this host at a time: two runs of one task build it once."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
