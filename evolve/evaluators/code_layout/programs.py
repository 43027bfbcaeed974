"""The real programs whose layout is evolved, and where their sources come from.

Each recipe names its source files, compile flags, link libraries and how a workload runs.
Sources come from what the machines can reach: sqlite3.c and its shell from the sqlean-py
sdist (the llvm_inline corpus, fetched once into the user cache), and Lua 5.4 from the
lupa sdist on PyPI, which bundles Lua's source (checked against its pinned sha256).

The builds are made deterministic where the programs are not: Lua seeds its string hashes
from the time and from addresses, one of them a function's (so the layout itself would
change every table's hashing), and table.sort's pivot from the clock; `luai_makeseed` and
`l_randomizePivot` are fixed at compile time instead.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evolve.evaluators.code_layout.artifacts import cache_root
from evolve.evaluators.llvm_inline.corpus import CorpusUnavailable, ensure_corpus
from evolve.evaluators.llvm_inline.units import NO_EXTENSIONS

LUPA_URL = (
    "https://files.pythonhosted.org/packages/c3/a6/"
    "0f869fbb07c393f15473b1eefefb7b5bec162fb7481803d040ed4dc46002/lupa-2.8.tar.gz"
)
LUPA_SHA256 = "d8022641b9ec8ecf2c5ecbe9f47e5a70e0b87c4b5ae921b92cb02a638e0acd08"
READY = ".complete"


@dataclass(frozen=True)
class Recipe:
    """How to build one program and run one workload of it. `sources` and `headers` are
    paths under the root `fetch` returns; `generated` adds sources written here; `argv`
    holds `{program}` and `{workload}` placeholders."""

    name: str
    sources: tuple[str, ...]
    headers: tuple[str, ...]
    cflags: tuple[str, ...]
    libs: tuple[str, ...]
    argv: tuple[str, ...]
    suffix: str
    fetch: Callable[[], Path]
    generated: dict[str, bytes] = field(default_factory=dict)

    def files(self) -> dict[str, bytes]:
        """Every source and header, read from the fetched root, plus the generated ones."""
        root = self.fetch()
        shipped = {path: (root / path).read_bytes() for path in (*self.sources, *self.headers)}
        shipped.update(self.generated)
        return shipped

    def compiled(self) -> tuple[str, ...]:
        return (*self.sources, *self.generated)


def _sqlite_root() -> Path:
    return ensure_corpus() / "sqlean"


def _lua_root() -> Path:
    """Lua 5.4's source folder from the lupa sdist, fetched and unpacked once."""
    root = cache_root() / "lua54"
    if (root / READY).exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / "lua54.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / READY).exists():
            _fetch_lua(root)
    return root


def _fetch_lua(root: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="evolve-lua-") as tmp:
        archive = Path(tmp) / "lupa.tar.gz"
        try:
            with urllib.request.urlopen(LUPA_URL, timeout=120) as response:
                archive.write_bytes(response.read())
        except OSError as exc:
            raise CorpusUnavailable(
                f"downloading Lua's source ({LUPA_URL}) failed: {exc}"
            ) from None
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != LUPA_SHA256:
            raise CorpusUnavailable(f"{LUPA_URL} has sha256 {digest}, expected {LUPA_SHA256}")
        with tarfile.open(archive) as sdist:
            members = [m for m in sdist.getmembers() if "/third-party/lua54/" in m.name]
            sdist.extractall(Path(tmp) / "x", members=members, filter="data")
        (found,) = (Path(tmp) / "x").glob("*/third-party/lua54")
        (found / READY).write_text(f"{LUPA_URL}\n")
        if root.exists():
            shutil.rmtree(root)
        shutil.move(found, root)


LUA_SOURCES = (
    "lapi.c", "lcode.c", "lctype.c", "ldebug.c", "ldo.c", "ldump.c", "lfunc.c", "lgc.c",
    "llex.c", "lmem.c", "lobject.c", "lopcodes.c", "lparser.c", "lstate.c", "lstring.c",
    "ltable.c", "ltm.c", "lundump.c", "lvm.c", "lzio.c", "lauxlib.c", "lbaselib.c",
    "lcorolib.c", "ldblib.c", "liolib.c", "lmathlib.c", "loadlib.c", "loslib.c",
    "lstrlib.c", "ltablib.c", "lutf8lib.c", "linit.c", "lua.c",
)  # fmt: skip
LUA_HEADERS = (
    "lapi.h", "lauxlib.h", "lcode.h", "lctype.h", "ldebug.h", "ldo.h", "lfunc.h", "lgc.h",
    "ljumptab.h", "llex.h", "llimits.h", "lmem.h", "lobject.h", "lopcodes.h", "lopnames.h",
    "lparser.h", "lprefix.h", "lstate.h", "lstring.h", "ltable.h", "ltm.h", "lua.h",
    "luaconf.h", "lualib.h", "lundump.h", "lvm.h", "lzio.h",
)  # fmt: skip

RECIPES = {
    "sqlite": Recipe(
        name="sqlite",
        sources=("sqlite3.c", "shell.c"),
        headers=("sqlite3.h", "sqlite3ext.h", "init.h"),
        cflags=("-I.",),
        libs=("-lm",),
        argv=("{program}", ":memory:", ".read {workload}"),
        suffix=".sql",
        fetch=_sqlite_root,
        generated={"no_extensions.c": NO_EXTENSIONS.encode()},  # llvm_inline says why
    ),
    "lua": Recipe(
        name="lua",
        sources=LUA_SOURCES,
        headers=LUA_HEADERS,
        cflags=(
            "-std=gnu99",
            "-DLUA_USE_LINUX",
            "-Dluai_makeseed(L)=0x5eedu",
            "-Dl_randomizePivot()=0x5eedu",
        ),
        libs=("-lm",),
        argv=("{program}", "{workload}"),
        suffix=".lua",
        fetch=_lua_root,
    ),
}
