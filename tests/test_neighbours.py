"""The programs a run holds one small change from a parent, named in the prompts on it
(evolve/propose/neighbours.py, evolve/mutators/small_change.py): found from a real SQLite
store's lineage,
shown as changes to the parent, and read by the scripted matmul model, which then leaves
out the changes that would make them again; and the parent's siblings that proposals in
flight work on, whose changes made on the parent could meet them."""

from __future__ import annotations

import random
import re
from pathlib import Path

from evolve.engine.budgets import Budgets
from evolve.engine.candidate_cache import CandidateCache
from evolve.engine.events import EventLog
from evolve.executors.local import LocalExecutor
from evolve.mutators.base import Neighbour, Parent, PastAttempt
from evolve.mutators.factory import make_mutator, prompt_context
from evolve.mutators.prompt import build_prompt
from evolve.mutators.small_change import small_change
from evolve.plugin.program import Program
from evolve.plugin.results import EvalResult
from evolve.propose.briefing import Briefing
from evolve.propose.neighbours import SHOWN_CHARS
from evolve.propose.proposer import Proposer
from evolve.propose.recent_attempts import RecentAttempts
from evolve.propose.services import RunServices
from evolve.search.novelty import NoveltyIndex
from evolve.search.strategy import IslandStrategy, Scored
from evolve.store import CandidateRecord, Store, default_url
from evolve.task.loading import load_task
from tests.conftest import ROOT, store_record, write_matmul_task
from tests.fakes.matmul_model import EDITS, MatmulModel
from tests.helpers.prompts import CONTEXT

RUN = "near"
MODEL = {"model": "scripted", "base_url": "http://127.0.0.1:9/v1"}
SEED = (ROOT / "tasks" / "matmul_c" / "seed.c").read_text()
HELD = "## Already in the run, one change from this program"
RACING = "## Being tried now on its siblings"


def knobs(code: str, **values: str) -> str:
    """`code` with the named knobs set: TILE_K="64", LOOP_ORDER="IKJ", cflags="-O3"."""
    for name, value in values.items():
        if name == "cflags":
            code = re.sub(r"(?m)^// cflags: \S+", f"// cflags: {value}", code)
        else:
            code = re.sub(rf"(?m)^#define {name} \S+", f"#define {name} {value}", code)
    return code


class Run:
    """A run's store holding a lineage of matmul programs, and a briefing over it."""

    def __init__(self, tmp_path: Path) -> None:
        self.task = task = load_task(write_matmul_task(tmp_path, MODEL, mutator="diff"))
        self.spec = task.spec
        self.store = Store(default_url(tmp_path))
        self.store.create_run(RUN, task_path="task.yaml", task_yaml="", seed=1, settings={})
        self.candidates = CandidateCache(self.store)
        self.seed = self.add(SEED, 1.0, None)
        self.briefing = Briefing(
            self.spec,
            self.store,
            RUN,
            strategy=IslandStrategy(self.spec.search, self.seed.id),
            candidates=self.candidates,
            novelty=NoveltyIndex(None),
            budgets=Budgets(self.spec.budget, self.store, RUN, wall_used_s=0.0),
            recent=RecentAttempts(self.store, self.candidates, 5),
        )

    def add(
        self, code: str, score: float | None, parent: CandidateRecord | None
    ) -> CandidateRecord:
        record = self.store.add_candidate(
            RUN, Program({"kernel.c": code}), parent_ids=[parent.id] if parent else [],
            island=0, generation=0 if parent is None else parent.generation + 1, mutation={},
        )  # fmt: skip
        assert record is not None
        status = "ok" if score is not None else "compile_error"
        record = self.store.record_evaluation(
            store_record(self.store, record.id), EvalResult(status, metrics={"gflops": 1.0}),
            kind="evaluate", score=score, input_seed=0, worker="w", started_at=0.0,
            finished_at=1.0,
        )  # fmt: skip
        self.candidates.remember(record)
        return record


def family(tmp_path: Path) -> tuple[Run, dict[str, CandidateRecord]]:
    """The seed G; the parent P (TILE_K 64); a sibling S setting the same knob (TILE_K 128),
    one on another knob (S2, LOOP_ORDER IKJ) and that one's child N making P's change too:
    N is P with LOOP_ORDER IKJ, the two changes made in the other order; and F, a sibling
    two changes from P."""
    run = Run(tmp_path)
    g = run.seed
    p = run.add(knobs(SEED, TILE_K="64"), 2.0, g)
    s = run.add(knobs(SEED, TILE_K="128"), 1.5, g)
    s2 = run.add(knobs(SEED, LOOP_ORDER="IKJ"), 3.0, g)
    n = run.add(knobs(SEED, LOOP_ORDER="IKJ", TILE_K="64"), 3.5, s2)
    f = run.add(knobs(SEED, TILE_I="32", cflags="-O3"), 1.2, g)
    return run, {"G": g, "P": p, "S": s, "S2": s2, "N": n, "F": f}


