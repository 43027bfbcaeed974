"""Turning a model's reply into a child program.

Two reply formats exist. A *diff* is one or more SEARCH/REPLACE blocks:

    kernel.c                      <- optional: the file this block edits
    <<<<<<< SEARCH
    lines copied from the parent
    =======
    the lines that replace them
    >>>>>>> REPLACE

A *rewrite* is one fenced code block holding the whole new content of an EVOLVE-BLOCK.
Either way the child is built through `Program.replace`, so the rule that only text
inside EVOLVE-BLOCKs may change is enforced in one place. Every failure is an
`EditError` whose message is written for the model: it is sent back for one repair. Its
`outcome` is what the proposals ledger records if the repair fails too: "outside_block"
for an edit that touched text outside the blocks, else "unparseable_after_repair".
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass

from evolve.mutators.base import MutationError
from evolve.plugin.program import END, START, Program, ProgramError, split_segments
from evolve.plugin.proposal_outcomes import Outcome

SEARCH_MARK = re.compile(r"^\s*<{5,}\s*SEARCH\s*$")
DIVIDER_MARK = re.compile(r"^\s*={5,}\s*$")
REPLACE_MARK = re.compile(r"^\s*>{5,}\s*REPLACE\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
# A line naming a file: `path: k.c`, `k.c`, `### src/k.c`, `**k.c**` or `` `k.c` ``.
PATH_LINE = re.compile(
    r"^[#*`\s]*(?:(?:path|file)\s*:\s*)?[`*]*(?P<path>[\w./-]*[\w-]\.\w+)[`*:\s]*$"
)
FENCED_CODE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(?P<code>.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
SHOWN_LINES = 4  # lines of a failing block quoted back in an error
WORD = re.compile(r"\w+")
CLOSEST_CANDIDATES = 8  # windows that difflib ranks when looking for the closest lines


class EditError(MutationError):
    """The reply could not be applied; the message says why, for the model to act on."""

    def __init__(self, message: str, outcome: Outcome = "unparseable_after_repair") -> None:
        super().__init__(message, outcome=outcome)


@dataclass(frozen=True)
class Edit:
    """One SEARCH/REPLACE block; `path` is None when the reply named no file."""

    search: str
    replace: str
    path: str | None = None

    def head(self) -> str:
        """The block's first lines, to say which block an error is about."""
        lines = self.search.splitlines()[:SHOWN_LINES] or ["(empty SEARCH)"]
        more = len(self.search.splitlines()) - SHOWN_LINES
        tail = [f"... ({more} more lines)"] if more > 0 else []
        return "\n".join(f"    {line}" for line in [*lines, *tail])


def parse_diff(text: str) -> list[Edit]:
    """The SEARCH/REPLACE blocks in a reply, in order.

    Prose and code fences around the blocks are ignored. The last non-blank, non-fence
    line before a block names its file when it looks like a path (`path: k.c`, `k.c`,
    `### k.c`); otherwise the block is for the main file.
    """
    lines = text.splitlines(keepends=True)
    edits: list[Edit] = []
    i = 0
    while i < len(lines):
        if not SEARCH_MARK.match(lines[i]):
            i += 1
            continue
        path = _path_before(lines, i)
        divider = _next(lines, i + 1, DIVIDER_MARK)
        end = _next(lines, divider + 1, REPLACE_MARK) if divider >= 0 else -1
        if end < 0:
            raise EditError(
                f"SEARCH/REPLACE block {len(edits) + 1} is not closed: each block needs a "
                "'=======' line and then a '>>>>>>> REPLACE' line."
            )
        search = "".join(lines[i + 1 : divider])
        replace = "".join(lines[divider + 1 : end])
        edits.append(Edit(search, replace, path))
        i = end + 1
    if not edits:
        raise EditError(
            "The reply had no SEARCH/REPLACE block, so nothing was changed. Answer with "
            "one or more blocks of the form\n<<<<<<< SEARCH\nlines copied exactly from the "
            "current program\n=======\nnew lines\n>>>>>>> REPLACE"
        )
    return edits


