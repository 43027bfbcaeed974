"""Fetch the C corpus once into a user cache: the sources are too large to commit.

Everything comes from what the machines can reach: the sqlean-py source distribution on
PyPI (SQLite, its shell and the sqlean extensions), and Debian's zlib1g-dev and libpng-dev
packages (zlib's example programs, libpng's pngtest.c, their headers and static libraries
for linking the guard programs). Run `python -m evolve.evaluators.llvm_inline.corpus` to fetch it
by hand; the evaluator's `prepare` does the same when it is missing.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SQLEAN = "sqlean.py==3.50.4.5"
DEBS = ("zlib1g-dev", "libpng-dev")
LAYOUT = "v1"  # bump when the layout below changes, so old caches are not reused
READY = ".complete"


class CorpusUnavailable(RuntimeError):
    """The corpus is missing and could not be fetched; the message says how to fix it."""


def user_cache() -> Path:
    """Where evolve keeps what it fetches and builds once: ~/.cache/evolve, or evolve/ under
    EVOLVE_CACHE_DIR or XDG_CACHE_HOME."""
    base = os.environ.get("EVOLVE_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    return Path(base) / "evolve" if base else Path.home() / ".cache" / "evolve"


def cache_root() -> Path:
    return user_cache() / "llvm_inline" / LAYOUT


def ensure_corpus(root: Path | None = None) -> Path:
    """The corpus folder, fetched first if absent; safe when several workers race for it."""
    root = root or cache_root()
    if (root / READY).exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / READY).exists():
            _fetch(root)
    return root


def _run(argv: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    except FileNotFoundError:
        raise CorpusUnavailable(f"{what} needs `{argv[0]}`, which is not installed") from None
    if done.returncode != 0:
        raise CorpusUnavailable(f"{what} failed ({' '.join(argv)}):\n{done.stderr[-2000:]}")


def _fetch(root: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="evolve-corpus-") as tmp:
        scratch = Path(tmp)
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        _run(
            [*pip, "--dest", str(scratch), SQLEAN],
            scratch,
            "downloading the sqlean-py source distribution from PyPI",
        )
        _run(
            ["apt-get", "download", *DEBS],
            scratch,
            "downloading Debian packages (if apt cannot locate them, run `apt-get update`)",
        )
        unpacked = scratch / "debs"
        for deb in sorted(scratch.glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(unpacked)], scratch, f"unpacking {deb.name}")
        (sdist,) = scratch.glob("sqlean_py-*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(scratch / "sdist", filter="data")
        (sqlite,) = (scratch / "sdist").glob("*/sqlite")

        staged = scratch / "corpus"
        shutil.copytree(sqlite, staged / "sqlean")
        shutil.copytree(unpacked / "usr/share/doc/zlib1g-dev/examples", staged / "zlib")
        png = staged / "png"
        png.mkdir()
        for name in ("pngtest.c", "pngtest.png"):
            shutil.copy(unpacked / "usr/share/doc/libpng-dev/examples" / name, png / name)
        include = staged / "include"
        include.mkdir()
        for name in ("zlib.h", "zconf.h", "png.h", "pngconf.h", "pnglibconf.h"):
            shutil.copy(unpacked / "usr/include" / name, include / name)
        lib = staged / "lib"
        lib.mkdir()
        for name in ("libz.a", "libpng16.a"):
            (found,) = unpacked.glob(f"usr/lib/*/{name}")
            shutil.copy(found, lib / name)
        (staged / READY).write_text(f"{SQLEAN} {' '.join(DEBS)}\n")
        if root.exists():
            shutil.rmtree(root)
        shutil.move(staged, root)


if __name__ == "__main__":
    print(ensure_corpus())
