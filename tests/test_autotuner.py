import random

import pytest

from evolve.knobs import find_knobs, set_knobs
from evolve.mutators import Autotuner, MutationError, MutationRequest, Parent
from evolve.mutators.autotuner import mutate_value
from evolve.program import Program

SOURCE = """// EVOLVE-BLOCK-START
#define A 16 // @knob int 1..64
#define B 0.5 // @knob float 0.01..10
#define C X // @knob choice X | Y | Z
#define D 3 // @knob int 1..9
// EVOLVE-BLOCK-END
"""


def _parent(program: Program, id_: int = 1) -> Parent:
    return Parent(id_, program, 1.0)


def test_int_steps_are_neighbours_powers_of_two_or_jumps_and_stay_in_range() -> None:
    knob = find_knobs(Program({"k.c": SOURCE}))[0]
    rng = random.Random(0)
    seen = [mutate_value(knob, rng, 0.3) for _ in range(400)]
    assert {15, 17, 32, 8} <= set(seen) and 16 not in seen
    assert all(1 <= v <= 64 for v in seen)
    jumps = [v for v in seen if v not in (15, 17, 32, 8)]
    assert len(set(jumps)) > 5, "a jump across the range never happened"
    top = find_knobs(Program({"k.c": SOURCE.replace("A 16", "A 64")}))[0]
    capped = {mutate_value(top, rng, 0.3) for _ in range(200)}
    assert {63, 32} <= capped and max(capped) == 63


def test_floats_move_log_normally_within_bounds_and_choices_change() -> None:
    knobs = find_knobs(Program({"k.c": SOURCE}))
    rng = random.Random(1)
    floats = [mutate_value(knobs[1], rng, 0.3) for _ in range(500)]
    assert all(0.01 <= f <= 10 for f in floats)
    assert 0.4 < sorted(floats)[250] < 0.6  # median stays near the old value
    assert {mutate_value(knobs[2], rng, 0.3) for _ in range(100)} == {"Y", "Z"}


def test_a_proposal_changes_knobs_only_and_is_reproducible() -> None:
    program = Program({"k.c": SOURCE})
    tuner = Autotuner({"crossover": 0.0})
    first = tuner.propose(MutationRequest(_parent(program), (), seed=42))
    again = tuner.propose(MutationRequest(_parent(program), (), seed=42))
    assert first.program.files == again.program.files
    assert first.program.code_hash != program.code_hash
    assert 1 <= len(first.record["changes"]) <= 2
    assert first.record["operator"] == "tune"


def test_crossover_takes_values_from_the_partner() -> None:
    program = Program({"k.c": SOURCE})
    knobs = find_knobs(program)
    partner = set_knobs(program, knobs, {0: 64, 1: 9.0, 2: "Z", 3: 9})
    tuner = Autotuner({"crossover": 1.0, "max_changes": 1})
    inherited = 0
    for seed in range(20):
        child = tuner.propose(MutationRequest(_parent(program), (_parent(partner, 2),), seed))
        assert child.record["operator"] == "crossover"
        assert child.record["partner"] == 2
        values = [k.value for k in find_knobs(child.program)]
        inherited += sum(v in (64, 9.0, "Z", 9) for v in values)
    assert inherited > 20  # about half of the 80 knob values come from the partner


def test_a_program_without_knobs_cannot_be_tuned() -> None:
    program = Program({"k.c": "// EVOLVE-BLOCK-START\nint x = 1;\n// EVOLVE-BLOCK-END\n"})
    with pytest.raises(MutationError, match="no @knob"):
        Autotuner({}).propose(MutationRequest(_parent(program), (), seed=0))
