"""A kernel, a prompt context and a parent for the tests of what a model is shown."""

from __future__ import annotations

from evolve.mutators.base import Parent
from evolve.mutators.prompt import PromptContext
from evolve.plugin.program import Program

KERNEL = """\
#include <stdio.h>
int fixed_helper(void) { return 1; }
// EVOLVE-BLOCK-START
int tuned(int x) { return x * 2; }
// EVOLVE-BLOCK-END
"""


CONTEXT = PromptContext(
    description="Make tuned() fast.",
    objectives=(("gflops", "maximize"), ("size_bytes", "minimize")),
    notes="Shifts beat multiplies on this machine.",
    hardware="CPU: Test Chip 9000, 8 cores usable",
    language="c",
)


def parent(
    score: float | None = 1.25, feedback: str = "warning: unused variable 'z'", pid: int = 7
) -> Parent:
    """Candidate `pid` holding KERNEL, as a prompt is shown it."""
    return Parent(pid, Program({"k.c": KERNEL}), score, {"gflops": 3.5}, feedback)
