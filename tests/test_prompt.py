import os
import pickle
from pathlib import Path

import pytest

from evolve.evaluators.c_kernel.evaluator import CKernelEvaluator
from evolve.mutators.base import Parent, PastAttempt
from evolve.mutators.change_summary import summarize_change
from evolve.mutators.factory import prompt_context
from evolve.mutators.prompt import OPERATORS, build_prompt, repair_prompt, truncate
from evolve.plugin import metric_glossary
from evolve.plugin.evaluator import evaluator_class
from evolve.plugin.hardware import describe_hardware
from evolve.plugin.program import Program
from evolve.task.loading import load_task
from tests.helpers.prompts import CONTEXT, KERNEL, parent

ROOT = Path(__file__).resolve().parents[1]

TURNS = {"max_turns": "3"}  # the agent's template needs it; the others ignore it


def test_the_diff_prompt_holds_everything_the_model_needs() -> None:
    """What every proposal shares is in the system prompt; the parent in the user message."""
    system, user = build_prompt("diff", CONTEXT, parent(), [])
    assert "Only the code between the EVOLVE-BLOCK-START" in system
    for needed in (
        "Make tuned() fast.",
        "gflops (maximize), size_bytes (minimize)",
        "Shifts beat multiplies",
        "Test Chip 9000, 8 cores usable",
        "<<<<<<< SEARCH",
        ">>>>>>> REPLACE",
    ):
        assert needed in system
        assert needed not in user
    for needed in (
        "### k.c\n```c\n" + KERNEL + "```",
        "#7 (score 1.25",
        "gflops = 3.5 GFLOP/s",
        "warning: unused variable 'z'",
    ):
        assert needed in user
    assert "\n\n\n" not in user.replace(KERNEL, "")
    assert "\n\n\n" not in system


def test_rewrite_asks_for_one_fenced_block_and_fix_names_the_failure() -> None:
    system, _ = build_prompt("rewrite", CONTEXT, parent(), [])
    assert "exactly one fenced code block (```c" in system
    assert "first EVOLVE-BLOCK of k.c" in system
    assert "<<<<<<< SEARCH" not in system
    _, user = build_prompt("fix", CONTEXT, parent(None, "error: 'q' undeclared"), [])
    assert "no score: it failed evaluation" in user
    assert "error: 'q' undeclared" in user


def test_inspirations_and_the_crossover_partner_show_their_blocks_changes_only() -> None:
    other = Parent(9, Program({"k.c": KERNEL.replace("x * 2", "x << 1")}), 2.0, {"gflops": 9.0})
    _, user = build_prompt("diff", CONTEXT, parent(), [other])
    inspiration = user.split("### Program #9 (score 2; gflops = 9 GFLOP/s)")[1]
    assert "k.c, its EVOLVE-BLOCKs:\n```c\nint tuned(int x) { return x << 1; }" in inspiration, (
        "a one-line block is shorter whole than as a diff"
    )
    assert "fixed_helper" not in inspiration
    current = Parent(7, Program({"k.c": LONG_KERNEL}), 1.0)
    second = Parent(
        9, Program({"k.c": LONG_KERNEL.replace("x ^ 33", "x ^ 34")}), 2.0, {"gflops": 9.0}
    )
    _, user = build_prompt("crossover", CONTEXT, current, [second])
    partner = user.split("## The second program, #9 (score 2, higher is better)\n")[1]
    assert partner.startswith("Metrics: gflops = 9 GFLOP/s\nk.c, changes to the current program:")
    assert "-static int helper_three(int x) { return x ^ 33; }\n+" in partner
    assert "fixed_helper" not in partner, "the fixed code is in the current program, once"
    assert user.count("helper_one(int x)") == 1, "the unchanged lines are shown once"
    with pytest.raises(ValueError, match="second parent"):
        build_prompt("crossover", CONTEXT, parent(), [])


LONG_KERNEL = """\
int fixed_helper(void) { return 1; }
// EVOLVE-BLOCK-START
#define TILE 64
static int helper_one(int x) { return x + 11; }
static int helper_two(int x) { return x - 22; }
static int helper_three(int x) { return x ^ 33; }
static int helper_four(int x) { return x | 44; }
int tuned(int x) { return helper_four(helper_three(helper_two(helper_one(x)))) * 2; }
// EVOLVE-BLOCK-END
"""


