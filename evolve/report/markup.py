"""The few HTML pieces the report is built of, escaping everything that is not marked safe.

Program text, feedback, model names and operator names come from the store, and a hostile
candidate controls some of them: every value is escaped on its way into the page unless it
is `Safe`, which only this package's own builders produce.
"""

from __future__ import annotations

import html
import math
from collections.abc import Collection, Iterable, Sequence

VOID = frozenset({"meta"})  # the void elements the report writes


class Safe(str):
    """HTML built by the report itself, already escaped where it holds data."""

    __slots__ = ()


def esc(value: object) -> Safe:
    return value if isinstance(value, Safe) else Safe(html.escape(str(value), quote=True))


def tag(name: str, body: object = "", /, **attributes: object) -> Safe:
    """<name attributes>body</name>; `class_` stands for `class`, and underscores in other
    names for dashes (`data_edge` is `data-edge`). A void element (meta) has no body."""
    words = "".join(
        f' {key.rstrip("_").replace("_", "-")}="{esc(value)}"'
        for key, value in attributes.items()
        if value is not None
    )
    if name in VOID:
        return Safe(f"<{name}{words}>")
    return Safe(f"<{name}{words}>{esc(body)}</{name}>")


def join(parts: Iterable[object]) -> Safe:
    return Safe("".join(esc(part) for part in parts))


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    numeric: Collection[int] = (),
    caption: str = "",
) -> Safe:
    """The columns at the `numeric` positions are right-aligned (class `num`)."""
    head = tag("tr", join(tag("th", header) for header in headers))
    body = join(
        tag(
            "tr",
            join(
                tag("td", cell, class_="num" if column in numeric else None)
                for column, cell in enumerate(row)
            ),
        )
        for row in rows
    )
    return tag(
        "table",
        join([tag("caption", caption) if caption else "", tag("thead", head), tag("tbody", body)]),
    )


def note(text: str) -> Safe:
    """The one line a section shows instead of its content when the run has no data for it."""
    return tag("p", text, class_="note")


def number(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-" if value is None else str(value)
    return f"{value:.4g}"


def percent(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
