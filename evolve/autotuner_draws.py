"""The autotuner's proposals, made in the driver and drawn again while they repeat a program
the run already holds.

Near a bound, or once a run has converged, most of the autotuner's moves land on a program
the run holds: in `bench/overhead.py` two proposals in three did. Each such proposal cost
the driver as much as a new child (a parent picked and briefed, the change summarized, a
`duplicate` row in the ledger) and evaluated nothing. A draw takes microseconds and costs
no money, so the driver draws again with a fresh seed, up to DRAWS times, and only the last
draw becomes the proposal. Each repeat counts toward the fruitless stop as the duplicate
proposal it replaces did, so a run whose neighbourhood is exhausted stops after as many
repeats as before.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

from evolve.llm.hooks import CallHooks
from evolve.mutators import Autotuner, MutationRequest, Proposal
from evolve.program import Program
from evolve.secrets import Keys
from evolve.workers import MutationFailed, make_proposal

DRAWS = 8  # an autotuner proposal's draws at most; each after the first repeated a program


def draw_new(
    autotuner: Autotuner, request: MutationRequest, held: Callable[[Program], bool]
) -> tuple[Proposal | MutationFailed, int]:
    """The first draw whose program is not `held`, or a failure, or the last draw; and how
    many repeats were drawn before it. Each seed comes from the one before, so the request's
    seed still decides the proposal."""
    repeats = 0
    made = make_proposal(autotuner, request, Keys(), CallHooks())
    while repeats < DRAWS - 1 and isinstance(made, Proposal) and held(made.program):
        repeats += 1
        request = replace(request, seed=random.Random(request.seed).getrandbits(63))
        made = make_proposal(autotuner, request, Keys(), CallHooks())
    return made, repeats