def test_an_inspiration_is_shown_as_its_changes_to_the_parent_not_its_whole_block() -> None:
    """The lines it shares with the current program are in the prompt once, as the
    current program's; an inspiration brings only its changes, and where it only adds
    lines, the line they follow."""
    current = Parent(7, Program({"k.c": LONG_KERNEL}), 1.0)
    other = Parent(9, Program({"k.c": LONG_KERNEL.replace("TILE 64", "TILE 128")}), 2.0)
    same = Parent(11, Program({"k.c": LONG_KERNEL}), 1.5)
    two = "static int helper_two(int x) { return x - 22; }\n"
    added = Parent(13, Program({"k.c": LONG_KERNEL.replace(two, two + "static int z;\n")}), 1.2)
    _, user = build_prompt("diff", CONTEXT, current, [other, same, added])
    section = user.split("## Other programs", 1)[1]
    assert "```diff\n@@\n-#define TILE 64\n+#define TILE 128\n```" in section
    assert f"```diff\n@@\n {two}+static int z;\n```" in section, "an insertion says where"
    assert user.count("helper_one(int x)") == 1, "an unchanged line was repeated"
    assert user.count("helper_four(int x)") == 1, "the unchanged block was repeated"
    assert user.count("helper_four(helper_three") == 1
    assert "#11 (score 1.5)\nk.c: the same EVOLVE-BLOCKs" in section
    rewritten = Parent(12, Program({"k.c": "// EVOLVE-BLOCK-START\nint tuned(int x);\n"
                                           "// EVOLVE-BLOCK-END\n"}), 3.0)  # fmt: skip
    _, user = build_prompt("diff", CONTEXT, current, [rewritten])
    assert "k.c, its EVOLVE-BLOCKs:\n```c\nint tuned(int x);\n```" in user, (
        "a rewrite is shorter whole than as a diff"
    )


def test_the_knobs_an_inspiration_sets_are_shown_as_the_values_it_sets() -> None:
    seed = (ROOT / "tasks" / "matmul_c" / "seed.c").read_text()
    current = Parent(7, Program({"kernel.c": seed}), 1.0)
    tuned = seed.replace("TILE_I 512 ", "TILE_I 32 ").replace("TILE_K 512 ", "TILE_K 64 ")
    recoded = tuned.replace("C[i] = 0.0f;", "C[i] = 0;")
    others = [Parent(9, Program({"kernel.c": tuned}), 2.0)]
    others.append(Parent(8, Program({"kernel.c": recoded}), 1.5))
    _, user = build_prompt("diff", CONTEXT, current, others)
    section = user.split("## Other programs", 1)[1]
    knobs = "`#define TILE_I` 512 -> 32; `#define TILE_K` 512 -> 64"
    assert f"kernel.c, changes to the current program: {knobs}\n" in section
    assert "@knob" not in section, "a knob's line was repeated"
    assert (
        f"kernel.c, changes to the current program: {knobs}; and:\n```diff\n@@\n"
        "-  for (int i = 0; i < n * n; i++) C[i] = 0.0f;\n"
        "+  for (int i = 0; i < n * n; i++) C[i] = 0;\n```"
    ) in section.split("### Program #8")[1], "a change to code is a diff"


def test_inspirations_are_sorted_best_first_and_lower_ones_are_labelled() -> None:
    scores = {21: 0.5, 22: 3.0, 23: None, 24: 2.0, 25: 1.0}
    others = [
        Parent(pid, Program({"k.c": KERNEL.replace("x * 2", f"x * {pid}")}), score)
        for pid, score in scores.items()
    ]
    _, user = build_prompt("diff", CONTEXT, parent(1.25), others)
    section = user.split("## Other programs, best first", 1)[1]
    order = [section.index(f"### Program #{pid} ") for pid in (22, 24, 25, 21, 23)]
    assert order == sorted(order), "not best first"
    label = section.index("Programs scoring below the current one")
    assert order[1] < label < order[2], "the lower ones are not labelled as such"
    _, user = build_prompt("fix", CONTEXT, parent(None), others)
    assert "scoring below" not in user, "every scored program beats a failed one"


