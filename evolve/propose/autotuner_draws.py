"""The autotuner's proposals, made in the driver and drawn again while they repeat a program
the run already holds.

Near a bound, or once a run has converged, most of the autotuner's moves land on a program
the run holds: in `bench/overhead.py` two proposals in three did. Each such proposal cost
the driver a parent picked and briefed, the change summarized and a `duplicate` row in the
ledger, on top of the draw itself, and evaluated nothing. A draw costs a fraction of a
millisecond and no money, so the driver draws again with a fresh seed, up to DRAWS times,
and only the last draw becomes the proposal.

A proposal counts once toward the fruitless stop, by its last draw: the stop comes
after MAX_FRUITLESS parent picks in a row that found nothing new (a run whose
neighbourhood is exhausted spends at most DRAWS times as many draws getting there), so a
run where only a few parents still have new neighbours is not given up on sooner.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

from evolve.llm.hooks import CallHooks
from evolve.mutators import Autotuner, MutationRequest, Proposal
from evolve.plugin.program import Program
from evolve.plugin.secrets import Keys
from evolve.propose.making import MutationFailed, make_proposal

DRAWS = 8  # an autotuner proposal's draws at most


def draw_new(
    autotuner: Autotuner, request: MutationRequest, held: Callable[[Program], bool]
) -> Proposal | MutationFailed:
    """The first draw whose program is not `held`, or a failure, or the last draw. Each seed
    comes from the one before, so the request's seed still decides the proposal."""
    for draw in range(DRAWS):
        made = make_proposal(autotuner, request, Keys(), CallHooks())
        if draw == DRAWS - 1 or not isinstance(made, Proposal) or not held(made.program):
            break
        request = replace(request, seed=random.Random(request.seed).getrandbits(63))
    return made
