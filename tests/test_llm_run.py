"""Whole runs with a model: the real openai SDK, in the proposal workers, against the
scripted server.

The scripted "model" reads the parent's code in its prompt and answers with a diff that
raises knob A; around it the script stages what real APIs do: prose instead of code, a 429
storm, a 500, an empty reply, a diff that does not match, and an edit outside the block.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evolve.engine.loop import Engine
from evolve.executors import Executor
from evolve.executors.local import LocalExecutor
from evolve.executors.on_ray import RayExecutor
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import write_matmul_task
from tests.fakes.llm_server import Empty, Fail, Reply, ScriptedLLMServer, prompt_text
from tests.helpers.engine_runs import Recorder
from tests.helpers.llm_runs import (
    CALL_USD,
    TOKENS_IN,
    TOKENS_OUT,
    llm_task,
    raise_a,
)


def reply(text: str) -> Reply:
    return Reply(text, input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)


NO_MATCH = reply("<<<<<<< SEARCH\nA = 999\n=======\nA = 5\n>>>>>>> REPLACE\n")
OUTSIDE = reply(
    "<<<<<<< SEARCH\n# EVOLVE-BLOCK-START\n=======\n# changed the marker\n>>>>>>> REPLACE\n"
)


PROSE = "I would make the code faster by thinking harder."


class FixingTheProse:
    """Answers the script's steps in order, but the repair turn after PROSE always with a
    fix of its own (a step no other reply takes, so that it is no duplicate): proposals
    run at once, so another proposal's request may come between a reply and its repair,
    and the script alone could not promise that the prose is repaired."""

    def __init__(self, script: list[Any]) -> None:
        self.script = deque(script)
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Any:
        if PROSE in prompt_text(body):
            return raise_a(body, by=5)
        with self.lock:
            step = self.script.popleft() if self.script else raise_a
        return step(body) if callable(step) else step


def _run(
    tmp_path: Path, task_file: Path, observer: Any = None, executor: Executor | None = None
) -> tuple[Any, Store]:
    """The task run to its end, its workers on `executor` (by default the local one)."""
    task = load_task(task_file)
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run(
        "llm", task_path=str(task.path), task_yaml=task.text, seed=3, settings={}
    )
    engine = Engine(
        task, store, run, make_evaluator(task), executor or LocalExecutor(tmp_path), workers=1,
        results_dir=tmp_path / "out", observer=observer,
    )  # fmt: skip
    return engine.run(), store


@pytest.mark.system
def test_a_model_run_survives_a_real_apis_failures_and_improves(tmp_path: Path) -> None:
    script = [
        reply(PROSE),  # prose: one repair turn, which always gets a fix
        raise_a,
        Fail(429, retry_after=1),
        Fail(429, retry_after=1),
        Fail(500),
        raise_a,
        Empty(input_tokens=TOKENS_IN, output_tokens=0),
        NO_MATCH,  # repaired by the next step
        raise_a,
        OUTSIDE,
        OUTSIDE,  # the repair fails too: the proposal is dropped, its calls are kept
    ]
    with ScriptedLLMServer(default=FixingTheProse(script)) as server:
        outcome, store = _run(tmp_path, llm_task(tmp_path, server.openai_url, candidates=8))
        requests = len(server.requests)

    assert outcome.reason == "candidate budget reached (8)"
    seed = store.seed_candidate("llm")
    assert seed is not None and outcome.best is not None
    assert outcome.best.score > seed.score  # type: ignore[operator]
    diff_children = [c for c in store.top("llm", 10) if c.mutation.get("operator") == "diff"]
    assert diff_children and all(
        c.mutation["model"] == "openai-compatible:scripted" for c in diff_children
    )
    assert any(c.mutation["repaired"] for c in diff_children)

    calls = store.llm_calls_of_run("llm")
    assert len(calls) == requests, "every request the server saw is in the ledger"
    statuses = [c.status for c in calls]
    for status in ("ok", "rate_limited", "server_error", "empty"):
        assert status in statuses, statuses
    ok = [c for c in calls if c.status in ("ok", "empty")]
    assert sum(c.input_tokens for c in ok) == TOKENS_IN * len(ok)
    assert store.llm_spend("llm")[0] == pytest.approx(sum(c.cost_usd for c in calls))
    assert all(c.cost_usd == pytest.approx(CALL_USD) for c in calls if c.status == "ok")
    made = store.llm_calls(diff_children[0].id)
    assert made and "SEARCH" in made[-1].response and "A = " in made[0].prompt
    shown = subprocess.run(
        [sys.executable, "-m", "evolve", "show", str(diff_children[0].id),
         "--db", f"sqlite:///{tmp_path / 'evolve.db'}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "openai-compatible:scripted (diff)" in shown.stdout
    assert "prompt:" in shown.stdout and ">>>>>>> REPLACE" in shown.stdout


@pytest.mark.system
def test_a_usd_budget_stops_the_run_before_a_request_could_pass_the_limit(
    tmp_path: Path,
) -> None:
    """Each request is reserved at its worst case before it is sent: the run stops when the
    next one no longer fits, so its spend is under the limit by less than that worst case."""
    limit = 12 * CALL_USD
    with ScriptedLLMServer(default=raise_a) as server:
        task = llm_task(tmp_path, server.openai_url, candidates=50, budget_usd=limit)
        task.write_text(
            task.read_text().replace("  timeout_s: 2\n", "  timeout_s: 2\n  max_tokens: 60\n")
        )
        recorder = Recorder()
        outcome, store = _run(tmp_path, task, recorder)

    spent, tokens = store.llm_spend("llm")
    shown = recorder.snapshots[-1].progress_line()
    assert f"models ${spent:.4f} of ${limit:g}, {tokens:,} tokens" in shown
    refused = re.fullmatch(
        r"USD budget reached \(\$[\d.]+ of \$[\d.e-]+ charged; the next request may cost "
        r"\$([\d.]+)\)",
        outcome.reason,
    )
    assert refused, outcome.reason
    assert limit - float(refused.group(1)) - 1e-4 < spent <= limit
    assert store.count_candidates("llm") < 50


def fix_or_raise() -> Callable[[dict[str, Any]], Reply]:
    """A model that repairs a failed program (lowers A, and sets C to a value no other
    program has), and otherwise raises A by a step that varies from call to call."""
    steps = itertools.count(1)

    def answer(body: dict[str, Any]) -> Reply:
        text = prompt_text(body)
        a = re.search(r"^A = (\d+)  # @knob int 0\.\.64$", text, re.M)
        c = re.search(r"^C = \S+  # @knob float 0\.1\.\.20$", text, re.M)
        assert a and c
        step, value = next(steps), int(a.group(1))
        if "failed evaluation" in text:
            edits = [
                (a.group(0), f"A = {value - 30}  # @knob int 0..64"),
                (c.group(0), f"C = {0.1 + step / 1000}  # @knob float 0.1..20"),
            ]
        else:
            edits = [(a.group(0), f"A = {min(value + 15 + step % 20, 64)}  # @knob int 0..64")]
        diff = "".join(
            f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n" for old, new in edits
        )
        return Reply(diff, input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)

    return answer


@pytest.mark.system
def test_fix_repairs_failed_candidates_and_crossover_records_both_parents(tmp_path: Path) -> None:
    with ScriptedLLMServer(default=fix_or_raise()) as server:
        task = llm_task(tmp_path, server.openai_url, candidates=30)
        text = task.read_text().replace("{target: 100}", "{target: 100, fail_above: 40}")
        text = text.replace("  timeout_s: 2\n", "  timeout_s: 2\n  finisher_share: 0\n")
        text = text.replace(
            "  - name: diff\n",
            "  - {name: diff, weight: 2}\n  - {name: fix, weight: 5}\n"
            "  - {name: crossover, weight: 2}\n",
        )
        task.write_text(text)
        outcome, store = _run(tmp_path, task)

    assert outcome.reason == "candidate budget reached (30)"
    made = {}
    for evaluation in store.run_evaluations("llm"):
        candidate = store.candidate(evaluation.candidate_id)
        made.setdefault(candidate.mutation.get("operator"), []).append(candidate)
    fixes = made.get("fix", [])
    assert fixes, f"no fix was tried: {sorted(made)} {store.status_counts('llm')}"
    for child in fixes:
        parent = store.candidate(child.parent_ids[0])
        assert parent.status == "check_failed"
        assert child.status == "ok"
    crossovers = made.get("crossover", [])
    assert crossovers and all(len(c.parent_ids) == 2 for c in crossovers)


@pytest.mark.system
def test_the_autotuner_finishes_what_the_model_made(tmp_path: Path) -> None:
    with ScriptedLLMServer(default=raise_a) as server:
        task = llm_task(tmp_path, server.openai_url, candidates=16)
        task.write_text(
            task.read_text().replace("  timeout_s: 2\n", "  timeout_s: 2\n  finisher_share: 0.5\n")
        )
        outcome, store = _run(tmp_path, task)

    assert outcome.reason == "candidate budget reached (16)"
    finished = [
        c for e in store.run_evaluations("llm")
        if (c := store.candidate(e.candidate_id)) and c.mutation.get("finisher")
    ]  # fmt: skip
    assert finished, "the finisher never ran"
    for child in finished:
        parent = store.candidate(child.parent_ids[0])
        assert parent.mutation["operator"] == "diff" and parent.status == "ok"
        assert child.mutation["operator"] in ("tune", "crossover") and not store.llm_calls(child.id)


def matmul_tuner(body: dict[str, Any]) -> Reply:
    """A model that knows the notes: first the loop order and -O3, then smaller k tiles."""
    text = prompt_text(body)
    order = re.search(r"^#define LOOP_ORDER (\w+) .*$", text, re.M)
    flags = re.search(r"^// cflags: (-O\d)( .*)$", text, re.M)
    tile = re.search(r"^#define TILE_K (\d+)( .*)$", text, re.M)
    assert order and flags and tile, "the prompt did not show the parent's code"
    if order.group(1) == "IJK":
        edits = [
            (order.group(0), order.group(0).replace("IJK  //", "IKJ  //")),
            (flags.group(0), f"// cflags: -O3{flags.group(2)}"),
        ]
    else:
        smaller = max(int(tile.group(1)) // 2, 8)
        edits = [(tile.group(0), f"#define TILE_K {smaller}{tile.group(2)}")]
    diff = "".join(f"<<<<<<< SEARCH\n{a}\n=======\n{b}\n>>>>>>> REPLACE\n" for a, b in edits)
    return Reply(f"Following the notes.\n{diff}", input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)


class SlowNewLines:
    """Answers after `seconds` with a line no program had, so every proposal is a new
    child; counts the requests it is answering at once, and notes when the first answer
    went out. The first wave is held until `wave` requests have come (30 s at most), so
    that requests a slow machine sends spread out still meet."""

    def __init__(self, seconds: float, wave: int) -> None:
        self.seconds = seconds
        self.wave = wave
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.numbers = itertools.count(1)
        self.answering = self.most = 0
        self.first_answer: float | None = None

    def __call__(self, body: dict[str, Any]) -> Reply:
        line = re.search(r"^A = \d+  # @knob int 0\.\.64$", prompt_text(body), re.M)
        assert line, "the prompt did not show the parent's code"
        with self.lock:
            number = next(self.numbers)
            self.answering += 1
            self.most = max(self.most, self.answering)
            self.arrived.notify_all()
            self.arrived.wait_for(
                lambda: self.first_answer is not None or self.answering >= self.wave, timeout=30
            )
        time.sleep(self.seconds)
        with self.lock:
            self.answering -= 1
            self.first_answer = self.first_answer or time.time()
            self.arrived.notify_all()  # a wave that never filled is let go at the first answer
        added = f"{line[0]}\nV{number} = 0"
        return reply(f"<<<<<<< SEARCH\n{line[0]}\n=======\n{added}\n>>>>>>> REPLACE\n")


@pytest.mark.system
@pytest.mark.parametrize(("concurrency", "candidates"), [(1, 12), (39, 120)])
def test_model_requests_never_outnumber_the_slots_and_the_next_ones_wait_ready(
    tmp_path: Path, concurrency: int, candidates: int
) -> None:
    """One evaluation worker and `concurrency`: that many model slots and one more. As many
    proposals again wait in the proposal workers, so a reply's slot goes to one at once."""
    slots_are_kept(tmp_path, concurrency, candidates, LocalExecutor(tmp_path))


