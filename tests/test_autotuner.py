import random
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from statistics import median

import pytest

from evolve.mutators import Autotuner, MutationError, MutationRequest, Parent, autotuner
from evolve.mutators.autotuner import mutate_value
from evolve.plugin.knobs import KINDS, Knob, Value, find_knobs, set_knobs
from evolve.plugin.program import Program

TASK_REFERENCE = Path(__file__).parents[1] / "docs" / "task-reference.md"

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
    with pytest.raises(MutationError, match="no @knob") as caught:
        Autotuner({}).propose(MutationRequest(_parent(program), (), seed=0))
    assert caught.value.outcome == "failed" and not caught.value.calls


def one_knob(annotation: str, value: int) -> Knob:
    line = f"#define T {value} // @knob {annotation}"
    return find_knobs(Program({"k.c": f"// EVOLVE-BLOCK-START\n{line}\n// EVOLVE-BLOCK-END\n"}))[0]


def shares(knob: Knob, draws: int, seed: int) -> dict[Value, float]:
    """How often each value came out of `draws` seeded moves from the knob's value."""
    rng = random.Random(seed)
    counts = Counter(mutate_value(knob, rng, 0.3) for _ in range(draws))
    return {value: n / draws for value, n in counts.items()}


def is_pow2(value: Value) -> bool:
    return isinstance(value, int) and value > 0 and value & (value - 1) == 0


def steps_to_reach(knob: Knob, target: int, seed: int, limit: int) -> list[int]:
    """A seeded walk of single moves, each from the last value, until one is <= target (or
    `limit` moves): the values it went through."""
    rng = random.Random(seed)
    walk: list[int] = []
    while len(walk) < limit and (not walk or walk[-1] > target):
        knob = replace(knob, value=mutate_value(knob, rng, 0.3))
        walk.append(int(knob.value))
    return walk


def test_pow2_doubles_halves_or_jumps_in_the_shares_the_readme_states() -> None:
    """From 64 in 1..4096: 128 and 32 a third each, and the last third spread evenly over
    the ten powers of two at least two octaves away."""
    seen = shares(one_knob("pow2 1..4096", 64), 30_000, seed=3)
    assert 64 not in seen and all(is_pow2(v) and 1 <= v <= 4096 for v in seen)
    assert seen[128] == pytest.approx(1 / 3, abs=0.015)
    assert seen[32] == pytest.approx(1 / 3, abs=0.015)
    far = [2**e for e in (*range(5), *range(8, 13))]
    assert set(seen) == {128, 32, *far}
    assert all(seen[v] == pytest.approx(1 / 30, abs=0.006) for v in far)


def test_one_pow2_move_from_the_top_reaches_every_power_of_two_in_range() -> None:
    seen = shares(one_knob("pow2 1..2048", 2048), 5_000, seed=4)
    assert set(seen) == {2**e for e in range(11)}
    assert seen[1024] == pytest.approx(1 / 2, abs=0.03)  # doubling leaves the range


def test_pow2_and_int_log_walks_from_2048_reach_16_in_a_few_moves() -> None:
    """The reported failure: a tile at 2048 that wants 8. Single moves, each from the last
    value, over 50 seeds: pow2 gets there within 20 (median 3), int log within 60 (median
    6), where linear moves take a median of about 50; no move leaves the range, and no pow2
    move leaves the powers of two."""

    def walks(annotation: str) -> list[list[int]]:
        return [steps_to_reach(one_knob(annotation, 2048), 16, seed, 400) for seed in range(50)]

    pow2, log, linear = walks("pow2 1..2048"), walks("int 1..2048 log"), walks("int 1..2048")
    assert all(1 <= v <= 2048 for walk in (*pow2, *log) for v in walk)
    assert all(is_pow2(v) for walk in pow2 for v in walk)
    assert max(map(len, pow2)) <= 20 and median(map(len, pow2)) <= 4
    assert max(map(len, log)) <= 60 and median(map(len, log)) <= 8
    assert median(map(len, linear)) >= 5 * median(map(len, log))


def test_the_int_log_jump_makes_every_octave_as_likely() -> None:
    """From 2048 in 1..4096, so that no move is clamped: the five moves a fifth each, and
    the jump as likely to land in 9..16 as in 257..512 (each an octave that no other move
    reaches), where the linear jump hardly ever reaches 16."""
    seen = shares(one_knob("int 1..4096 log", 2048), 40_000, seed=5)
    for step in (2047, 2049, 4096, 1024):
        assert seen[step] == pytest.approx(1 / 5, abs=0.012)
    low = sum(share for value, share in seen.items() if 9 <= int(value) <= 16)
    mid = sum(share for value, share in seen.items() if 257 <= int(value) <= 512)
    assert low == pytest.approx(mid, rel=0.25) and low > 0.01
    linear = shares(one_knob("int 1..4096", 2048), 40_000, seed=5)
    assert sum(share for value, share in linear.items() if int(value) <= 16) < low / 10


