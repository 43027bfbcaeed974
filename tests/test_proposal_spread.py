"""Model proposals spread over parents: a cap per parent and per scored program, the
proposals in flight named in later prompts on the parent, and a parent cooled by a
rejected proposal (evolve/propose/spread.py); then a whole run against the scripted
server, whose requests show each prompt's parent."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from evolve.engine.candidate_cache import CandidateCache
from evolve.engine.loop import Engine
from evolve.executors.local import LocalExecutor
from evolve.mutators.base import PastAttempt
from evolve.mutators.prompt import build_prompt
from evolve.plugin.program import Program
from evolve.propose.recent_attempts import RecentAttempts
from evolve.propose.spread import Spread
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import SYNTHETIC_SEED, write_matmul_task
from tests.fakes.llm_server import Reply, ScriptedLLMServer, prompt_text
from tests.fakes.matmul_model import MatmulModel
from tests.helpers.prompts import CONTEXT, parent

IN_FLIGHT = "## Being tried now on this program"


def test_a_parent_takes_at_most_its_share_and_the_next_proposal_goes_elsewhere() -> None:
    spread = Spread(2)
    spread.started(1, parent_id=7, label="diff")
    assert spread.open_to(7)
    spread.started(2, parent_id=7, label="rewrite by m")
    assert not spread.open_to(7), "a third proposal in flight on one parent"
    assert spread.open_to(8)
    assert spread.being_tried(7) == ("diff", "rewrite by m")
    assert spread.being_tried(8) == ()
    spread.ended(1, rejected=False)
    assert spread.open_to(7) and spread.being_tried(7) == ("rewrite by m",)


def test_a_small_population_gets_few_model_proposals_at_once() -> None:
    spread = Spread(2)
    assert spread.room(0) and not spread.room(1), "one at most while nothing is scored"
    spread.evaluated(1, scored=True)
    assert spread.room(1) and not spread.room(2), "two on the seed alone"
    spread.evaluated(2, scored=True)
    spread.evaluated(3, scored=False)
    assert spread.room(3) and not spread.room(4)
    spread.evaluated(2, scored=False)  # a failed re-measurement
    assert not spread.room(2)


def test_a_rejected_proposal_cools_its_parent_until_something_else_happens() -> None:
    spread = Spread(2)
    spread.evaluated(1, scored=True)
    spread.started(10, parent_id=1, label="diff")
    spread.started(11, parent_id=2, label="diff")
    spread.ended(10, rejected=True)  # a duplicate: its slot is free, but not on parent 1
    assert not spread.open_to(1)
    assert spread.open_to(2), "only the rejected proposal's parent cools"
    spread.ended(11, rejected=False)  # another proposal settled: parent 1 is open again
    assert spread.open_to(1)

    spread.started(12, parent_id=1, label="diff")
    spread.started(13, parent_id=3, label="diff")
    spread.ended(12, rejected=True)
    assert not spread.open_to(1)
    spread.evaluated(4, scored=True)  # an evaluation was recorded meanwhile
    assert spread.open_to(1)

    spread.started(14, parent_id=5, label="diff")
    spread.ended(13, rejected=False)
    spread.ended(14, rejected=True)
    assert spread.open_to(5), "with nothing else in flight a cooled parent stays open"


def test_zero_lifts_the_cap_the_small_population_limit_and_the_cooling() -> None:
    spread = Spread(0)
    for number in range(10):
        spread.started(number, parent_id=1, label="diff")
    assert spread.open_to(1) and spread.room(10)
    spread.ended(0, rejected=True)
    assert spread.open_to(1)


def test_a_prompt_names_the_proposals_in_flight_after_the_recent_attempts() -> None:
    attempts = [PastAttempt("diff", "duplicate of #3", "+1/-1 lines in k.c: `x + x`")]
    _, user = build_prompt(
        "diff", CONTEXT, parent(), [], attempts=attempts, in_flight=("diff", "rewrite by m")
    )
    section = user.split(IN_FLIGHT + "\n", 1)[1].split("\n## ", 1)[0]
    assert section.splitlines()[1:] == ["- diff", "- rewrite by m"]
    assert user.index("## Recent attempts") < user.index(IN_FLIGHT)
    _, user = build_prompt("diff", CONTEXT, parent(), [], attempts=attempts)
    assert "Being tried now" not in user


def test_a_change_tried_again_is_shown_once_so_older_ones_stay_in_sight(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    store.create_run("r", task_path="t", task_yaml="", seed=0, settings={})
    program = Program({"seed.py": SYNTHETIC_SEED})
    seed = store.add_candidate("r", program, parent_ids=[], island=0, generation=0, mutation={})
    assert seed is not None
    recent = RecentAttempts(store, CandidateCache(store), limit=3)
    assert recent.of(seed.id) == ()
    for change in ("a", "b", "c"):
        recent.settled(seed.id, "diff", "failed", summary=f"change {change}")
    for _ in range(4):  # one change, repeated: the three changes stay shown
        recent.settled(seed.id, "diff", "duplicate", summary="change c", nearest_id=seed.id)
    shown = recent.of(seed.id)
    assert [a.summary for a in shown] == ["change c", "change b", "change a"]
    recent.settled(seed.id, "diff", "failed", summary="change d")
    assert [a.summary for a in recent.of(seed.id)] == ["change d", "change c", "change b"]


@dataclass(frozen=True)
class Asked:
    parent_id: int
    prompt: str
    received: float
    answered: float


class Recording:
    """The scripted matmul model, each request recorded with its parent and its times."""

    def __init__(self, model: MatmulModel) -> None:
        self.model = model
        self.asked: list[Asked] = []
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        received = time.time()
        text = prompt_text(body)
        reply = self.model(body)
        found = re.search(r"^## The current program, #(\d+) ", text, re.M)
        assert found, "a prompt without its parent"
        with self.lock:
            self.asked.append(Asked(int(found.group(1)), text, received, time.time()))
        return reply


@pytest.mark.system
def test_a_run_spreads_its_model_proposals_and_they_see_each_other(tmp_path: Path) -> None:
    """Two proposals a parent: a model that always gives its most plausible edit not tried
    yet makes two requests on one parent at once collide, as a real model's do."""
    model = Recording(MatmulModel(0, delay_s=0.3, top=1))
    with ScriptedLLMServer(default=model) as server:
        model_spec = {"model": "scripted", "base_url": server.openai_url}
        path = write_matmul_task(tmp_path, model_spec, mutator="diff", candidates=10)
        text = path.read_text().replace(
            "  migration_interval: 25\n", "  migration_interval: 25\n  in_flight_per_parent: 2\n"
        )
        path.write_text(text + "  concurrency: 8\n")
        task = load_task(path)
        store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
        run = store.create_run("spread", task_path=str(path), task_yaml=task.text, seed=1,
                               settings={})  # fmt: skip
        engine = Engine(task, store, run, make_evaluator(task), LocalExecutor(tmp_path),
                        workers=1, results_dir=tmp_path / "out")  # fmt: skip
        engine.run()
    asked = sorted(model.asked, key=lambda a: a.received)
    assert len(asked) >= 10

    for one in asked:  # at most two requests on a parent at any moment
        at_once = [o for o in asked if o.parent_id == one.parent_id
                   and o.received <= one.received < o.answered]  # fmt: skip
        assert len(at_once) <= 2, f"{len(at_once)} requests on #{one.parent_id} at once"
    overlapping = [
        (a, b) for i, a in enumerate(asked) for b in asked[i + 1 :]
        if a.parent_id == b.parent_id and b.received < a.answered
    ]  # fmt: skip
    assert overlapping, "no two proposals on one parent were in flight together"
    for a, b in overlapping:  # the later-built prompt of the two names the other
        assert IN_FLIGHT in a.prompt or IN_FLIGHT in b.prompt
    assert any(f"{IN_FLIGHT}\n" in a.prompt and "\n- diff" in a.prompt for a in asked)

    rejected = [p for p in store.proposals("spread") if p.outcome == "duplicate"]
    assert rejected, "no two requests collided"
    for proposal in rejected:  # the next prompt on its parent shows it as tried
        later = [a for a in asked if a.parent_id == proposal.parent_ids[0]
                 and a.received > (proposal.finished_at or 0)]  # fmt: skip
        if later:
            tried = later[0].prompt.split("## Recent attempts on this program\n", 1)[1]
            assert proposal.summary in tried.split("\n## ", 1)[0]
