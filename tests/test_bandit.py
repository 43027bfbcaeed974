"""The adaptive model choice: the bandit's rule, and its state surviving a killed driver."""

from __future__ import annotations

import itertools
import random
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evolve.engine.loop import Engine
from evolve.executors.local import LocalExecutor
from evolve.runtime import orphans
from evolve.search.bandit import ArmStats, CostAwareBandit, improvement_reward
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import EVOLVE, write_synthetic_task
from tests.fakes.llm_server import Reply, ScriptedLLMServer, prompt_text
from tests.helpers.cli import evolve, kill_group

GOOD, BAD = "openai-compatible:good", "openai-compatible:bad"


def test_at_equal_weights_both_arms_are_tried_then_the_better_one_wins() -> None:
    bandit = CostAwareBandit({"a": 1.0, "b": 1.0})
    rng = random.Random(0)
    first = bandit.choose(rng)
    bandit.pulled(first)
    second = bandit.choose(rng)
    assert {first, second} == {"a", "b"}
    bandit.pulled(second)
    for _ in range(30):
        bandit.pulled("a")
        bandit.rewarded("a", 0.8)
        bandit.pulled("b")
    picks = Counter(bandit.choose(rng) for _ in range(10))
    assert picks["a"] == 10
    assert bandit.choose(rng, allowed=["b"]) == "b"


def test_at_equal_reward_the_cheaper_arm_wins_and_free_arms_do_not_divide_by_zero() -> None:
    stats = {"cheap": ArmStats(20, 10.0, 0.02), "dear": ArmStats(20, 10.0, 2.0)}
    bandit = CostAwareBandit({"cheap": 1.0, "dear": 1.0}, stats)
    assert bandit.choose(random.Random(1)) == "cheap"
    paid = {"free": ArmStats(5, 2.0, 0.0), "paid": ArmStats(5, 2.0, 1.0)}
    free = CostAwareBandit({"free": 1.0, "paid": 1.0}, paid)
    assert free.index("free") > free.index("paid") > 0


def test_with_no_data_the_prior_decides() -> None:
    bandit = CostAwareBandit({"diff @ heavy": 3.0, "diff @ light": 1.0, "rewrite @ light": 0.5})
    assert {bandit.choose(random.Random(seed)) for seed in range(20)} == {"diff @ heavy"}
    assert (
        bandit.index("diff @ heavy")
        > bandit.index("diff @ light")
        > bandit.index("rewrite @ light")
    )
    assert bandit.choose(random.Random(0), allowed=["diff @ light", "rewrite @ light"]) == (
        "diff @ light"
    )


def simulate(
    bandit: CostAwareBandit, success: dict[str, float], rounds: int, seed: int
) -> list[str]:
    """Pull arms as the engine does (pulled, then rewarded once the child is scored); an arm's
    child beats its parent with probability `success[arm]`, earning 0.8."""
    rng, world = random.Random(seed), random.Random(seed + 1000)
    picks = []
    for _ in range(rounds):
        arm = bandit.choose(rng)
        bandit.pulled(arm)
        bandit.charged(arm, 0.001)
        bandit.rewarded(arm, 0.8 if world.random() < success[arm] else 0.0)
        picks.append(arm)
    return picks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_data_overrides_the_prior(seed: int) -> None:
    """A hundredfold weight for the worse model: the first pull is still its, but the
    underdog's real rewards win it most of the work (a weight that multiplied the index,
    as before, kept 299 of 300 pulls on the favoured arm here)."""
    bandit = CostAwareBandit({"favoured": 10.0, "underdog": 0.1})
    picks = simulate(bandit, {"favoured": 0.1, "underdog": 0.6}, rounds=300, seed=seed)
    assert picks[0] == "favoured"
    assert Counter(picks)["underdog"] > 200
    assert Counter(picks[-100:])["underdog"] > 80
    assert (bandit.stats["favoured"].pulls, bandit.stats["underdog"].pulls) == (
        Counter(picks)["favoured"],
        Counter(picks)["underdog"],
    ), "the store's counts are real pulls only; the prior is not written into them"


def test_the_reward_is_scale_free_improvement_over_the_parent() -> None:
    assert improvement_reward(None, 5.0) == 0.0
    assert improvement_reward(4.0, 5.0) == improvement_reward(5.0, 5.0) == 0.0
    assert improvement_reward(5.5, 5.0) == pytest.approx(0.55)
    assert improvement_reward(55.0, 50.0) == pytest.approx(0.55)  # the same gain, 10x scale
    assert improvement_reward(-1.0, -2.0) == pytest.approx(0.75)  # a distance that halved
    assert improvement_reward(100.0, 1.0) == 1.0


