"""Build the sandbox image without a registry: debootstrap a Debian rootfs and `docker import` it.

The tag carries a hash of the recipe (suite, packages, users, image settings), so a changed
recipe builds a new image and an unchanged one is never rebuilt. The Dockerfile next to this
file makes the same image for hosts that can pull `debian:bookworm-slim`.

Run it with `python -m evolve.sandboxes.images` (as root, after `apt-get install debootstrap`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

REPOSITORY = "evolve-sandbox"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES_FILE = Path(__file__).with_name("packages.txt")
JOB_USER = (1000, "sandbox", "/work")  # runs the candidates
KEEPER_USER = (1001, "keeper", "/nonexistent")  # owns the keep-alive process, out of jobs' reach
CHANGES = ("WORKDIR /work", "USER 1001", 'CMD ["sleep", "infinity"]')
PHASES = {  # debootstrap's per-package verbs, reported once per phase
    "Retrieving": "downloading",
    "Validating": "downloading",
    "Extracting": "extracting",
    "Unpacking": "unpacking",
    "Configuring": "configuring",
}
IMPORT_TIMEOUT_S = 1800  # uploading a few GB of rootfs outlasts the SDK's default minute

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ImageStatus:
    tag: str
    present: bool
    size_bytes: int | None = None


def packages() -> list[str]:
    return PACKAGES_FILE.read_text().split()


def image_tag() -> str:
    """The tag of the image this recipe makes: edit the recipe and the tag changes with it."""
    recipe = json.dumps([SUITE, packages(), JOB_USER, KEEPER_USER, CHANGES])
    return f"{REPOSITORY}:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def image_status(client: docker.DockerClient | None = None) -> ImageStatus:
    tag = image_tag()
    client = client or docker.from_env()
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return ImageStatus(tag, present=False)
    return ImageStatus(tag, present=True, size_bytes=image.attrs.get("Size"))


def build_image(force: bool = False, progress: Progress = print) -> str:
    """The tag of the sandbox image, built first unless an image with that tag exists."""
    client = docker.from_env(timeout=IMPORT_TIMEOUT_S)
    tag = image_tag()
    if not force and image_status(client).present:
        progress(f"{tag} is present; not rebuilding (force=True rebuilds)")
        return tag
    _require_build_tools()
    previous = {image.id for image in client.images.list(name=REPOSITORY)}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="evolve-image-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _debootstrap(rootfs, progress)
        _add_users(rootfs)
        _trim(rootfs)
        tarball = Path(tmp) / "rootfs.tar"
        progress("packing the rootfs")
        subprocess.run(
            ["tar", "--numeric-owner", "--exclude=./dev/*", "--exclude=./proc/*",
             "--exclude=./sys/*", "-C", rootfs, "-cf", tarball, "."],
            check=True,
        )  # fmt: skip
        progress(f"importing {tarball.stat().st_size / 1e9:.2f} GB into docker as {tag}")
        repository, version = tag.split(":")
        client.api.import_image(
            src=str(tarball),
            repository=repository,
            tag=version,
            changes=[*CHANGES, f"LABEL evolve.recipe={version}"],
        )
    built = client.images.get(tag)
    size = built.attrs["Size"] / 1e9
    progress(f"built {tag} ({size:.2f} GB) in {time.monotonic() - started:.0f} s")
    for image_id in previous - {built.id}:  # older recipes, or this tag before --force
        with contextlib.suppress(docker.errors.APIError):  # still used by a container: keep it
            client.images.remove(image_id)
            progress(f"removed the superseded image {image_id[:19]}")
    return tag


def _require_build_tools() -> None:
    if os.geteuid() != 0:
        raise RuntimeError("building the sandbox image needs root (debootstrap, chroot ownership)")
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is missing: apt-get install -y debootstrap")


def _debootstrap(rootfs: Path, progress: Progress) -> None:
    """Run debootstrap, reporting each phase (downloading, unpacking, ...) once, not per package."""
    argv = ["debootstrap", "--variant=minbase", f"--include={','.join(packages())}"]
    progress(f"debootstrap {SUITE} with {len(packages())} packages from {MIRROR}")
    with subprocess.Popen(
        [*argv, SUITE, str(rootfs), MIRROR],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        if proc.stdout is None:
            raise RuntimeError("debootstrap's stdout is not a pipe despite stdout=PIPE")
        phase, tail = "resolving", []
        for line in proc.stdout:
            tail = [*tail[-19:], line.rstrip()]
            words = line.split()
            now = PHASES.get(words[1], phase) if len(words) > 1 and words[0] == "I:" else phase
            if now != phase:
                phase = now
                progress(f"  debootstrap: {phase} packages")
    if proc.returncode != 0:
        raise RuntimeError(f"debootstrap failed ({proc.returncode}):\n" + "\n".join(tail))


def _add_users(rootfs: Path) -> None:
    """Write the two accounts directly: no chroot, no useradd, the same result every time."""
    etc = rootfs / "etc"
    with (etc / "passwd").open("a") as passwd, (etc / "group").open("a") as group:
        for uid, name, home in (JOB_USER, KEEPER_USER):
            passwd.write(f"{name}:x:{uid}:{uid}::{home}:/bin/sh\n")
            group.write(f"{name}:x:{uid}:\n")
    (rootfs / "work").mkdir(exist_ok=True)


def _trim(rootfs: Path) -> None:
    """Drop the downloaded .debs and package lists: the image never runs apt."""
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / cache).glob("*"):
            if entry.is_file():
                entry.unlink()
