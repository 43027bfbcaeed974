"""A task's sandbox image: a base image plus the Debian packages its `sandbox.packages` names
and the PyPI requirements its `sandbox.pip` names.

The packages are installed with apt-get from Debian's archive, then the requirements with
the image's own pip (Debian's python3-pip, added when the base has no pip), in a throwaway
container started from the local base image, which is then committed; nothing is pulled
from a registry, so this works wherever `evolve sandbox build` does (the base needs only
network access to the archive and to PyPI, and an apt source, which the offline build
writes). pip installs into /usr/local, which the image's python3 puts before Debian's own
packages on sys.path even under `-I`, and it counts what Debian installed (numpy) as there
already. The tag is a hash of the recipe, the base's tag, the sorted package names and the
sorted requirements, so a recipe is built once per host and reused by every later run; and
since the base's tag is itself a hash of its own recipe, every host of a cluster computes
the same tag for the same task. A requirement without a pinned version is resolved when the
image is built, and not again until it is rebuilt (`--force`).

The build runs Debian's maintainer scripts and the requirements' build scripts as root, but
in that container, not on the host; only names that follow Debian's rules and requirements
that parse as pip's get this far (evolve/task/schema.py checks them).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shlex
import tarfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container

from evolve.sandboxes.images.build import IMPORT_TIMEOUT_S, Progress, image_tag
from evolve.sandboxes.pip_output import PIP_FLAGS, PipLog

REPOSITORY = "evolve-sandbox-packages"
PIP_MARK = "evolve: pip install"  # said by the build before pip starts
# Run as root in the build container; the packages come in as "$@", then `--pip` and the
# requirements. The lists, apt's caches and the downloaded .debs go, as in the base image:
# the sandbox never runs apt.
SETTINGS = "/tmp/evolve-build"  # the host's settings for the build (host_settings)
# The host's settings that reach the build: proxies, and where pip finds packages.
PASSED = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT")
CA_BUNDLES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")  # the first set is used
INSTALL = f"""set -e
export DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore
if [ -f {SETTINGS}/env ]; then . {SETTINGS}/env; fi
packages=
while [ "$#" -gt 0 ] && [ "$1" != --pip ]; do packages="$packages $1"; shift; done
if [ "$#" -gt 0 ]; then
  shift
  python3 -m pip --version >/dev/null 2>&1 || packages="$packages python3-pip"
fi
if [ -n "$packages" ]; then
  apt-get update
  apt-get install -y --no-install-recommends $packages
fi
if [ "$#" -gt 0 ]; then
  echo "{PIP_MARK}"
  python3 -u -m pip install {" ".join(PIP_FLAGS)} "$@"
