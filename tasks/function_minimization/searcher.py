"""The candidate's side of a function_minimization stage, in a process of its own.

    python -I -B searcher.py PROGRAM REPLIES_FD REQUESTS_FD

Imports PROGRAM, then for each `search SEED` line from the evaluator calls its
run_search(objective, bounds, budget, seed), where objective(x, y) sends `x y` to the
evaluator and returns the value it answers; `done` ends a search, `error` a search that
raised (its traceback goes to stderr). A call past the budget raises BudgetSpent, as the
evaluator's notes say.
"""

import importlib.util
import os
import sys
import traceback

BOUNDS = ((-5.12, 5.12), (-5.12, 5.12))
BUDGET = 2000


class BudgetSpent(Exception):
    """A call past the budget."""


class Remote:
    """The objective as the candidate sees it: each call is a question to the evaluator."""

    def __init__(self, replies, requests):
        self.replies, self.requests = replies, requests

    def __call__(self, x, y):
        self.requests.write(f"{float(x)!r} {float(y)!r}\n")
        self.requests.flush()
        answer = self.replies.readline()
        if answer == "spent\n":
            raise BudgetSpent(f"objective called more than {BUDGET} times")
        return float(answer)


def main(program, replies_fd, requests_fd):
    replies = os.fdopen(int(replies_fd))
    requests = os.fdopen(int(requests_fd), "w")
    spec = importlib.util.spec_from_file_location("candidate", program)
    module = importlib.util.module_from_spec(spec)
    objective = Remote(replies, requests)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        traceback.print_exc()
        requests.write("error: importing the program raised\n")
        requests.flush()
        return
    for line in replies:
        seed = int(line.split()[1])
        try:
            module.run_search(objective, BOUNDS, BUDGET, seed)
        except BudgetSpent:
            pass  # scored on the calls within the budget
        except BaseException:
            traceback.print_exc()
            requests.write("error: run_search raised\n")
            requests.flush()
            return
        requests.write("done\n")
        requests.flush()


if __name__ == "__main__":
    main(*sys.argv[1:])