def test_what_is_the_same_all_run_long_comes_before_what_changes() -> None:
    """The legend of the run's metrics joins the task, rules, hardware, notes and answer
    format in the system prompt, which comes first and is the same for every proposal;
    the user message explains only a metric that legend does not cover."""
    names = ("gflops", "time_spread", "text.a.c")
    first = Parent(7, Program({"k.c": KERNEL}), 1.0, {"gflops": 3.5, "time_spread": 0.1})
    second = Parent(
        8, Program({"k.c": KERNEL.replace("x * 2", "x + x")}), 2.0,
        {"gflops": 7.0, "text.b.c": 96.0, "time_s": 0.5},
    )  # fmt: skip
    for operator in OPERATORS:
        a_system, a_user = build_prompt(
            operator, CONTEXT, first, [second], extra=TURNS, metric_names=names
        )
        b_system, b_user = build_prompt(
            operator, CONTEXT, second, [first], extra=TURNS, metric_names=names, digest="d"
        )
        assert a_system == b_system, operator
        legend = a_system.split("## What the metrics mean\n", 1)[1].split("\n\n", 1)[0]
        assert "- time_spread: relative spread" in legend and "text.<file>" in legend
        assert a_system.index("## What the metrics mean") < a_system.index("## Answer format")
        for user in (a_user, b_user):
            assert "relative spread" not in user and "text.<file>" not in user, operator
            assert "## What the metrics mean" not in user
        other = b_user.split("## What the other metrics mean\n", 1)[1].split("\n## ", 1)[0]
        assert other.strip() == "- time_s (s): median time of one call", operator


def test_every_inspiration_sent_is_shown_with_its_key_metrics_in_units() -> None:
    """The engine chooses how many; each shows its score and its key metrics, the
    objectives first, each with its unit, but one that only repeats the score."""
    others = [
        Parent(
            20 + i,
            Program({"k.c": KERNEL.replace("x * 2", f"x * {i + 3}")}),
            3.0 - i / 10,
            {
                "time_s": 0.0123,
                "size_bytes": 640.0 + i,
                "gflops": 9.5 - i,
                "odd": 1.0,
                "speedup": 3.0 - i / 10,
            },
        )
        for i in range(5)
    ]
    _, user = build_prompt("diff", CONTEXT, parent(), others)
    for i in range(5):
        heading = next(
            line for line in user.splitlines() if line.startswith(f"### Program #{20 + i}")
        )
        assert heading.startswith(f"### Program #{20 + i} (score {3.0 - i / 10:g}; gflops")
        assert heading.endswith(
            f"gflops = {9.5 - i:g} GFLOP/s, size_bytes = {640 + i} B, time_s = 0.0123 s, odd = 1)"
        )
        assert f"x * {i + 3}" in user
    assert user.index("### Program #20") < user.index("### Program #24")
    _, user = build_prompt("crossover", CONTEXT, parent(), others)
    assert "## The second program, #20" in user and "### Program #20" not in user
    assert "### Program #24" in user


def test_metrics_read_with_their_units_and_meanings_once() -> None:
    metrics = {"time_spread": 0.86, "speedup": 1.5, "text.foo.c": 5120.0, "mystery": 0.25}
    others = [Parent(3, Program({"k.c": KERNEL}), 1.0, {"time_spread": 0.2, "text.bar.c": 8.0})]
    _, user = build_prompt(
        "diff", CONTEXT, Parent(7, Program({"k.c": KERNEL}), 1.5, metrics), others
    )
    assert "time_spread = 0.86 (86%), speedup = 1.5x, text.foo.c = 5120 B, mystery = 0.25" in user
    legend = user.split("## What the metrics mean\n", 1)[1].split("\n## ", 1)[0]
    assert "- time_spread: relative spread of the timed calls" in legend
    assert "0.86 means 86% noise" in legend
    assert legend.count("time_spread") == 1
    assert legend.count("text.<file>") == 1
    assert "mystery" not in legend
    _, bare = build_prompt("diff", CONTEXT, Parent(7, Program({"k.c": KERNEL}), 1.5, {}), [])
    assert "## What the metrics mean" not in bare


