"""The offline mutator: varies knobs, never structure, and needs no network or key."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evolve.knobs import Knob, Value, find_knobs, set_knobs
from evolve.mutators.base import MutationError, MutationRequest, Proposal


class AutotunerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    crossover: float = Field(0.2, ge=0, le=1, description="share of children made by crossover")
    max_changes: int = Field(2, ge=1, description="knobs changed per mutation, at most")
    float_sigma: float = Field(0.3, gt=0, description="log-normal step for float knobs")


JUMP_SHARE = 0.125  # of an int knob's range: the spread of a jump


def mutate_value(knob: Knob, rng: random.Random, sigma: float) -> Value:
    """A different value for one knob: ints by neighbour or power-of-two steps or a jump
    across the range, floats log-normally, choices uniformly. Returns the old value only
    if no other exists.

    The jump is what lets a threshold that starts at 0 or 1 travel: doubling 0 goes
    nowhere, and walking by one across a range of hundreds takes hundreds of candidates."""
    if knob.kind == "choice":
        others = [o for o in knob.options if o != knob.value]
        return rng.choice(others) if others else knob.value
    if knob.kind == "int":
        value = int(knob.value)
        jump = value + round(rng.gauss(0.0, (knob.high - knob.low) * JUMP_SHARE))
        steps = [value + 1, value - 1, value * 2, value // 2 if value > 1 else value - 1, jump]
        candidates = sorted({min(max(s, int(knob.low)), int(knob.high)) for s in steps} - {value})
        return rng.choice(candidates) if candidates else value
    value = float(knob.value)
    base = value if value != 0 else (knob.high - knob.low) / 10 or 1.0
    return min(max(base * math.exp(rng.gauss(0.0, sigma)), knob.low), knob.high)


class Autotuner:
    name = "autotuner"
    Params = AutotunerParams

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        self.params = AutotunerParams.model_validate(dict(params or {}))

    def propose(self, request: MutationRequest) -> Proposal:
        rng = random.Random(request.seed)
        program = request.parent.program
        knobs = find_knobs(program)
        if not knobs:
            raise MutationError("the program has no @knob values for the autotuner to vary")
        partner = next(
            (
                p
                for p in request.others
                if [k.signature for k in find_knobs(p.program)] == [k.signature for k in knobs]
            ),
            None,
        )
        values: dict[int, Value] = {}
        operator = "tune"
        if partner is not None and rng.random() < self.params.crossover:
            operator = "crossover"
            theirs = find_knobs(partner.program)
            values = {i: theirs[i].value for i in range(len(knobs)) if rng.random() < 0.5}
        count = rng.randint(1, min(self.params.max_changes, len(knobs)))
        for i in rng.sample(range(len(knobs)), count):
            values[i] = mutate_value(knobs[i], rng, self.params.float_sigma)
        changes = {
            knobs[i].label: [knobs[i].value, value]
            for i, value in sorted(values.items())
            if value != knobs[i].value
        }
        if not changes:
            raise MutationError("every knob is pinned at its only value")
        record: dict[str, Any] = {"operator": operator, "mutator": self.name, "changes": changes}
        if operator == "crossover":
            record["partner"] = partner.id  # type: ignore[union-attr]
        return Proposal(set_knobs(program, knobs, values), record)
