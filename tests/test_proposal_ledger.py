"""The proposals ledger: every proposal settled with its outcome, every paid call stored the
moment it completes (so a kill -9 loses none), and prompts that carry what was tried.

The scripted "model" below plays each way a real proposal ends, one after another; the
run is then read back from the store, as a user would check it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evolve.engine.candidate_cache import CandidateCache
from evolve.engine.loop import Engine
from evolve.executors.local import LocalExecutor
from evolve.llm import LLMCall
from evolve.plugin.program import Program
from evolve.propose.digest import run_digest
from evolve.propose.recent_attempts import RecentAttempts
from evolve.store import CandidateRecord, Settlement, Store
from evolve.store.commits import Commits
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import SYNTHETIC_SEED, postgres_schema
from tests.fakes.llm_server import (
    Empty,
    Fail,
    Reply,
    ScriptedLLMServer,
    Stall,
    ToolCall,
    prompt_text,
)
from tests.helpers.llm_runs import CALL_USD, TOKENS_IN, TOKENS_OUT, llm_task

RUN = "ledger"
KNOB_A = re.compile(r"^A = (\d+)  # @knob int 0\.\.64$", re.M)


def call(cost: float = CALL_USD, status: str = "ok") -> LLMCall:
    return LLMCall(
        provider="openai-compatible",
        model="scripted",
        prompt="p",
        response="r",
        input_tokens=TOKENS_IN,
        output_tokens=TOKENS_OUT,
        cost_usd=cost,
        latency_s=0.1,
        status=status,  # type: ignore[arg-type]
        started_at=time.time(),
    )


def add_child(store: Store, seed_id: int, settlement: Settlement) -> CandidateRecord | None:
    """The seed's child with A = 9, made by the settled proposal."""
    return store.add_candidate(
        RUN,
        Program({"s.py": SYNTHETIC_SEED.replace("A = 1 ", "A = 9 ")}),
        parent_ids=[seed_id],
        island=0,
        generation=1,
        mutation={"operator": "diff"},
        settlement=settlement,
    )


def test_a_proposal_groups_its_streamed_calls_and_settles_once(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'ledger.db'}")
    store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
    seed = store.plant_seed(RUN, Program({"s.py": SYNTHETIC_SEED}))
    made = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
    dropped = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
    killed = store.open_proposal(RUN, operator="rewrite", parent_ids=[seed.id], island=0)
    first, second, third = call(), call(), call()
    store.add_proposal_call(made, first)  # streamed while the proposal ran
    store.add_proposal_call(made, first)  # delivered twice: stored once
    store.add_proposal_call(killed, call())

    child = add_child(
        store, seed.id, Settlement(made, "candidate", [first, second], summary="A 1 -> 9")
    )
    assert child is not None
    store.settle_proposal(Settlement(dropped, "unparseable_after_repair", [third], detail="x"))
    assert store.interrupt_proposals(RUN) == 1

    rows = {p.id: p for p in store.proposals(RUN)}
    assert rows[made].outcome == "candidate" and rows[made].candidate_id == child.id
    assert rows[made].calls == 2, "the call the stream missed is written at settlement"
    assert rows[made].cost_usd == pytest.approx(2 * CALL_USD)
    assert rows[made].models == ("openai-compatible:scripted",)
    assert [c.candidate_id for c in store.proposal_calls(made)] == [child.id, child.id]
    assert rows[dropped].outcome == "unparseable_after_repair" and rows[dropped].calls == 1
    assert rows[killed].outcome == "interrupted" and rows[killed].cost_usd == pytest.approx(
        CALL_USD
    )
    assert store.llm_spend(RUN)[0] == pytest.approx(4 * CALL_USD)
    late = call()
    store.add_proposal_call(dropped, late)  # written after its proposal was settled
    store.add_proposal_call(dropped, late)
    settled = {p.id: p for p in store.proposals(RUN)}[dropped]
    assert settled.calls == 2 and settled.cost_usd == pytest.approx(2 * CALL_USD)
    assert store.llm_spend(RUN)[0] == pytest.approx(5 * CALL_USD)
    recent = store.recent_attempts(seed.id, 2)
    assert [p.id for p in recent] == [killed, dropped]
    assert store.recent_attempts(seed.id, 5)[-1].child_status == "pending"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.system
def test_a_settlement_that_lacks_a_streamed_call_still_counts_and_links_it(
    tmp_path: Path, backend: str
) -> None:
    """The settling driver reads the models from the calls it was handed only when they
    are all the proposal stored: here the ledger holds one more, from another model."""
    with contextlib.ExitStack() as stack:
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
        if backend == "postgresql":
            url = stack.enter_context(postgres_schema())
        _settle_short_of_the_ledger(stack.enter_context(Store(url)))