def _next(lines: list[str], start: int, mark: re.Pattern[str]) -> int:
    """Index of the first line from `start` matching `mark`, stopping at the next block."""
    for j in range(start, len(lines)):
        if SEARCH_MARK.match(lines[j]):
            return -1
        if mark.match(lines[j]):
            return j
    return -1


def _path_before(lines: list[str], index: int) -> str | None:
    for line in reversed(lines[:index]):
        if not line.strip() or FENCE.match(line):
            continue
        named = PATH_LINE.match(line.strip())
        return named["path"] if named else None
    return None


def _end_line(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def apply_diff(program: Program, edits: list[Edit]) -> Program:
    """The child made by applying `edits` to `program`, in order.

    Each SEARCH must match exactly one run of whole lines in its file. An exact match is
    tried first; failing that, a whitespace-tolerant one that ignores trailing spaces and
    indentation differences, in which case the replacement is re-indented by the same
    shift. Blocks that match nowhere or in several places are all reported in one
    EditError, with the parent lines closest to each, so a single repair can fix them.
    """
    files = dict(program.files)
    problems: list[str] = []
    for number, edit in enumerate(edits, start=1):
        try:
            path = _target(program, edit)
            files[path] = _apply_one(files[path], edit, path)
        except EditError as error:
            problems.append(f"Block {number}:\n{edit.head()}\n{error}")
    if problems:
        raise EditError(
            f"{len(problems)} of {len(edits)} SEARCH/REPLACE blocks could not be applied.\n\n"
            + "\n\n".join(problems)
        )
    if files == dict(program.files):
        raise EditError("no change: the SEARCH/REPLACE blocks leave the program identical.")
    return _child(program, files)


def _target(program: Program, edit: Edit) -> str:
    """The file an edit is for: the one it names, else the main file.

    A named path that is not in the program is matched by its base name, and is ignored
    when the program has a single file (the model merely named it differently).
    """
    if edit.path is None or edit.path in program.files:
        return edit.path or program.main_file
    same_name = [p for p in program.files if p.rsplit("/", 1)[-1] == edit.path.rsplit("/", 1)[-1]]
    if len(same_name) == 1:
        return same_name[0]
    if len(program.files) == 1:
        return program.main_file
    raise EditError(
        f"the file {edit.path!r} is not part of the program; its files are "
        + ", ".join(program.files)
    )


def _apply_one(text: str, edit: Edit, path: str) -> str:
    lines = text.splitlines(keepends=True)
    search = edit.search.splitlines()
    if not search:
        raise EditError("the SEARCH section is empty; copy the lines to be replaced into it.")
    replace = _end_line(edit.replace).splitlines(keepends=True)
    for normal in (_exact, _loose):
        hits = _find(lines, search, normal)
        if len(hits) > 1:
            where = ", ".join(str(h + 1) for h in hits)
            raise EditError(
                f"it is ambiguous: the SEARCH text matches {len(hits)} places in {path} "
                f"(starting at lines {where}). Add neighbouring lines so it matches only one."
            )
        if hits:
            start = hits[0]
            if normal is _loose:
                replace = _reindent(replace, search, lines[start : start + len(search)])
            return "".join([*lines[:start], *replace, *lines[start + len(search) :]])
    raise EditError(
        f"not found: the SEARCH text does not match any lines of {path}. It must copy the "
        f"current program's lines exactly.\n{_closest(lines, search, path)}"
    )


def _exact(line: str) -> str:
    return line.rstrip("\r\n")


def _loose(line: str) -> str:
    return line.strip()


def _find(lines: list[str], search: list[str], normal: Callable[[str], str]) -> list[int]:
    key = [normal(s) for s in search]
    have = [normal(line) for line in lines]
    return [i for i in range(len(have) - len(key) + 1) if have[i : i + len(key)] == key]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindent(replace: list[str], search: list[str], found: list[str]) -> list[str]:
    """Shift the replacement as the parent's lines are shifted from SEARCH.

    Only a shift that is the same on every line (one prefix added, or one removed) is
    carried over; anything else leaves the replacement as the model wrote it.
    """
    pairs = {(_indent(s), _indent(f)) for s, f in zip(search, found, strict=True) if s.strip()}
    if all(f.endswith(s) for s, f in pairs):
        added = {f[: len(f) - len(s)] for s, f in pairs}
        if len(added) == 1:
            prefix = added.pop()
            return [prefix + line if line.strip() else line for line in replace]
    if all(s.endswith(f) for s, f in pairs):
        removed = {s[: len(s) - len(f)] for s, f in pairs}
        if len(removed) == 1:
            extra = removed.pop()
            return [line.removeprefix(extra) for line in replace]
    return replace


def _closest(lines: list[str], search: list[str], path: str) -> str:
    """The run of parent lines most similar to SEARCH, numbered, for the model to copy.

    difflib's ratio on every window is quadratic in the window and too slow for long
    files, so a cheap word-overlap score picks a few windows for difflib to rank.
    """
    if not lines:
        return f"{path} is empty."
    size = min(len(search), len(lines))
    ours = [frozenset(WORD.findall(line)) for line in lines]
    theirs = [frozenset(WORD.findall(line)) for line in search]

    def overlap(start: int) -> float:
        pairs = zip(ours[start : start + size], theirs, strict=False)
        return sum(len(a & b) / len(a | b) if a | b else 1.0 for a, b in pairs)

    def similarity(start: int) -> float:
        window = "\n".join(line.strip() for line in lines[start : start + size])
        wanted = "\n".join(line.strip() for line in search)
        return difflib.SequenceMatcher(None, window, wanted, autojunk=False).ratio()

    starts = sorted(range(len(lines) - size + 1), key=overlap, reverse=True)
    best = max(starts[:CLOSEST_CANDIDATES], key=similarity)
    shown = "".join(
        f"    {best + k + 1:>4} | {line.rstrip()}\n"
        for k, line in enumerate(lines[best : best + size])
    )
    return f"The closest lines in {path} (line numbers are not part of the text):\n{shown}".rstrip()


def apply_rewrite(program: Program, text: str) -> Program:
    """The child whose first EVOLVE-BLOCK holds the reply's one fenced code block.

    The block rewritten is the first one of the first file that has one (the main file in
    practice); a program with several blocks keeps the others as they are. When the code
    contains the marker lines themselves (the model echoed them, or the whole file), only
    what lies between them is used.
    """
    blocks = [m["code"] for m in FENCED_CODE.finditer(text)]
    if len(blocks) != 1:
        count = "no fenced code block" if not blocks else f"{len(blocks)} fenced code blocks"
        raise EditError(
            f"The reply had {count}. Answer with exactly one fenced code block (```) holding "
            "the whole new content of the EVOLVE-BLOCK."
        )
    body = _between_markers(blocks[0])
    path = rewrite_target(program)
    segments = split_segments(path, program.files[path])
    first = next(k for k, s in enumerate(segments) if s.mutable)
    new_text = "".join(body if k == first else "".join(s.lines) for k, s in enumerate(segments))
    if new_text == program.files[path]:
        raise EditError("no change: the rewritten block is identical to the current one.")
    return _child(program, {**program.files, path: new_text})


def rewrite_target(program: Program) -> str:
    """The file whose first EVOLVE-BLOCK a rewrite replaces: the first file with a block."""
    return next(p for p, t in program.files.items() if len(split_segments(p, t)) > 1)


def _between_markers(code: str) -> str:
    lines = code.splitlines(keepends=True)
    start = next((k for k, line in enumerate(lines) if START.match(line)), -1)
    end = next((k for k, line in enumerate(lines) if k > start and END.match(line)), len(lines))
    return "".join(lines[start + 1 : end])


def _child(program: Program, files: dict[str, str]) -> Program:
    try:
        return program.replace(files)
    except ProgramError as error:
        raise EditError(
            "Only text inside the EVOLVE-BLOCK (between the EVOLVE-BLOCK-START and "
            "EVOLVE-BLOCK-END lines) may change, and the marker lines must stay as they "
            f"are. {error}",
            outcome="outside_block",
        ) from None
