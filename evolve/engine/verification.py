"""Whether a run's scores were checked where its candidates cannot reach, and if not, why.

An evaluator that computes its scores beside the candidate, in the same sandbox job, gives
scores that a candidate can forge: the python evaluator without a verify.py, the command
evaluator without a check.py. Such an evaluator answers `unverified() -> str | None` (the
plugin contract, evolve/plugin/evaluator.py) with a one-line reason; None, or no such method,
means its scores are measured or re-checked by trusted code outside the candidate's reach.
The reason is asked once, when the task loads, kept in the run's settings (so the views of
a finished run know it without loading the task again), and every view of the run's
scores says "unverified" beside them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the task loader uses this module too, and needs no store
    from evolve.plugin.evaluator import Evaluator
    from evolve.store import RunRecord

SETTING = "unverified"  # the run's settings key: the reason, or None
WORD = "unverified"  # what the views print beside a score


def evaluator_reason(evaluator: Evaluator) -> str | None:
    """Why the evaluator's scores cannot be trusted, or None where they can."""
    return evaluator.unverified()


def run_reason(run: RunRecord) -> str | None:
    """The reason the run recorded when it started; None for a verified run (and for a run
    from before the reason was recorded)."""
    reason = run.settings.get(SETTING)
    return reason if isinstance(reason, str) and reason else None
