import random
from collections import Counter

from evolve.search import Islands
from evolve.search.selection import power_law_rank


def test_power_law_rank_prefers_the_best_but_reaches_the_tail() -> None:
    rng = random.Random(3)
    ranks = Counter(power_law_rank(rng, 100, 1.5) for _ in range(20_000))
    assert set(ranks) <= set(range(100))
    assert ranks[0] > ranks[1] > ranks[5] > ranks[50]
    assert sum(n for r, n in ranks.items() if r >= 50) > 0
    assert power_law_rank(rng, 1, 1.5) == 0


def test_islands_rank_rescore_and_discard() -> None:
    islands = Islands(2, pressure=2.0, exploration=0.0)
    islands.add(1, 1.0, [0, 1])
    islands.add(2, 5.0, [0])
    islands.add(3, 3.0, [1])
    assert islands.best(0) == 2 and islands.best(1) == 3
    islands.add(2, 0.5, [])  # a re-measurement lowered it; it keeps its island
    assert islands.best(0) == 1
    islands.discard(3)
    assert islands.best(1) == 1
    rng = random.Random(0)
    assert {islands.pick(0, rng) for _ in range(200)} == {1, 2}


def test_ring_migration_moves_each_best_to_the_next_island() -> None:
    islands = Islands(3, pressure=1.5, exploration=0.1)
    islands.add(10, 9.0, [0])
    islands.add(11, 1.0, [1])
    islands.add(12, 5.0, [2])
    moves = islands.migrants()
    assert moves == [(10, 1), (11, 2), (12, 0)]
    for candidate, island in moves:
        islands.migrate(candidate, island)
    assert islands.best(1) == 10 and islands.best(0) == 10 and islands.best(2) == 12
    assert (10, 1) not in islands.migrants()


def test_a_migration_of_a_candidate_that_lost_its_score_is_ignored() -> None:
    islands = Islands(2, pressure=1.5, exploration=0.0)
    islands.add(1, 1.0, [0])
    islands.discard(1)  # a failed re-measurement
    islands.migrate(1, 1)  # replayed from the store on resume
    assert islands.best(0) is None and islands.best(1) is None


def test_a_pick_besides_one_program_draws_over_the_others_once() -> None:
    islands = Islands(2, pressure=1.5, exploration=0.3)
    islands.add(1, 1.0, [0, 1])
    islands.add(2, 2.0, [0])
    rng = random.Random(4)
    assert {islands.pick(0, rng, besides=2) for _ in range(100)} == {1}
    assert {islands.pick(0, rng, besides=1) for _ in range(100)} == {2}
    assert islands.pick(1, rng, besides=1) is None  # it holds nothing else
    assert {islands.pick(1, rng, besides=2) for _ in range(20)} == {1}  # 2 is not there
