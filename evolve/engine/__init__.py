"""A run from its start to its end: `evolve run`'s launch (launch.py), the
steady-state loop (loop.py), its evaluation workers and how they are kept busy (pool.py,
workers.py, dispatch.py, outage.py, fair_slots.py), what may still be spent (budgets.py),
who is crowned (champion.py, scoring.py, verification.py), what the board is told
(events.py, leaders.py, candidate_cache.py), and how a run ends short of success
(ending.py).
"""
