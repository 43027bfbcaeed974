"""The report's figures, drawn by matplotlib and returned as SVG text to inline in the page.

Only the object-oriented API is used (`Figure`, never pyplot): no global registry of
figures, no display, nothing left open, and the SVG canvas needs no backend switch. Text
stays text (`svg.fonttype: none`), which the browser draws, so the file stays small and a
test can read the labels. Mathtext is off: labels come from the store, and a `$` in a model
name is not TeX. A scatter of thousands of points is rasterized into one image inside the
SVG: a vector path per point would make the page tens of megabytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from evolve.report.progress import WHOLE_RUN, Progress
from evolve.views.objective_terms import Terms, in_unit

RASTER_ABOVE = 2000  # points in one scatter beyond which it is drawn as an image
LABEL_CHARS = 40  # of a bar's label; model and operator names can be long
NAMED_ISLANDS = 8  # islands named in a legend; more share one entry
WIDE, TALL = 7.5, 3.4  # inches
STYLE = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
# The SVG's RDF block, left out: it says matplotlib made it, and when, in every figure.
METADATA = ("Creator", "Date", "Format", "Type")
RUN_COLOR, REMEASURE_COLOR, CLOUD_COLOR, FRONT_COLOR = "#111111", "#d62728", "#5f7387", "#1f77b4"
FALL_COLOR = "#ff7f0e"
NAMED_FALLS = 12  # falls of the run's best named on the plot; the caption lists them too
LOG_ABOVE = 20.0  # a spread of values (largest / smallest) that gets a logarithmic axis


def _draw(name: str, height: float, paint: Callable[[Axes], None]) -> str:
    """Paint one figure and return its <svg> element, tagged with `name` for the page."""
    with rc_context({**STYLE, "svg.hashsalt": name}):
        figure = Figure(figsize=(WIDE, height), layout="constrained")
        paint(figure.add_subplot())
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata=dict.fromkeys(METADATA))
    text = buffer.getvalue()
    svg = text[text.index("<svg") :]
    return svg.replace("<svg", f'<svg class="plot" data-plot="{name}" role="img"', 1)


def _rasterize(points: int) -> bool:
    return points > RASTER_ABOVE


def progress(replayed: Progress, axis: str, terms: Terms) -> str:
    """The best against candidates evaluated (`axis` "candidates") or against the seconds
    since the run was created ("seconds"), per island and for the whole run, in the
    objective's terms (`terms`): every candidate's first measurement as a point, each
    re-measurement marked, and each fall of a best marked where it happened, with the
    candidate that caused it on the run's line."""

    def x(candidates: int, seconds: float) -> float:
        return candidates if axis == "candidates" else seconds

    def y(score: float) -> float:
        one = terms.single
        return in_unit(score, one) if one is not None else score

    def paint(axes: Axes) -> None:
        if replayed.scores:
            axes.scatter(
                [x(p.candidates, p.seconds) for p in replayed.scores],
                [y(p.score) for p in replayed.scores],
                s=12,
                color=CLOUD_COLOR,
                alpha=0.8,
                linewidths=0,
                label="each candidate's first measurement",
                zorder=2,
                rasterized=_rasterize(len(replayed.scores)),
            )
        islands = sorted(key for key in replayed.curves if key != WHOLE_RUN)
        for rank, island in enumerate(islands):
            curve = replayed.curves[island]
            named = len(islands) <= NAMED_ISLANDS
            label = f"island {island}" if named else ("islands" if rank == 0 else None)
            xs = curve.candidates if axis == "candidates" else curve.seconds
            axes.step(xs, [y(b) for b in curve.best], where="post", linewidth=1, alpha=0.8,
                      label=label, zorder=3)  # fmt: skip
        whole = replayed.curves.get(WHOLE_RUN)
        if whole is not None:
            xs = whole.candidates if axis == "candidates" else whole.seconds
            axes.step(xs, [y(b) for b in whole.best], where="post", color=RUN_COLOR,
                      linewidth=2, label="run", zorder=4)  # fmt: skip
        marked = [r for r in replayed.remeasures if r.score is not None]
        if marked:
            axes.scatter(
                [x(r.candidates, r.seconds) for r in marked],
                [y(r.score) for r in marked if r.score is not None],
                marker="x",
                s=28,
                color=REMEASURE_COLOR,
                label="re-measurement",
                zorder=5,
                rasterized=_rasterize(len(marked)),
            )
        falls = [f for curve in replayed.curves.values() for f in curve.falls]
        if falls:
            axes.scatter(
                [x(f.candidates, f.seconds) for f in falls],
                [y(f.before) for f in falls],
                marker="D",
                s=30,
                facecolors="none",
                edgecolors=FALL_COLOR,
                linewidths=1.5,
                label="best re-measured worse",
                zorder=6,
            )
        for fall in whole.falls[:NAMED_FALLS] if whole is not None else ():
            axes.annotate(
                f"#{fall.candidate_id}",
                (x(fall.candidates, fall.seconds), y(fall.before)),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=7,
                color=FALL_COLOR,
            )
        values = [y(p.score) for p in replayed.scores]
        if values and min(values) > 0 and max(values) / min(values) >= LOG_ABOVE:
            axes.set_yscale("log")  # a run time from seconds to milliseconds
            # Plain numbers: the default labels are TeX, which this page does not parse.
            axes.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            axes.yaxis.set_minor_formatter(FuncFormatter(_minor_label))
        axes.set_xlabel("candidates evaluated" if axis == "candidates" else "seconds since start")
        axes.set_ylabel(f"best {terms.name}, {terms.better}")
        _legend(axes)

    return _draw(f"progress-{axis}", TALL, paint)


