"""A table that fits its width by leaving whole columns out, never by cutting a cell.

Rich fits a table too wide for the terminal by shrinking its columns and cutting their text
with an ellipsis, so at 80 columns a score reads `-0.083…`. A number cut short is worse than
no number: it reads as a different one. Here each column has a rank, and while the table
is wider than the space it is drawn in, the lowest-ranked column that may go is left out;
the caption names what was left out, so a reader knows to widen the terminal for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

ALWAYS = 0  # the rank of a column that is never left out
UNBOUNDED = 100_000  # the width a table is measured in: wide enough for any cell


@dataclass(frozen=True)
class Column:
    header: str
    cells: Sequence[str | Text]
    keep: int = ALWAYS  # left out before any column of higher rank; ALWAYS: never
    right: bool = True  # numbers are read by their right edge


class FittedTable:
    """Rendered at the width it is given: see the module's docstring. Columns keep their
    order; only which of them are shown depends on the width."""

    def __init__(
        self, columns: Sequence[Column], *, title: str = "", notes: Sequence[str] = ()
    ) -> None:
        self.columns, self.title, self.notes = list(columns), title, list(notes)

    def shown(self, console: Console, width: int) -> list[Column]:
        """The columns drawn at `width`: every one whose table fits, less the lowest-ranked
        droppable ones until it does (or nothing more may go)."""
        shown = list(self.columns)
        unbounded = console.options.update_width(UNBOUNDED)  # a measure is capped at its width
        while Measurement.get(console, unbounded, self._table(shown, [])).maximum > width:
            droppable = [c for c in shown if c.keep != ALWAYS]
            if not droppable:
                break
            shown.remove(min(droppable, key=lambda c: c.keep))
        return shown

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        shown = self.shown(console, options.max_width)
        left_out = [c.header for c in self.columns if c not in shown]
        notes = list(self.notes)
        if left_out:
            notes.append(f"not shown at this width: {', '.join(left_out)}")
        yield self._table(shown, notes)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        table = self._table(self.shown(console, options.max_width), [])
        return Measurement.get(console, options, table)

    def _table(self, columns: list[Column], notes: list[str]) -> Table:
        table = Table(
            title=Text(self.title) if self.title else None,
            caption=Text("\n".join(notes)) if notes else None,
            expand=False,
        )
        for column in columns:
            justify = "right" if column.right else "left"
            table.add_column(column.header, justify=justify, no_wrap=True)
        for row in zip(*(column.cells for column in columns), strict=True):
            table.add_row(*row)
        return table
