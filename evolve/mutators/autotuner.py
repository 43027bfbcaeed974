"""The offline mutator: varies knobs, never structure, and needs no network or key.

Every move it makes, by kind of knob. v is the knob's value in the parent and LOW..HIGH its
range. Each result is clamped to the range, and the move picks uniformly among the distinct
results that differ from v: the shares below hold where none coincide, and where some do
(near a bound, or at small values) those left share equally.

- int: v+1, v-1, 2v, v//2 (v-1 when v <= 1), and a jump v + round(N(0, (HIGH-LOW)/8));
  1/5 each.
- int log: v+1, v-1, 2v, v//2 (v-1 when v <= 1), and a jump log-uniform over the range,
  LOW-1 + round(e^U) with U uniform on [0, ln(HIGH-LOW+1)]; 1/5 each.
- pow2: 2v, v/2, and a jump to 2^e, e uniform among the range's exponents two or more
  octaves from v's; 1/3 each (at a bound, or in a range too short for a jump, those left
  share equally).
- float: v * e^N(0, float_sigma), from (HIGH-LOW)/10 (or 1 if that is 0) when v is 0; a
  draw beyond a bound stops at it.
- choice: another option, uniformly.

One proposal: with probability `crossover`, when another program of the island has knobs of
the same signatures (the first such is the partner), each knob takes the partner's value
with probability 1/2. Then k knobs, k uniform on 1..min(`max_changes`, number of knobs),
drawn without replacement, move from the parent's value as above (replacing what they
inherited). A proposal that changes no value fails. Every draw comes from one generator
seeded by the request, so a seed gives the same child.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evolve.mutators.base import MutationError, MutationRequest, Mutator, Parent, Proposal
from evolve.plugin.knobs import Knob, Value, find_knobs, set_knobs
from evolve.plugin.program import ProgramError


class AutotunerParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    crossover: float = Field(0.2, ge=0, le=1, description="share of children made by crossover")
    max_changes: int = Field(2, ge=1, description="knobs changed per mutation, at most")
    float_sigma: float = Field(0.3, gt=0, description="log-normal step for float knobs")


JUMP_SHARE = 0.125  # of an int knob's range: the spread of a linear jump
MIN_OCTAVES = 2  # a pow2 jump goes at least this far; nearer is what doubling and halving do


def mutate_value(knob: Knob, rng: random.Random, sigma: float) -> Value:
    """A different value for one knob, by one of its kind's moves (the table above). Returns
    the old value only if no other exists.

    The jumps are what let a value travel: doubling 0 goes nowhere, walking by one across a
    range of hundreds takes hundreds of candidates, and a tile at 2048 that should be 8 is
    eight octaves away, which steps of an eighth of the range never cover."""
    if knob.kind == "choice":
        others = [o for o in knob.options if o != knob.value]
        return rng.choice(others) if others else knob.value
    if knob.kind == "float":
        value = float(knob.value)
        base = value if value != 0 else (knob.high - knob.low) / 10 or 1.0
        return min(max(base * math.exp(rng.gauss(0.0, sigma)), knob.low), knob.high)
    value = int(knob.value)
    moves = _pow2_moves(knob, value, rng) if knob.kind == "pow2" else _int_moves(knob, value, rng)
    candidates = sorted({min(max(m, int(knob.low)), int(knob.high)) for m in moves} - {value})
    return rng.choice(candidates) if candidates else value


def _int_moves(knob: Knob, value: int, rng: random.Random) -> list[int]:
    if knob.log:
        jump = _log_uniform(int(knob.low), int(knob.high), rng)
    else:
        jump = value + round(rng.gauss(0.0, (knob.high - knob.low) * JUMP_SHARE))
    return [value + 1, value - 1, value * 2, value // 2 if value > 1 else value - 1, jump]


def _log_uniform(low: int, high: int, rng: random.Random) -> int:
    """Counted from `low` (which counts as 1), every octave of the range is as likely as the
    next: from 2048 in 1..2048, 8-16 as likely as 512-1024. Counting from `low` keeps a
    range that starts at 0 or below on the same footing."""
    return low - 1 + round(math.exp(rng.uniform(0.0, math.log(high - low + 1))))


def _pow2_moves(knob: Knob, value: int, rng: random.Random) -> list[int]:
    """Doubling and halving, and a jump uniform over the range's other octaves, so that from
    any power of two every other one in range is one move away."""
    here = value.bit_length() - 1
    exponents = range(int(knob.low).bit_length() - 1, int(knob.high).bit_length())
    far = [e for e in exponents if abs(e - here) >= MIN_OCTAVES]
    return [value * 2, value // 2, *([2 ** rng.choice(far)] if far else [])]


class Autotuner(Mutator):
    name = "autotuner"
    Params = AutotunerParams

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        self.params = AutotunerParams.model_validate(dict(params or {}))

    def propose(self, request: MutationRequest) -> Proposal:
        rng = random.Random(request.seed)
        program = request.parent.program
        try:
            knobs = find_knobs(program)
        except ProgramError as exc:  # a model's edit may leave a knob its annotation refuses
            raise MutationError(f"the knobs cannot be tuned: {exc}") from None
        if not knobs:
            raise MutationError("the program has no @knob values for the autotuner to vary")
        found = _partner(knobs, request.others)
        partner: Parent | None = None
        values: dict[int, Value] = {}
        if found is not None and rng.random() < self.params.crossover:
            partner, theirs = found
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
        operator = "tune" if partner is None else "crossover"
        record: dict[str, Any] = {"operator": operator, "mutator": self.name, "changes": changes}
        if partner is not None:
            record["partner"] = partner.id
        return Proposal(set_knobs(program, knobs, values), record)


def _partner(knobs: list[Knob], others: Sequence[Parent]) -> tuple[Parent, list[Knob]] | None:
    """The first other program whose knobs pair with `knobs` one for one, and its knobs. One
    whose annotations no longer parse is passed over, as one whose knobs differ is."""
    wanted = [k.signature for k in knobs]
    for other in others:
        try:
            theirs = find_knobs(other.program)
        except ProgramError:
            continue
        if [k.signature for k in theirs] == wanted:
            return other, theirs
    return None
