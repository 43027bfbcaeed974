"""How a proposal ended: the words of the `proposals` ledger, shared by the mutators that
decide them and the store, board and prompts that read them."""

from __future__ import annotations

from typing import Literal

Outcome = Literal[
    "candidate",  # a new program, queued for evaluation
    "duplicate",  # the run already holds this exact program
    "too_similar",  # the novelty filter rejected it before any evaluation
    "unparseable_after_repair",  # the reply could not be applied, even after one repair turn
    "outside_block",  # the edit touched code outside the EVOLVE-BLOCKs
    "empty",  # the model replied with nothing
    "retries_exhausted",  # every attempt failed: 429s, 5xx, timeouts, errors
    "refused",  # the provider refused the key or the model: the run stops
    "out_of_turns",  # the agent used its turns or its token cap without submitting
    "budget",  # a budget (candidates, USD, tokens) was reached before it could be kept
    "failed",  # any other reason the mutator gave, or a crash (its traceback is logged)
    "interrupted",  # in flight when the driver stopped or was killed
]

OUTCOMES: tuple[Outcome, ...] = (
    "candidate",
    "duplicate",
    "too_similar",
    "unparseable_after_repair",
    "outside_block",
    "empty",
    "retries_exhausted",
    "refused",
    "out_of_turns",
    "budget",
    "failed",
    "interrupted",
)
