"""A scripted "model" for matmul_c that collides the way a real one does.

Asked to improve a program, a coding model gives one of a few obvious edits, the most
obvious most often: asked the same question about the same program twice at once, it
often answers the same twice. This one reads the current program's knob lines from the
prompt (the first of each is the parent's) and answers a SEARCH/REPLACE diff that sets one
knob to a plausible value: one of the TOP most plausible edits that change the parent, drawn
by plausibility. Like a model that reads its prompt, it leaves out an edit the prompt's
"Recent attempts on this program" already lists or that its "Already in the run" section
says makes a program the run holds, or that "Being tried now on its siblings" says may
make the program a sibling's proposal makes (it applies each listed change to the parent's
line and compares), and it lowers the weight of the most
obvious edits by DODGE for each proposal the prompt says is "Being tried now" on the same
program (it is told to prefer a change they are unlikely to make, but not what they are).
"""

from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from tests.fakes.llm_server import Reply, prompt_text

TOP = 5  # plausible edits a model chooses among for one program
DODGE = 4.0  # how much less likely the most obvious edits get, per proposal being tried
TOKENS_IN, TOKENS_OUT = 2000, 150


@dataclass(frozen=True)
class Edit:
    knob: str  # the line's pattern, its value in group 1
    value: str
    weight: float  # plausibility


# A line of "Already in the run" or of the siblings being tried: `shared words` old -> new
HELD = re.compile(r"^- #\d+(?: \(.*?\))?: `([^`]+)` (.+?) -> (.+)$", re.M)

CFLAGS = r"^// cflags: (.+?)    @knob choice .*$"


def _define(name: str) -> str:
    return rf"^#define {name} (\S+)\s+// @knob .*$"


EDITS = (
    Edit(_define("LOOP_ORDER"), "IKJ", 10),
    Edit(CFLAGS, "-O3 -march=native", 7),
    Edit(_define("TILE_K"), "64", 4),
    Edit(CFLAGS, "-O3", 3),
    Edit(_define("TILE_J"), "128", 3),
    Edit(_define("LOOP_ORDER"), "KIJ", 2.5),
    Edit(_define("TILE_I"), "32", 2),
    Edit(CFLAGS, "-O3 -march=native -funroll-loops", 2),
    Edit(_define("TILE_K"), "128", 1.5),
    Edit(_define("TILE_I"), "64", 1.5),
    Edit(_define("TILE_J"), "256", 1),
    Edit(CFLAGS, "-Ofast -march=native", 1),
)


def _section(text: str, title: str) -> str:
    """The body of the prompt's `## title` section, empty when it has none."""
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return found.group(1) if found else ""


class MatmulModel:
    """Call with a request body; thread-safe. `answered` counts the replies; each takes
    `delay_s` to come, as a real model's does (the server answers each on its own thread)."""

    def __init__(
        self, seed: int, delay_s: float = 0.0, *, top: int = TOP, dodge: float = DODGE
    ) -> None:
        """`top` and `dodge` as TOP and DODGE; `top=1` is a model that always gives its most
        plausible edit not tried yet, whatever else is in flight."""
        self.rng = random.Random(seed)
        self.delay_s, self.top, self.dodge = delay_s, top, dodge
        self.lock = threading.Lock()
        self.answered = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        time.sleep(self.delay_s)
        text = prompt_text(body)
        tried = _section(text, "Recent attempts on this program")
        held = HELD.findall(_section(text, "Already in the run, one change from this program"))
        held += HELD.findall(_section(text, "Being tried now on its siblings"))
        in_flight = _section(text, "Being tried now on this program").count("\n- ")
        changes = [(edit, change) for edit in EDITS if (change := _change(text, edit))]
        fresh = [
            (edit, change)
            for edit, change in changes
            if change[2] not in tried and not any(_makes(change, h) for h in held)
        ][: self.top]
        with self.lock:
            self.answered += 1
            if not fresh:
                return Reply("I see nothing more to change.", TOKENS_IN, TOKENS_OUT)
            weights = [
                edit.weight / (self.dodge**in_flight if rank < in_flight else 1.0)
                for rank, (edit, _) in enumerate(fresh)
            ]
            old, new, _ = self.rng.choices(fresh, weights=weights)[0][1]
        diff = f"One setting.\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"
        return Reply(diff, TOKENS_IN, TOKENS_OUT)


def _change(text: str, edit: Edit) -> tuple[str, str, str] | None:
    """The parent's line for the edit's knob, the line with the new value, and what a change
    summary quotes of the new line up to the word after the value (whitespace collapsed);
    None where the parent has that value already."""
    line = re.search(edit.knob, text, re.M)
    if line is None or line.group(1) == edit.value:
        return None
    old = line.group(0)
    start, end = line.start(1) - line.start(), line.end(1) - line.start()
    new = old[:start] + edit.value + old[end:]
    head = new[: start + len(edit.value)]
    signature = " ".join(head.split()) + " " + new[len(head) :].split()[0]
    return old, new, signature


def _makes(change: tuple[str, str, str], held: tuple[str, str, str]) -> bool:
    """Whether the listed change (shared words, old, new) turns the parent's line into the
    line this change writes."""
    old, new = " ".join(change[0].split()), " ".join(change[1].split())
    shared, was, becomes = held
    before, after = f"{shared} {was}", f"{shared} {becomes}"
    return before in old and old.replace(before, after, 1) == new