@pytest.mark.usefixtures("ray_session")
def test_on_ray_two_proposal_workers_share_the_slots_out(tmp_path: Path) -> None:
    """40 slots take two Ray proposal workers (32 slots at most each), which share them out
    and no more."""
    assert RayExecutor().proposal_shares(40) == [20, 20]
    slots_are_kept(tmp_path, 39, 120, RayExecutor())


def slots_are_kept(tmp_path: Path, concurrency: int, candidates: int, executor: Executor) -> None:
    """A run with `concurrency` model slots and one more, on `executor`: never more requests
    at once than slots, and a proposal waiting for each slot from the start."""
    slots = concurrency + 1
    model = SlowNewLines(0.5, wave=slots)
    with ScriptedLLMServer(default=model) as server:
        task_file = llm_task(tmp_path, server.openai_url, candidates=candidates)
        # Past the first wave's hold (30 s at most), so no held request is timed out and sent again.
        text = task_file.read_text().replace("  timeout_s: 2\n", "  timeout_s: 60\n")
        # Every slot on the seed at once, as this test needs: no spreading over parents.
        text = text.replace(
            "  migration_interval: 5\n", "  migration_interval: 5\n  in_flight_per_parent: 0\n"
        )
        task_file.write_text(text + f"  concurrency: {concurrency}\n  finisher_share: 0\n")
        outcome, store = _run(tmp_path, task_file, executor=executor)
        served = len(server.requests)

    assert outcome.reason == f"candidate budget reached ({candidates})"
    assert model.most == slots, f"{model.most} model requests were answered at once"
    proposals = store.proposals("llm")
    assert len(proposals) == served and {p.outcome for p in proposals} == {"candidate"}
    assert model.first_answer is not None
    ahead = [p for p in proposals if p.created_at < model.first_answer]
    assert len(ahead) == 2 * slots, "a proposal asking and one waiting, per slot"


