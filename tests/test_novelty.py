"""The novelty filter: code that differs only in comments and layout reads as the same
program; a real change does not; inspirations are spread out by code distance."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from evolve.plugin.program import Program
from evolve.search.novelty import NoveltyIndex, block_tokens, signature

C_SEED = """\
#include <stddef.h>
// EVOLVE-BLOCK-START
#pragma GCC unroll 4
static double dot(const double *a, const double *b, size_t n) {
    double sum = 0.0; // the running total
    for (size_t i = 0; i < n; i++) {
        sum += a[i] * b[i];
    }
    /* a block comment */
    const char *tag = "not // a comment";
    return sum;
}
// EVOLVE-BLOCK-END
int main(void) { return 0; }
"""

PY_SEED = """\
import math
# EVOLVE-BLOCK-START
def area(r):
    # circle
    return math.pi * r * r  # the formula
# EVOLVE-BLOCK-END
print(area(2))
"""


def c_program(text: str = C_SEED) -> Program:
    return Program({"kernel.c": text})


def variant(family: int, member: int) -> Program:
    """Programs of one family share most of their code; families share little."""
    lines = [f"    float w{family}_{k} = v{family} * {k + family * 31};" for k in range(30)]
    lines[member % 30] = f"    float w{family}_{member} = v{family} - {member};"
    body = "\n".join(lines)
    return Program({"f.c": f"// EVOLVE-BLOCK-START\n{body}\n// EVOLVE-BLOCK-END\n"})


def test_comments_layout_and_frozen_text_are_not_code() -> None:
    tokens = block_tokens(c_program())
    assert "#" in tokens and "pragma" in tokens  # a C preprocessor line is code
    assert '"not // a comment"' in tokens  # a comment marker inside a string is text
    assert "running" not in tokens and "block" not in tokens
    assert "include" not in tokens and "main" not in tokens  # outside the block
    python = block_tokens(Program({"a.py": PY_SEED}))
    assert "circle" not in python and "formula" not in python and "pi" in python


def test_identical_and_recommented_code_is_too_similar_and_a_real_change_is_not() -> None:
    index = NoveltyIndex(threshold=0.95)
    assert index.nearest(c_program()) is None
    index.add(7, c_program())
    assert index.nearest(c_program()) == (7, 1.0)
    recommented = C_SEED.replace("// the running total", "/* accumulate */").replace("    ", "\t")
    reflowed = recommented.replace("{\n        sum", "{ sum").replace("/* a block comment */", "")
    assert index.too_similar(c_program(reflowed)) == (7, 1.0)
    changed = c_program(C_SEED.replace("a[i] * b[i]", "a[i] + b[i]"))
    nearest = index.nearest(changed)
    assert nearest is not None and nearest[0] == 7 and 0.5 < nearest[1] < 0.95
    assert index.too_similar(changed) is None
    unrolled = c_program(C_SEED.replace("unroll 4", "unroll 8"))
    assert index.too_similar(unrolled) is None  # a pragma's argument is a real change too


def test_without_a_threshold_nothing_is_too_similar() -> None:
    index = NoveltyIndex(threshold=None)
    index.add(1, c_program())
    assert index.too_similar(c_program()) is None
    assert index.nearest(c_program()) == (1, 1.0)


def test_nearest_finds_the_closest_of_many_and_similarity_is_symmetric() -> None:
    index = NoveltyIndex(threshold=0.9)
    for family in range(5):
        for member in range(4):
            index.add(family * 10 + member, variant(family, member))
    assert len(index) == 20 and 31 in index and 99 not in index
    found = index.nearest(variant(3, 1))
    assert found == (31, 1.0)
    found = index.nearest(variant(3, 9))  # a new member of family 3
    assert found is not None and found[0] // 10 == 3 and 0.7 < found[1] < 1.0
    assert index.similarity(30, 31) == index.similarity(31, 30) > 0.7
    assert index.similarity(30, 40) < 0.2
    index.add(40, variant(3, 0))  # a known id is re-indexed, not added twice
    assert len(index) == 20 and index.similarity(30, 40) == 1.0


def test_diverse_spreads_inspirations_away_from_the_parent_and_each_other() -> None:
    index = NoveltyIndex(threshold=None)
    for family in range(3):
        for member in range(4):
            index.add(family * 10 + member, variant(family, member))
    pool = [1, 2, 3, 11, 12, 21, 22, 99]  # 99 was never indexed
    chosen = index.diverse(pool, k=3, anchor=0)
    assert chosen[:2] in ([11, 21], [21, 11])  # the other families before a parent's sibling
    assert chosen[2] in (1, 2, 3, 12, 22)
    assert len(index.diverse(pool, k=7, anchor=0)) == 7
    assert index.diverse(pool, k=8, anchor=0)[-1] == 99  # unknown ids only fill
    assert index.diverse([0, 0, 11], k=3, anchor=0) == [11]
    assert index.diverse(pool, k=0, anchor=0) == []


def test_signatures_are_the_same_in_every_process() -> None:
    """Python's hash() differs between processes; a signature must not."""
    script = (
        "import sys; from evolve.plugin.program import Program; "
        "from evolve.search.novelty import signature; "
        "print(signature(Program({'kernel.c': sys.stdin.read()})).tolist())"
    )
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script],
            input=C_SEED, capture_output=True, text=True, env=env, check=True, timeout=60,
        )  # fmt: skip
        outputs.add(done.stdout.strip())
    assert outputs == {str(signature(c_program()).tolist())}
    assert signature(c_program()).dtype == np.uint32


