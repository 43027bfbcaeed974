"""Everything the report says about one run, read from the store in a few bulk queries.

A run may hold tens of thousands of candidates. Each table is read once and without its
large texts (no query per candidate); code is read only for the lineage the page shows,
and whole evaluations only for the seed and the best, whose counters it compares.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from evolve.engine.champion import champion_of
from evolve.report.lineage import Tree, trace
from evolve.store import CandidateRecord, EvaluationRecord, ProposalRecord, RunRecord, Store
from evolve.store.evaluations import scoring_evaluation
from evolve.store.records import (
    CandidateOutline,
    EvaluationOutline,
    FailedEvaluation,
    ModelSpend,
)
from evolve.task.stored import TaskInfo, task_info
from evolve.views.figures import RunFigures
from evolve.views.objective_terms import Terms

log = logging.getLogger("evolve.report")

FEEDBACK_CHARS = 4000  # of a failure's feedback: its first line is what the report groups
LINEAGE_NODES = 300  # of the best's chain of first parents; older ancestors are counted


@dataclass(frozen=True)
class RunFacts:
    run: RunRecord
    task: TaskInfo
    candidates: dict[int, CandidateOutline]  # oldest first
    evaluations: list[EvaluationOutline]  # in the order they were recorded
    failures: list[FailedEvaluation]
    proposals: list[ProposalRecord]
    spend: list[ModelSpend]
    metrics: dict[int, dict[str, float]]  # of each scored candidate, when objectives > 1
    best: CandidateOutline | None  # the champion; else the top score, not crowned
    crowned: bool
    seed: CandidateOutline | None
    terms: Terms  # how its figures are told
    # The best's figure beside the seed's (evolve/views/figures.py); "" without a best.
    headline: str
    measured: dict[str, EvaluationRecord]  # "seed", "best": the evaluation to read counters of
    tree: Tree | None
    lineage: dict[int, CandidateRecord]  # the programs of the tree's candidates


def read_facts(store: Store, run_name: str) -> RunFacts:
    """KeyError when the store holds no run of that name."""
    started = time.perf_counter()
    run = store.get_run(run_name)
    if run is None:
        raise KeyError(f"no run named {run_name!r} in {store.display_url}")
    task = task_info(run)
    candidates = {c.id: c for c in store.candidate_outlines(run_name)}
    # The run's champion, judged as the run judged it (evolve/engine/champion.py): the top score
    # may belong to a candidate measured once, or flagged with disagreeing measurements.
    crowned = champion_of(store, run)
    scored = [c for c in candidates.values() if c.score is not None]
    top = max(scored, key=lambda c: (c.score, -c.id), default=None)
    best = candidates.get(crowned.id) if crowned is not None else top
    seed = next(iter(candidates.values()), None)
    tree = trace(candidates, best.id, LINEAGE_NODES) if best is not None else None
    figures = RunFigures(store, run)
    facts = RunFacts(
        run=run,
        task=task,
        candidates=candidates,
        evaluations=store.evaluation_outlines(run_name),
        failures=store.failed_evaluations(run_name, FEEDBACK_CHARS),
        proposals=list(store.each_proposal(run_name)),
        spend=store.spend_by_model(run_name),
        metrics=store.scoring_metrics(run_name) if len(task.objectives) > 1 else {},
        best=best,
        crowned=crowned is not None,
        seed=seed,
        terms=figures.terms,
        headline=figures.headline(best.id) if best is not None else "",
        measured=_measured(store, {"seed": seed, "best": best}),
        tree=tree,
        lineage=store.candidates_by_id(tree.ids) if tree is not None else {},
    )
    log.info(
        "report of run %s: %d candidates, %d evaluations read in %.2f s",
        run_name,
        len(candidates),
        len(facts.evaluations),
        time.perf_counter() - started,
    )
    return facts


def _measured(
    store: Store, which: dict[str, CandidateOutline | None]
) -> dict[str, EvaluationRecord]:
    """For each candidate, the evaluation whose counters to show: the one that gave its
    score if it counted any, else its latest that did; where none did, the one that gave
    its score (or its latest), whose stages may say why nothing was counted."""
    found: dict[str, EvaluationRecord] = {}
    for role, candidate in which.items():
        evaluations = store.evaluations(candidate.id) if candidate is not None else []
        if not evaluations:
            continue
        scoring = scoring_evaluation(evaluations)
        counted = [e for e in evaluations if e.counters]
        if scoring is not None and scoring.counters:
            found[role] = scoring
        else:
            found[role] = counted[-1] if counted else scoring or evaluations[-1]
    return found
