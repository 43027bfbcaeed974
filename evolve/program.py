"""Programs and their EVOLVE-BLOCK regions.

A program is one or more text files. Only the text between a line holding
`EVOLVE-BLOCK-START` and one holding `EVOLVE-BLOCK-END`, each written as a comment in
the file's own syntax (`//`, `#`, `/* */`, `--`, `;`), may change. `replace` enforces
that rule for every edit, whoever made it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_COMMENT = r"(?://|#|/\*|--|;)"
START = re.compile(rf"^\s*{_COMMENT}\s*EVOLVE-BLOCK-START\b")
END = re.compile(rf"^\s*{_COMMENT}\s*EVOLVE-BLOCK-END\b")


class ProgramError(ValueError):
    """A program or an edit of it breaks the EVOLVE-BLOCK rules."""


@dataclass(frozen=True)
class Segment:
    """A run of lines that is either frozen (outside every block) or mutable (inside one)."""

    mutable: bool
    lines: tuple[str, ...]


def split_segments(path: str, text: str) -> list[Segment]:
    """Split a file into alternating frozen and mutable runs; the marker lines are frozen."""
    segments: list[Segment] = []
    current: list[str] = []
    inside = False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if START.match(line):
            if inside:
                raise ProgramError(f"{path}:{number}: EVOLVE-BLOCK-START inside another block")
            current.append(line)
            segments.append(Segment(False, tuple(current)))
            current, inside = [], True
        elif END.match(line):
            if not inside:
                raise ProgramError(f"{path}:{number}: EVOLVE-BLOCK-END without a START")
            segments.append(Segment(True, tuple(current)))
            current, inside = [line], False
        else:
            current.append(line)
    if inside:
        raise ProgramError(f"{path}: EVOLVE-BLOCK-START is never closed")
    segments.append(Segment(False, tuple(current)))
    return segments


@dataclass(frozen=True)
class Program:
    files: Mapping[str, str]

    def __post_init__(self) -> None:
        if not self.files:
            raise ProgramError("a program needs at least one file")
        if not any(len(split_segments(p, t)) > 1 for p, t in self.files.items()):
            raise ProgramError(
                "no EVOLVE-BLOCK-START / EVOLVE-BLOCK-END region: nothing could ever change"
            )

    @classmethod
    def from_paths(cls, paths: list[Path], root: Path) -> Program:
        return cls({str(p.relative_to(root)): p.read_text() for p in paths})

    @property
    def main_file(self) -> str:
        return next(iter(self.files))

    @property
    def code_hash(self) -> str:
        """Hash of the normalised text, so whitespace-only variants count as one program."""
        digest = hashlib.sha256()
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0")
            for line in self.files[path].splitlines():
                normal = " ".join(line.split())
                if normal:
                    digest.update(normal.encode() + b"\n")
        return digest.hexdigest()

    def replace(self, files: Mapping[str, str]) -> Program:
        """A child with new file texts; raises ProgramError if anything outside a block moved."""
        if set(files) != set(self.files):
            raise ProgramError(
                f"an edit may not add or remove files: {sorted(self.files)} -> {sorted(files)}"
            )
        for path, new_text in files.items():
            old = split_segments(path, self.files[path])
            new = split_segments(path, new_text)
            frozen_old = [s.lines for s in old if not s.mutable]
            frozen_new = [s.lines for s in new if not s.mutable]
            if len(old) != len(new) or frozen_old != frozen_new:
                raise ProgramError(
                    f"{path}: the edit changes text outside the EVOLVE-BLOCK regions"
                )
        return Program(dict(files))

    def as_bytes(self) -> dict[str, bytes]:
        return {path: text.encode() for path, text in self.files.items()}
