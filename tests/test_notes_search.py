"""The agent's `read_notes`: the part of the notes asked for, not the whole file, on the
shipped matmul notes (one heading over a list of points) and on notes with sections."""

from __future__ import annotations

from pathlib import Path

from evolve.mutators.notes_search import find, split_parts, split_sections

ROOT = Path(__file__).resolve().parents[1]
MATMUL = (ROOT / "tasks" / "matmul_c" / "notes.md").read_text()
SECTIONED = """\
# Kernel notes

Read these before changing the kernel.

## Cache blocking
Tile so that a block of B fits in L2.

## Vectorisation
Use -O3 -march=native; check the vector width.

## Rules
Only `matmul` may be global.
"""


def test_a_topic_gets_the_point_that_answers_it_not_the_whole_file() -> None:
    answer = find(MATMUL, "loop order")
    assert "**Loop order first.**" in answer
    assert answer.startswith("# matmul_c: notes"), "the part is shown under its heading"
    for elsewhere in ("Register blocking", "Power-of-two strides", "How it is timed"):
        assert elsewhere not in answer
    assert len(answer) < len(MATMUL) / 3


def test_a_topic_naming_a_heading_gets_that_section_only() -> None:
    assert find(SECTIONED, "cache blocking") == (
        "## Cache blocking\nTile so that a block of B fits in L2."
    )
    assert find(SECTIONED, "rules") == "## Rules\nOnly `matmul` may be global."
    vector = find(SECTIONED, "vector width")
    assert "-march=native" in vector and "Tile so" not in vector and "global" not in vector


def test_a_topic_the_notes_do_not_mention_lists_their_headings() -> None:
    answer = find(SECTIONED, "quantum entanglement")
    assert answer.startswith("nothing in the notes matches 'quantum entanglement'")
    assert "## Cache blocking\n## Vectorisation\n## Rules" in answer
    assert "Tile so" not in answer


def test_sections_and_their_parts_keep_every_line() -> None:
    sections = split_sections(SECTIONED)
    assert [s.title for s in sections] == [
        "Kernel notes", "Cache blocking", "Vectorisation", "Rules",
    ]  # fmt: skip
    parts = split_parts(split_sections(MATMUL)[0].body)
    assert parts[0].startswith("C = A * B for 512x512")
    assert [p.split("**")[1] for p in parts[1:6]] == [
        "Loop order first.", "Let the compiler vectorise.", "Block for the cache.",
        "Power-of-two strides conflict.", "Register blocking",
    ]  # fmt: skip
    assert "absorbs." in parts[2], "a point's continuation lines stay with it"