def test_a_small_change_reads_as_the_words_that_changed() -> None:
    base = Program({"kernel.c": SEED})

    def change(code: str) -> str | None:
        return small_change(base, Program({"kernel.c": code}))

    assert change(knobs(SEED, TILE_K="64")) == "`#define TILE_K` 512 -> 64"
    assert change(knobs(SEED, cflags="-O3")) == "`// cflags:` -O2 -> -O3"
    zeroing = "  for (int i = 0; i < n * n; i++) C[i] = 0.0f;\n"
    unrolled = "  for (int i = 0; i < n * n; i += 2) {\n    C[i] = 0.0f; C[i + 1] = 0.0f;\n  }\n"
    assert change(SEED.replace(zeroing, unrolled)) == (
        "`for (int i = 0; i < n * n; i++) C[i]...` -> `for (int i = 0; i < n * n; i += 2) {...`"
    )
    assert change(knobs(SEED, TILE_K="64", LOOP_ORDER="IKJ")) is None, "two knobs: two changes"
    assert change(knobs(SEED, cflags="-O3", TILE_K="64")) is None
    assert change(SEED) is None
    assert small_change(base, Program({"kernel.c": SEED, "extra.h": "int x;\n"})) is None


def test_the_relatives_one_change_away_are_named_as_changes_to_the_parent(
    tmp_path: Path,
) -> None:
    run, kin = family(tmp_path)
    near = run.briefing.near(kin["P"], ())
    assert near == (
        Neighbour(kin["N"].id, "`#define LOOP_ORDER` IJK -> IKJ", "ok", 3.5),
        Neighbour(kin["S"].id, "`#define TILE_K` 64 -> 128", "ok", 1.5),
        Neighbour(kin["G"].id, "`#define TILE_K` 64 -> 512", "ok", 1.0),
    ), "the parent's parent, its sibling on the same knob and a sibling's child, best first"

    # What its recent attempts show already (a child, or what a duplicate repeated) is
    # not named twice.
    shown = (PastAttempt("diff", "duplicate of #", "", repeated_id=kin["S"].id),)
    assert [n.id for n in run.briefing.near(kin["P"], shown)] == [kin["N"].id, kin["G"].id]

    # A child added later is found once the engine notes it: the run's lineage is read once.
    child = run.add(knobs(SEED, TILE_K="64", cflags="-O3"), None, kin["P"])
    assert child.id not in [n.id for n in run.briefing.near(kin["P"], ())]
    run.briefing.neighbours.note(child)
    assert run.briefing.near(kin["P"], ())[-1] == Neighbour(
        child.id, "`// cflags:` -O2 -> -O3", "compile_error", None
    )


def test_siblings_with_proposals_in_flight_are_named_and_their_change_left_out(
    tmp_path: Path,
) -> None:
    """P and its sibling S2 differ in two knobs. A proposal on S2 in flight that makes P's
    change gives the program that S2's change makes on P: told so, the model never makes
    it, though it is the most plausible edit of P."""
    run = Run(tmp_path)
    p = run.add(knobs(SEED, TILE_K="64"), 2.0, run.seed)
    s = run.add(knobs(SEED, TILE_K="128"), 1.5, run.seed)  # one change from P: no race
    s2 = run.add(knobs(SEED, LOOP_ORDER="IKJ"), 3.0, run.seed)
    elsewhere = run.add(knobs(SEED, LOOP_ORDER="IKJ", cflags="-O3"), 3.1, s2)
    racing = run.briefing.racing(p, {s.id, s2.id, elsewhere.id, p.id})
    assert racing == (Neighbour(s2.id, "`#define LOOP_ORDER` IJK -> IKJ", "ok", 3.0),)
    assert run.briefing.racing(p, {s.id, elsewhere.id}) == ()
    assert run.briefing.racing(run.seed, {s2.id}) == ()

    both = Program({"kernel.c": knobs(SEED, TILE_K="64", LOOP_ORDER="IKJ")}).code_hash
    shown = Parent(p.id, p.program, p.score)
    for told, expected in (((), True), (racing, False)):
        _, user = build_prompt("diff", CONTEXT, shown, [], racing=told)
        model = MatmulModel(0)
        body = {"messages": [{"role": "user", "content": user}]}
        made = set()
        for _ in range(100):
            found = re.search(r"SEARCH\n(.*)\n=======\n(.*)\n>>>>>>> REPLACE", model(body).text)
            assert found
            code = p.program.files["kernel.c"].replace(found[1], found[2], 1)
            made.add(Program({"kernel.c": code}).code_hash)
        assert (both in made) is expected


