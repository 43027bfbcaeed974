"""Why joining a Ray cluster failed, in one line that names the fix.

Ray reports a refused token, a missing one and a cluster of other versions in words an
operator has to dig for: a refused token ends as "Failed to connect to Ray cluster", with
the reason two exceptions down and in the C++ warnings it printed meanwhile; a version
mismatch is a six-line message. What the user needs is the cause and what to change, so
each known cause is recognised in the text of the exception and its causes, and anything
else is Ray's own message squeezed onto one line.
"""

from __future__ import annotations

import re

AUTH_FIX = (
    "set RAY_AUTH_MODE=token and give this machine the head's token, in RAY_AUTH_TOKEN or "
    "~/.ray/auth_token"
)
CAUSE_CHARS = 300  # of a cause's last line, when Ray's own message is all there is

# Ray's words for each cause (ray/exceptions.py, ray/_private/utils.py, the GCS's reply).
REFUSED_TOKEN = "InvalidAuthToken"
NO_TOKEN = "no authentication token was found"
VERSIONS = re.compile(
    r"cluster was started with:\s*Ray: (?P<cluster_ray>\S+)\s*Python: (?P<cluster_python>\S+)"
    r".*?was started with:\s*Ray: (?P<here_ray>\S+)\s*Python: (?P<here_python>\S+)",
    re.DOTALL,
)


def explain(exc: BaseException, auth_mode: str | None) -> str:
    """One line for why the join failed, given the failure and this machine's RAY_AUTH_MODE
    (which decides whether a refused token was a missing one or a wrong one: with the mode
    unset Ray sends none, even when ~/.ray/auth_token exists)."""
    said = _everything_said(exc)
    if REFUSED_TOKEN in said:
        if (auth_mode or "").lower() == "token":
            return f"the cluster refused this machine's Ray token as wrong: {AUTH_FIX}"
        return (
            "the cluster requires token authentication and this machine sent no token "
            f"(RAY_AUTH_MODE is not 'token'): {AUTH_FIX}"
        )
    if NO_TOKEN in said:
        return (
            "RAY_AUTH_MODE=token, but this machine has no Ray token: give it the head's "
            "token, in RAY_AUTH_TOKEN or ~/.ray/auth_token"
        )
    versions = VERSIONS.search(said)
    if versions:
        return (
            f"the cluster runs Ray {versions['cluster_ray']} on Python "
            f"{versions['cluster_python']}, this machine Ray {versions['here_ray']} on Python "
            f"{versions['here_python']}: install Ray {versions['cluster_ray']} and Python "
            f"{versions['cluster_python']} here (or start the cluster with this machine's)"
        )
    return squeezed(exc)


def squeezed(exc: BaseException) -> str:
    """Ray's own message on one line, with the last line of what it was raised from: Ray's
    "Failed to connect" says nothing more, the exception under it does."""
    line = _one_line(f"{type(exc).__name__}: {exc}")
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        last = [text for text in str(cause).splitlines() if text.strip()][-1:]
        reason = _one_line(last[0] if last else type(cause).__name__)
        if reason and reason not in line:
            cut = reason[:CAUSE_CHARS] + ("..." if len(reason) > CAUSE_CHARS else "")
            line = f"{line} ({cut})"
    return line


def _everything_said(exc: BaseException) -> str:
    """The text of `exc` and of every exception it was raised from or while handling."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _one_line(text: str) -> str:
    return " ".join(text.split())
