"""A change to a program in a few words, where it is small: how a prompt names the programs
the run holds one change from its parent (evolve/propose/neighbours.py), and an inspiration that
only sets a few knobs differently (evolve/mutators/prompt.py).

A line changed in place, `#define TILE_K 64  // @knob ...` into
`#define TILE_K 128  // @knob ...`, reads "`#define TILE_K` 64 -> 128": the words the two
lines share before the change, then what changed, and not the words they share after it.
A block of a few lines replaced by a different number of lines is quoted, clipped.
"""

from __future__ import annotations

from collections.abc import Sequence

from evolve.mutators.change_summary import differing_middle
from evolve.plugin.knobs import ANNOTATION
from evolve.plugin.program import Program

MAX_LINES = 3  # lines on either side of a replaced block that is still small
CHANGED_CLIP = 40  # characters of what changed, on either side
SHARED_CLIP = 32  # characters of the shared words before it, the nearest kept


def small_change(base: Program, other: Program) -> str | None:
    """How `other` differs from `base` where that is one small change to one file both have:
    set aside the lines the file begins and ends with alike, one line changed, or at most
    MAX_LINES lines replaced by a different number of lines. Two lines changed in place
    are two changes (two knobs set, say), not one. None otherwise, and where they are the
    same."""
    paths = dict.fromkeys([*base.files, *other.files])
    changed = [path for path in paths if base.files.get(path) != other.files.get(path)]
    if len(changed) != 1:
        return None
    path = changed[0]
    old, new = base.files.get(path), other.files.get(path)
    if old is None or new is None:
        return None
    removed, added = differing_middle(old.splitlines(), new.splitlines())
    if len(removed) == len(added) == 1:
        text = in_words(removed[0], added[0], clip=True)
    elif len(removed) != len(added) and max(len(removed), len(added)) <= MAX_LINES:
        text = f"{_quoted(removed)} -> {_quoted(added)}"
    else:
        return None
    return text if len(base.files) == 1 else f"{path}: {text}"


def in_words(old: str, new: str, *, clip: bool) -> str:
    """One line changed in place: the words before the change that both share, then what
    changed; `clip` cuts long changes short."""
    shared, gone, came = _split(old, new)
    if gone == came:
        return f"`{_clipped(gone, clip)}` respaced"
    gone, came = _clipped(gone, clip), _clipped(came, clip)
    if not shared:
        return f"{_quoted([gone] if gone else [], clip)} -> {_quoted([came] if came else [], clip)}"
    if clip and len(shared) > SHARED_CLIP:
        shared = "..." + shared[-SHARED_CLIP:]
    return f"`{shared}` {gone} -> {came}"


def knob_set(old: str, new: str) -> str | None:
    """A knob's line (evolve/plugin/knobs.py) changed in place, a few words of it, in words: the
    value set differently. None where the lines are not that."""
    if not (ANNOTATION.search(old) and ANNOTATION.search(new)):
        return None
    shared, gone, came = _split(old, new)
    if not shared or gone == came or max(len(gone), len(came)) > CHANGED_CLIP:
        return None
    return f"`{shared}` {gone} -> {came}"


def _split(old: str, new: str) -> tuple[str, str, str]:
    """The words two lines share before their change, and what each has there, whitespace
    collapsed; the words they share after it are left out. Where one side would be empty
    (a word added or removed), the shared word next to the change is named on both sides,
    so that neither reads as nothing. Lines alike but for spacing give ("", line, line)."""
    ours, theirs = old.split(), new.split()
    if ours == theirs:
        return "", " ".join(ours), " ".join(theirs)
    head = _shared(ours, theirs)
    tail = _shared(ours[head:][::-1], theirs[head:][::-1])
    if min(len(ours), len(theirs)) == head + tail:
        if head:
            head -= 1
        elif tail:
            tail -= 1
    gone = " ".join(ours[head : len(ours) - tail])
    came = " ".join(theirs[head : len(theirs) - tail])
    return " ".join(ours[:head]), gone, came


def _shared(one: Sequence[str], other: Sequence[str]) -> int:
    """How many words the two begin with alike."""
    count = 0
    while count < min(len(one), len(other)) and one[count] == other[count]:
        count += 1
    return count


def _quoted(lines: Sequence[str], clip: bool = True) -> str:
    if not lines:
        return "nothing"
    return f"`{_clipped(' / '.join(' '.join(line.split()) for line in lines), clip)}`"


def _clipped(text: str, clip: bool) -> str:
    if not clip or len(text) <= CHANGED_CLIP:
        return text
    return text[: CHANGED_CLIP - 3].rstrip() + "..."
