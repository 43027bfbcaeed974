"""Sanitizer reports cut down to what a model can act on.

A full AddressSanitizer or MemorySanitizer report is mostly shadow-memory dumps and frames
in the runtime; the model needs the error, where in its own file, and the summary.
"""

from __future__ import annotations

import re

REPORT_CHARS = 1500
LINE_CHARS = 300
CANDIDATE_FRAMES = 3  # per section of a report
CONTEXT_FRAMES = 2  # of the error itself, when none of its frames is the candidate's
TRIMMED = "[... report trimmed]"

PID_PREFIX = re.compile(r"^==\d+==")
FRAME = re.compile(r"^\s*#(?P<index>\d+) 0x[0-9a-f]+ in (?P<where>.*)$")
NOTEWORTHY = re.compile(
    r"Sanitizer: |runtime error: |^(?:READ|WRITE) of size |is located |^Uninitialized bytes "
    r"|^The signal is caused |^Hint: "
)
CANDIDATE_PATH = re.compile(r"\S*\bcandidate/")
OTHER_PATH = re.compile(r"(?<![^\s(])/\S*/(?=[^/\s]+:\d)")
REGISTERS = re.compile(r"\s*(?:at |\()pc 0x[0-9a-f]+ bp 0x[0-9a-f]+ sp 0x[0-9a-f]+(?: T\d+\))?")


def trim_report(stderr: bytes, limit: int = REPORT_CHARS) -> str | None:
    """The lines of a sanitizer report that a model can act on, at most `limit` characters;
    None when stderr holds no report.

    Kept: what went wrong (the ERROR or WARNING line, a `runtime error:` line, the access,
    where the address lies, the SUMMARY), each section's first frames in the candidate's
    file with their `file:line`, and the error's own first frames when none is the
    candidate's. Addresses, registers and the work dir are dropped, and a section repeated
    (MSan tells every store of an uninitialised value) appears once.
    """
    blocks: list[str] = []
    summary = ""
    for header, frames in _sections(stderr.decode(errors="replace")):
        own = [frame for frame in frames if "candidate/" in frame][:CANDIDATE_FRAMES]
        if not own and NOTEWORTHY.search(header) is None:
            continue
        block = "\n".join(_clean(line) for line in [header, *(own or frames[:CONTEXT_FRAMES])])
        if header.startswith("SUMMARY:"):
            summary = block
        elif block not in blocks:
            blocks.append(block)
    if not blocks and not summary:
        return None
    room = limit - len(summary) - len(TRIMMED) - 2
    kept: list[str] = []
    for block in blocks:
        if sum(len(part) + 1 for part in kept) + len(block) > room:
            kept.append(TRIMMED)
            break
        kept.append(block)
    return "\n".join(part for part in [*kept, summary] if part)[:limit]


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """The report as (line, the stack frames under it), without the `==PID==` prefixes."""
    sections: list[tuple[str, list[str]]] = []
    for raw in text.splitlines():
        line = PID_PREFIX.sub("", raw).strip()
        frame = FRAME.match(line)
        if frame is not None:
            if sections:
                sections[-1][1].append(f"    #{frame['index']} {frame['where']}")
        elif line:
            sections.append((line, []))
    return sections


def _clean(line: str) -> str:
    line = OTHER_PATH.sub("", CANDIDATE_PATH.sub("", REGISTERS.sub("", line)))
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."
