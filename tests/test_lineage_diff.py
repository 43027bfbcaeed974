"""`evolve lineage` and `evolve diff`, run through click against a store filled through the
Store API as a run fills it: a seed, an autotuned child, a model-made child, their crossover
(whose model is known only from its paid call) and a model-made grandchild. The run minimizes
runtime_s, so every score is a negated runtime and a runtime that fell must read "better"."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, create_engine, event, insert

from evolve.cli.commands import main
from evolve.llm import LLMCall
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.store import Settlement, Store
from evolve.store.schema import Candidate
from evolve.views.lineage_tree import lineage_tree
from tests.conftest import postgres_schema, store_record

RUN = "sorter"
TASK_YAML = """\
name: sorter
seed: [solve.py]
evaluator: {name: python}
objectives:
  - {name: runtime_s, direction: minimize}
"""


def program(body: str, **extra: str) -> Program:
    block = f"def solve(xs):\n    # EVOLVE-BLOCK-START\n{body}    # EVOLVE-BLOCK-END\n"
    return Program({"solve.py": block, **extra})


def measured(store: Store, candidate_id: int, runtime_s: float) -> None:
    result = EvalResult.from_stages(
        [StageResult("measure", True, 0.1, metrics={"runtime_s": runtime_s})]
    )
    store.record_evaluation(
        store_record(store, candidate_id),
        result,
        kind="evaluate",
        score=-runtime_s,  # evolve/engine/scoring.py's score of a minimized objective
        input_seed=1,
        worker="worker-0",
        started_at=time.time(),
        finished_at=time.time(),
    )


def fill(store: Store) -> dict[str, int]:
    """The family, by role: seed, tuned, diffed, crossed (of tuned + diffed), rewritten."""
    store.create_run(RUN, task_path="task.yaml", task_yaml=TASK_YAML, seed=0, settings={})
    seed = store.plant_seed(RUN, program("    return sorted(xs)\n"))
    measured(store, seed.id, 2.0)

    def child(body: str, parents: list[int], mutation: dict[str, Any], **extra: Any) -> int:
        made = store.add_candidate(
            RUN, program(body), parent_ids=parents, island=0, generation=1, mutation=mutation,
            **extra,
        )  # fmt: skip
        assert made is not None
        return made.id

    tuned = child(
        "    xs = list(xs)\n    xs.sort()\n    return xs\n",
        [seed.id],
        {"operator": "autotune", "mutator": "autotuner", "summary": "+2/-1 lines: `xs.sort()`"},
    )
    diffed = child(
        "    return sorted(xs, key=int)\n",
        [seed.id],
        {"operator": "diff", "model": "openai:gpt-4o-mini", "summary": "+1/-1 lines: `key=int`"},
    )
    proposal = store.open_proposal(RUN, operator="crossover", parent_ids=[tuned, diffed], island=0)
    call = LLMCall("anthropic", "claude-sonnet-4", "prompt", "reply", 100, 40, 0.01, 1.5, "ok")
    crossed = child(
        "    xs = list(xs)\n    xs.sort(key=int)\n    return xs\n",
        [tuned, diffed],
        {"operator": "crossover", "partner": diffed, "summary": "+1/-1 lines: `xs.sort(key=int)`"},
        settlement=Settlement(proposal, "candidate", [call]),
    )
    rewritten = child(
        "    xs = list(xs)\n    xs.sort(key=int, reverse=False)\n    return xs\n",
        [crossed],
        {"operator": "rewrite", "model": "openai:gpt-4o", "summary": "+1/-1 lines: `reverse`"},
    )
    for candidate_id, runtime_s in [(tuned, 1.6), (diffed, 2.4), (crossed, 1.5), (rewritten, 1.2)]:
        measured(store, candidate_id, runtime_s)
    roles = {"seed": seed.id, "tuned": tuned, "diffed": diffed}
    return roles | {"crossed": crossed, "rewritten": rewritten}


@pytest.fixture
def filled(tmp_path: Path) -> Iterator[tuple[str, dict[str, int]]]:
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(url) as store:
        yield url, fill(store)


def evolve(url: str, *args: object) -> Result:
    return CliRunner().invoke(main, [*map(str, args), "--db", url])


def lines_of(result: Result) -> dict[str, str]:
    """Each shown candidate's first line, by its `#id`, with the tree's guides taken off."""
    found: dict[str, str] = {}
    for line in result.stdout.splitlines():
        text = line.lstrip("│├└─ ")
        if text.startswith("#"):
            found.setdefault(text.split()[0], text)
    return found


def test_the_ancestry_of_a_crossover_grandchild_names_both_parents_and_reaches_the_seed(
    filled: tuple[str, dict[str, int]],
) -> None:
    url, ids = filled
    result = evolve(url, "lineage", ids["rewritten"])
    assert result.exit_code == 0, result.output
    assert "runtime_s (minimized: lower is better)" in result.stdout
    shown = lines_of(result)
    assert set(shown) == {f"#{n}" for n in ids.values()}
    crossed = shown[f"#{ids['crossed']}"]
    assert f"crossover of #{ids['tuned']} + #{ids['diffed']}" in crossed
    assert "anthropic:claude-sonnet-4" in crossed  # known only from its paid call
    assert "-0.1 (-6.3%) better" in crossed and "`xs.sort(key=int)`" in crossed
    rewritten = shown[f"#{ids['rewritten']}"]
    assert "rewrite" in rewritten and "openai:gpt-4o" in rewritten
    assert "runtime_s 1.2" in rewritten and "-0.3 (-20.0%) better" in rewritten
    diffed = shown[f"#{ids['diffed']}"]
    assert "openai:gpt-4o-mini" in diffed and "+0.4 (+20.0%) worse" in diffed
    assert "autotune" in shown[f"#{ids['tuned']}"]
    assert "seed" in shown[f"#{ids['seed']}"]
    # the seed is reached through both parents, and drawn once
    assert result.stdout.count(f"#{ids['seed']} (see above)") == 1


def test_descendants_are_found_through_every_parent_and_depth_cuts_them_with_a_note(
    filled: tuple[str, dict[str, int]],
) -> None:
    url, ids = filled
    every = evolve(url, "lineage", ids["seed"], "--descendants")
    assert every.exit_code == 0, every.output
    assert set(lines_of(every)) == {f"#{n}" for n in ids.values()}
    assert every.stdout.count(f"#{ids['crossed']} (see above)") == 1
    assert "not shown" not in every.stdout

    cut = evolve(url, "lineage", ids["seed"], "--descendants", "--depth", "1")
    assert cut.exit_code == 0, cut.output
    assert set(lines_of(cut)) == {f"#{ids[role]}" for role in ("seed", "tuned", "diffed")}
    assert cut.stdout.count("1 child not shown") == 2
    assert "2 more descendants beyond depth 1, not shown" in cut.stdout

    from_middle = evolve(url, "lineage", ids["diffed"], "--descendants")
    assert set(lines_of(from_middle)) == {f"#{ids[r]}" for r in ("diffed", "crossed", "rewritten")}


def test_a_run_of_several_objectives_tells_changes_in_its_score(tmp_path: Path) -> None:
    """Its score is the weighted sum, already oriented up: a rise is better."""
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(url) as store:
        two = TASK_YAML + "  - {name: bytes, direction: minimize, weight: 0.5}\n"
        store.create_run(RUN, task_path="task.yaml", task_yaml=two, seed=0, settings={})
        seed = store.plant_seed(RUN, program("    return sorted(xs)\n"))
        child = store.add_candidate(
            RUN, program("    return sorted(xs)[:]\n"), parent_ids=[seed.id], island=0,
            generation=1, mutation={"operator": "diff"},
        )  # fmt: skip
        assert child is not None
        measured(store, seed.id, 4.0)
        measured(store, child.id, 3.0)
    result = evolve(url, "lineage", child.id)
    assert "in score (the objectives' weighted sum, higher is better)" in result.stdout
    assert "score -3  diff  +1 (+25.0%) better" in lines_of(result)[f"#{child.id}"]


def test_diff_against_the_parent_shows_the_changed_line_plain_or_coloured(
    filled: tuple[str, dict[str, int]],
) -> None:
    url, ids = filled
    crossed, rewritten = ids["crossed"], ids["rewritten"]
    plain = evolve(url, "diff", rewritten)
    assert plain.exit_code == 0, plain.output
    assert plain.stdout.splitlines() == [
        f"--- a/solve.py\t(#{crossed})",
        f"+++ b/solve.py\t(#{rewritten})",
        "@@ -1,6 +1,6 @@",
        " def solve(xs):",
        "     # EVOLVE-BLOCK-START",
        "     xs = list(xs)",
        "-    xs.sort(key=int)",
        "+    xs.sort(key=int, reverse=False)",
        "     return xs",
        "     # EVOLVE-BLOCK-END",
    ]
    assert evolve(url, "diff", crossed, rewritten).stdout == plain.stdout
    coloured = evolve(url, "diff", rewritten, "--color")
    assert "\x1b[31m-    xs.sort(key=int)\x1b[0m" in coloured.stdout
    assert "\x1b[32m+    xs.sort(key=int, reverse=False)\x1b[0m" in coloured.stdout
    assert "\x1b[36m@@ -1,6 +1,6 @@\x1b[0m" in coloured.stdout


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch(1)")
def test_the_plain_diff_of_two_runs_candidates_patches_one_program_into_the_other(
    filled: tuple[str, dict[str, int]], tmp_path: Path
) -> None:
    """Files only one side has, a last line with no newline, a form feed (a line break to
    str.splitlines, not to patch), and the other run named."""
    url, ids = filled
    with Store(url) as store:
        store.create_run("other", task_path="t.yaml", task_yaml=TASK_YAML, seed=0, settings={})
        block = "def solve(xs):\n    # EVOLVE-BLOCK-START\n    return xs\n    # EVOLVE-BLOCK-END"
        other = store.plant_seed("other", Program({"solve.py": block, "notes.txt": "fast\fer\n"}))
        old = store.candidate(ids["seed"])
    assert old is not None
    result = evolve(url, "diff", ids["seed"], other.id)
    assert result.exit_code == 0, result.output
    assert f"--- /dev/null\t(#{ids['seed']}, run {RUN})" in result.stdout
    assert f"+++ b/notes.txt\t(#{other.id}, run other)" in result.stdout
    for path, text in old.program.files.items():
        (tmp_path / path).write_text(text)
    subprocess.run(["patch", "-p1"], input=result.stdout, text=True, cwd=tmp_path, check=True)
    assert {path: (tmp_path / path).read_text() for path in other.program.files} == dict(
        other.program.files
    )


def test_the_same_program_twice_is_no_difference(filled: tuple[str, dict[str, int]]) -> None:
    url, ids = filled
    with Store(url) as store:
        store.create_run("again", task_path="t.yaml", task_yaml=TASK_YAML, seed=0, settings={})
        seed = store.candidate(ids["seed"])
        assert seed is not None
        copy = store.plant_seed("again", seed.program)
    result = evolve(url, "diff", ids["seed"], copy.id)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "no difference" in result.stderr


def test_unknown_ids_and_the_seeds_parent_exit_2_saying_why(
    filled: tuple[str, dict[str, int]],
) -> None:
    url, ids = filled
    for args in (["lineage", 999], ["lineage", 999, "--descendants"], ["diff", 999]):
        result = evolve(url, *args)
        assert result.exit_code == 2 and "no candidate #999" in result.stderr, args
    result = evolve(url, "diff", ids["seed"], 999)
    assert result.exit_code == 2 and "no candidate #999" in result.stderr
    result = evolve(url, "diff", ids["seed"])
    assert result.exit_code == 2
    assert f"#{ids['seed']} is the seed of run {RUN}: it has no parent" in result.stderr


def test_ten_thousand_candidates_take_a_few_queries_and_little_time(tmp_path: Path) -> None:
    """A chain of 10,000 from the seed, a tenth of them crossovers with an older candidate:
    reading it must not cost a query per candidate, nor overflow a recursion."""
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    with Store(url) as store:
        store.create_run(RUN, task_path="task.yaml", task_yaml=TASK_YAML, seed=0, settings={})
        seed = store.plant_seed(RUN, program("    return sorted(xs)\n")).id
    last = seed + 9_999
    rows = [
        {
            "id": n,
            "run_name": RUN,
            "parent_ids": [n - 1, n // 2] if n % 10 == 0 else [n - 1],
            "island": 0,
            "generation": n - seed,
            "files": dict(program(f"    return {n}\n").files),
            "code_hash": str(n),
            "mutation": {"operator": "diff"},
            "status": "ok",
            "score": -1.0 / n,
            "measurements": 1,
            "created_at": 0.0,
        }
        for n in range(seed + 1, last + 1)
    ]
    raw = create_engine(url)  # 10,000 add_candidate calls would take minutes
    with raw.begin() as connection:
        connection.execute(insert(Candidate), rows)
    raw.dispose()
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    with Store(url) as store:
        event.listen(Engine, "before_cursor_execute", count)
        try:
            started = time.perf_counter()
            descendants = lineage_tree(store, seed, descendants=True, depth=None)
            ancestry = lineage_tree(store, last, descendants=False, depth=None)
            took = time.perf_counter() - started
        finally:
            event.remove(Engine, "before_cursor_execute", count)
    assert len(statements) < 20, statements  # a query per candidate would be 10,000
    assert took < 10
    assert descendants.cut == 0 and ancestry.cut == 0
    steps, branch = 0, ancestry.root
    while branch.branches:
        steps, branch = steps + 1, branch.branches[0]
    assert steps == 9_999 and branch.member.id == seed


@pytest.mark.postgres
def test_lineage_and_diff_against_postgresql() -> None:
    with postgres_schema() as url, Store(url) as store:
        ids = fill(store)
        ancestry = evolve(url, "lineage", ids["rewritten"])
        assert ancestry.exit_code == 0, ancestry.output
        assert set(lines_of(ancestry)) == {f"#{n}" for n in ids.values()}
        assert "anthropic:claude-sonnet-4" in lines_of(ancestry)[f"#{ids['crossed']}"]
        descendants = evolve(url, "lineage", ids["seed"], "--descendants", "--depth", "1")
        assert "2 more descendants beyond depth 1" in descendants.stdout
        diff = evolve(url, "diff", ids["rewritten"])
        assert diff.exit_code == 0, diff.output
        assert "+    xs.sort(key=int, reverse=False)\n" in diff.stdout
        assert evolve(url, "lineage", 10**9).exit_code == 2


def test_a_programs_escape_sequences_are_shown_to_a_reader_and_kept_in_a_pipe(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'evolve.db'}"
    hostile = "    xs = 1  # \x1b]52;c;cm0gLXJmIH4K\x07\x1b[8mhidden\x1b[0m\n"
    with Store(url) as store:
        store.create_run("esc", task_path="t.yaml", task_yaml=TASK_YAML, seed=0, settings={})
        seed = store.plant_seed("esc", program("    return xs\n"))
        child = store.add_candidate(
            "esc", program(hostile + "    return xs\n"), parent_ids=[seed.id], island=0,
            generation=1, mutation={"operator": "diff"},
        )  # fmt: skip
    assert child is not None
    piped = evolve(url, "diff", child.id)
    assert piped.exit_code == 0 and "+" + hostile in piped.stdout, "a pipe gets the bytes"
    read = evolve(url, "diff", child.id, "--color")
    assert read.exit_code == 0
    assert not any(raw in read.stdout for raw in ("\x07", "\x1b]52", "\x1b[8m"))
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b[8mhidden" in read.stdout
