"""Which sandbox a run's candidates get, said on every run: the task's backend or the one
`--sandbox` names, refused (Ended, exit code 2) where it cannot work here (naming the fix)
rather than replaced by a weaker one unasked, and with the packages the task asks for."""

from __future__ import annotations

import subprocess
from dataclasses import replace

from rich.markup import escape

from evolve.engine.ending import Ended
from evolve.plugin.sandbox import backend as sandbox_backend
from evolve.task.loading import LoadedTask
from evolve.task.schema import SandboxSpec
from evolve.ui.console import console, errors


def usable_sandbox(task: LoadedTask, backend: str | None) -> LoadedTask:
    """The task with the sandbox it will run in, said on every run; Ended (exit code 2) where
    that sandbox cannot work here, naming the fix, rather than fall back to a weaker one.

    A process sandbox that cannot isolate (no bubblewrap) runs only where the task itself
    says `sandbox.backend: process`: a flag typed once is not consent for every candidate.
    """
    chosen = backend or task.spec.sandbox.backend
    try:  # the task's own backend was checked as it loaded: only --sandbox can name no plugin
        plugin = sandbox_backend(chosen)
    except ValueError as exc:
        raise Ended(2, f"--sandbox: {exc}") from None
    ready, how = plugin.readiness()
    if ready:
        console.print(f"sandbox: {how}")
    elif chosen == "docker":
        raise Ended(
            2,
            f"{task.path}: sandbox.backend: the docker sandbox cannot run here: {how}. Or run "
            "candidates in the process sandbox: `--sandbox process`",
        )
    elif chosen != "process":
        raise Ended(2, f"{task.path}: sandbox.backend: the {chosen} sandbox cannot run here: {how}")
    elif task.spec.sandbox.backend == "process":
        errors.print(
            f"[yellow]warning:[/yellow] sandbox 'process': {how}; candidates "
            "run as plain processes of this user, with its files and network"
        )
    else:
        raise Ended(
            2,
            f"{task.path}: sandbox.backend: the process sandbox cannot isolate here ({how}). "
            "Install bubblewrap, or accept unisolated candidates by setting "
            "`sandbox: {backend: process}` in the task",
        )
    sandbox = task.spec.sandbox.model_copy(update={"backend": chosen})
    if sandbox.packages or sandbox.pip:
        sandbox = _with_packages(task, sandbox)
    if sandbox == task.spec.sandbox:
        return task
    return replace(task, spec=task.spec.model_copy(update={"sandbox": sandbox}))


def _with_packages(task: LoadedTask, sandbox: SandboxSpec) -> SandboxSpec:
    """The sandbox with the task's `sandbox.packages` and `sandbox.pip`: on Docker, the image
    that holds them; on the process backend, the Python environment that holds the pip
    requirements; built now if this host lacks it.

    Built rather than refused: the task already says what it needs, the build takes seconds
    to minutes once per recipe and host and is reused by every later run, so sending the user
    off to type another command first would add a step and nothing else. Each phase is shown
    as it goes, and a build that fails (an unknown package, no network) ends (exit code 2)
    with apt-get's last lines or pip's error and the command that retries the build alone.

    The process sandbox installs no Debian package: its candidates use this host's own
    software. That is a warning, naming what dpkg finds missing, not an error: what a package
    provides (scipy, say) may be here all the same, installed by pip where dpkg cannot see it.
    """
    key = "sandbox.packages" if not sandbox.pip else "sandbox.pip"
    what = ", ".join([*sandbox.packages, *(f"pip: {wanted}" for wanted in sandbox.pip)])
    try:
        tag = sandbox_backend(sandbox.backend).provision(
            image=sandbox.image,
            packages=sandbox.packages,
            pip=sandbox.pip,
            progress=lambda line: console.print(escape(line), highlight=False),
        )
    except Exception as exc:  # RuntimeError from the build, or the engine failing mid-way
        raise Ended(
            2,
            f"{task.path}: {key}: cannot build the sandbox with {what}: {exc}\n"
            f"Retry the build alone: {_retry(task, sandbox)}",
        ) from None
    if sandbox.packages and sandbox.backend != "docker":
        names = ", ".join(sandbox.packages)
        errors.print(
            f"[yellow]warning:[/yellow] {task.path}: sandbox.packages: the {sandbox.backend} "
            f"sandbox installs no Debian package; candidates use this host's {names} "
            f"({_on_host(sandbox.packages)})",
            highlight=False,
        )
    if tag is None:
        return sandbox
    held_in = "image" if sandbox.backend == "docker" else "Python environment"
    console.print(f"sandbox {held_in} with {escape(what)}: {tag}", highlight=False)
    return sandbox.built(tag)


def _retry(task: LoadedTask, sandbox: SandboxSpec) -> str:
    if sandbox.backend == "docker":
        return f"evolve sandbox build --task {task.path}"
    return f"evolve check {task.path} --sandbox {sandbox.backend}"


def _on_host(packages: list[str]) -> str:
    """What dpkg says of the packages on this host, in words."""
    try:
        listed = subprocess.run(
            ["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *packages],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return "no dpkg here to check them"
    installed = {
        line.split()[0] for line in listed.stdout.splitlines() if line.endswith(" installed")
    }
    missing = [name for name in packages if name not in installed]
    if missing:
        return f"dpkg finds these missing: {', '.join(missing)}"
    return "dpkg finds them all installed"
