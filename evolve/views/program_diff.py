"""What changed between two candidates' programs, as a unified diff, file by file.

The plain form is meant for tools as much as for eyes: `evolve diff 3 7 | patch -p1` and
`git apply` take it as it is. So the candidate ids go after a tab on the `---`/`+++` lines,
the place a unified diff keeps a file's date, which both tools skip (after a space, git
would read them as part of the file name); a file only one side has is diffed against
/dev/null, which both read as added or removed; and a last line with no newline is marked
the way diff(1) marks it, lest the patch add one.
"""

from __future__ import annotations

import re
from difflib import unified_diff

from evolve.store import CandidateRecord, Store

NO_NEWLINE = "\\ No newline at end of file\n"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but tab and newline
BOLD, RED, GREEN, CYAN, RESET = "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[0m"


def compared(
    store: Store, first: int, second: int | None
) -> tuple[CandidateRecord, CandidateRecord]:
    """The two candidates to diff, the old side first: `first` and `second`, or without a
    second, `first`'s first parent and `first`. LookupError, saying why, when there is no
    such pair: an unknown id, or a seed, which has no parent."""
    if second is not None:
        return _candidate(store, first), _candidate(store, second)
    child = _candidate(store, first)
    if not child.parent_ids:
        raise LookupError(
            f"#{child.id} is the seed of run {child.run_name}: it has no parent to compare "
            "with; give a second id"
        )
    return _candidate(store, child.parent_ids[0]), child


def file_diffs(old: CandidateRecord, new: CandidateRecord) -> list[list[str]]:
    """Each changed file's diff lines, its two header lines first; empty when the programs
    are the same. Candidates of two runs name their runs too, lest a reader take the two
    programs for parent and child."""
    apart = old.run_name != new.run_name
    old_label = f"(#{old.id}, run {old.run_name})" if apart else f"(#{old.id})"
    new_label = f"(#{new.id}, run {new.run_name})" if apart else f"(#{new.id})"
    before_files, after_files = old.program.files, new.program.files
    diffs: list[list[str]] = []
    for path in sorted(before_files.keys() | after_files.keys()):
        before, after = before_files.get(path), after_files.get(path)
        if before == after:
            continue
        lines = unified_diff(
            _lines(before),
            _lines(after),
            fromfile="/dev/null" if before is None else f"a/{path}",
            tofile="/dev/null" if after is None else f"b/{path}",
            fromfiledate=old_label,
            tofiledate=new_label,
        )
        diffs.append([ended for line in lines for ended in _ended(line)])
    return diffs


def visible(diffs: list[list[str]]) -> list[list[str]]:
    """The diff with every control character but tab and newline written as `\\xNN`, for a
    terminal: a program's text may hold escape sequences, and a model's code must not be
    able to hide lines, retitle the window or write to the clipboard when it is reviewed."""
    return [[_CONTROL.sub(_escaped, line) for line in lines] for lines in diffs]


def _escaped(found: re.Match[str]) -> str:
    return f"\\x{ord(found.group()):02x}"


def plain(diffs: list[list[str]]) -> str:
    return "".join(line for lines in diffs for line in lines)


def painted(diffs: list[list[str]]) -> str:
    """For a terminal: headers bold, hunk headers cyan, additions green, deletions red.
    Headers are known by place, not by their first characters, which a removed line
    beginning with "--" shares."""
    out: list[str] = []
    for lines in diffs:
        out += [_paint(line, BOLD) for line in lines[:2]]
        out += [_paint(line, _colour(line)) for line in lines[2:]]
    return "".join(out)


def _colour(line: str) -> str | None:
    return {"@": CYAN, "+": GREEN, "-": RED}.get(line[:1])


def _paint(line: str, colour: str | None) -> str:
    if colour is None:
        return line
    text = line.removesuffix("\n")
    return f"{colour}{text}{RESET}\n"


def _candidate(store: Store, candidate_id: int) -> CandidateRecord:
    found = store.candidate(candidate_id)
    if found is None:
        raise LookupError(f"no candidate #{candidate_id} in {store.display_url}")
    return found


def _lines(text: str | None) -> list[str]:
    """Split at newlines only, as patch reads them: str.splitlines also splits at form feeds
    and lone carriage returns, which would put a false "No newline" mark mid-file."""
    if not text:
        return []
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1].removesuffix("\n")
    return lines if lines[-1] else lines[:-1]


def _ended(line: str) -> list[str]:
    return [line] if line.endswith("\n") else [line + "\n", NO_NEWLINE]