def two_models() -> Callable[[dict[str, Any]], Reply]:
    """`good` raises knob A and sets C to a value no program had (so the score improves, and
    each proposal is new and costs one call); `bad` answers prose, even when asked to repair
    it, so each of its proposals fails and costs two calls."""
    unique = itertools.count(1)

    def answer(body: dict[str, Any]) -> Reply:
        if body["model"] == "bad":
            return Reply("I would think harder about it.", input_tokens=100, output_tokens=50)
        text = prompt_text(body)
        a = re.search(r"^A = (\d+)  # @knob int 0\.\.64$", text, re.M)
        c = re.search(r"^C = \S+  # @knob float 0\.1\.\.20$", text, re.M)
        assert a and c
        edits = [
            (a.group(0), f"A = {min(int(a.group(1)) + 3, 64)}  # @knob int 0..64"),
            (c.group(0), f"C = {1 + next(unique) / 1000}  # @knob float 0.1..20"),
        ]
        diff = "".join(f"<<<<<<< SEARCH\n{o}\n=======\n{n}\n>>>>>>> REPLACE\n" for o, n in edits)
        return Reply(diff, input_tokens=100, output_tokens=50)

    return answer


def adaptive_task(tmp_path: Path, url: str) -> Path:
    task = write_synthetic_task(
        tmp_path / "task", candidates=30, params="{target: 100, delay_s: 0.3}", islands=1
    )
    price = "{input_per_mtok: 1.0, output_per_mtok: 4.0}"
    task.write_text(
        task.read_text()
        + f"""mutators:
  - name: diff
llm:
  models:
    - {{model: good, base_url: "{url}"}}
    - {{model: bad, base_url: "{url}"}}
  adaptive: true
  finisher_share: 0
  concurrency: 1
  timeout_s: 5
  prices:
    "{GOOD}": {price}
    "{BAD}": {price}
"""
    )
    return task


def pulls_match_the_ledger(store: Store, run: str) -> dict[str, tuple[int, float, float]]:
    """A proposal's arm is pulled when it ends, in the transaction that settles it (or
    closes it as interrupted, after a kill), and charged the calls stored under it, so the
    counts agree however the driver died: a good proposal is one call, a bad one two."""
    orphans.sweep(store)  # what `evolve run` does first
    arms = store.bandit_arms(run)
    proposals = store.proposals(run)
    assert all(p.outcome is not None for p in proposals)
    for label, calls in ((GOOD, 1), (BAD, 2)):
        own = [p for p in proposals if p.arm == f"diff @ {label}"]
        assert arms[f"diff @ {label}"][0] == len(own)
        assert arms[f"diff @ {label}"][2] == pytest.approx(sum(p.cost_usd for p in own))
        assert all(p.calls == calls for p in own if p.outcome != "interrupted")
        assert all(p.models == (label,) for p in own if p.calls)
    return arms


@pytest.mark.system
def test_a_killed_adaptive_run_resumes_with_its_ledger_and_bandit_state(tmp_path: Path) -> None:
    db = tmp_path / "results" / "evolve.db"
    with ScriptedLLMServer(default=two_models()) as server:
        task = adaptive_task(tmp_path, server.openai_url)
        driver = subprocess.Popen(
            [*EVOLVE, "run", str(task), "--name", "bandit", "--workers", "1", "--plain"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                time.sleep(0.3)
                if db.exists():
                    with Store(f"sqlite:///{db}") as store:
                        if sum(p for p, _, _ in store.bandit_arms("bandit").values()) >= 6:
                            break
            driver.send_signal(signal.SIGKILL)
            driver.wait(timeout=30)
        finally:
            kill_group(driver)

        with Store(f"sqlite:///{db}") as store:
            before = pulls_match_the_ledger(store, "bandit")
            ledger_before = store.llm_calls_of_run("bandit")
            assert store.count_candidates("bandit") < 30
            run = store.get_run("bandit")
            assert run is not None
            loaded = load_task(task)
            engine = Engine(loaded, store, run, make_evaluator(loaded), LocalExecutor(tmp_path),
                            workers=1, results_dir=tmp_path / "peek")  # fmt: skip
            bandit = engine.proposer.bandit
            assert bandit is not None
            restored = {a: (s.pulls, s.reward, s.cost_usd) for a, s in bandit.stats.items()}
            assert restored == before, "the resumed engine forgot what its bandit learnt"
            assert engine.budgets.spent_usd == pytest.approx(store.llm_spend("bandit")[0])

        resumed = evolve("run", "--resume", "bandit", "--workers", "1", cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr

    with Store(f"sqlite:///{db}") as store:
        after = pulls_match_the_ledger(store, "bandit")
        assert store.llm_calls_of_run("bandit")[: len(ledger_before)] == ledger_before
        for arm, (pulls, reward, usd) in before.items():
            assert after[arm][0] >= pulls and after[arm][1] >= reward and after[arm][2] >= usd
        good, bad = after[f"diff @ {GOOD}"], after[f"diff @ {BAD}"]
        assert good[1] > 0 and bad[1] == 0
        assert good[0] > bad[0], f"the bandit kept asking the useless model: {after}"
        children = [c for c in store.top("bandit", 40) if c.mutation.get("arm")]
        assert children and all(c.mutation["model"] == GOOD for c in children)
