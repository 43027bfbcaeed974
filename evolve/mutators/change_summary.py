"""One line saying what a proposal changed, stored with it for the prompts that follow.

A model told "diff -> #41 scored 1.92: +3/-1 lines in kernel.c: `for (k = 0; k < n; k += 4)`"
knows what was already tried on its parent without reading the child's code.
"""

from __future__ import annotations

from difflib import SequenceMatcher

from evolve.program import Program

CLIP = 60  # characters of the quoted line
NAMED_FILES = 3  # more changed files than this are counted, not named


def summarize_change(parent: Program, child: Program) -> str:
    """`+3/-1 lines in kernel.c: `first added line``; `no change` when the files are equal.

    The quoted line is the first added one that holds code (not a blank line or a lone
    brace), else the first removed one, so the summary says what the change did.
    """
    added = removed = 0
    changed: list[str] = []
    first_added = first_removed = ""
    for path in [*child.files, *(p for p in parent.files if p not in child.files)]:
        old = parent.files.get(path, "").splitlines()
        new = child.files.get(path, "").splitlines()
        if old == new:
            continue
        changed.append(path)
        old, new = differing_middle(old, new)
        matcher = SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag in ("replace", "delete"):
                removed += i2 - i1
                first_removed = first_removed or _code_line(old[i1:i2])
            if tag in ("replace", "insert"):
                added += j2 - j1
                first_added = first_added or _code_line(new[j1:j2])
    if not changed:
        return "no change"
    where = ", ".join(changed) if len(changed) <= NAMED_FILES else f"{len(changed)} files"
    if first_added:
        what = f": `{_clip(first_added)}`"
    elif first_removed:
        what = f": removed `{_clip(first_removed)}`"
    else:
        what = ""
    return f"+{added}/-{removed} lines in {where}{what}"


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


def _clip(line: str) -> str:
    text = " ".join(line.split())
    return text if len(text) <= CLIP else text[: CLIP - 3] + "..."
