"""The `evolve` command run as a user runs it, in a subprocess."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from tests.conftest import EVOLVE


def evolve(*args: str | Path, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`evolve ARGS` in `cwd`, its output captured as text."""
    return subprocess.run(
        [*EVOLVE, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL to every process of `process`'s group (one started with start_new_session)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
