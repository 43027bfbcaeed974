"""The candidate's run: its order() reads the training profile in the sandbox, and the
names it returns are checked on the host before anything is linked.

That run holds the candidate's code, order_runner.py and the profile, and nothing else: no
objects, no workloads. Only the list of names leaves it, and only once `check_order` has
found it to be exactly the hot functions. Text from it (an error message, an invented
name) reaches the feedback escaped, so no byte it chooses can break the store.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from evolve.evaluators.code_layout.params import CodeLayoutParams
from evolve.plugin.program import Program
from evolve.plugin.stages import Runner, StageFailed, excerpt

ORDER_RUNNER = (Path(__file__).parent / "order_runner.py").read_bytes()
ORDER_BYTES = 8 * 1024**2  # an answer larger than this is not read
NAMES_SHOWN = 8
SLACK_S = 15.0  # beyond import and order(), for Python's start and the files in and out


def printable(text: str) -> str:
    """`text` with anything that is not valid UTF-8 (lone surrogates) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def ask_candidate(
    run: Runner,
    params: CodeLayoutParams,
    program: Program,
    functions: list[dict[str, object]],
    calls: list[dict[str, object]],
) -> list[str]:
    """The names the candidate's order() returned, not yet checked."""
    given = {
        "functions": functions,
        "calls": calls,
        "order_timeout_s": params.order_timeout_s,
        "import_timeout_s": params.import_timeout_s,
    }
    files = {f"candidate/{path}": text for path, text in program.as_bytes().items()}
    files |= {"order_runner.py": ORDER_RUNNER, "input.json": json.dumps(given).encode()}
    module = f"candidate/{program.main_file}"
    # An order() that outlives its alarm is stopped by the sandbox soon after, not at the
    # task's timeout_s, which is sized for the measurement.
    patience = params.import_timeout_s + params.order_timeout_s + SLACK_S
    limits = run.limits
    if patience < limits.timeout_s:
        keys = "evaluator.params.import_timeout_s + order_timeout_s, and a margin"
        limits = replace(limits, timeout_s=patience, timeout_key=keys)
    result = Runner(run.sandbox, limits, run.runs)(
        ["python3", "-I", "order_runner.py", module, "input.json"], files, collect=["order.json"]
    )
    if result.timed_out:
        raise StageFailed(f"the candidate's run {result.describe()}", timed_out=True)
    raw = result.files.get("order.json")
    if raw is None or not result.ok:
        stderr = excerpt(result.stderr, tail=True)
        raise StageFailed(f"the candidate's run {result.describe()} without an order\n{stderr}")
    if len(raw) > ORDER_BYTES:
        raise StageFailed(f"order.json is {len(raw)} bytes; more than {ORDER_BYTES} is not read")
    try:
        answer = json.loads(raw)
        names = answer.get("order") if isinstance(answer, dict) else None
        error = answer.get("error") if isinstance(answer, dict) else "not an object"
    except (ValueError, RecursionError):
        raise StageFailed("order.json is not JSON that this evaluator reads") from None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise StageFailed(printable(str(error or "order.json holds no list of names")[:4000]))
    return names


def _count(names: Sequence[str], noun: str) -> str:
    return f"{len(names)} {noun}" + ("" if len(names) == 1 else "s")


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(repr(name[:60]) for name in names[:NAMES_SHOWN])
    more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
    return shown + more


def check_order(names: Sequence[str], hot: Sequence[str]) -> None:
    """StageFailed, naming what is wrong, unless `names` holds each hot function once."""
    expected = set(hot)
    counts = Counter(names)
    problems = []
    missing = sorted(expected - counts.keys())
    invented = sorted(counts.keys() - expected)
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if missing:
        problems.append(f"leaves out {_count(missing, 'hot function')}: {_listed(missing)}")
    if invented:
        problems.append(f"names what is not a hot function ({len(invented)}): {_listed(invented)}")
    if repeated:
        problems.append(f"repeats {_count(repeated, 'name')}: {_listed(repeated)}")
    if problems:
        raise StageFailed(
            f"order() must return each of the {len(expected)} hot functions exactly once; "
            f"it {'; it '.join(problems)}"
        )
