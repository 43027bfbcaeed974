"""The corpus's translation units, their splits and the guard programs that run them.

Splits: `fast` is a few small files (about a second) that every candidate meets first;
`train` is every file selection sees (it includes `fast`); `heldout` is reported, never
selected on; `large` (sqlite3.c and its shell, tens of seconds) joins `heldout` only when
a task asks for it. The sqlean extensions make up most of training because they compile
quickly and are real, varied C; sqlean-regexp is left out since it does not build on its own.

A guard links a unit into a program and runs it; its output under a candidate's decisions
must equal its output under the stock build at the task's opt_level. Guards cover every
program that has a natural test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SPLITS = ("fast", "train", "heldout", "large")

SQLEAN_HEADERS = ("sqlean/sqlite3ext.h", "sqlean/sqlite3.h")
ZLIB_HEADERS = ("include/zlib.h", "include/zconf.h")
PNG_HEADERS = (*ZLIB_HEADERS, "include/png.h", "include/pngconf.h", "include/pnglibconf.h")


@dataclass(frozen=True)
class Guard:
    """`link` are extra linker inputs (corpus paths or flags); `script` runs under sh."""

    link: tuple[str, ...]
    script: str  # the linked program is ./<unit name>
    inputs: tuple[str, ...] = ()  # corpus files the script reads
    texts: tuple[tuple[str, str], ...] = ()  # (path, content) written beside them


@dataclass(frozen=True)
class Unit:
    name: str
    source: str  # relative to the corpus root
    split: str
    flags: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # what else the compile reads: headers, folders (ending in /)
    guard: Guard | None = None

    def needed(self) -> tuple[str, ...]:
        """Corpus paths this unit's compile and guard read, folders included as `dir/`."""
        guard = () if self.guard is None else self.guard.inputs
        links = () if self.guard is None else tuple(p for p in self.guard.link if "/" in p)
        return (self.source, *self.files, *guard, *links)


def _sqlean(name: str, split: str) -> Unit:
    return Unit(
        f"sqlean-{name}",
        f"sqlean/sqlean-{name}.c",
        split,
        ("-Isqlean",),
        (*SQLEAN_HEADERS, f"sqlean/{name}/"),
    )


def _zlib(name: str, split: str, guard: Guard | None = None, extra: tuple[str, ...] = ()) -> Unit:
    return Unit(
        f"zlib-{name}", f"zlib/{name}.c", split, ("-Iinclude",), (*ZLIB_HEADERS, *extra), guard
    )


LIBZ = ("lib/libz.a",)

# sqlean's sqlite3.c names the extensions' entry point in core_init, which nothing calls
# unless SQLITE_EXTRA_INIT asks for it; the shell is linked without the extensions, so this
# stands in for it.
NO_EXTENSIONS = """\
struct sqlite3;
struct sqlite3_api_routines;
int sqlite3_sqlean_init(struct sqlite3 *db, char **error, const struct sqlite3_api_routines *api) {
  (void)db; (void)error; (void)api;
  return 0;
}
"""

# What the sqlite shell guard runs: enough SQL to exercise the parser, planner and printf.
SHELL_SCRIPT = """\
create table t(a integer primary key, b text, c real);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 500)
insert into t select i, printf('row-%05d', i * 7919 % 1000), i / 3.0 from n;
create index tb on t(b);
select count(*), sum(a), min(b), max(b), round(avg(c), 6) from t;
select b, count(*) from t group by substr(b, 1, 6) order by 2 desc, 1 limit 5;
select group_concat(a, ',') from (select a from t where b like 'row-00%' order by a);
select printf('%.3e|%08x|%-6s|', c, a, b) from t where a % 97 = 0;
"""

UNITS: tuple[Unit, ...] = (
    _sqlean("define", "fast"),
    _sqlean("unicode", "fast"),
    _sqlean("vsv", "fast"),
    _zlib(
        "minigzip",
        "fast",
        Guard(
            LIBZ,
            "./zlib-minigzip < zlib/example.c | ./zlib-minigzip -d | cksum"
            " && ./zlib-minigzip -9 < zlib/gun.c | cksum",
            ("zlib/example.c", "zlib/gun.c"),
        ),
    ),
    *(_sqlean(name, "train") for name in ("crypto", "fileio", "fuzzy", "ipaddr", "math")),
    *(_sqlean(name, "train") for name in ("stats", "text", "time", "uuid")),
    _zlib("example", "train", Guard(LIBZ, "./zlib-example test.gz")),
    Unit(
        "png-pngtest",
        "png/pngtest.c",
        "train",
        ("-Iinclude",),
        PNG_HEADERS,
        Guard(
            ("lib/libpng16.a", *LIBZ, "-lm"),
            "./png-pngtest png/pngtest.png out.png && cksum out.png",
            ("png/pngtest.png",),
        ),
    ),
    _zlib(
        "zpipe",
        "heldout",
        Guard(LIBZ, "./zlib-zpipe < zlib/gun.c | ./zlib-zpipe -d | cksum", ("zlib/gun.c",)),
    ),
    *(_zlib(name, "heldout") for name in ("gun", "gzappend", "gzjoin", "fitblk", "enough")),
    _zlib("gzlog", "heldout", extra=("zlib/gzlog.h",)),
    _zlib("zran", "heldout", extra=("zlib/zran.h",)),
    _zlib("gznorm", "heldout"),
    Unit("sqlite3", "sqlean/sqlite3.c", "large", ("-Isqlean",), (*SQLEAN_HEADERS, "sqlean/init.h")),
    Unit(
        "sqlite-shell",
        "sqlean/shell.c",
        "large",
        ("-Isqlean",),
        SQLEAN_HEADERS,
        Guard(
            ("objects/sqlite3.o", "no_extensions.c", "-lm"),
            "./sqlite-shell :memory: < script.sql",
            texts=(("script.sql", SHELL_SCRIPT), ("no_extensions.c", NO_EXTENSIONS)),
        ),
    ),
)


def units_in(splits: tuple[str, ...]) -> tuple[Unit, ...]:
    """The units of `splits`; `train` includes `fast`, and the order is the corpus's."""
    wanted = set(splits) | ({"fast"} if "train" in splits else set())
    return tuple(unit for unit in UNITS if unit.split in wanted)


def gather(root: Path, units: tuple[Unit, ...]) -> dict[str, bytes]:
    """The corpus files the units need, keyed by their path in the sandbox's work dir."""
    files: dict[str, bytes] = {}
    for unit in units:
        for needed in unit.needed():
            if needed.startswith("objects/"):
                continue  # made earlier in the same run
            path = root / needed
            if needed.endswith("/"):
                for found in sorted(path.rglob("*")) if path.is_dir() else ():
                    if found.is_file():
                        files[str(found.relative_to(root))] = found.read_bytes()
            elif path.is_file():
                files[needed] = path.read_bytes()
            else:
                raise FileNotFoundError(f"the corpus at {root} lacks {needed} (for {unit.name})")
        for path, text in () if unit.guard is None else unit.guard.texts:
            files[path] = text.encode()
    return files
