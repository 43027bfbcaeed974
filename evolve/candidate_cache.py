"""Candidates the engine saw lately, kept in memory: parents are picked again and again, and
the engine is the only writer of candidates, so what it remembers is never stale."""

from __future__ import annotations

from collections import OrderedDict

from evolve.store import CandidateRecord, Store

RECORD_CACHE = 4096  # candidate records kept in memory; a bound, not the population


class CandidateCache:
    def __init__(self, store: Store, size: int = RECORD_CACHE) -> None:
        self.store, self.size = store, size
        self.records: OrderedDict[int, CandidateRecord] = OrderedDict()

    def get(self, candidate_id: int) -> CandidateRecord:
        record = self.records.get(candidate_id)
        if record is None:
            record = self.store.candidate(candidate_id)
            if record is None:
                raise LookupError(f"candidate #{candidate_id} is not in the store")
            self.remember(record)
        return record

    def remember(self, record: CandidateRecord) -> None:
        self.records[record.id] = record
        self.records.move_to_end(record.id)
        if len(self.records) > self.size:
            self.records.popitem(last=False)
