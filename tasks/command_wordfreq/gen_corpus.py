"""Write the corpus that tasks/command_wordfreq counts, the same bytes on every Python 3.

Run by the task's build command in the sandbox: `python3 gen_corpus.py > corpus.txt`.
About 4 MB of lines of made-up words, drawn by a fixed linear congruential generator (not
`random`, whose streams may differ between Python versions) with a skewed distribution,
so that a few hundred words are frequent and thousands are rare; capitals, punctuation
and digits are mixed in, so that splitting words is part of the job. check.py holds the
corpus's top 20, and `python3 gen_corpus.py --top` prints them for it.
"""

from __future__ import annotations

import collections
import re
import sys

SOUNDS = "kalominerutavisobedufagihojuzepaqurisate"
SYLLABLES = [SOUNDS[i : i + 2] for i in range(0, len(SOUNDS), 2)]
VOCABULARY = 6000
LINES = 60_000
PUNCTUATION = (", ", ". ", "; ", " - ", "! ", " (", ") ", " 42 ", "'s ", " ")
TOP = 20


class Lcg:
    """x -> (a x + c) mod 2^48, the constants of POSIX drand48."""

    def __init__(self, seed: int) -> None:
        self.state = seed

    def below(self, n: int) -> int:
        self.state = (0x5DEECE66D * self.state + 0xB) % (1 << 48)
        return (self.state >> 16) * n >> 32


def words(rng: Lcg) -> list[str]:
    made: list[str] = []
    while len(made) < VOCABULARY:
        word = "".join(SYLLABLES[rng.below(len(SYLLABLES))] for _ in range(1 + rng.below(4)))
        if word not in made:
            made.append(word)
    return made


def corpus() -> str:
    rng = Lcg(2026)
    vocabulary = words(rng)
    lines = []
    for _ in range(LINES):
        parts = []
        for _ in range(4 + rng.below(14)):
            u = rng.below(1 << 16) / (1 << 16)
            word = vocabulary[int(VOCABULARY * u**4)]  # skewed: low indexes are common
            if rng.below(8) == 0:
                word = word.capitalize() if rng.below(4) else word.upper()
            parts.append(word + PUNCTUATION[rng.below(len(PUNCTUATION))])
        lines.append("".join(parts).rstrip() + "\n")
    return "".join(lines)


def top(text: str) -> list[tuple[int, str]]:
    """The reference: words are runs of ASCII letters, lower-cased; most frequent first,
    ties in alphabetical order."""
    counts = collections.Counter(re.findall(r"[a-z]+", text.lower()))
    return sorted(((n, w) for w, n in counts.items()), key=lambda e: (-e[0], e[1]))[:TOP]


if __name__ == "__main__":
    text = corpus()
    if sys.argv[1:] == ["--top"]:
        print(top(text))
    else:
        sys.stdout.write(text)
