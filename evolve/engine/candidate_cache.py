"""Candidates the engine saw lately, kept in memory: parents are picked again and again, and
the engine is the only writer of candidates, so what it remembers is never stale.

It keeps the candidates used most lately: a parent picked often stays while the flood of new
children passes through; a resumed run starts with its best (`warm`). A candidate it lacks
has not been remembered for thousands of candidates, so no write of the store's open turn
touches it, and it is read without first writing the turn's deferred writes (a search that
explores picks old candidates often)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from evolve.store import CandidateRecord, Store

RECORD_CACHE = 4096  # candidate records kept in memory; a bound, not the population


class CandidateCache:
    def __init__(self, store: Store, size: int = RECORD_CACHE) -> None:
        self.store, self.size = store, size
        self.records: OrderedDict[int, CandidateRecord] = OrderedDict()

    def get(self, candidate_id: int) -> CandidateRecord:
        record = self.records.get(candidate_id)
        if record is not None:
            self.records.move_to_end(candidate_id)
            return record
        record = self.store.candidate(candidate_id, flush=False)
        if record is None:
            raise LookupError(f"candidate #{candidate_id} is not in the store")
        self.remember(record)
        return record

    def many(self, candidate_ids: Iterable[int]) -> dict[int, CandidateRecord]:
        """The named candidates, those not in memory read in one query and remembered; an
        id the store lacks is left out."""
        wanted = list(dict.fromkeys(candidate_ids))
        missing = [i for i in wanted if i not in self.records]
        read = self.store.candidates_by_id(missing, flush=False) if missing else {}
        found = {}
        for candidate_id in wanted:
            record = self.records.get(candidate_id) or read.get(candidate_id)
            if record is not None:
                self.remember(record)
                found[candidate_id] = record
        return found

    def warm(self, records: Iterable[CandidateRecord]) -> None:
        """A resumed run's candidates, best first: its parents are picked mostly from its
        best, which one read at set-up fetches together instead of one read each as they
        come up (on a database server, each waits for the commit in flight). The best are
        remembered last, so they are the last to give way."""
        for record in reversed(list(records)):
            self.remember(record)

    def remember(self, record: CandidateRecord) -> None:
        self.records[record.id] = record
        self.records.move_to_end(record.id)
        if len(self.records) > self.size:
            self.records.popitem(last=False)
