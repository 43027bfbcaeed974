"""One line saying what a proposal changed, stored with it for the prompts that follow.

A model told "diff -> #41 scored 1.92: +3/-1 lines in kernel.c: `for (k = 0; k < n; k += 4)`"
knows what was already tried on its parent without reading the child's code.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from evolve.plugin.knobs import Knob, find_knobs, format_value
from evolve.plugin.program import Program, ProgramError

CLIP = 60  # characters of the quoted line
VALUE_CLIP = 24  # characters of a knob's value, as shown
NAMED_FILES = 3  # more changed files than this are counted, not named
NAMED_MOVES = 3  # more knob moves than this are counted, not named
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class _Hunk:
    removed: list[str]
    added: list[str]

    @property
    def size(self) -> int:
        return max(len(self.removed), len(self.added))

    @property
    def knobs_only(self) -> bool:
        """Every line it changes holds a knob: its knob moves say what it did."""
        return all("@knob" in line for line in (*self.removed, *self.added))


def summarize_change(parent: Program, child: Program) -> str:
    """`+3/-1 lines in kernel.c: ...`, naming what mattered most; `no change` when the
    files are equal.

    Knob moves come first (`LOOP_ORDER IJK→IKJ, TILE_I 512→256`), the most significant
    first: a choice switched, then the numbers that moved furthest across their range.
    Then the largest other hunk, quoted by its first added line that holds code (not a
    blank line or a lone brace), else its first removed one.
    """
    added = removed = 0
    changed: list[str] = []
    hunks: list[_Hunk] = []
    for path in [*child.files, *(p for p in parent.files if p not in child.files)]:
        old = parent.files.get(path, "").splitlines()
        new = child.files.get(path, "").splitlines()
        if old == new:
            continue
        changed.append(path)
        old, new = differing_middle(old, new)
        matcher = SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                hunks.append(_Hunk(old[i1:i2], new[j1:j2]))
                removed += i2 - i1
                added += j2 - j1
    if not changed:
        return "no change"
    where = ", ".join(changed) if len(changed) <= NAMED_FILES else f"{len(changed)} files"
    moves = _knob_moves(parent, child) if any(h.knobs_only for h in hunks) else []
    others = [h for h in hunks if not (moves and h.knobs_only)]
    said = [_moves_said(moves)] if moves else []
    if others:
        said.append(_quoted(max(others, key=lambda h: h.size)))  # the first of the largest
    what = "; ".join(part for part in said if part)
    return f"+{added}/-{removed} lines in {where}" + (f": {what}" if what else "")


def _quoted(hunk: _Hunk) -> str:
    if line := _code_line(hunk.added):
        return f"`{_clip(line, CLIP)}`"
    if line := _code_line(hunk.removed):
        return f"removed `{_clip(line, CLIP)}`"
    return ""


def _knob_moves(parent: Program, child: Program) -> list[tuple[float, str]]:
    """Each knob whose value differs between the two, as (how far it moved, `NAME OLD→NEW`),
    furthest first; none where either program's knobs do not parse or do not pair up."""
    try:
        before, after = find_knobs(parent), find_knobs(child)
    except ProgramError:
        return []
    if [_declared(k) for k in before] != [_declared(k) for k in after]:
        return []  # knobs added, removed or redeclared: the hunks say what changed
    moves = []
    for old, new in zip(before, after, strict=True):
        if old.value != new.value:
            name = _knob_name(child, new)
            shown = f"{_clip(format_value(old, old.value), VALUE_CLIP)}→"
            shown += _clip(format_value(new, new.value), VALUE_CLIP)
            moves.append((_distance(old, new), f"{name} {shown}"))
    return sorted(moves, key=lambda move: -move[0])


def _declared(knob: Knob) -> tuple[object, ...]:
    """What its annotation declares, wherever its line now is."""
    return (knob.file, knob.kind, knob.low, knob.high, knob.options, knob.log)


def _knob_name(program: Program, knob: Knob) -> str:
    """The name its line gives the knob (`TILE_I` in `#define TILE_I 64`, `cflags` in
    `// cflags: -O2`): the last identifier before its value; else where it is."""
    line = program.files[knob.file].splitlines()[knob.line]
    names = _IDENTIFIER.findall(line[: knob.start])
    return names[-1] if names else knob.label


def _distance(old: Knob, new: Knob) -> float:
    """How far a knob moved, as a share of its range: a choice switched moves all the way;
    knobs that move by factors (pow2, log ints, positive floats) are measured in octaves."""
    if old.kind == "choice":
        return 1.0
    low, high = old.low, old.high
    a, b = float(old.value), float(new.value)
    if (old.kind == "pow2" or old.log or old.kind == "float") and min(low, a, b) > 0:
        a, b, low, high = math.log2(a), math.log2(b), math.log2(low), math.log2(high)
    return abs(b - a) / (high - low) if high > low else 0.0


def _moves_said(moves: list[tuple[float, str]]) -> str:
    named = [said for _, said in moves[:NAMED_MOVES]]
    if len(moves) > NAMED_MOVES:
        named.append(f"{len(moves) - NAMED_MOVES} more knobs")
    return ", ".join(named)


def differing_middle(old: list[str], new: list[str]) -> tuple[list[str], list[str]]:
    """Both less the lines they begin and end with alike: the matcher then compares only
    what changed (one line, for a tuned knob), not the whole file, which was most of the
    cost of admitting a child in a run of fast proposals."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return old[head : len(old) - tail], new[head : len(new) - tail]


def _code_line(lines: list[str]) -> str:
    return next((line for line in lines if any(c.isalnum() for c in line)), "")


def _clip(line: str, limit: int) -> str:
    text = " ".join(line.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