def test_one_metric_name_can_mean_different_things_to_two_evaluators() -> None:
    c_kernel = metric_glossary.meaning("speedup", "c_kernel")
    cuda = metric_glossary.meaning("speedup", "cuda_kernel")
    assert c_kernel and cuda and "seed" in c_kernel.text and "reference kernel" in cuda.text
    rate = metric_glossary.meaning("pixels_per_s")
    assert (
        rate
        and rate.value(1234.5) == "1234.5 pixels/s"
        and rate.value(2e9) == "2000000000 pixels/s"
    )
    assert metric_glossary.shown("fast_1.5", 1.0) == "fast_1.5 = 1"
    assert metric_glossary.meaning("zzz") is None


def test_recent_attempts_are_listed_so_the_model_does_not_repeat_them() -> None:
    attempts = [
        PastAttempt("diff", "ok", "+3/-1 lines in k.c: `x << 2`", child_id=41, score=1.92),
        PastAttempt("rewrite", "duplicate of #12", "+1/-1 lines in k.c: `x + x`"),
        PastAttempt("diff", "build_failed", "+2/-0 lines in k.c: `int y;`", child_id=44),
        PastAttempt("diff", "unparseable_after_repair", ""),
        PastAttempt("crossover", "too_similar to #9", "+1/-1 lines in k.c: `x * 3`"),
        PastAttempt("diff", "duplicate of #5", "+1/-1 lines in k.c: `x + x`"),
        PastAttempt("fix", "interrupted", ""),
    ]
    _, user = build_prompt("diff", CONTEXT, parent(), [], attempts=attempts)
    section = user.split("## Recent attempts on this program\n", 1)[1].split("\n## ", 1)[0]
    assert "Do not propose any of them again" in section
    assert section.splitlines()[1:] == [
        "- diff -> #41 scored 1.92 (parent 1.25): +3/-1 lines in k.c: `x << 2`",
        "- rewrite -> duplicate of #12: +1/-1 lines in k.c: `x + x`",
        "- diff -> #44 build failed: +2/-0 lines in k.c: `int y;`",
        "- diff -> the answer could not be applied",
        "- crossover -> too similar to #9: +1/-1 lines in k.c: `x * 3`",
        "- diff -> duplicate of #5: +1/-1 lines in k.c: `x + x`",
        "- fix -> interrupted",
    ]
    for operator in OPERATORS:
        _, user = build_prompt(
            operator, CONTEXT, parent(), [parent(pid=8)], extra=TURNS, attempts=attempts
        )
        assert "- diff -> #41 scored 1.92" in user, operator
    _, user = build_prompt("diff", CONTEXT, parent(), [])
    assert "Recent attempts" not in user


def test_the_run_digest_opens_the_user_message() -> None:
    digest = "Best score 2.5 (#9, diff); the seed scored 1."
    for operator in OPERATORS:
        system, user = build_prompt(
            operator, CONTEXT, parent(), [parent(pid=8)], extra=TURNS, digest=digest
        )
        assert user.startswith(f"## This run so far\n{digest}\n\n"), operator
        assert digest not in system
    _, user = build_prompt("diff", CONTEXT, parent(), [])
    assert "This run so far" not in user


def test_the_system_prompt_is_the_same_for_every_proposal_of_an_operator() -> None:
    """Providers cache the longest stable prefix: everything per-proposal stays out of it."""
    first = parent(1.25, "error one", pid=7)
    second = Parent(8, Program({"k.c": KERNEL.replace("x * 2", "x + x")}), 2.5, {"t": 1.0}, "two")
    attempt = PastAttempt("diff", "ok", "changed", child_id=99, score=3.0)
    for operator in OPERATORS:
        a_system, a_user = build_prompt(
            operator, CONTEXT, first, [second], extra=TURNS, digest="one"
        )
        b_system, b_user = build_prompt(
            operator, CONTEXT, second, [first], extra=TURNS, attempts=[attempt], digest="two"
        )
        assert a_system == b_system, operator
        assert a_user != b_user
        assert "x + x" in b_user and "x + x" not in b_system
    diff_system = build_prompt("diff", CONTEXT, first, [])[0]
    assert build_prompt("fix", CONTEXT, first, [])[0] == diff_system


