"""The part of a task's notes that a topic asks for, for the agent's `read_notes` tool.

Notes are split by their markdown headings, and each section again into its paragraphs and
top-level list items: a knowledge file is often one heading over a list of points, and the
agent asking about cache blocking needs that point, not the file. A topic that names a
heading gets that section; any other gets the few parts that share the most words with it,
each under its heading so the agent knows where it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MOST_PARTS = 2  # parts returned for a topic that names no heading
HEADING = re.compile(r"^(#{1,6}) +(.*)$")
ITEM = re.compile(r"^(?:[-*+]|\d+[.)]) ")
WORD = re.compile(r"[a-z0-9_]{3,}")


@dataclass(frozen=True)
class Section:
    heading: str  # the heading line, "" for text before the first heading
    body: str

    @property
    def title(self) -> str:
        return HEADING.sub(r"\2", self.heading).strip()

    def text(self) -> str:
        return "\n".join(filter(None, (self.heading, self.body.strip())))


def find(notes: str, topic: str) -> str:
    """What the notes say about `topic`: the section it names, else the parts sharing the
    most words with it; else, the notes' headings, so the agent can ask again."""
    sections = split_sections(notes)
    wanted = _words(topic)
    named = [s for s in sections if s.title and wanted and wanted <= _words(s.title)]
    if named:
        return named[0].text()
    ranked = sorted(
        (
            (len(wanted & _words(f"{section.title} {part}")), order, section, part)
            for order, (section, part) in enumerate(
                (s, p) for s in sections for p in split_parts(s.body)
            )
        ),
        key=lambda hit: (-hit[0], hit[1]),
    )
    found = [(section, part) for hits, _, section, part in ranked[:MOST_PARTS] if hits]
    if found:
        return "\n\n".join(
            "\n".join(filter(None, (section.heading, part))) for section, part in found
        )
    titles = [s.heading for s in sections if s.heading]
    listing = "; their headings are:\n" + "\n".join(titles) if titles else ""
    return f"nothing in the notes matches {topic!r}{listing}"


def split_sections(notes: str) -> list[Section]:
    """Each heading with the text under it, in order; text before the first heading too."""
    sections: list[Section] = []
    heading, lines = "", []
    for line in notes.splitlines():
        if HEADING.match(line):
            if heading or "".join(lines).strip():
                sections.append(Section(heading, "\n".join(lines)))
            heading, lines = line.strip(), []
        else:
            lines.append(line)
    if heading or "".join(lines).strip():
        sections.append(Section(heading, "\n".join(lines)))
    return sections


def split_parts(body: str) -> list[str]:
    """A section's paragraphs and top-level list items, each whole (a list item's
    continuation lines stay with it)."""
    parts: list[list[str]] = []
    fresh = True
    for line in body.splitlines():
        if not line.strip():
            fresh = True
            continue
        if fresh or ITEM.match(line):
            parts.append([])
        parts[-1].append(line)
        fresh = False
    return ["\n".join(part).strip() for part in parts]


def _words(text: str) -> set[str]:
    """Lower-case words of three letters or more, a plural's `s` dropped."""
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in WORD.findall(text.lower())}
