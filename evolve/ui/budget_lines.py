"""The top of the live board: a bar per budget, how the run stands, and its best, laid out
for the width they are drawn at.

Rich's Progress shares a line among its columns and cuts whichever overflows, so at 80
columns a budget read `wal… 1s of 180s` and its bar shrank to two characters. Here the
label and the figure of a bar are never cut: the bar takes what they leave, within
`BAR_MIN`..`BAR_MAX`, and where not even `BAR_MIN` is left the bar is what goes. The run's
state is a list of phrases put on as few lines as fit, a phrase never split between two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

BAR_MIN, BAR_MAX = 10, 40  # characters of a bar
SEPARATOR = "; "


@dataclass(frozen=True)
class Gauge:
    label: str  # "candidates"
    completed: float
    total: float | None  # None: no limit, and the bar pulses
    figure: str  # "12/200", "61s of 180s"


class BudgetLines:
    def __init__(
        self, gauges: Sequence[Gauge], state: Sequence[Text], best: Text | None = None
    ) -> None:
        self.gauges, self.state, self.best = list(gauges), list(state), best

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if self.gauges:
            yield self._gauges(width)
        yield from packed(self.state, width)
        if self.best is not None:
            yield self.best

    def _gauges(self, width: int) -> Table:
        label = max(cell_len(g.label) for g in self.gauges)
        figure = max(cell_len(g.figure) for g in self.gauges)
        bar = min(BAR_MAX, width - label - figure - 2)  # 2: the gaps between the three
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True, min_width=label)
        if bar >= BAR_MIN:
            grid.add_column(no_wrap=True, width=bar)
        grid.add_column(no_wrap=True)
        for gauge in self.gauges:
            drawn = ProgressBar(total=gauge.total, completed=gauge.completed, width=bar)
            grid.add_row(gauge.label, *[drawn] * (bar >= BAR_MIN), gauge.figure)
        return grid


def packed(phrases: Sequence[Text], width: int) -> list[Text]:
    """The phrases joined by `SEPARATOR` on as few lines of `width` as hold them whole; a
    phrase longer than a line has one to itself, and wraps there between its words."""
    lines: list[Text] = []
    line: Text | None = None
    for phrase in phrases:
        if line is not None and cell_len(line.plain + SEPARATOR + phrase.plain) <= width:
            line.append(SEPARATOR)
            line.append_text(phrase)
            continue
        if line is not None:
            lines.append(line)
        line = phrase.copy()
    if line is not None:
        lines.append(line)
    return lines
