"""A sandbox that is down is not the candidate's fault: its jobs wait and are retried, and
only an outage that lasts ends the run (nothing is lost: it can be resumed)."""

from __future__ import annotations

import time

UNAVAILABLE_RETRY_S = 5.0  # wait before retrying a job the sandbox could not run
UNAVAILABLE_GIVE_UP_S = 600.0  # a sandbox down this long ends the run


class Outage:
    def __init__(self) -> None:
        self.since: float | None = None
        self.retry_at = 0.0

    def down(self) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since = now
        self.retry_at = now + UNAVAILABLE_RETRY_S

    def up(self) -> None:
        self.since = None

    def may_submit(self) -> bool:
        return time.monotonic() >= self.retry_at

    def wait_s(self) -> float:
        """How long until a waiting job may be tried again, at most a quarter second."""
        return min(0.25, max(0.0, self.retry_at - time.monotonic()))

    def give_up_reason(self) -> str | None:
        if self.since is not None and time.monotonic() - self.since > UNAVAILABLE_GIVE_UP_S:
            return f"the sandbox was unavailable for {UNAVAILABLE_GIVE_UP_S:.0f}s"
        return None
