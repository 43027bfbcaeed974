"""The two consoles every command writes to."""

from __future__ import annotations

import sys

from rich.console import Console

# Pipes and CI logs get a wide page rather than rich's 80 columns, so tables stay readable.
console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True, soft_wrap=True)