def test_the_agent_searches_its_notes_instead_of_reading_them_in_its_prompts() -> None:
    system, user = build_prompt("agent", CONTEXT, parent(), [], extra=TURNS)
    assert "Shifts beat multiplies" not in system + user
    assert "Make tuned() fast." in system and "at most 3 turns" in user


def test_rules_of_a_c_kernel_task_reach_the_system_prompt() -> None:
    task = load_task(ROOT / "tasks" / "matmul_c" / "task.yaml")
    evaluator = CKernelEvaluator(task.spec.evaluator.params, task.root)
    context = prompt_context(task, evaluator)
    system, user = build_prompt("diff", context, Parent(1, task.seed, 1.0), [])
    rules = system.split("## Rules every program must follow\n", 1)[1].split("\n## ", 1)[0]
    assert "`void matmul(int n, const float *restrict A" in rules
    assert "only global symbol" in rules
    assert "-O3 -Os -Ofast -march=native" in rules and "-flto" in rules
    assert "stopped after 20 s" in rules
    assert "## Rules" not in user
    assert prompt_context(task).rules.startswith("- Each sandbox job")


@pytest.mark.parametrize(
    "name", sorted(p.name for p in (ROOT / "tasks").iterdir() if (p / "task.yaml").is_file())
)
def test_every_shipped_evaluator_states_its_rules(name: str) -> None:
    task = load_task(ROOT / "tasks" / name / "task.yaml")
    spec = task.spec.evaluator
    rules = evaluator_class(spec.name)(spec.params, task.root).prompt_rules()
    lines = rules.splitlines()
    assert lines and all(line.startswith("- ") for line in lines)


def test_a_task_template_overrides_only_its_own_name(tmp_path: Path) -> None:
    (tmp_path / "diff.txt").write_text("CUSTOM for $$5: $task\n\n$parent\n\n$format\n")
    system, user = build_prompt("diff", CONTEXT, parent(), [], templates=tmp_path)
    assert user.startswith("CUSTOM for $5: \n\n## The current program, #7")
    assert "<<<<<<< SEARCH" not in user  # the built-in system prompt holds it
    assert system == build_prompt("diff", CONTEXT, parent(), [])[0]
    (tmp_path / "diff.txt").write_text("$tsak\n")
    with pytest.raises(ValueError, match=r"diff.txt: unknown placeholder \$tsak"):
        build_prompt("diff", CONTEXT, parent(), [], templates=tmp_path)


def test_a_section_the_task_system_prompt_leaves_out_stays_in_the_user_message(
    tmp_path: Path,
) -> None:
    (tmp_path / "system.txt").write_text("You guess numbers.\n\n$task\n")
    system, user = build_prompt("diff", CONTEXT, parent(), [], templates=tmp_path)
    assert system.startswith("You guess numbers.\n\n## Task\nMake tuned() fast.")
    assert "Make tuned() fast." not in user
    for kept in ("Shifts beat multiplies", "Test Chip 9000", "<<<<<<< SEARCH"):
        assert kept in user and kept not in system
    _, user = build_prompt(
        "diff", CONTEXT, parent(), [], templates=tmp_path, metric_names=("gflops",)
    )
    assert "## What the metrics mean\n- gflops (GFLOP/s): floating-point" in user


def test_every_placeholder_is_accepted_in_every_template(tmp_path: Path) -> None:
    """The answer formats are the exception: they cannot hold $format, themselves."""
    names = ["task", "rules", "hardware", "notes", "digest", "parent", "feedback"]
    names += ["inspirations", "partner", "legend", "attempts", "language", "path"]
    every = "\n\n".join(f"[{name}] ${name}" for name in names) + "\n"
    (tmp_path / "format_diff.txt").write_text(every)
    every += "\n[format] $format\n"
    for template in ("system.txt", "diff.txt", "crossover.txt"):
        (tmp_path / template).write_text(every)
    system, user = build_prompt(
        "crossover", CONTEXT, parent(), [parent(pid=8)], templates=tmp_path, digest="d"
    )
    assert "[task] ## Task" in system and "[language] c" in system
    assert "[partner] ## The second program, #8" in user and "[path] k.c" in user


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


