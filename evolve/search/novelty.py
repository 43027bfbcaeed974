"""How alike two programs' code is: MinHash over token shingles of their EVOLVE-BLOCKs.

A model asked twice for an improvement often writes the same change twice, reformatted or
recommented; evaluating it again costs a sandbox run and teaches nothing. Only the text
that can change counts (the blocks), without comments and layout, so two programs that
differ in nothing else read as identical, while one changed operator, name or number
does not.

Each program becomes a signature of PERMUTATIONS 32-bit minima; the share of equal
positions between two signatures estimates the Jaccard similarity of their shingle sets.
The signatures sit in one numpy matrix, so comparing a child with thousands of programs
is one vectorised pass. Hashing goes through blake2b, never Python's hash(), so the
signature of a program is the same in every process and every run.

The estimate only chooses which few programs to compare exactly: a rejection, and every
similarity this module reports, is the exact Jaccard similarity of the two shingle sets.
On a block of hundreds of tokens a one-number edit changes a handful of shingles, and 64
minima would often all miss them and read 1.0.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from evolve.plugin.program import C_LIKE, Program, split_segments

PERMUTATIONS = 64
SHINGLE = 3  # tokens per shingle
CONFIRMED = 8  # nearest programs by estimate whose exact similarity is computed

_STRING = r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
_C_COMMENT = r"//[^\n]*|/\*[\s\S]*?(?:\*/|$)"
_HASH_COMMENT = r"#[^\n]*"
_WORD = r"[A-Za-z_]\w*|\d[\w.]*|\S"
# File types whose comments start with `#`; C-like ones use // and /* */, and in them `#`
# starts a preprocessor line, which is code. Any other file is read with both.
_HASH_ONLY = frozenset({".py", ".pyi", ".pyx", ".sh", ".bash", ".zsh", ".r", ".rb", ".pl",
                        ".yaml", ".yml", ".toml", ".cmake", ".mk"})  # fmt: skip
_C_ONLY = C_LIKE | {".java", ".js", ".ts", ".rs", ".go", ".cs", ".swift", ".glsl", ".metal"}
# Where indentation is syntax, a line's indentation is a token: moving a `return` out of a
# loop is a different program.
_INDENTED = frozenset({".py", ".pyi", ".pyx"})
# A comment that carries part of the program: a knob's value, or the flags it is built with.
_MEANT = re.compile(r"@knob|cflags:")
_WORDS = re.compile(_WORD)


def _tokenizer(comment: str) -> re.Pattern[str]:
    # Strings first, so that `//` or `#` inside a literal is no comment; comments are
    # matched (as group 1) only to be dropped.
    return re.compile(rf"{_STRING}|({comment})|{_WORD}")


_BY_KIND = {
    "c": _tokenizer(_C_COMMENT),
    "hash": _tokenizer(_HASH_COMMENT),
    "both": _tokenizer(f"{_C_COMMENT}|{_HASH_COMMENT}"),
}


def tokens(path: str, text: str) -> list[str]:
    """The file's tokens: identifiers, numbers, strings and single punctuation marks, with
    comments and whitespace gone (in Python, each line's indentation stays, as a token),
    except what a comment holds that the program means:
    the value of a knob written in a comment, and compiler flags (`// cflags: -O3`, read
    by the c_kernel evaluator). Two programs that differ there differ."""
    suffix = Path(path).suffix.lower()
    kind = "c" if suffix in _C_ONLY else "hash" if suffix in _HASH_ONLY else "both"
    found: list[str] = []
    indented = suffix in _INDENTED
    line = -1  # the start of the last line whose indentation was counted
    for match in _BY_KIND[kind].finditer(text):
        comment = match.group(1)
        if comment is None and indented:
            start = text.rfind("\n", 0, match.start()) + 1
            if start != line and not text[start : match.start()].strip():
                found.append(f"\x01{match.start() - start}")  # the line's indentation
                line = start
        if comment is None:
            found.append(match.group())
        elif _MEANT.search(comment):
            meant = comment.split("@knob", 1)[0]
            found += _WORDS.findall(meant.lstrip("/#*").rstrip("*/"))
    return found


def block_tokens(program: Program) -> list[str]:
    """The tokens of every EVOLVE-BLOCK, file by file in name order; a marker between
    blocks keeps a shingle from spanning two of them."""
    found: list[str] = []
    for path in sorted(program.files):
        for segment in split_segments(path, program.files[path]):
            if segment.mutable:
                found += tokens(path, "".join(segment.lines))
                found.append("\0")
    return found


def _hash64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


@lru_cache(maxsize=1 << 16)
def _token_hash(token: str) -> int:
    return _hash64(token.encode())


def _parameters() -> tuple[np.ndarray, np.ndarray]:
    """Odd multipliers and offsets of the multiply-shift hashes that stand in for random
    permutations; derived from fixed labels, so the same everywhere."""
    a = [_hash64(f"minhash-a-{i}".encode()) | 1 for i in range(PERMUTATIONS)]
    b = [_hash64(f"minhash-b-{i}".encode()) for i in range(PERMUTATIONS)]
    return np.array(a, dtype=np.uint64)[:, None], np.array(b, dtype=np.uint64)[:, None]


_A, _B = _parameters()
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd, so multiplying by it loses nothing
_SHARE = np.full(PERMUTATIONS, 1 / PERMUTATIONS, dtype=np.float32)  # exact: a power of two
_EMPTY = np.full(PERMUTATIONS, np.iinfo(np.uint32).max, dtype=np.uint32)


def shingles(program: Program) -> np.ndarray:
    """The program's distinct shingle hashes, sorted (uint64)."""
    hashed = np.array([_token_hash(t) for t in block_tokens(program)], dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64 is the point
        if hashed.size >= SHINGLE:  # a shingle's hash mixes its tokens' in order
            mixed = hashed[: hashed.size - SHINGLE + 1]
            for offset in range(1, SHINGLE):
                mixed = mixed * _MIX + hashed[offset : offset + mixed.size]
            hashed = mixed
    return np.unique(hashed)


def signature(program: Program, shingled: np.ndarray | None = None) -> np.ndarray:
    """The program's MinHash signature: PERMUTATIONS uint32 minima over its shingles."""
    hashed = shingles(program) if shingled is None else shingled
    if hashed.size == 0:
        return _EMPTY.copy()
    with np.errstate(over="ignore"):
        permuted = (_A * hashed[None, :] + _B) >> np.uint64(32)
    return permuted.min(axis=1).astype(np.uint32)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The exact Jaccard similarity of two sorted sets of distinct shingle hashes."""
    if a.size == 0 and b.size == 0:
        return 1.0
    common = np.intersect1d(a, b, assume_unique=True).size
    return common / (a.size + b.size - common)


class NoveltyIndex:
    """The signatures of programs seen so far, to find a new one's nearest neighbour and to
    choose a spread of inspirations. `threshold` is search.novelty_threshold: a program at
    least this similar to an indexed one is too similar; None turns rejection off.

    A MinHash estimate is only an estimate: on a block of hundreds of tokens a one-number
    edit shares all but a few shingles, and 64 minima often all agree. So a rejection is
    decided by the exact Jaccard similarity of the shingle sets, which the index keeps
    (32-bit hashes, a few KB a program), for the CONFIRMED programs the estimate ranks
    nearest; the estimate only chooses where to look."""

    def __init__(self, threshold: float | None, *, needed: bool = True) -> None:
        """`needed`: False where nothing will consult the index (a run with no model
        proposals, the only ones it filters and briefs); it then indexes nothing, and the
        driver skips a program's shingling for each new candidate."""
        self.threshold, self.needed = threshold, needed
        self._signatures = np.empty((64, PERMUTATIONS), dtype=np.uint32)
        self._shingles: list[np.ndarray] = []
        self._ids: list[int] = []
        self._rows: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, candidate_id: object) -> bool:
        return candidate_id in self._rows

    def add(self, candidate_id: int, program: Program) -> None:
        """Index a program; a known id has its signature replaced."""
        if not self.needed:
            return
        shingled = shingles(program)
        row = self._rows.get(candidate_id)
        if row is None:
            row = len(self._ids)
            if row == len(self._signatures):
                grown = np.empty((2 * row, PERMUTATIONS), dtype=np.uint32)
                grown[:row] = self._signatures
                self._signatures = grown
            self._ids.append(candidate_id)
            self._rows[candidate_id] = row
            self._shingles.append(_short(shingled))
        self._shingles[row] = _short(shingled)
        self._signatures[row] = signature(program, shingled)

    def nearest(self, program: Program) -> tuple[int, float] | None:
        """The most similar indexed program and the exact Jaccard similarity of the two,
        among the CONFIRMED that the MinHash estimate ranks nearest (the oldest among
        equals); None while nothing is indexed."""
        if not self._ids:
            return None
        shingled = shingles(program)
        estimated = self._against(signature(program, shingled))
        rows = np.argsort(-estimated, kind="stable")[:CONFIRMED]
        mine = _short(shingled)
        exact = [jaccard(mine, self._shingles[row]) for row in rows]
        best = int(np.argmax(exact))
        return self._ids[int(rows[best])], exact[best]

    def too_similar(self, program: Program) -> tuple[int, float] | None:
        """The nearest program if it is at least `threshold` similar, else None."""
        if self.threshold is None:
            return None
        found = self.nearest(program)
        return found if found is not None and found[1] >= self.threshold else None

    def similarity(self, a_id: int, b_id: int) -> float:
        """Exact Jaccard similarity of two indexed programs; KeyError for an unknown id."""
        return jaccard(self._shingles[self._rows[a_id]], self._shingles[self._rows[b_id]])

    def diverse(self, pool: Sequence[int], k: int, anchor: int) -> list[int]:
        """Up to k ids from `pool`, farthest-first: each the one least like the anchor (the
        parent) and those already chosen, ties to the earlier in `pool`. Ids not indexed
        have no distance to go by; they only fill places the indexed ones leave."""
        candidates = list(dict.fromkeys(i for i in pool if i != anchor))
        known = [i for i in candidates if i in self._rows]
        unknown = [i for i in candidates if i not in self._rows]
        chosen: list[int] = []
        if known and k > 0:
            signatures = self._signatures[[self._rows[i] for i in known]]
            distance = np.full(len(known), np.inf)
            if anchor in self._rows:
                distance = 1.0 - self._against(self._signatures[self._rows[anchor]], signatures)
            while len(chosen) < min(k, len(known)):
                best = int(distance.argmax())
                chosen.append(known[best])
                distance = np.minimum(distance, 1.0 - self._against(signatures[best], signatures))
                distance[best] = -np.inf  # never chosen twice
        return chosen + unknown[: max(0, k - len(chosen))]

    def _against(self, signature: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Similarity of one signature to each row (all indexed programs by default)."""
        if rows is None:
            rows = self._signatures[: len(self._ids)]
        return (rows == signature) @ _SHARE


def _short(shingled: np.ndarray) -> np.ndarray:
    """32 bits of each shingle hash, sorted and distinct: what the exact similarity needs,
    at half the memory."""
    return np.unique((shingled >> np.uint64(32)).astype(np.uint32))
