"""Leaderboard and candidate views, shared by the live dashboard and the commands."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from evolve.champion import flagged, is_flagged
from evolve.llm.prices import shown_cost
from evolve.plausibility import flag_reasons
from evolve.search.pareto import pareto_front
from evolve.store import CandidateRecord, EvaluationRecord, RunRecord, Store
from evolve.store.evaluations import scoring_evaluation
from evolve.verification import WORD, run_reason

KEY_METRICS = 4
FLAGGED_NOTE = (
    "! flagged: a result too good to believe, crowned only when two measurements agree; "
    "evolve show ID says why"
)
FRONT_NOTE = "* on the Pareto front: no other program is as good on every objective"


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def scored_by(store: Store, candidate_id: int) -> EvaluationRecord | None:
    """The evaluation that gave the candidate its score, whose metrics are shown beside it."""
    return scoring_evaluation(store.evaluations(candidate_id))


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


def leaderboard(store: Store, run: RunRecord, limit: int = 10) -> Table:
    run_name = run.name
    top = store.top(run_name, limit)
    evaluations = {c.id: store.evaluations(c.id) for c in top}
    metrics = {c.id: scoring_evaluation(evaluations[c.id]) for c in top}
    suspects = {c.id for c in top if is_flagged(evaluations[c.id])}
    on_front = front(store, run)
    names: list[str] = []
    for evaluation in metrics.values():
        for name in evaluation.metrics if evaluation else ():
            if name not in names and len(names) < KEY_METRICS:
                names.append(name)
    notes = [FLAGGED_NOTE] * bool(suspects) + [FRONT_NOTE] * bool(on_front)
    unverified = run_reason(run)
    if unverified:
        notes.append(f"{WORD}: {unverified}")
    caption = "\n".join(notes) or None
    table = Table(title=Text(f"top {limit} of {run_name}"), caption=caption, expand=False)
    score = f"score ({WORD})" if unverified else "score"
    for column in ["rank", "id", score, *names, "island", "gen", "parent", "measured"]:
        table.add_column(column, justify="right")
    for rank, candidate in enumerate(top, start=1):
        evaluation = metrics[candidate.id]
        values = [_fmt(evaluation.metrics.get(n)) if evaluation else "-" for n in names]
        table.add_row(
            str(rank),
            f"#{candidate.id}"
            + "!" * (candidate.id in suspects)
            + "*" * (candidate.id in on_front),
            _fmt(candidate.score),
            *values,
            str(candidate.island),
            str(candidate.generation),
            f"#{candidate.parent_ids[0]}" if candidate.parent_ids else "seed",
            f"{candidate.measurements}x" + (" flagged" if candidate.id in suspects else ""),
        )
    return table


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
    parts: list[RenderableType] = [
        Text(
            f"candidate #{candidate.id}  run {candidate.run_name}  status {candidate.status}  "
            f"score {_fmt(candidate.score)}{f' {WORD}' if unverified else ''}  "
            f"measurements {candidate.measurements}  "
            f"island {candidate.island}  generation {candidate.generation}"
            + ("  on the Pareto front" if on_front else ""),
            style="bold",
        ),
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
    for evaluation in evaluations:
        gives = ", gives the score" if scoring is not None and evaluation.id == scoring.id else ""
        title = f"evaluation {evaluation.id} ({evaluation.kind}): {evaluation.status}{gives}"
        node = evaluation.sandbox.get("node") if evaluation.sandbox else None
        if node:
            title += f"\non {node['host']} ({node['cpu']}), Ray node {node['node_id'][:12]}"
        table = Table(title=title)
        table.add_column("metric")
        table.add_column("value", justify="right")
        table.add_column("source")
        for name, value in evaluation.metrics.items():
            table.add_row(name, _fmt(value), "evaluator")
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
    path = "  <-  ".join(f"#{c.id} ({_fmt(c.score)}, {_operator(c)})" for c in lineage)
    parts.append(Text("\nlineage to the seed: " + path))
    return Group(*parts)
