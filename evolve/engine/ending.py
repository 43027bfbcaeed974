"""How a command ends short of success, said by the library and acted on by the CLI alone.

The code that launches and checks runs (evolve/engine/launch.py,
evolve/runtime/sandbox_choice.py) never
exits the process: it raises `Ended` with the exit code a command gives (2 for bad input
found before anything started, 1 for a run that failed, 130 for one stopped) and the line
that says why. evolve/cli/commands.py prints that line and exits with the code; a program that calls
evolve.api catches it like any other exception.
"""

from __future__ import annotations


class Ended(Exception):
    """`message` is the error line (empty where it was printed already, with details that
    a single line cannot hold); `hint`, printed after it, says what to do next."""

    def __init__(self, exit_code: int, message: str = "", hint: str = "") -> None:
        super().__init__(message or f"ended with exit code {exit_code}")
        self.exit_code, self.message, self.hint = exit_code, message, hint