def bars(
    name: str,
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    xlabel: str,
    *,
    counts: bool = False,
) -> str:
    """Horizontal bars, one group per label (first on top), one bar per series; `counts`
    keeps the axis to whole numbers."""

    def paint(axes: Axes) -> None:
        width = 0.8 / len(series)
        rows = range(len(labels))
        for index, (legend, values) in enumerate(series.items()):
            offsets = [row + (index - (len(series) - 1) / 2) * width for row in rows]
            axes.barh(offsets, values, height=width, label=legend)
        axes.set_yticks(list(rows), [_clip(label) for label in labels])
        axes.invert_yaxis()
        axes.set_xlabel(xlabel)
        axes.grid(axis="y", visible=False)
        if counts:
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        if len(series) > 1:
            _legend(axes)

    return _draw(name, max(1.6, 0.9 + 0.32 * len(labels) * max(1, len(series) // 2)), paint)


def front(
    points: Sequence[tuple[float, float]],
    on_front: Sequence[tuple[float, float]],
    names: tuple[str, str],
) -> str:
    """Every scored candidate on the first two objectives, the Pareto front drawn over."""

    def paint(axes: Axes) -> None:
        xs, ys = zip(*points, strict=True)
        axes.scatter(
            xs,
            ys,
            s=6,
            color=CLOUD_COLOR,
            linewidths=0,
            label="candidates",
            rasterized=_rasterize(len(points)),
        )
        edge = sorted(on_front)
        axes.plot(
            [x for x, _ in edge],
            [y for _, y in edge],
            marker="o",
            markersize=4,
            color=FRONT_COLOR,
            label="Pareto front",
        )
        axes.set_xlabel(names[0])
        axes.set_ylabel(names[1])
        _legend(axes)

    return _draw("pareto", TALL, paint)


def _minor_label(value: float, _: object) -> str:
    """On a logarithmic axis, 2 and 5 of each decade are labelled, the rest left bare."""
    if value <= 0:
        return ""
    leading = round(value / 10 ** math.floor(math.log10(value)))
    return f"{value:g}" if leading in (2, 5) else ""


def _legend(axes: Axes) -> None:
    """Beside the plot, where it hides no point."""
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)


def _clip(label: str) -> str:
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
