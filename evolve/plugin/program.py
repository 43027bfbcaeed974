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
from functools import cached_property, lru_cache
from pathlib import Path

_COMMENT = r"(?://|#|/\*|--|;)"
START = re.compile(rf"^\s*{_COMMENT}\s*EVOLVE-BLOCK-START\b")
END = re.compile(rf"^\s*{_COMMENT}\s*EVOLVE-BLOCK-END\b")
SPLITS_KEPT = 256  # file texts whose segments are kept (see split_segments)
NAMES_KEPT = 256  # file names whose language is kept (see c_like)

# C, C++ and CUDA sources and headers: the files whose layout code_hash may ignore.
C_LIKE = frozenset(
    {".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".cu", ".cuh"}
)
# Where a C-like file's layout is visible to the program itself, so that the file is hashed
# byte for byte: a raw string literal keeps its blank lines and trailing blanks; __LINE__,
# __builtin_LINE and source_location see line numbers and `#line` sets them; token pasting
# (`##`, or `%:%:` and `??=??=`, which spell `#` too) can build __LINE__ out of pieces that
# are not it; #embed, __has_embed, .incbin and __FILE__ reach a source file's bytes, this
# one's included.
_LAYOUT_VISIBLE = re.compile(
    r'(?<!\w)(?:u8|[uUL])?R"'
    r"|##|%:|\?\?="
    r"|#(?:\s|/\*(?:[^*]|\*(?!/))*\*/)*(?:line|embed)\b"  # a comment may sit after `#`
    r"|__LINE__|__builtin_(?:LINE|COLUMN)|source_location"
    r"|__has_embed|(?i:incbin)|__FILE|__BASE_FILE__"
)
# A backslash (or its trigraph `??/`) that only whitespace separates from the end of a line
# splices that line to the next: GCC accepts spaces, tabs, form feeds and the like between.
_SPLICE = ("\\", "??/")
_SPLICES = re.compile(r"(?:\\|\?\?/)[^\S\n]*\n")
# Whitespace that compilers do not agree on, or that ends a line by itself: a file holding
# any is kept whole rather than reasoned about.
_ODD_SPACE = re.compile(r"[\f\v\r]")


class ProgramError(ValueError):
    """A program or an edit of it breaks the EVOLVE-BLOCK rules."""


@dataclass(frozen=True)
class Segment:
    """A run of lines that is either frozen (outside every block) or mutable (inside one)."""

    mutable: bool
    lines: tuple[str, ...]


@lru_cache(maxsize=SPLITS_KEPT)
def split_segments(path: str, text: str) -> tuple[Segment, ...]:
    """Split a file into alternating frozen and mutable runs; the marker lines are frozen.
    Kept for the latest texts: a proposal splits its parent's files again and again (to
    find its knobs, to check its child) and builds a Program of the child, which splits
    the child's once more."""
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
    return tuple(segments)


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
    def stored(cls, files: Mapping[str, str]) -> Program:
        """A program as the store holds it, without the checks a new one passes: a row that
        an older version wrote under looser checks, or that was changed by hand, must still
        be shown and exported rather than end the command. Making a child of it checks it
        again (`replace`), and so does anything that reads its blocks."""
        program = object.__new__(cls)
        object.__setattr__(program, "files", files)
        return program

    @classmethod
    def from_paths(cls, paths: list[Path], root: Path) -> Program:
        return cls({str(p.relative_to(root)): p.read_text() for p in paths})

    @property
    def main_file(self) -> str:
        return next(iter(self.files))

    @cached_property
    def code_hash(self) -> str:
        """Hash of the files with only behaviour-free layout removed: the store evaluates a
        program once per hash, so two programs that could behave differently must never
        share one. See `layout_free` for what counts as layout. A run stored by an older
        version keeps that version's hashes, so after an upgrade a program it already holds
        may be evaluated once more; nothing else changes. Kept once computed: the engine
        asks for it several times per proposal."""
        # A macro shows its layout where it is used: a header that pastes __LINE__ together
        # makes the line numbers of every file that uses it visible, so all stay exact.
        # Only C-like files lose their layout at all, so without one there is nothing to
        # look for (the search was about 5% of the driver's time with the autotuner).
        exact = any(map(c_like, self.files)) and any(map(shows_layout, self.files.values()))
        digest = hashlib.sha256()
        for path in sorted(self.files):
            text = self.files[path]
            for part in (path, text if exact else layout_free(path, text)):
                data = part.encode()
                digest.update(len(data).to_bytes(8, "big") + data)
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

    @property
    def code_length(self) -> int:
        """Characters inside the EVOLVE-BLOCKs of all files: the part evolution writes, and
        the `code_length` feature a MAP-Elites grid may be cut by."""
        return sum(
            len(line)
            for path, text in self.files.items()
            for segment in split_segments(path, text)
            if segment.mutable
            for line in segment.lines
        )


def layout_free(path: str, text: str) -> str:
    """The text less what cannot change what the program does, as far as its language says.

    Only C-like files (C_LIKE) lose anything: spaces and tabs at line ends, and blank lines.
    Outside a raw string literal neither can reach a C program's behaviour, except through
    line numbers or through reading source bytes, so a file that may do either (see
    `shows_layout`) is kept whole, and so is any line spliced onto the line before it by a
    backslash that only whitespace follows. A file holding a form feed, vertical tab or
    carriage return is kept whole too: compilers differ on where such a line ends. (A macro
    from outside the program can still print a line number; that reaches diagnostics only.)
    Everything else, Python included, is hashed exactly: indentation is syntax there,
    blank lines and trailing spaces may sit inside a triple-quoted string, and a space
    after a line-ending backslash is a syntax error; a file type we do not know gets the
    same caution.
    """
    if not c_like(path) or _ODD_SPACE.search(text) or shows_layout(text):
        return text
    kept: list[str] = []
    spliced = False
    for line in text.split("\n"):
        body = line.rstrip(" \t")
        splices = line.rstrip().endswith(_SPLICE)
        if spliced or splices:
            kept.append(line)  # exact: what follows the backslash decides if it splices
        elif body:
            kept.append(body)
        spliced = splices
    return "\n".join(kept)


@lru_cache(maxsize=NAMES_KEPT)
def c_like(path: str) -> bool:
    """Whether the file is C or C++ (or CUDA) by its name, as compilers pick a language.
    Kept: a run has a few file names, asked about at every hash, and a Path is slow to make."""
    return Path(path).suffix.lower() in C_LIKE


def shows_layout(text: str) -> bool:
    """Whether the text, read as C, may see its own layout (_LAYOUT_VISIBLE); looked for in
    the text with its line splices removed too, since a splice may cut any of those words."""
    joined = _SPLICES.sub("", text)
    return bool(_LAYOUT_VISIBLE.search(text) or _LAYOUT_VISIBLE.search(joined))
