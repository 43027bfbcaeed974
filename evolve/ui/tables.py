"""Leaderboard and candidate views, shared by the live dashboard and the commands."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from evolve.engine.champion import flagged, is_flagged
from evolve.engine.verification import WORD, run_reason
from evolve.llm.prices import shown_cost
from evolve.plugin.plausibility import flag_reasons
from evolve.search.pareto import pareto_front
from evolve.store import CandidateRecord, RunRecord, Store
from evolve.store.evaluations import scoring_evaluation
from evolve.ui.fitted import Column, FittedTable
from evolve.views.figures import RunFigures
from evolve.views.objective_terms import Terms

KEY_METRICS = 4
FLAGGED_NOTE = (
    "! flagged: a result too good to believe, crowned only when two measurements agree; "
    "evolve show ID says why"
)
FRONT_NOTE = "* on the Pareto front: no other program is as good on every objective"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def front(store: Store, run: RunRecord) -> set[int]:
    """The Pareto front of a run searched by `pareto`, over the objectives it was started
    with (kept in its settings); empty for any other run."""
    objectives = run.settings.get("objectives") or []
    if run.settings.get("strategy") != "pareto" or len(objectives) < 2:
        return set()
    names = [name for name, _ in objectives]
    points = {
        candidate_id: [metrics[name] for name in names]
        for candidate_id, metrics in store.scoring_metrics(run.name).items()
        if all(isinstance(metrics.get(name), int | float) for name in names)
    }
    return pareto_front(points, [direction for _, direction in objectives])


def leaderboard(
    store: Store, run: RunRecord, figures: RunFigures | None = None, limit: int = 10
) -> FittedTable:
    """The run's top `limit` by stored score, each told in the objective's terms and
    against the seed; at a narrow width the least useful columns go first
    (evolve/ui/fitted.py), never the id or the figures that rank. `figures`: the run's,
    where the caller keeps them."""
    figures = figures or RunFigures(store, run)
    terms = figures.terms
    top = store.top(run.name, limit)
    evaluations = {c.id: store.evaluations(c.id) for c in top}
    metrics = {c.id: scoring_evaluation(evaluations[c.id]) for c in top}
    suspects = {c.id for c in top if is_flagged(evaluations[c.id])}
    on_front = front(store, run)
    ranked = [o.name for o in terms.objectives]
    names: list[str] = []
    for evaluation in metrics.values():
        for name in evaluation.metrics if evaluation else ():
            if name not in names and name not in ranked and len(names) < KEY_METRICS:
                names.append(name)
    notes = [FLAGGED_NOTE] * bool(suspects) + [FRONT_NOTE] * bool(on_front)
    unverified = run_reason(run)
    if unverified:
        notes.append(f"{WORD}: {unverified}")

    def metric(candidate: CandidateRecord, name: str) -> float | None:
        evaluation = metrics[candidate.id]
        return evaluation.metrics.get(name) if evaluation else None

    marked = f" ({WORD})" if unverified else ""
    columns = [
        Column("rank", [str(rank) for rank in range(1, len(top) + 1)], keep=10),
        Column(
            "id",
            [f"#{c.id}" + "!" * (c.id in suspects) + "*" * (c.id in on_front) for c in top],
        ),
    ]
    if terms.single is None:  # several objectives: each, then the sum that ranks
        columns += [
            Column(terms.column(name), [terms.cell(name, metric(c, name)) for c in top])
            for name in ranked
        ]
    columns.append(Column(terms.name + marked, [terms.score_cell(c.score) for c in top]))
    seed = figures.seed_score()
    if seed is not None:
        columns.append(
            Column(
                "vs seed",
                [terms.against_seed(c.score, seed) if c.score is not None else "-" for c in top],
                keep=11,
            )
        )
    columns += [
        Column(terms.column(name), [terms.cell(name, metric(c, name)) for c in top], keep=7 - i)
        for i, name in enumerate(names)
    ]
    columns += [
        Column("island", [str(c.island) for c in top], keep=1),
        Column("gen", [str(c.generation) for c in top], keep=2),
        Column(
            "parent",
            [f"#{c.parent_ids[0]}" if c.parent_ids else "seed" for c in top],
            keep=8,
        ),
        Column(
            "measured",
            [f"{c.measurements}x" + (" flagged" if c.id in suspects else "") for c in top],
            keep=9,
        ),
    ]
    title = f"top {limit} of {run.name}, by {terms.ranking()}"
    return FittedTable(columns, title=title, notes=notes)


def run_summary(store: Store, run: RunRecord) -> Text:
    """The run's status and its candidates by status, and why a failed run has no results;
    as Text, since a run's name is not rich markup."""
    counts = store.status_counts(run.name)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    line = f"run {run.name} ({run.status}): {summary}"
    outcomes = store.proposal_outcomes(run.name)
    if outcomes:
        ended = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
        line += f"\nproposals: {sum(outcomes.values())} ({ended})"
    seed = store.seed_candidate(run.name)
    if run.status == "failed" and seed is not None and seed.status == "pending":
        line += (
            f"\nthe seed #{seed.id} was never evaluated: the evaluator's set-up failed on the "
            "workers; the error is in the run's run.log"
        )
    elif seed is not None and seed.score is None and seed.status != "pending":
        line += f"\nthe seed #{seed.id} failed ({seed.status}): evolve show {seed.id} says why"
    return Text(line)


def _operator(candidate: CandidateRecord) -> str:
    return "seed" if not candidate.parent_ids else str(candidate.mutation.get("operator", "?"))