def test_an_int_log_range_may_start_at_zero_or_below() -> None:
    for annotation, low in (("int 0..4096 log", 0), ("int -8..4096 log", -8)):
        seen = shares(one_knob(annotation, 1024), 5_000, seed=6)
        assert min(map(int, seen)) == low and max(map(int, seen)) <= 4096


def test_one_move_of_a_plain_int_at_512_stays_at_256_or_above() -> None:
    """The task reference's comparison: a pow2 knob reaches any power of two in one move."""
    assert min(map(int, shares(one_knob("int 1..512", 512), 20_000, seed=7))) >= 256
    assert set(shares(one_knob("pow2 1..512", 512), 2_000, seed=7)) == {2**e for e in range(9)}


POW2_SOURCE = """// EVOLVE-BLOCK-START
#define TI 512 // @knob pow2 1..512
#define TJ 64 // @knob pow2 1..512
#define TK 8 // @knob pow2 1..512
// EVOLVE-BLOCK-END
"""


def test_crossover_exchanges_pow2_values_and_keeps_them_powers_of_two() -> None:
    program = Program({"k.c": POW2_SOURCE})
    partner = set_knobs(program, find_knobs(program), {0: 2, 1: 256, 2: 128})
    tuner = Autotuner({"crossover": 1.0, "max_changes": 1})
    inherited = 0
    for seed in range(30):
        child = tuner.propose(MutationRequest(_parent(program), (_parent(partner, 2),), seed))
        assert child.record["operator"] == "crossover"
        values = [k.value for k in find_knobs(child.program)]
        assert all(is_pow2(v) for v in values)
        inherited += sum(v == w for v, w in zip(values, (2, 256, 128), strict=True))
    assert 25 < inherited < 65  # about half of the 90 values, less those then moved


def test_knobs_of_another_kind_or_range_are_never_exchanged() -> None:
    program = Program({"k.c": POW2_SOURCE})
    as_int = Program({"k.c": POW2_SOURCE.replace("pow2 1..512", "int 1..512")})
    narrower = Program(
        {"k.c": POW2_SOURCE.replace("pow2 1..512", "pow2 1..256").replace("512 //", "256 //")}
    )
    tuner = Autotuner({"crossover": 1.0})
    for other in (as_int, narrower):
        child = tuner.propose(MutationRequest(_parent(program), (_parent(other, 2),), seed=1))
        assert child.record["operator"] == "tune"


def test_a_knob_a_model_broke_fails_the_proposal_and_never_pairs() -> None:
    """A model may set a pow2 tile to 48: the autotuner declines that program with a
    reason, and passes over it as a partner."""
    program = Program({"k.c": POW2_SOURCE})
    broken = Program({"k.c": POW2_SOURCE.replace("TJ 64", "TJ 48")})
    with pytest.raises(MutationError, match=r"k\.c:3: .*power of two"):
        Autotuner({}).propose(MutationRequest(_parent(broken), (), seed=0))
    tuner = Autotuner({"crossover": 1.0})
    child = tuner.propose(MutationRequest(_parent(program), (_parent(broken, 2),), seed=0))
    assert child.record["operator"] == "tune"


def documented_moves(text: str) -> dict[str, str]:
    return {kind: " ".join(moves.replace("`", "").split()) for kind, moves in text}


def test_the_task_reference_documents_the_moves_the_autotuner_documents() -> None:
    """One table of moves in two places: the task reference's rows say, word for word, what
    the autotuner's docstring says, for every kind of knob, the log scale included."""
    reference = TASK_REFERENCE.read_text()
    table = reference.split("| knob | moves |\n", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([\w ]+)` \| (.+) \|$", table, re.M)
    bullets = re.findall(r"^- ([\w ]+): (.+?)(?=^- |^$)", autotuner.__doc__ or "", re.M | re.S)
    in_reference, in_module = documented_moves(rows), documented_moves(bullets)
    assert set(in_module) == {*KINDS, "int log"}
    assert in_reference == in_module


def test_the_task_reference_example_declares_every_kind() -> None:
    reference = TASK_REFERENCE.read_text()
    example = reference.split("**Knobs**", 1)[1].split("```c\n", 1)[1].split("```", 1)[0]
    knobs = find_knobs(Program({"k.c": f"// EVOLVE-BLOCK-START\n{example}// EVOLVE-BLOCK-END\n"}))
    assert {k.kind for k in knobs} == set(KINDS)
    assert any(k.log for k in knobs)
