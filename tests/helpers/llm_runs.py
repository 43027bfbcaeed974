"""Runs with the scripted model: its prices, a model that raises knob A, one that bills each
request as a provider would, and the synthetic task written for them."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evolve.llm.reservations import prompt_tokens_bound
from tests.conftest import write_synthetic_task
from tests.fakes.llm_server import Reply, Stall, prompt_text

TOKENS_IN, TOKENS_OUT = 100, 50


PRICE_IN, PRICE_OUT = 2.0, 8.0  # USD per million tokens


CALL_USD = (TOKENS_IN * PRICE_IN + TOKENS_OUT * PRICE_OUT) / 1e6


def raise_a(body: dict[str, Any], by: int = 7) -> Reply:
    """A sensible model: the first `A = N` line it was shown is the parent's; raise N."""
    line = re.search(r"^A = (\d+)  # @knob int 0\.\.64$", prompt_text(body), re.M)
    assert line, "the prompt did not show the parent's code"
    value = int(line.group(1))
    diff = (
        "Raising A moves the sum towards the target.\n"
        f"<<<<<<< SEARCH\n{line.group(0)}\n=======\nA = {min(value + by, 64)}  # @knob int 0..64\n"
        ">>>>>>> REPLACE\n"
    )
    return Reply(diff, input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT)


def llm_task(tmp_path: Path, url: str, *, candidates: int, budget_usd: float | None = None) -> Path:
    """The synthetic task on one island, proposed by `diff` from the scripted model at `url`,
    priced at PRICE_IN and PRICE_OUT, with a USD budget where `budget_usd` is given."""
    task = write_synthetic_task(tmp_path / "task", candidates=candidates, islands=1)
    usd = f"\n  usd: {budget_usd}" if budget_usd else ""
    text = task.read_text().replace(
        f"  candidates: {candidates}\n", f"  candidates: {candidates}{usd}\n"
    )
    task.write_text(
        text
        + f"""mutators:
  - name: diff
llm:
  models:
    - {{model: scripted, base_url: "{url}"}}
  timeout_s: 2
  prices:
    "openai-compatible:scripted": {{input_per_mtok: {PRICE_IN}, output_per_mtok: {PRICE_OUT}}}
"""
    )
    return task


MAX_TOKENS = 200


ANSWER_TOKENS = 60


class BillingModel:
    """A model that raises knob A, reports usage as a tokenizer would (a token per four
    characters of prompt), and bills each request as it arrives: `stalls(n)` says whether
    the n-th request (from 0) is answered only after `stall_s`, past the client's timeout,
    and so billed its worst case."""

    def __init__(
        self, stalls: Callable[[int], bool] = lambda n: False, stall_s: float = 0.0
    ) -> None:
        self.stalls, self.stall_s = stalls, stall_s
        self.billed: list[int] = []  # tokens, request by request
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply | Stall:
        text = prompt_text(body)
        with self._lock:
            number = len(self.billed)
            stalled = self.stalls(number)
            if stalled:
                tokens_in, tokens_out = prompt_tokens_bound([text]), body["max_tokens"]
            else:
                tokens_in, tokens_out = math.ceil(len(text) / 4), ANSWER_TOKENS
            self.billed.append(tokens_in + tokens_out)
        answer = raise_a(body)
        reply = Reply(answer.text, input_tokens=tokens_in, output_tokens=tokens_out)
        return Stall(self.stall_s, reply) if stalled else reply


def billed_task(
    tmp_path: Path,
    url: str,
    *,
    candidates: int = 500,
    budget: str = "",
    timeout_s: float = 5,
    concurrency: int = 8,
) -> Path:
    """`llm_task` (the scripted model priced), with `budget` lines added, and
    `concurrency` model requests in flight at once."""
    path = llm_task(tmp_path, url, candidates=candidates)
    text = path.read_text().replace(
        f"  candidates: {candidates}\n", f"  candidates: {candidates}\n{budget}"
    )
    text = text.replace(
        "  timeout_s: 2\n",
        f"  timeout_s: {timeout_s}\n  max_tokens: {MAX_TOKENS}\n  max_attempts: 2\n"
        f"  concurrency: {concurrency}\n  finisher_share: 0\n",
    )
    path.write_text(text)
    return path