def _settle_short_of_the_ledger(store: Store) -> None:
    store.create_run(RUN, task_path="t", task_yaml="", seed=0, settings={})
    seed = store.plant_seed(RUN, Program({"s.py": SYNTHETIC_SEED}))
    made = store.open_proposal(RUN, operator="diff", parent_ids=[seed.id], island=0)
    streamed_only = replace(call(), model="other")
    handed = call()
    store.add_proposal_call(made, streamed_only)
    store.add_proposal_call(made, handed)
    child = add_child(store, seed.id, Settlement(made, "candidate", [handed]))
    assert child is not None
    row = {p.id: p for p in store.proposals(RUN)}[made]
    assert row.calls == 2 and row.cost_usd == pytest.approx(2 * CALL_USD)
    assert row.models == ("openai-compatible:other", "openai-compatible:scripted")
    assert [c.candidate_id for c in store.proposal_calls(made)] == [child.id, child.id]


class Playbook:
    """A model that ends its proposals in every way a real one does, in turn. It reads
    the parent's knob A from the prompt; the programs differ only in A, so setting A to a
    value the run already holds re-proposes a program the run has."""

    PLAYS = ("raise", "comment", "prose", "outside", "empty", "down", "repeat")

    def __init__(self) -> None:
        self.plays = itertools.cycle(self.PLAYS)
        self.held = {1}  # values of A the run holds: the seed's, then each child's
        self.prompts: list[str] = []
        self.down: set[str] = set()  # prompts answered with a 500: their retries fail too
        self.step = 0

    def __call__(self, body: dict[str, Any]) -> Reply | Empty | Fail:
        text = prompt_text(body)
        if _is_repair(body):  # insist on what was refused
            return _reply(body["messages"][-2]["content"])
        if text in self.down:
            return Fail(500, "the scripted server is still down")
        self.prompts.append(text)
        line = KNOB_A.search(text, text.index("The current program"))
        assert line, "the prompt did not show the parent's code"
        value = int(line.group(1))
        play = next(self.plays)
        if play == "raise" or (play == "repeat" and not self.held - {value}):
            self.step += 1
            new = min(value + self.step, 64)
            self.held.add(new)
            return _diff(line.group(0), f"A = {new}  # @knob int 0..64")
        if play == "repeat":
            return _diff(line.group(0), f"A = {min(self.held - {value})}  # @knob int 0..64")
        if play == "comment":
            return _diff(line.group(0), f"{line.group(0)}  (tried before)")
        if play == "prose":
            return _reply("I would make it faster by thinking harder.")
        if play == "outside":
            return _diff("# EVOLVE-BLOCK-START", "# the block starts here")
        if play == "empty":
            return Empty(input_tokens=TOKENS_IN, output_tokens=0)
        self.down.add(text)
        return Fail(500, "the scripted server is down")


def _is_repair(body: dict[str, Any]) -> bool:
    """The second user turn of a conversation is the repair request."""
    return sum(m["role"] == "user" for m in body["messages"]) > 1


def _reply(text: str) -> Reply:
    return Reply(text, input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)


def _diff(old: str, new: str) -> Reply:
    return _reply(f"A change.\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n")


def _task(tmp_path: Path, url: str, *, candidates: int) -> Path:
    """test_llm_run's task (one island, diff, the scripted model priced), with the novelty
    filter on and one model request in flight at a time, retried once."""
    task = llm_task(tmp_path, url, candidates=candidates)
    text = task.read_text().replace(
        "  migration_interval: 5\n", "  migration_interval: 5\n  novelty_threshold: 0.95\n"
    )
    text = text.replace(
        "  timeout_s: 2\n",
        "  timeout_s: 5\n  max_attempts: 2\n  concurrency: 1\n  finisher_share: 0\n",
    )
    task.write_text(text)
    return task