def test_programs_without_tokens_match_each_other_only() -> None:
    empty = Program({"a.py": "# EVOLVE-BLOCK-START\n# nothing yet\n# EVOLVE-BLOCK-END\n"})
    index = NoveltyIndex(threshold=0.5)
    index.add(1, empty)
    assert index.too_similar(empty) == (1, 1.0)
    assert index.too_similar(c_program()) is None


def test_a_real_edit_in_a_large_block_is_never_read_as_identical() -> None:
    """64 minima often all miss the few shingles a one-number edit changes in a block of
    hundreds of tokens; the exact similarity decides, so threshold 1.0 rejects only code
    that is the same up to comments and layout."""
    lines = [f"#define TILE_{i} {16 * (i + 1)}  // @knob pow2 1..512" for i in range(40)]
    lines += [f"acc += a[i * {i + 3}] * b[k + {i}];" for i in range(40)]
    body = "\n".join(lines)
    index = NoveltyIndex(1.0)
    index.add(1, Program({"k.c": f"// EVOLVE-BLOCK-START\n{body}\n// EVOLVE-BLOCK-END\n"}))
    for i in range(40):
        edited = body.replace(f"TILE_{i} {16 * (i + 1)} ", f"TILE_{i} {16 * (i + 1) + 1} ")
        child = Program({"k.c": f"// EVOLVE-BLOCK-START\n{edited}\n// EVOLVE-BLOCK-END\n"})
        found = index.nearest(child)
        assert found is not None and found[0] == 1 and 0.98 < found[1] < 1.0
        assert index.too_similar(child) is None
    recommented = body.replace("// @knob", "//   @knob")
    same = Program({"k.c": f"// EVOLVE-BLOCK-START\n{recommented}\n// EVOLVE-BLOCK-END\n"})
    assert index.too_similar(same) == (1, 1.0)


def test_what_a_comment_means_to_the_program_counts() -> None:
    """c_kernel reads its compiler flags from a comment, and a knob may live in one: two
    programs that differ there are different programs, not a recomment."""
    seed = "// cflags: -O2    @knob choice -O2 | -O3\n#define TILE 64  // @knob pow2 1..512\n"
    index = NoveltyIndex(1.0)
    index.add(1, Program({"k.c": f"// EVOLVE-BLOCK-START\n{seed}// EVOLVE-BLOCK-END\n"}))
    faster = seed.replace("cflags: -O2 ", "cflags: -O3 ")
    child = Program({"k.c": f"// EVOLVE-BLOCK-START\n{faster}// EVOLVE-BLOCK-END\n"})
    assert index.too_similar(child) is None
    found = index.nearest(child)
    assert found is not None and found[1] < 1.0
    retitled = seed.replace("@knob pow2", "@knob  pow2")
    same = Program({"k.c": f"// EVOLVE-BLOCK-START\n{retitled}// EVOLVE-BLOCK-END\n"})
    assert index.too_similar(same) == (1, 1.0)


def test_python_indentation_is_part_of_the_program() -> None:
    inside = "def f(xs):\n    t = 0\n    for x in xs:\n        t += x\n        return t\n"
    after = "def f(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t\n"
    index = NoveltyIndex(1.0)
    index.add(1, Program({"f.py": f"# EVOLVE-BLOCK-START\n{inside}# EVOLVE-BLOCK-END\n"}))
    moved = Program({"f.py": f"# EVOLVE-BLOCK-START\n{after}# EVOLVE-BLOCK-END\n"})
    assert index.too_similar(moved) is None
    recommented = inside.replace("t = 0\n", "t = 0  # the running total\n")
    same = Program({"f.py": f"# EVOLVE-BLOCK-START\n{recommented}# EVOLVE-BLOCK-END\n"})
    assert index.too_similar(same) == (1, 1.0)


def test_an_index_nothing_consults_indexes_nothing() -> None:
    index = NoveltyIndex(threshold=0.9, needed=False)
    index.add(1, c_program())
    assert len(index) == 0 and 1 not in index
    assert index.nearest(c_program()) is None