def test_a_change_is_summarised_in_one_line() -> None:
    before = Program({"k.c": KERNEL})
    after = Program(
        {
            "k.c": KERNEL.replace(
                "int tuned(int x) { return x * 2; }\n", "int tuned(int x) {\n  return x << 1;\n}\n"
            )
        }
    )
    assert summarize_change(before, after) == "+3/-1 lines in k.c: `int tuned(int x) {`"
    assert summarize_change(before, before) == "no change"
    shorter = Program({"k.c": KERNEL.replace("int tuned(int x) { return x * 2; }\n", "")})
    assert summarize_change(before, shorter) == (
        "+0/-1 lines in k.c: removed `int tuned(int x) { return x * 2; }`"
    )
    long_line = "int tuned(int x) { return " + " + ".join(["x"] * 40) + "; }\n"
    longer = Program({"k.c": KERNEL.replace("int tuned(int x) { return x * 2; }\n", long_line)})
    summary = summarize_change(before, longer)
    assert summary.endswith("...`") and len(summary) < 100
    two = Program({"k.c": KERNEL, "h.h": "#define N 4\n"})
    assert summarize_change(before, two) == "+1/-0 lines in h.h: `#define N 4`"

    # Lines alike at both ends are not compared (the ones between are), whatever repeats.
    def block(text: str) -> Program:
        return Program({"r.c": f"// EVOLVE-BLOCK-START\n{text}// EVOLVE-BLOCK-END\n"})

    rows = "x += 1;\n" * 6
    assert summarize_change(block(rows), block(rows + "x += 1;\n")) == (
        "+1/-0 lines in r.c: `x += 1;`"
    )
    ends, both = block(f"int a;\n{rows}int b;\n"), block(f"long a;\n{rows}long b;\n")
    assert summarize_change(ends, both) == "+2/-2 lines in r.c: `long a;`"


MATMUL_SEED = (ROOT / "tasks" / "matmul_c" / "seed.c").read_text()


def test_a_change_summary_names_knob_moves_first_the_choice_before_the_numbers() -> None:
    """The first changed line is `#define TILE_I 256`; what mattered is the loop order."""
    seed = Program({"seed.c": MATMUL_SEED})
    tuned = Program(
        {
            "seed.c": MATMUL_SEED.replace("#define TILE_I 512 ", "#define TILE_I 256 ")
            .replace("#define TILE_K 512 ", "#define TILE_K 8   ")
            .replace("#define LOOP_ORDER IJK ", "#define LOOP_ORDER IKJ ")
        }
    )
    assert summarize_change(seed, tuned) == (
        "+3/-3 lines in seed.c: LOOP_ORDER IJK→IKJ, TILE_K 512→8, TILE_I 512→256"
    )
    flags = Program({"seed.c": MATMUL_SEED.replace("// cflags: -O2 ", "// cflags: -O3 ")})
    assert summarize_change(seed, flags) == "+1/-1 lines in seed.c: cflags -O2→-O3"


def test_a_change_summary_names_the_largest_hunk_after_the_knobs() -> None:
    seed = Program({"seed.c": MATMUL_SEED})
    zeroing = "  for (int i = 0; i < n * n; i++) C[i] = 0.0f;\n"
    rewritten = (
        MATMUL_SEED.replace("#define TILE_J 512 ", "#define TILE_J 64  ")
        .replace("#define MIN(a, b)", "#define MINIMUM(a, b)")
        .replace(zeroing, "  memset(C, 0, sizeof(float) * n * n);\n  /* C is zeroed */\n")
    )
    assert summarize_change(seed, Program({"seed.c": rewritten})) == (
        "+4/-3 lines in seed.c: TILE_J 512→64; `memset(C, 0, sizeof(float) * n * n);`"
    )
    # A knob redeclared is no move: the hunks say what changed.
    widened = MATMUL_SEED.replace(
        "@knob pow2 1..512\n#define TILE_J", "@knob pow2 1..1024\n#define TILE_J"
    )
    assert summarize_change(seed, Program({"seed.c": widened})) == (
        "+1/-1 lines in seed.c: `#define TILE_I 512 // @knob pow2 1..1024`"
    )