@pytest.mark.system
def test_every_way_a_proposal_ends_is_in_the_ledger_and_in_later_prompts(
    tmp_path: Path,
) -> None:
    model = Playbook()
    with ScriptedLLMServer(default=model) as server:
        task = load_task(_task(tmp_path, server.openai_url, candidates=7))
        store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
        run = store.create_run(RUN, task_path=str(task.path), task_yaml=task.text, seed=5,
                               settings={})  # fmt: skip
        engine = Engine(task, store, run, make_evaluator(task), LocalExecutor(tmp_path),
                        workers=1, results_dir=tmp_path / "out")  # fmt: skip
        engine.run()
        served = len(server.requests)

    proposals = store.proposals(RUN)
    outcomes = {p.outcome for p in proposals}
    for wanted in ("candidate", "duplicate", "too_similar", "unparseable_after_repair",
                   "outside_block", "empty", "retries_exhausted"):  # fmt: skip
        assert wanted in outcomes, f"no {wanted} proposal: {sorted(map(str, outcomes))}"
    assert None not in outcomes, "a proposal was left open after the run ended"

    calls = store.llm_calls_of_run(RUN)
    assert len(calls) == served, "every request the server answered is in the ledger"
    assert all(c.proposal_id is not None for c in calls), "an orphan call"
    assert sum(p.calls for p in proposals) == served
    assert store.llm_spend(RUN)[0] == pytest.approx(sum(p.cost_usd for p in proposals))
    for proposal in proposals:
        assert proposal.parent_ids, "a proposal without its parent"
        if proposal.outcome == "too_similar":
            assert proposal.nearest_id is not None and proposal.similarity >= 0.95
            assert proposal.candidate_id is None
        if proposal.outcome == "duplicate":
            assert proposal.nearest_id is not None and proposal.candidate_id is None
        if proposal.outcome == "candidate":
            assert proposal.summary and proposal.candidate_id is not None
    # The digest the engine kept in memory is the one the store would give, and so are
    # the attempts it shows on each parent (as sets: memory keeps them in the order they
    # were settled, the store in the order they were opened).
    assert engine.proposer.briefing.outlines.digest() == run_digest(store, RUN)
    recent = engine.proposer.briefing.recent
    assert recent.kept, "no prompt asked for a parent's attempts"
    from_store = RecentAttempts(store, CandidateCache(store), limit=100)
    for parent_id in list(recent.kept):
        kept, stored = recent.of(parent_id), from_store.of(parent_id)
        assert len(kept) == min(len(stored), recent.limit)
        assert set(kept) <= set(stored)
    rejected = sum(p.outcome in ("too_similar", "duplicate") for p in proposals)
    evaluated = [e for e in store.run_evaluations(RUN) if e.kind == "evaluate"]
    assert store.count_candidates(RUN) == 7 and len(evaluated) == 7
    assert rejected, "rejected children cost no evaluation"

    shown = max(text.count("### Program #") for text in model.prompts)
    assert shown >= 3, "prompts showed fewer than 3 other programs on an island of 7"
    later = [text for text in model.prompts if "Recent attempts" in text]
    assert later, "no prompt showed the parent's earlier attempts"
    assert any("too_similar" in text or "duplicate" in text for text in later)


@pytest.mark.system
def test_an_agent_that_wanders_ends_out_of_turns_and_then_on_the_budget(tmp_path: Path) -> None:
    """An agent that reads notes and never submits: its own token cap ends the first
    proposal (`out_of_turns`); what the run's token budget leaves ends the second
    (`budget`: its cap, or a request whose worst case no longer fits), and then the run,
    within the budget."""
    wander = ToolCall("read_notes", {"topic": "knobs"}, input_tokens=400, output_tokens=100)
    with ScriptedLLMServer(default=wander) as server:
        path = _task(tmp_path, server.openai_url, candidates=5)
        text = path.read_text().replace(
            "  - name: diff\n", "  - {name: agent, params: {max_tokens: 1200}}\n"
        )
        text = text.replace("  timeout_s: 5\n", "  timeout_s: 5\n  max_tokens: 100\n")
        path.write_text(text.replace("  candidates: 5\n", "  candidates: 5\n  tokens: 2500\n"))
        task = load_task(path)
        store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
        run = store.create_run(RUN, task_path=str(task.path), task_yaml=task.text, seed=5,
                               settings={})  # fmt: skip
        engine = Engine(task, store, run, make_evaluator(task), LocalExecutor(tmp_path),
                        workers=1, results_dir=tmp_path / "out")  # fmt: skip
        outcome = engine.run()
        served = len(server.requests)

    assert outcome.reason.startswith("token budget reached")
    ended = [(p.operator, p.outcome, p.calls) for p in store.proposals(RUN)]
    assert ended[0] == ("agent", "out_of_turns", 3) and ended[1][:2] == ("agent", "budget")
    assert len(store.llm_calls_of_run(RUN)) == served == sum(calls for *_, calls in ended)
    assert 1500 <= store.llm_spend(RUN)[1] <= 2500


def _hang_after(answered: int) -> Any:
    """A model that answers `answered` requests, each with a diff that needs a repair turn
    first, then stalls: so the driver is killed while a paid call's proposal is open."""
    count = itertools.count()

    def answer(body: dict[str, Any]) -> Reply | Stall:
        number = next(count)
        if number >= answered:
            return Stall(600)
        text = prompt_text(body)
        line = KNOB_A.search(text, text.index("The current program"))
        assert line
        if not _is_repair(body):
            return _reply("prose first: this call is paid for but makes nothing yet")
        return _diff(
            line.group(0), f"A = {min(int(line.group(1)) + 5 + number, 64)}  # @knob int 0..64"
        )

    return answer