def test_a_cousin_that_made_the_same_change_on_an_uncle_is_named(tmp_path: Path) -> None:
    """X is its parent A's change (LOOP_ORDER KIJ) on A, which set cflags; A's sibling U set
    cflags otherwise, and U's child C made X's change too: C is X with cflags set again."""
    run = Run(tmp_path)
    a = run.add(knobs(SEED, cflags="-O3"), 1.1, run.seed)
    x = run.add(knobs(SEED, cflags="-O3", LOOP_ORDER="KIJ"), 2.2, a)
    u = run.add(knobs(SEED, cflags="-Ofast"), 1.3, run.seed)
    c = run.add(knobs(SEED, cflags="-Ofast", LOOP_ORDER="KIJ"), 2.6, u)
    run.add(knobs(SEED, cflags="-Ofast", TILE_J="8"), 0.9, u)  # two changes from X
    assert run.briefing.near(x, ()) == (
        Neighbour(c.id, "`// cflags:` -O3 -> -Ofast", "ok", 2.6),
        Neighbour(a.id, "`#define LOOP_ORDER` KIJ -> IJK", "ok", 1.1),
    )


def test_the_names_fit_a_small_budget_the_best_first(tmp_path: Path) -> None:
    run = Run(tmp_path)
    parent = run.add(knobs(SEED, TILE_K="64"), 2.0, run.seed)
    names = ("unroll-loops", "fast-math", "tree-vectorize", "no-math-errno")
    flags = [f"-O{level} -f{name}" for level in "0123s" for name in names]
    for number, value in enumerate(flags):
        run.add(knobs(SEED, TILE_K="64", cflags=value), 1.0 + number / 10, parent)
    near = run.briefing.near(parent, ())
    assert 0 < len(near) < len(flags)
    assert sum(len(n.change) for n in near) <= SHOWN_CHARS
    scores = [n.score for n in near]
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0 + (len(flags) - 1) / 10


def test_the_model_leaves_out_what_the_prompt_says_the_run_holds(tmp_path: Path) -> None:
    """The scripted model's plausible edits of P include setting LOOP_ORDER to IKJ (which
    makes N) and TILE_K to 128 (which makes S). Told they exist, it never makes them."""
    run, kin = family(tmp_path)
    parent = Parent(kin["P"].id, kin["P"].program, kin["P"].score)
    held = {kin["N"].program.code_hash, kin["S"].program.code_hash}

    def children(neighbours: tuple[Neighbour, ...]) -> list[str]:
        _, user = build_prompt("diff", CONTEXT, parent, [], neighbours=neighbours)
        assert (HELD in user) == bool(neighbours)
        model = MatmulModel(0, top=len(EDITS))
        body = {"messages": [{"role": "user", "content": user}]}
        made = []
        for _ in range(200):
            reply = model(body).text
            found = re.search(r"SEARCH\n(.*)\n=======\n(.*)\n>>>>>>> REPLACE", reply)
            assert found, reply
            code = kin["P"].program.files["kernel.c"].replace(found[1], found[2], 1)
            made.append(Program({"kernel.c": code}).code_hash)
        return made

    assert held & set(children(())), "without the section the model makes them"
    near = run.briefing.near(kin["P"], ())
    assert not held & set(children(near))


def test_the_proposer_sends_them_with_a_model_proposal_on_the_parent(tmp_path: Path) -> None:
    """The driver's own path: a diff proposal drawn on P carries P's neighbours, and the
    prompt its mutator builds from the request names them."""
    run, kin = family(tmp_path)
    search = run.spec.search.model_copy(update={"in_flight_per_parent": 0, "islands": 1})
    spec = run.spec.model_copy(update={"search": search})
    strategy = IslandStrategy(spec.search, run.seed.id)
    for record in kin.values():
        if record.id != run.seed.id:
            strategy.add(Scored(record.id, 0, record.score))
    editor = make_mutator(spec.mutators[0], run.task, prompt_context(run.task))
    proposer = Proposer(
        spec, {"diff": editor}, store=run.store, run_name=RUN, strategy=strategy,
        candidates=run.candidates, budgets=Budgets(spec.budget, run.store, RUN, wall_used_s=0.0),
        events=EventLog(None), services=RunServices(None), slots=64,
        executor=LocalExecutor(tmp_path),
    )  # fmt: skip
    proposer.spread.started(10**6, kin["S2"].id, "diff")  # a proposal on a sibling, sent
    rng = random.Random(5)
    on_p = []
    for _ in range(60):
        assert proposer.submit(rng, added=len(kin))
        on_p += [request for job, _, request in proposer.outbox if job.parent.id == kin["P"].id]
        if on_p:
            break
    assert on_p, "no proposal on P in 60 draws"
    request = on_p[0]
    assert {n.id for n in request.neighbours} == {kin["N"].id, kin["S"].id, kin["G"].id}
    assert [n.id for n in request.racing] == [kin["S2"].id], "S2 is in flight, two changes off"
    _, user = build_prompt(
        "diff", prompt_context(run.task), request.parent, request.others,
        attempts=request.attempts, neighbours=request.neighbours, racing=request.racing,
    )  # fmt: skip
    assert f"- #{kin['S'].id} (1.5): `#define TILE_K` 64 -> 128" in user
    assert f"{RACING}\n" in user and f"- #{kin['S2'].id}: `#define LOOP_ORDER` IJK -> IKJ" in user
