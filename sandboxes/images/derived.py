"""A task's sandbox image: a base image plus the Debian packages its `sandbox.packages` names.

The packages are installed with apt-get from Debian's archive in a throwaway container
started from the local base image, which is then committed; nothing is pulled from a
registry, so this works wherever `evolve sandbox build` does (the base needs only network
access to the archive, and an apt source, which the offline build writes). The tag is a
hash of the recipe, the base's tag and the sorted package names, so a recipe is built once
per host and reused by every later run; and since the base's tag is itself a hash of its
own recipe, every host of a cluster computes the same tag for the same task.

The build runs Debian's maintainer scripts as root, but in that container, not on the host;
only names that follow Debian's rules get this far (evolve/task.py checks them), so a task
can install packages from the archive and nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterable, Iterator, Sequence

import docker
import docker.errors
from docker.models.containers import Container

from sandboxes.images.build import IMPORT_TIMEOUT_S, Progress, image_tag

REPOSITORY = "evolve-sandbox-packages"
# Run as root in the build container; the packages come in as "$@". The lists, apt's caches
# and the downloaded .debs go, as in the base image: the sandbox never runs apt.
INSTALL = """set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends "$@"
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb
"""
PHASES = (  # how apt-get's per-package lines start, and the phase each is reported as
    ("Get:", "downloading"),
    ("Unpacking ", "unpacking"),
    ("Setting up ", "configuring"),
)
TAIL_LINES = 20  # of apt-get's output, quoted when it fails


def _wanted(packages: Iterable[str]) -> list[str]:
    """The packages as the recipe holds them: sorted, each once, so that order and repeats in
    the task file do not make a new image."""
    return sorted(set(packages))


def derived_tag(base: str, packages: Iterable[str]) -> str:
    """The tag of `base` with `packages` installed: the same recipe gives the same tag."""
    recipe = json.dumps([base, _wanted(packages)])
    return f"{REPOSITORY}:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def build_derived(
    base: str | None,
    packages: Sequence[str],
    *,
    force: bool = False,
    progress: Progress = print,
) -> str:
    """The tag of `base` (None: the sandbox image) with `packages` installed, built first
    unless an image with that tag exists. RuntimeError says why it cannot be built: the base
    is missing, or apt-get failed (an unknown package, no network), with apt-get's last lines.
    """
    base = base or image_tag()
    names = _wanted(packages)
    tag = derived_tag(base, names)
    client = docker.from_env(timeout=IMPORT_TIMEOUT_S)
    previous = _image_id(client, tag)
    if previous is not None and not force:
        progress(f"{tag} ({base} + {' '.join(names)}) is present; not rebuilding")
        return tag
    try:
        config = client.images.get(base).attrs["Config"]
    except docker.errors.ImageNotFound:
        fix = "`evolve sandbox build`" if base == image_tag() else "build it first"
        raise RuntimeError(f"the base image {base} is missing: {fix}") from None
    progress(f"building {tag}: {base} + {' '.join(names)}, with apt-get from Debian's archive")
    started = time.monotonic()
    with _container(client, base, names) as container:
        tail = _follow(container, progress)
        code = container.wait()["StatusCode"]
        if code != 0:
            raise RuntimeError(f"apt-get failed ({code}):\n" + "\n".join(tail))
        repository, version = tag.split(":")
        container.commit(repository, version, changes=_restored(config, base, names))
    built = client.images.get(tag)
    size = built.attrs["Size"] / 1e9
    progress(f"built {tag} ({size:.2f} GB with its base) in {time.monotonic() - started:.0f} s")
    if previous is not None and previous != built.id:  # --force: the old one has no tag now
        with contextlib.suppress(docker.errors.APIError):  # still used by a container: keep it
            client.images.remove(previous)
    return tag


def _image_id(client: docker.DockerClient, tag: str) -> str | None:
    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound:
        return None


@contextlib.contextmanager
def _container(client: docker.DockerClient, base: str, names: list[str]) -> Iterator[Container]:
    """The build container, running the install as root with the network; removed after,
    whatever happens (Ctrl-C included)."""
    container = client.containers.create(
        base, ["sh", "-c", INSTALL, "install", *names], user="root", network_mode="bridge"
    )
    try:
        container.start()
        yield container
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)


def _follow(container: Container, progress: Progress) -> list[str]:
    """Report each of apt-get's phases once, as it reaches it; its last lines, for errors."""
    phase, tail, pending = "", [], b""
    for chunk in container.logs(stream=True, follow=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").rstrip()
            tail = [*tail[-(TAIL_LINES - 1) :], line]
            now = next((name for start, name in PHASES if line.startswith(start)), phase)
            if now != phase:
                phase = now
                progress(f"  apt-get: {phase} packages")
    if pending:
        tail.append(pending.decode(errors="replace").rstrip())
    return tail


def _restored(config: dict, base: str, names: list[str]) -> list[str]:
    """Dockerfile lines that give the committed image its base's user, command and work dir
    (the build container ran as root with its own command), and labels naming its recipe."""
    return [
        f"USER {config.get('User') or 'root'}",
        f"CMD {json.dumps(config.get('Cmd') or [])}",
        f"WORKDIR {config.get('WorkingDir') or '/'}",
        f"LABEL evolve.base={json.dumps(base)} evolve.packages={json.dumps(' '.join(names))}",
    ]
