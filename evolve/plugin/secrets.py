"""Which environment variables are secrets, and how the model keys reach the model clients.

Candidates run below the evaluation workers, so whatever those processes hold is one
escape (or one careless line of feedback) away from the store. Their environment is the
easy target: /proc/PID/environ shows a process's *initial* environment, so a key that a
worker deletes from os.environ after it started is still there to read. Hence:

- no worker process is started with a secret in its environment: a local run's evaluation
  workers and the guardian get `environment_without` the secrets (evolve/executors/,
  evolve/runtime/guardian.py); for a local Ray instance, `withheld` takes them out of os.environ
  while `ray.init` starts it (evolve/runtime/cluster.py), and puts them back for the driver, which
  is the only process that reads the user's environment;
- the driver reads the model keys once (`Keys.read`) and hands them to each model proposal
  as an argument of the call (on Ray a small one, which Ray inlines in the call; it never
  lands in the shared-memory object store); `Keys.lent` shows them to the model clients for
  that proposal only;
- evaluation workers never receive them;
- a copy of the driver forked to try a task's trusted code (evolve/evaluators/task_files.py) forgets
  them first (`forget`), its initial environment blanked.

A secret is a variable the task names as a model key, a provider's usual key variable, a
name that says so (ending in _KEY, _TOKEN, APIKEY, _PWD or _PASS; holding _KEY_, SECRET,
PASSWORD, PASSWD or CREDENTIAL), or a value that carries a password in a URL
(`postgresql://user:pw@host/db`). Ray's own settings (RAY_*, its auth token included) are
kept: Ray's processes need them to reach each other.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

KNOWN = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY"})
SUFFIXES = ("_KEY", "_TOKEN", "APIKEY", "_PWD", "_PASS")
INFIXES = ("_KEY_", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
URL_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
RAY_OWN = "RAY_"

log = logging.getLogger(__name__)


def is_secret(name: str, value: str = "") -> bool:
    """Whether a variable of this name (and value, where known) is treated as a secret."""
    upper = name.upper()
    if upper.startswith(RAY_OWN):
        return False
    by_name = upper in KNOWN or upper.endswith(SUFFIXES) or any(w in upper for w in INFIXES)
    return by_name or URL_PASSWORD.search(value) is not None


def secret_names(environ: Mapping[str, str] | Iterable[str], also: Iterable[str] = ()) -> list[str]:
    """The names in `environ` that are secrets by name (or by value, given a mapping), or
    named in `also` (a task's keys)."""
    declared = set(also)
    values = environ if isinstance(environ, Mapping) else {}
    return sorted(
        name for name in environ if name in declared or is_secret(name, values.get(name, ""))
    )


def environment_without(also: Iterable[str] = ()) -> dict[str, str]:
    """os.environ without its secrets (and the names in `also`): the environment of a
    process the driver starts."""
    hidden = set(secret_names(os.environ, also))
    return {name: value for name, value in os.environ.items() if name not in hidden}


@contextmanager
def withheld(also: Iterable[str] = ()) -> Iterator[list[str]]:
    """Take the secrets out of os.environ for the duration (processes started meanwhile
    never see them), then put them back; yields the names withheld."""
    names = secret_names(os.environ, also)
    held = {name: os.environ.pop(name) for name in names}
    try:
        yield names
    finally:
        os.environ.update(held)


def forget() -> None:
    """Drop this process's secrets: os.environ loses them and the initial environment block,
    which /proc/PID/environ shows and a fork inherits, is overwritten with zeros. The other
    variables are set again first, so they live on (on the heap) for the code that follows.
    For a forked copy of the driver; best effort where /proc/self/mem cannot be written."""
    kept = {name: value for name, value in os.environ.items() if not is_secret(name, value)}
    os.environ.clear()
    os.environ.update(kept)
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start and env_end: fields 50, 51
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            memory.write(bytes(end - start))
    except (OSError, IndexError, ValueError) as exc:
        log.warning("could not blank this process's initial environment: %s", exc)


_LENT: ContextVar[Keys | None] = ContextVar("evolve_lent_keys", default=None)


@dataclass(frozen=True)
class Keys:
    """Model keys by the name of the variable they came from. The repr names the variables
    only, so a key never reaches a log line, a traceback or Ray's task errors."""

    values: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"Keys({', '.join(sorted(self.values)) or 'none'})"

    @classmethod
    def read(cls, names: Iterable[str]) -> Keys:
        """The keys that the driver's environment holds for these names."""
        return cls({name: os.environ[name] for name in names if os.environ.get(name, "").strip()})

    @contextmanager
    def lent(self) -> Iterator[None]:
        """Model clients in this context (this task, this thread) find their keys here."""
        token = _LENT.set(self)
        try:
            yield
        finally:
            _LENT.reset(token)


def lookup(name: str) -> str | None:
    """A model key: from the keys lent to this context, else (in the driver, or a script that
    calls a client directly) from the environment."""
    lent = _LENT.get()
    if lent is not None:
        return lent.values.get(name)
    return os.environ.get(name)
