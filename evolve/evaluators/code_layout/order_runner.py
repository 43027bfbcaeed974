"""Runs the candidate's order(functions, calls) in the sandbox and writes what it returned.

    python3 -I order_runner.py MODULE input.json     # writes order.json

This run shares the sandbox with the candidate's code, so nothing it writes is believed
beyond the list of names in order.json, which the host checks against the profile's hot
functions before anything is linked. It exists to turn the candidate's failures into plain
feedback: an exception, a wrong type, or a call past its deadline.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path


class TookTooLong(BaseException):
    """Raised by the alarm; a BaseException so that `except Exception` in the candidate does
    not swallow it (a bare `except:` still can: the sandbox's timer is the last word)."""


def write(answer: dict[str, object]) -> None:
    Path("order.json").write_text(json.dumps(answer))


def on_alarm(signum: int, frame: object) -> None:
    raise TookTooLong


def load(module_path: str) -> object:
    """The candidate's order function; raises whatever importing it raised."""
    spec = importlib.util.spec_from_file_location("candidate_layout", module_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {module_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    order = getattr(module, "order", None)
    if not callable(order):
        raise TypeError(f"{module_path} defines no function `order(functions, calls)`")
    return order


def bounded(what: str, seconds: float, action: Callable[[], object]) -> tuple[object, str]:
    """`action()`'s value and "", or None and what went wrong (too slow, or its traceback)."""
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return action(), ""
    except TookTooLong:
        return None, f"{what} took longer than {seconds:g} s"
    except BaseException:  # the candidate's own failure, whatever it raised
        return None, f"{what} raised:\n{traceback.format_exc(limit=-4)[-3000:]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def main() -> None:
    module_path, input_path = sys.argv[1], sys.argv[2]
    given = json.loads(Path(input_path).read_text())
    signal.signal(signal.SIGALRM, on_alarm)
    order, error = bounded(
        f"importing {module_path}", given["import_timeout_s"], lambda: load(module_path)
    )
    if not error:

        def call() -> object:
            return order(given["functions"], given["calls"])  # type: ignore[operator]

        result, error = bounded("order()", given["order_timeout_s"], call)
    if error:
        write({"error": error})
        return
    if not isinstance(result, (list, tuple)):
        kind = type(result).__name__
        write({"error": f"order() returned a value of type {kind}; it must return a list of names"})
        return
    for index, item in enumerate(result):
        if not isinstance(item, str):
            kind = type(item).__name__
            write({"error": f"order() returned a value of type {kind} at position {index}; "
                   "each item must be a name (str)"})  # fmt: skip
            return
    write({"order": list(result)})


if __name__ == "__main__":
    main()