def made_by(candidate: CandidateRecord) -> str:
    """How a candidate came about, in words: operator, mutator or model, parents, changes."""
    if not candidate.parent_ids:
        return "seed: the task's own program"
    mutation = candidate.mutation
    operator = _operator(candidate)
    mutator = mutation.get("mutator")
    who = f" ({mutator})" if mutator and mutator != operator else ""
    model = f", model {mutation['model']}" if mutation.get("model") else ""
    parents = " and ".join(f"#{parent}" for parent in candidate.parent_ids)
    words = [f"{operator}{who}{model}, from {parents}"]
    changes = mutation.get("changes")  # the autotuner's: knob label -> [old, new]
    if isinstance(changes, dict) and changes:
        moved = ", ".join(
            f"{where} {pair[0]} -> {pair[1]}" if _is_pair(pair) else where
            for where, pair in changes.items()
        )
        words.append(f"changing {moved}")
    if mutation.get("summary"):
        words.append(str(mutation["summary"]))
    if mutation.get("repaired"):
        words.append("after one repaired reply")
    if mutation.get("turns"):
        words.append(f"{mutation['turns']} turns, {mutation.get('drafts', 0)} drafts tested")
    if mutation.get("finisher"):
        words.append("tuning a model-made child's knobs")
    if mutation.get("arm"):
        words.append(f"chosen by the bandit ({mutation['arm']})")
    return "; ".join(words)


def _is_pair(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2


def _language(path: str) -> str:
    suffix = path.rsplit(".", 1)[-1] if "." in path else ""
    return {"c": "c", "h": "c", "cu": "cuda", "py": "python", "cpp": "cpp"}.get(suffix, "text")


def candidate_view(store: Store, candidate: CandidateRecord) -> RenderableType:
    run = store.get_run(candidate.run_name)
    on_front = run is not None and candidate.id in front(store, run)
    unverified = run_reason(run) if run is not None else None
    figures = RunFigures(store, run) if run is not None else None
    terms = figures.terms if figures is not None else Terms()
    figure = figures.headline(candidate.id) if figures is not None else "no score"
    parts: list[RenderableType] = [
        Text(
            f"candidate #{candidate.id}  run {candidate.run_name}  status {candidate.status}  "
            f"measurements {candidate.measurements}  "
            f"island {candidate.island}  generation {candidate.generation}"
            + ("  on the Pareto front" if on_front else ""),
            style="bold",
        ),
        Text(f"{figure}{f' ({WORD})' if unverified else ''}; {terms.ranking()}", style="bold"),
        Text(f"made by: {made_by(candidate)}"),
    ]
    if unverified:
        parts.append(Text(f"{WORD}: {unverified}", style="yellow"))
    evaluations = store.evaluations(candidate.id)
    scoring = scoring_evaluation(evaluations)
    flags = [
        f"FLAGGED in evaluation {e.id} ({e.kind}): {reason}"
        for e in evaluations
        if flagged(e)
        for reason in flag_reasons(e.feedback) or ["the evaluator set metric flagged"]
    ]
    if flags:
        parts.append(Text("\n".join(flags), style="bold red"))
    for path, text in candidate.program.files.items():
        parts += [
            Text(f"\n{path}", style="bold cyan"),
            Syntax(text, _language(path), line_numbers=True),
        ]
    crowned = figures.measurement(candidate.id) if figures is not None else None
    for evaluation in evaluations:
        gives = ", gives the score" if scoring is not None and evaluation.id == scoring.id else ""
        if crowned is not None and scoring is not None and crowned.id != scoring.id:
            gives += ", the figure above (its latest two agree)" * (evaluation.id == crowned.id)
        title = f"\nevaluation {evaluation.id} ({evaluation.kind}): {evaluation.status}{gives}"
        node = evaluation.sandbox.get("node") if evaluation.sandbox else None
        if node:
            title += f"\non {node['host']} ({node['cpu']})"
            if node["node_id"] != node["host"]:  # a Ray cluster's node, not this machine's
                title += f", Ray node {node['node_id'][:12]}"
        parts.append(Text(title, style="bold"))  # above the table: never wrapped to its width
        table = Table()
        table.add_column("metric")
        table.add_column("value", justify="right")
        table.add_column("source")
        for name, value in evaluation.metrics.items():
            table.add_row(name, terms.value(name, value), "evaluator")
        for name, counter in evaluation.counters.items():
            table.add_row(name, _fmt(counter.value), counter.source)
        parts.append(table)
        if evaluation.feedback:
            parts.append(Text("feedback:\n" + evaluation.feedback, style="yellow"))
    for call in store.llm_calls(candidate.id):
        parts.append(
            Text(
                f"\nmodel call {call.id}: {call.provider}:{call.model} ({call.operator}) "
                f"{call.status}, {call.input_tokens}+{call.output_tokens} tokens, "
                f"{shown_cost(call.cost_usd, call.input_tokens + call.output_tokens)}, "
                f"{call.latency_s:.1f}s",
                style="bold magenta",
            )
        )
        parts += [Text("prompt:", style="bold"), Text(call.prompt)]
        parts += [Text("response:", style="bold"), Text(call.response or call.error or "")]
    lineage = store.lineage(candidate.id)
    path = "  <-  ".join(
        f"#{c.id} ({'-' if c.score is None else terms.amount(c.score)}, {_operator(c)})"
        for c in lineage
    )
    parts.append(Text("\nlineage to the seed: " + path))
    return Group(*parts)