@pytest.mark.system
def test_evolve_run_on_matmul_with_an_anthropic_model_improves_on_the_seed(tmp_path: Path) -> None:
    with ScriptedLLMServer(default=matmul_tuner) as server:
        model = {"model": "anthropic:scripted", "base_url": server.anthropic_url}
        task = write_matmul_task(tmp_path, model, mutator="diff", candidates=3, n=256)
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-key"}
        done = subprocess.run(
            [sys.executable, "-m", "evolve", "run", str(task), "--name", "mm", "--workers", "1"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        requests = list(server.requests)

    assert done.returncode == 0, done.stderr
    assert requests and {r.api for r in requests} == {"anthropic"}
    assert {r.api_key for r in requests} == {"sk-ant-test-key"}
    with Store(f"sqlite:///{tmp_path / 'results' / 'evolve.db'}") as store:
        seed, best = store.seed_candidate("mm"), store.best("mm")
        assert seed is not None and best is not None and best.id != seed.id
        assert best.score > 2 * seed.score  # type: ignore[operator]  # i-k-j at -O3: ~10x
        assert best.mutation["operator"] == "diff"
        assert best.mutation["model"] == "anthropic:scripted"
        calls = store.llm_calls(best.id)
        assert calls and calls[-1].provider == "anthropic" and "REPLACE" in calls[-1].response
        assert "sk-ant-test-key" not in json.dumps([c.prompt for c in calls])
    assert "sk-ant-test-key" not in done.stdout + done.stderr
