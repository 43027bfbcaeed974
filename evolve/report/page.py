"""The report as one HTML document: inline style, inline SVG, a little inline script.

The file must open anywhere, offline, with no server: nothing in it is fetched. Its
Content-Security-Policy says so to the browser too, and lets only the page's own two
scripts run (by their hashes), so that even a string the escaping missed could not run
script. The scripts are small on purpose: one records any error into the DOM
(`data-js-errors` on the body), the other wires the lineage panel and marks the render
finished (`data-rendered="yes"`), which is what a test reads back from a headless browser.
"""

from __future__ import annotations

import base64
import hashlib
import time

from evolve.engine.verification import WORD, run_reason
from evolve.report.facts import RunFacts
from evolve.report.markup import Safe, join, tag
from evolve.report.sections import Section, sections
from evolve.views.run_states import shown_status

STYLE = """
:root { color-scheme: light; --ink: #1d232a; --muted: #5b6670; --rule: #d8dee4; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--ink); margin: 0 auto;
  max-width: 1200px; padding: 1rem 2rem 4rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; }
h2 { border-bottom: 1px solid var(--rule); padding-bottom: .2rem; margin-top: 2.5rem; }
h3 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
nav a { margin-right: 1rem; }
.note, .muted { color: var(--muted); }
figure { margin: .5rem 0 1rem; }
figcaption { color: var(--muted); font-size: .9rem; }
svg.plot { width: 100%; max-width: 860px; height: auto; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; }
caption { text-align: left; color: var(--muted); padding-bottom: .2rem; }
th, td { border-bottom: 1px solid var(--rule); padding: .2rem .6rem; text-align: left;
  vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f8fa; padding: .6rem; overflow: auto; font-size: .8rem; }
.lineage { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1rem; }
.tree-scroll { max-height: 85vh; overflow: auto; border: 1px solid var(--rule); }
.panel { position: sticky; top: 1rem; max-height: 85vh; overflow: auto;
  border: 1px solid var(--rule); padding: 0 .8rem; }
.panel dl { display: grid; grid-template-columns: max-content 1fr; gap: .1rem .8rem; }
.panel dt { color: var(--muted); }
.panel dd { margin: 0; overflow-wrap: anywhere; }
svg.tree text { font: 12px ui-monospace, monospace; fill: var(--ink); }
svg.tree text.muted { fill: var(--muted); }
.edge, .node { cursor: pointer; outline: none; }
.edge .line { stroke: #8a96a3; stroke-width: 2; fill: none; }
.edge.partner .line { stroke: #a05195; stroke-dasharray: 5 3; }
.edge .hit { stroke: transparent; stroke-width: 14; fill: none; }
.edge.selected .line { stroke: #d62728; stroke-width: 3; }
.node circle { fill: #1f77b4; stroke: #fff; stroke-width: 2; }
.node.seed circle { fill: #2ca02c; }
.node.best circle { fill: #ff7f0e; }
.node.unscored circle { fill: #b8c0c8; }
.node.selected circle, .node:focus circle { stroke: #d62728; stroke-width: 3; }
.diff .head { font-weight: bold; }
.diff .hunk { color: #0a6d8a; }
.diff .add { background: #e6ffec; color: #116329; }
.diff .del { background: #ffebe9; color: #82071e; }
"""

ON_ERROR = """
window.onerror = function (message, source, line) {
  var body = document.body;
  var before = body.dataset.jsErrors ? body.dataset.jsErrors + "\\n" : "";
  body.dataset.jsErrors = before + message + " (line " + line + ")";
};
"""

LINEAGE = """
(function () {
  var panel = document.getElementById("edge-panel");
  var pinned = null;
  function show(key) {
    var source = document.getElementById("panel-" + key);
    if (!panel || !source) { return; }
    var copy = source.cloneNode(true);
    copy.removeAttribute("id");
    copy.hidden = false;
    panel.replaceChildren(copy);
    document.querySelectorAll(".lineage .selected").forEach(function (element) {
      element.classList.remove("selected");
    });
    document.querySelectorAll('.lineage [data-edge="' + key + '"]').forEach(function (element) {
      element.classList.add("selected");
    });
  }
  function pin(key) { pinned = key; show(key); }
  document.querySelectorAll(".lineage [data-edge]").forEach(function (element) {
    var key = element.getAttribute("data-edge");
    element.addEventListener("mouseenter", function () { show(key); });
    element.addEventListener("mouseleave", function () { if (pinned) { show(pinned); } });
    element.addEventListener("click", function () { pin(key); });
    element.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); pin(key); }
    });
  });
  var best = document.querySelector(".lineage .node.best");
  if (best) { pin(best.getAttribute("data-edge")); }
  document.body.dataset.rendered = "yes";
})();
"""


def _hash(script: str) -> str:
    digest = hashlib.sha256(script.encode()).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    f"script-src {_hash(ON_ERROR)} {_hash(LINEAGE)}; base-uri 'none'; form-action 'none'"
)


def render(facts: RunFacts) -> str:
    parts = sections(facts)
    title = f"evolve report: {facts.run.name}"
    head = join(
        [
            tag("meta", charset="utf-8"),
            tag("meta", http_equiv="Content-Security-Policy", content=POLICY),
            tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
            tag("title", title),
            Safe(f"<style>{STYLE}</style>"),
        ]
    )
    body = join(
        [
            Safe(f"<script>{ON_ERROR}</script>"),
            tag("h1", title),
            _summary(facts),
            tag("nav", join(tag("a", s.title, href=f"#{s.key}") for s in parts)),
            join(_section(s) for s in parts),
            Safe(f"<script>{LINEAGE}</script>"),
        ]
    )
    return f'<!DOCTYPE html>\n<html lang="en">\n<head>{head}</head>\n<body>{body}</body>\n</html>\n'


def _section(section: Section) -> Safe:
    return tag("section", join([tag("h2", section.title), section.body]), id=section.key)


def _summary(facts: RunFacts) -> Safe:
    run, best = facts.run, facts.best
    if best is None:
        leader = "no best yet"
    elif facts.crowned:
        leader = f"best #{best.id}, {facts.headline}"
    else:
        leader = (
            f"top #{best.id}, {facts.headline}, not crowned: measured once, or flagged with "
            "measurements that disagree"
        )
    leader += f" ({facts.terms.ranking()})" if best is not None else ""
    if best is not None and (unverified := run_reason(run)):
        leader += f" ({WORD}: {unverified})"
    words = [
        f"status {shown_status(run, time.time())}",
        f"{len(facts.candidates)} candidates",
        f"{len(facts.evaluations)} evaluations",
        f"{len(facts.proposals)} proposals",
        leader,
        "written " + time.strftime("%Y-%m-%d %H:%M:%S"),
    ]
    return tag("p", " · ".join(words), class_="muted")
