import os
import pickle
from pathlib import Path

import pytest

from evolve.hardware import describe_hardware
from evolve.mutators.base import Parent
from evolve.mutators.prompt import PromptContext, build_prompt, repair_prompt, truncate
from evolve.program import Program

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
    return Parent(pid, Program({"k.c": KERNEL}), score, {"gflops": 3.5}, feedback)


def test_the_diff_prompt_holds_everything_the_model_needs() -> None:
    system, user = build_prompt("diff", CONTEXT, parent(), [])
    assert "EVOLVE-BLOCK-START" in system
    for needed in (
        "Make tuned() fast.",
        "gflops (maximize), size_bytes (minimize)",
        "### k.c\n```c\n" + KERNEL + "```",
        "score 1.25",
        "gflops = 3.5",
        "warning: unused variable 'z'",
        "Shifts beat multiplies",
        "Test Chip 9000, 8 cores usable",
        "<<<<<<< SEARCH",
        ">>>>>>> REPLACE",
    ):
        assert needed in user
    assert "\n\n\n" not in user.replace(KERNEL, "")


def test_rewrite_asks_for_one_fenced_block_and_fix_names_the_failure() -> None:
    _, user = build_prompt("rewrite", CONTEXT, parent(), [])
    assert "exactly one fenced code block (```c" in user
    assert "first EVOLVE-BLOCK of k.c" in user
    assert "<<<<<<< SEARCH" not in user
    _, user = build_prompt("fix", CONTEXT, parent(None, "error: 'q' undeclared"), [])
    assert "no score: it failed evaluation" in user
    assert "error: 'q' undeclared" in user


def test_inspirations_show_blocks_only_and_crossover_shows_the_partner_in_full() -> None:
    other = Parent(9, Program({"k.c": KERNEL.replace("x * 2", "x << 1")}), 2.0)
    _, user = build_prompt("diff", CONTEXT, parent(), [other])
    inspiration = user.split("### Program 9 (score 2, higher is better)")[1]
    assert "x << 1" in inspiration
    assert "fixed_helper" not in inspiration
    _, user = build_prompt("crossover", CONTEXT, parent(), [other])
    partner = user.split("## The second program (score 2, higher is better)")[1]
    assert "fixed_helper" in partner
    assert "x << 1" in partner
    with pytest.raises(ValueError, match="second parent"):
        build_prompt("crossover", CONTEXT, parent(), [])


def test_empty_sections_leave_no_headings() -> None:
    bare = PromptContext(description="Go fast.", objectives=(("t", "minimize"),))
    _, user = build_prompt("diff", bare, parent(feedback=""), [])
    assert "## Notes" not in user
    assert "## Hardware" not in user
    assert "## Evaluator feedback" not in user
    assert "## Other programs" not in user


def test_the_measured_hardware_overrules_what_the_notes_say_about_it() -> None:
    """Notes may have been written on another machine; the section that was read from this
    one says that it, not the notes, is right about the hardware."""
    context = PromptContext(
        description="Tile it.",
        objectives=(("speedup", "maximize"),),
        notes="Tile for the 48 KiB L1d.",
        hardware="Caches: L1d 32 KiB, L2 1 MiB",
    )
    _, user = build_prompt("diff", context, parent(), [])
    hardware = user.split("## Hardware the program is measured on\n", 1)[1].split("\n## ", 1)[0]
    assert hardware.startswith("Caches: L1d 32 KiB, L2 1 MiB\n")
    assert "Where the notes say otherwise about the hardware, this section is right." in hardware
    assert user.index("## Hardware") < user.index("## Notes on this task")


def test_a_task_template_overrides_only_its_own_name(tmp_path: Path) -> None:
    (tmp_path / "diff.txt").write_text("CUSTOM for $$5: $task\n\n$notes\n\n$format\n")
    system, user = build_prompt("diff", CONTEXT, parent(), [], templates=tmp_path)
    assert user.startswith("CUSTOM for $5: ## Task\nMake tuned() fast.")
    assert "<<<<<<< SEARCH" in user
    assert system == build_prompt("diff", CONTEXT, parent(), [])[0]
    (tmp_path / "diff.txt").write_text("$tsak\n")
    with pytest.raises(ValueError, match=r"diff.txt: unknown placeholder \$tsak"):
        build_prompt("diff", CONTEXT, parent(), [], templates=tmp_path)


def test_long_feedback_keeps_head_and_tail() -> None:
    lines = [f"line {i}: error in stage" for i in range(5000)]
    feedback = "\n".join(["FIRST ERROR here", *lines, "LAST summary: 3 mismatches"])
    cut = truncate(feedback, 2000)
    assert len(cut) <= 2100
    assert cut.startswith("FIRST ERROR here\n")
    assert cut.endswith("LAST summary: 3 mismatches")
    assert "characters omitted" in cut
    _, user = build_prompt("diff", CONTEXT, parent(feedback=feedback), [])
    assert "FIRST ERROR here" in user
    assert "LAST summary" in user
    assert "line 2500:" not in user


def test_repair_prompt_quotes_the_error() -> None:
    text = repair_prompt("Block 1: not found")
    assert "Block 1: not found" in text
    assert "answer format asked for above" in text


def test_context_pickles() -> None:
    assert pickle.loads(pickle.dumps(CONTEXT)) == CONTEXT


def test_hardware_names_this_cpu_and_its_cores() -> None:
    described = describe_hardware()
    model = next(
        line.split(":", 1)[1].strip()
        for line in Path("/proc/cpuinfo").read_text().splitlines()
        if line.startswith("model name")
    )
    assert model in described
    assert f"{len(os.sched_getaffinity(0))} cores usable" in described
    assert describe_hardware() is described
