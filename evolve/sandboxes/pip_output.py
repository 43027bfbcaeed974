"""pip as the sandboxes run it: the same options wherever it installs a task's requirements,
its progress told a line per package, and its failure told in one line naming the
requirement and quoting pip's own error.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence

from packaging.utils import canonicalize_name

from evolve.plugin.pip_requirements import project

# No cache (an image layer or an environment folder keeps what was installed), no questions,
# no bar (it is not a terminal), and no warning that a newer pip exists.
PIP_FLAGS = ("--no-cache-dir", "--no-input", "--progress-bar", "off", "--disable-pip-version-check")
TAIL_LINES = 20  # of pip's output, quoted when it fails
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class PipLog:
    """Follows pip's output line by line: says each requirement it collects and what it
    installs, keeps its error lines and its last lines for the failure."""

    def __init__(self, progress: Callable[[str], None]) -> None:
        self.progress = progress
        self.started = False  # whether pip has begun: its output comes after others'
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.errors: list[str] = []

    def line(self, text: str) -> None:
        text = text.rstrip()
        self.tail.append(text)
        if text.startswith("Collecting "):
            self.progress(f"  pip: collecting {text.split()[1]}")
        elif text.startswith("Installing collected packages: "):
            self.progress(f"  pip: installing {text.partition(': ')[2]}")
        elif text.startswith(("ERROR:", "error:")):
            self.errors.append(text)

    def failure(self, requirements: Sequence[str], code: int | None) -> str:
        """pip's failure in words: the requirements its first error line names (else all of
        them), that line, and pip's last lines beneath."""
        said = self.errors[0] if self.errors else _last_words(self.tail)
        mentioned = {canonicalize_name(word) for word in NAME.findall(said)}
        named = [wanted for wanted in requirements if project(wanted) in mentioned]
        which = ", ".join(named) if named else f"the requirements ({', '.join(requirements)})"
        return f"pip could not install {which} (exit {code}): {said}\n" + "\n".join(self.tail)


def _last_words(lines: deque[str]) -> str:
    return next((line for line in reversed(lines) if line.strip()), "no output")