fi
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb {SETTINGS}
"""
PHASES = (  # how apt-get's per-package lines start, and the phase each is reported as
    ("Get:", "downloading"),
    ("Unpacking ", "unpacking"),
    ("Setting up ", "configuring"),
)
TAIL_LINES = 20  # of apt-get's output, quoted when it fails


def _wanted(packages: Iterable[str]) -> list[str]:
    """The packages (or requirements) as the recipe holds them: sorted, each once, so that
    order and repeats in the task file do not make a new image."""
    return sorted(set(packages))


def derived_tag(base: str, packages: Iterable[str], pip: Iterable[str] = ()) -> str:
    """The tag of `base` with `packages` and the requirements `pip` installed: the same
    recipe gives the same tag."""
    recipe: list[object] = [base, _wanted(packages)]
    if requirements := _wanted(pip):
        recipe.append(requirements)
    digest = hashlib.sha256(json.dumps(recipe).encode()).hexdigest()
    return f"{REPOSITORY}:{digest[:12]}"


def _described(names: list[str], requirements: list[str]) -> str:
    """What the recipe adds, in words: `jq python3-six` and `pip: scipy, pywavelets`."""
    parts = [" ".join(names)] if names else []
    if requirements:
        parts.append(f"pip: {', '.join(requirements)}")
    return " + ".join(parts)


def build_derived(
    base: str | None,
    packages: Sequence[str],
    *,
    pip: Sequence[str] = (),
    force: bool = False,
    progress: Progress = print,
) -> str:
    """The tag of `base` (None: the sandbox image) with `packages` and the requirements `pip`
    installed, built first unless an image with that tag exists. RuntimeError says why it
    cannot be built: the base is missing, apt-get failed (an unknown package, no network),
    with apt-get's last lines, or pip did, naming the requirement and quoting pip's error.
    """
    base = base or image_tag()
    names, requirements = _wanted(packages), _wanted(pip)
    tag = derived_tag(base, names, requirements)
    adds = _described(names, requirements)
    client = docker.from_env(timeout=IMPORT_TIMEOUT_S)
    previous = _image_id(client, tag)
    if previous is not None and not force:
        progress(f"{tag} ({base} + {adds}) is present; not rebuilding")
        return tag
    try:
        config = client.images.get(base).attrs["Config"]
    except docker.errors.ImageNotFound:
        fix = "`evolve sandbox build`" if base == image_tag() else "build it first"
        raise RuntimeError(f"the base image {base} is missing: {fix}") from None
    how = "with apt-get from Debian's archive" + (" and pip from PyPI" if requirements else "")
    progress(f"building {tag}: {base} + {adds}, {how}")
    started = time.monotonic()
    argv = [*names, *(["--pip", *requirements] if requirements else [])]
    with _container(client, base, argv) as container:
        pip_log = PipLog(progress)
        tail = _follow(container, progress, pip_log)
        code = container.wait()["StatusCode"]
        if code != 0 and pip_log.started:
            raise RuntimeError(pip_log.failure(requirements, code))
        if code != 0:
            raise RuntimeError(f"apt-get failed ({code}):\n" + "\n".join(tail))
        repository, version = tag.split(":")
        changes = _restored(config, base, names, requirements)
        container.commit(repository, version, changes=changes)
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
def _container(client: docker.DockerClient, base: str, argv: list[str]) -> Iterator[Container]:
    """The build container, running the install as root with the network; removed after,
    whatever happens (Ctrl-C included)."""
    container = client.containers.create(
        base, ["sh", "-c", INSTALL, "install", *argv], user="root", network_mode="bridge"
    )
    try:
        container.put_archive("/tmp", host_settings())
        container.start()
        yield container
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)


def host_settings() -> bytes:
    """A tar of SETTINGS: an `env` file setting the host's proxies and PASSED pip settings,
    and the host's CA bundle as pip's, where one is named (a proxy that inspects TLS signs
    with a CA only the host trusts). Sourced by the build, not kept in the image: a
    container's own environment would be."""
    lines = [
        f"export {name}={shlex.quote(value)}"
        for name, value in sorted(os.environ.items())
        if name in PASSED or name.lower().endswith("_proxy")
    ]
    files: dict[str, bytes] = {}
    bundle = next((os.environ[name] for name in CA_BUNDLES if os.environ.get(name)), None)
    if bundle and os.path.isfile(bundle):
        with open(bundle, "rb") as stream:
            files["ca.pem"] = stream.read()
        lines.append(f"export PIP_CERT={SETTINGS}/ca.pem")
    files["env"] = "".join(f"{line}\n" for line in lines).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(f"{Path(SETTINGS).name}/{name}")
            member.size, member.mode = len(data), 0o644
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def _follow(container: Container, progress: Progress, pip_log: PipLog) -> list[str]:
    """Report each of apt-get's phases once, as it reaches it, and pip's lines through
    `pip_log` once it starts; apt-get's last lines, for errors."""
    phase, tail, pending = "", [], b""
    for chunk in container.logs(stream=True, follow=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").rstrip()
            if pip_log.started:
                pip_log.line(line)
                continue
            if line == PIP_MARK:
                pip_log.started = True
                continue
            tail = [*tail[-(TAIL_LINES - 1) :], line]
            now = next((name for start, name in PHASES if line.startswith(start)), phase)
            if now != phase:
                phase = now
                progress(f"  apt-get: {phase} packages")
    if pending:
        line = pending.decode(errors="replace").rstrip()
        if pip_log.started:
            pip_log.line(line)
        else:
            tail.append(line)
    return tail


def _restored(config: dict, base: str, names: list[str], requirements: list[str]) -> list[str]:
    """Dockerfile lines that give the committed image its base's user, command and work dir
    (the build container ran as root with its own command), and labels naming its recipe."""
    labels = {"evolve.base": base, "evolve.packages": " ".join(names)}
    if requirements:
        labels["evolve.pip"] = json.dumps(requirements)
    return [
        f"USER {config.get('User') or 'root'}",
        f"CMD {json.dumps(config.get('Cmd') or [])}",
        f"WORKDIR {config.get('WorkingDir') or '/'}",
        "LABEL " + " ".join(f"{key}={json.dumps(value)}" for key, value in labels.items()),
    ]