@pytest.mark.system
def test_a_kill_9_loses_no_paid_call_and_resume_spends_exactly(tmp_path: Path) -> None:
    db = tmp_path / "results" / "evolve.db"
    evolve = [sys.executable, "-m", "evolve"]
    with ScriptedLLMServer(default=_hang_after(3)) as server:
        task = _task(tmp_path, server.openai_url, candidates=6)
        # The stalled request is killed with the driver, never timed out and retried first,
        # however slowly the machine gets to the kill.
        text = task.read_text()
        assert text.count("  timeout_s: 5\n") == 1  # the model's
        task.write_text(text.replace("  timeout_s: 5\n", "  timeout_s: 120\n"))
        driver = subprocess.Popen(
            [*evolve, "run", str(task), "--name", RUN, "--workers", "1", "--plain"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(server.requests) < 4:
                time.sleep(0.2)
            assert len(server.requests) >= 4, "the run never reached a stalled request"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with Store(f"sqlite:///{db}") as store:
                    statuses = [c.status for c in store.llm_calls_of_run(RUN)]
                    if statuses.count("ok") >= 3 and "in_flight" in statuses:
                        break
                time.sleep(0.2)
            driver.send_signal(signal.SIGKILL)
            driver.wait(timeout=30)
            stalled = len(server.requests) - 3  # taken, never answered
        finally:
            if driver.poll() is None:
                driver.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)

        with Store(f"sqlite:///{db}") as store:
            calls = store.llm_calls_of_run(RUN)
            answered = [c for c in calls if c.status == "ok"]
            assert len(answered) == 3, "a call answered before the kill is missing"
            in_flight = [c for c in calls if c.status == "in_flight"]
            assert len(in_flight) == stalled >= 1, "a stalled request has no row"
            open_ = [p for p in store.proposals(RUN) if p.outcome is None]
            assert any(store.proposal_calls(p.id) for p in open_), "a killed proposal's call"
            spent_before = store.llm_spend(RUN)[0]
            lost_usd = sum(c.charged_usd for c in in_flight)  # the provider bills them
            assert spent_before == pytest.approx(3 * CALL_USD + lost_usd)

        server.default = _hang_after(10_000)
        resumed = subprocess.run(
            [*evolve, "run", "--resume", RUN, "--workers", "1", "--plain"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        served = len(server.requests) - stalled

    with Store(f"sqlite:///{db}") as store:
        calls = store.llm_calls_of_run(RUN)
        assert len(calls) == served + stalled
        assert [c.status for c in calls].count("lost") == stalled
        assert store.llm_spend(RUN)[0] == pytest.approx(served * CALL_USD + lost_usd)
        outcomes = [p.outcome for p in store.proposals(RUN)]
        assert "interrupted" in outcomes and None not in outcomes


@pytest.mark.postgres
@pytest.mark.parametrize("slow_commits", [False, True], ids=["commits as they come", "slow"])
def test_calls_of_an_instant_model_on_postgresql_all_land_under_their_proposals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_commits: bool
) -> None:
    """The engine opens model proposals inside a store turn; their calls are written by
    the ledger writer, on a connection of its own, the moment the model answers, which on
    PostgreSQL finds only committed rows. Every call must still land under its proposal,
    even when each turn's commit (on the store's commit thread: evolve/store/commits.py)
    takes longer than the model."""
    if slow_commits:
        commit = Commits._end

        def slowly(self: Commits, end: Callable[[], None]) -> None:
            time.sleep(0.3)
            commit(self, end)

        monkeypatch.setattr(Commits, "_end", slowly)
    steps = itertools.count(1)

    def model(body: dict[str, Any]) -> Reply:  # prose first, a fresh diff on the repair
        if not _is_repair(body):
            return _reply("I would make it faster.")
        line = KNOB_A.search(prompt_text(body), prompt_text(body).index("The current program"))
        assert line
        return _diff(line.group(0), f"A = {next(steps) % 64}  # @knob int 0..64")

    with postgres_schema() as url, ScriptedLLMServer(default=model) as server:
        task = load_task(_task(tmp_path, server.openai_url, candidates=12))
        store = Store(url)
        run = store.create_run(RUN, task_path=str(task.path), task_yaml=task.text, seed=5,
                               settings={})  # fmt: skip
        engine = Engine(task, store, run, make_evaluator(task), LocalExecutor(tmp_path),
                        workers=2, results_dir=tmp_path / "out")  # fmt: skip
        engine.run()
        served = len(server.requests)
        calls = store.llm_calls_of_run(RUN)
        proposals = store.proposals(RUN)
        store.close()

    assert len(calls) == served and all(c.proposal_id is not None for c in calls)
    assert None not in {p.outcome for p in proposals}
    assert sum(p.calls for p in proposals) == served
    made = [p for p in proposals if p.outcome == "candidate"]
    assert made and all(p.calls == 2 for p in made), "each child: the prose and its repair"
