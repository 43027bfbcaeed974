"""Shipped notes say what holds on any machine; what one machine has is the prompt's hardware
section, read from the machine that measures (evolve.plugin.hardware). Notes that stated one
CPU's caches and speeds contradicted that section wherever the task ran elsewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SHIPPED = sorted([*ROOT.glob("tasks/*/notes.md"), *ROOT.glob("evolve/cli/starters/*/notes.md")])

# Each pattern is a way a note states a fact about one machine.
MACHINE_FACTS = (
    re.compile(r"\d+(?:\.\d+)?\s*(?:[KMG]i?B|[KM])\s+(?:of\s+)?L[1-3]", re.I),  # 48 KiB L1d
    re.compile(r"\bL[1-3][di]?\s+(?:cache\s+)?(?:is|of|=|:)\s*\d", re.I),  # L2 is 2 MiB
    re.compile(r"\d[\d.,]*\s*[GT](?:FLOP|B)/s", re.I),  # a measured rate: 170 GFLOP/s
    re.compile(r"\d[\d.]*\s*GHz", re.I),  # a clock
    re.compile(r"\b(?:on|of|for|in) this (?:machine|CPU|computer|host|server|box)\b", re.I),
    re.compile(r"\b(?:AVX-?512|AVX2?|FMA|SSE[\d.]*|NEON|SVE2?)\b[^.\n]{0,30}?\bhere\b", re.I),
    re.compile(r"\bthe (?:CPU|machine|GPU|core) has \d", re.I),  # the CPU has 16 cores
)
# Talk of caches or vector extensions, which the hardware section is for.
HARDWARE_TALK = re.compile(r"\bL[1-3]d?\b|\bAVX|\bSSE|\bNEON\b|\bSVE\b|-march=native")
POINTER = "hardware section"


def machine_facts(text: str) -> list[str]:
    """The lines of `text` that state a fact about one machine."""
    return [line for line in text.splitlines() if any(p.search(line) for p in MACHINE_FACTS)]


@pytest.mark.parametrize(
    "text",
    [
        "Each matrix is 1 MiB; the CPU has\n48 KiB L1d and 2 MiB L2 per core, so B alone...",
        "and -march=native enables AVX-512 and FMA on this machine.",
        "one-thread OpenBLAS reaches about 170 GFLOP/s here, tiled i-k-j about 35-55.",
        "-mavx2 -mfma or -march=native (AVX-512 here) widen the vectors.",
        "a -march=native build on this CPU gets no counters.",
        "Its L2 is 1 MiB, shared by two cores.",
        "The floor is 128 MiB / 900 GB/s.",
        "The cores turbo to 3.8 GHz.",
        "The CPU has 16 cores and 2 MiB of L2 each.",
    ],
)
def test_statements_about_one_machine_are_caught(text: str) -> None:
    """What the old matmul_c and stencil_c notes said, and its kin."""
    assert machine_facts(text)


@pytest.mark.parametrize(
    "line",
    [
        "Each matrix is 1 MiB, so on current cores B alone is far larger than L1.",
        "TILE_K x TILE_J x 4 bytes should fit in L1 or L2; the sizes are in the hardware section.",
        "The floor is 128 MiB / DRAM bandwidth: a few tens of microseconds on a modern card.",
        "gamma and beta (8 KiB each) stay in L1/L2.",
        "Rows 4 KiB apart map to the same L1 set where L1 has 64 sets of 64-byte lines.",
        "timed at 2048 x 2048 x 2048 (17.2 GFLOP).",
        "AVX-512 helps where the hardware section lists avx512f.",
        "-march=native enables every extension the CPU has.",
        "Stock -Os is about 1.07-1.12 x -Oz on this corpus.",
    ],
)
def test_general_statements_pass(line: str) -> None:
    assert machine_facts(line) == []


@pytest.mark.parametrize("notes", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_notes_state_no_facts_of_one_machine(notes: Path) -> None:
    assert machine_facts(notes.read_text()) == []


@pytest.mark.parametrize("notes", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_notes_that_reason_about_caches_or_vectors_point_to_the_hardware_section(
    notes: Path,
) -> None:
    text = notes.read_text()
    assert not HARDWARE_TALK.search(text) or POINTER in text


def test_the_notes_checked_are_the_shipped_ones() -> None:
    """The checks above pass vacuously if the globs find nothing."""
    expected = {ROOT / "tasks/matmul_c/notes.md", ROOT / "evolve/cli/starters/c_kernel/notes.md"}
    assert expected <= set(SHIPPED)
