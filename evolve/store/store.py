"""The lineage store: every run, candidate, evaluation and island migration, in SQL.

Each public write is one short transaction, so a driver killed at any instant leaves either
all of a write or none of it, and `evolve run --resume` rebuilds from what is there.

`Store` is only the sum of its parts, one module each: opening the database and handing out
its connections (`database`, with `engines` and `commits`),
runs (`runs`), candidates and lineage (`candidates`), evaluations (`evaluations`), the model
calls and bandit arms (`ledger`), the proposals that grouped them (`proposals`) and island
migrations (`islands`).
"""

from __future__ import annotations

from typing import NoReturn

from evolve.store.candidates import Candidates
from evolve.store.evaluations import Evaluations
from evolve.store.islands import IslandMigrations
from evolve.store.ledger import Ledger
from evolve.store.proposals import Proposals
from evolve.store.runs import Runs


class Store(Runs, Candidates, Evaluations, Ledger, Proposals, IslandMigrations):
    """Opens (and if needed creates or upgrades) the database at `url`; lives in the driver."""

    def __repr__(self) -> str:
        return f"Store({self.display_url!r})"

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a Store belongs to the driver process and cannot be pickled; "
            "send results back to the driver, or pass the URL and open a new Store"
        )
