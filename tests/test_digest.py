"""The run digest, counted from a real SQLite store."""

from __future__ import annotations

from pathlib import Path

from evolve.mutators.base import Parent
from evolve.mutators.prompt import PromptContext, build_prompt
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult, StageResult
from evolve.propose.digest import run_digest
from evolve.store import Store, default_url
from tests.conftest import store_record

RUN = "run-1"


def program(n: int) -> Program:
    return Program({"kernel.c": f"// EVOLVE-BLOCK-START\nint x = {n};\n// EVOLVE-BLOCK-END\n"})


def add(store: Store, n: int, operator: str, parents: list[int], summary: str = "") -> int:
    mutation = {"operator": operator, **({"summary": summary} if summary else {})}
    record = store.add_candidate(
        RUN, program(n), parent_ids=parents, island=0, generation=len(parents), mutation=mutation
    )
    assert record is not None
    return record.id


def passed(store: Store, candidate_id: int, score: float) -> None:
    result = EvalResult.from_stages([StageResult("measure", True, 1.0, metrics={"t": 1.0})])
    record(store, candidate_id, result, score)


def failed(store: Store, candidate_id: int, stage: str, feedback: str) -> None:
    before = [] if stage == "build" else [StageResult("build", True, 0.1)]
    result = EvalResult.from_stages([*before, StageResult(stage, False, 0.1, feedback)])
    record(store, candidate_id, result, None)


def record(store: Store, candidate_id: int, result: EvalResult, score: float | None) -> None:
    store.record_evaluation(
        store_record(store, candidate_id),
        result,
        kind="evaluate",
        score=score,
        input_seed=1,
        worker="w",
        started_at=1.0,
        finished_at=2.0,
    )


def test_the_digest_says_what_worked_and_what_failed(tmp_path: Path) -> None:
    with Store(default_url(tmp_path)) as store:
        store.create_run(RUN, task_path="t.yaml", task_yaml="", seed=1, settings={})
        seed = add(store, 0, "seed", [])
        passed(store, seed, 1.0)
        assert run_digest(store, RUN) == ""  # nothing to say before a child is evaluated

        loop = add(store, 1, "diff", [seed], "+3/-1 lines in kernel.c: `for (k = 0; k < n;`")
        passed(store, loop, 1.5)
        flags = add(store, 2, "diff", [seed])
        failed(store, flags, "build", "compiler flag(s) not allowed: -fplugin=x\nAllowed: -O2")
        passed(store, add(store, 3, "rewrite", [loop]), 1.2)
        failed(store, add(store, 4, "diff", [loop]), "check", "\n  output C differs at [3, 4]")
        tiles = add(store, 5, "autotuner", [loop], "TILE_K 512 -> 64")
        passed(store, tiles, 2.5)
        failed(store, add(store, 6, "diff", [tiles]), "build", "error: expected ';'")
        add(store, 7, "diff", [tiles])  # pending: not counted yet
        passed(store, add(store, 8, "crossover", [tiles, loop]), 2.4)

        digest = run_digest(store, RUN)
    assert digest.splitlines() == [
        f"Best score 2.5 (#{tiles}, autotuner); the seed scored 1. The best rose 2 times, the "
        "last 2 evaluated candidates ago.",
        "Children by operator:",
        "- diff: 1 of 4 passed, 1 beat their parent",
        "- rewrite: 1 of 1 passed, 0 beat their parent",
        "- autotuner: 1 of 1 passed, 1 beat their parent",
        "- crossover: 1 of 1 passed, 0 beat their parent",
        "Commonest failures:",
        f"- build_failed x2, e.g. #{tiles + 1}: error: expected ';'",
        f"- check_failed x1, e.g. #{tiles - 1}: output C differs at [3, 4]",
        "Largest gains over a parent:",
        f"- #{tiles} (autotuner), +1 over #{loop}: TILE_K 512 -> 64",
        f"- #{loop} (diff), +0.5 over #{seed}: +3/-1 lines in kernel.c: `for (k = 0; k < n;`",
    ]
    context = PromptContext(description="Go fast.", objectives=(("t", "minimize"),))
    _, user = build_prompt("diff", context, Parent(tiles, program(5), 2.5), [], digest=digest)
    assert user.startswith("## This run so far\nBest score 2.5")


def test_a_run_whose_programs_all_fail_says_so(tmp_path: Path) -> None:
    with Store(default_url(tmp_path)) as store:
        store.create_run(RUN, task_path="t.yaml", task_yaml="", seed=1, settings={})
        seed = add(store, 0, "seed", [])
        failed(store, seed, "build", "")
        failed(store, add(store, 1, "fix", [seed]), "build", "")
        digest = run_digest(store, RUN)
    assert digest.splitlines() == [
        "No program has passed yet; the seed failed.",
        "Children by operator:",
        "- fix: 0 of 1 passed, 0 beat their parent",
        "Commonest failures:",
        f"- build_failed x1, e.g. #{seed + 1}: (no feedback)",
    ]
