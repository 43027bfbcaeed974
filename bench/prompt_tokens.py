"""Prompt tokens per model proposal on matmul_c, before and after a change to the prompts,
built from one real population, section by section.

First a short real run makes the population: `evolve run` on the shipped matmul_c (process
sandbox, timing counters off) with the autotuner and the `diff` operator, whose model is
the scripted server of tests/fakes answering with SEARCH/REPLACE edits of the program it
was shown (loop orders, tiles, flags, and a few changes to the code), run by the code of
the `--before` checkout where there is one. Then, for each
checkout compared, a child process with that checkout on PYTHONPATH opens a copy of it,
restores the run's search state into its own Briefing, and builds the prompts of a fixed
series of proposals (parents drawn with a fixed random seed; diff, rewrite and crossover
in turn), exactly as the engine builds a request. Nothing is sent anywhere.

Tokens are estimated as characters / 4 (tiktoken's encodings cannot be downloaded on the
machines this runs on; the ratio is about right for code and English, and the comparison,
the same text measured the same way, does not depend on it). Printed: the mean prompt
(system + user) per proposal, the mean user message (what a provider that caches the
system prompt bills in full), what a proposal is billed as where the system prompt is read
from the provider's cache, and the tokens each section takes.

Run: `.venv/bin/python bench/prompt_tokens.py --before /path/to/previous/checkout`
(`git worktree add /tmp/before <commit>` makes one). `--keep DIR` keeps the population
(DIR/population.db and its task) for a later run; `--measure` is the child process's entry.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUN = "prompt-bench"
STORE = "population.db"
CHARS_PER_TOKEN = 4
# What a cached input token costs beside a fresh one: Anthropic's cache reads, and
# OpenAI's cached input on the gpt-4o family (newer models charge less still).
CACHE_READ = {0.1: "Anthropic", 0.5: "OpenAI"}
OPERATORS = ("diff", "rewrite", "crossover")
HEADING = re.compile(r"(?m)^(#{2,3}) (.*)$")
KNOBS = {
    "LOOP_ORDER": ("IJK", "IKJ", "KIJ", "JIK"),
    "TILE_I": ("512", "64", "32", "128"),
    "TILE_J": ("512", "256", "128", "64"),
    "TILE_K": ("512", "64", "128", "32"),
}
FLAGS = ("-O2", "-O3", "-O3 -march=native", "-Ofast -march=native")
ZEROING = "  for (int i = 0; i < n * n; i++) C[i] = 0.0f;\n"
REWRITES = (  # changes to the code itself, beyond the knobs
    "  for (int i = 0; i < n * n; i += 4) {\n"
    "    C[i] = 0.0f; C[i + 1] = 0.0f; C[i + 2] = 0.0f; C[i + 3] = 0.0f;\n  }\n",
    "  float *c = C;\n  for (int i = 0; i < n * n; i++) *c++ = 0.0f;\n",
    "  for (int r = 0; r < n; r++)\n    for (int j = 0; j < n; j++) C[r * n + j] = 0.0f;\n",
)


def scripted_edit(prompt: str, count: int) -> str:
    """A SEARCH/REPLACE edit of the current program in `prompt`, varied by `count`."""
    current = prompt.split("## The current program", 1)[1].split("\n## ", 1)[0]
    rng = random.Random(count)
    if ZEROING in current and rng.random() < 0.3:
        new = REWRITES[count % len(REWRITES)]
        return f"<<<<<<< SEARCH\n{ZEROING}=======\n{new}>>>>>>> REPLACE\n"
    if rng.random() < 0.3:
        line = next(x for x in current.splitlines() if x.startswith("// cflags:"))
        flags = line.split("@knob", 1)[0].removeprefix("// cflags:").strip()
        new = line.replace(flags, rng.choice([f for f in FLAGS if f != flags]), 1)
        return f"<<<<<<< SEARCH\n{line}\n=======\n{new}\n>>>>>>> REPLACE\n"
    knob = rng.choice(sorted(KNOBS))
    line = next(x for x in current.splitlines() if x.startswith(f"#define {knob} "))
    value = line.split()[2]
    new = line.replace(f" {value}", f" {rng.choice([v for v in KNOBS[knob] if v != value])}", 1)
    return f"<<<<<<< SEARCH\n{line}\n=======\n{new}\n>>>>>>> REPLACE\n"


def make_population(folder: Path, candidates: int, code: Path) -> None:
    """A short real run of a copy of matmul_c in `folder` into its population.db, its
    model the scripted server, run by the checkout `code` (the oldest compared: a newer
    checkout can upgrade its store, an older one cannot open a newer one's)."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes.llm_server import Reply, ScriptedLLMServer, prompt_text

    answered = iter(range(10**9))

    def model(body: dict[str, Any]) -> Reply:
        edit = scripted_edit(prompt_text(body), next(answered))
        return Reply(f"Try this.\n{edit}", input_tokens=3000, output_tokens=200)

    with ScriptedLLMServer(default=model) as server:
        task = folder / "matmul_c"
        shutil.copytree(code / "tasks" / "matmul_c", task)
        text = (task / "task.yaml").read_text()
        text = re.sub(r"(?m)^    counter_sizes: .*\n", "", text)
        text = text.replace("sizes: {n: 512}", "sizes: {n: 512}\n    counters: false")
        text = text.replace("  - {name: autotuner}", "  - {name: autotuner}\n  - {name: diff}")
        model_entry = json.dumps({"model": "scripted", "base_url": server.openai_url})
        text += f"llm:\n  models:\n    - {model_entry}\n  timeout_s: 30\n"
        (task / "task.yaml").write_text(text)
        argv = [sys.executable, "-m", "evolve", "run", str(task / "task.yaml"), "--plain"]
        argv += ["--sandbox", "process", "--candidates", str(candidates), "--seed", "1"]
        argv += ["--name", RUN, "--db", f"sqlite:///{folder / STORE}", "--results", str(folder)]
        argv += ["--workers", "1", "--wall-time", "1800"]  # the candidates end it, not the clock
        env = {**os.environ, "PYTHONPATH": str(code), "OPENAI_API_KEY": "sk-bench"}
        done = subprocess.run(  # in `folder`: `-m evolve` would load the current folder's
            argv, env=env, cwd=folder, capture_output=True, text=True, timeout=1800
        )
        if done.returncode != 0:
            raise SystemExit(f"the population run failed ({done.returncode}):\n{done.stderr}")


def measure(store: Path, proposals: int) -> dict[str, Any]:
    """The prompts this checkout's code builds for `proposals` proposals on the run in
    `store`: sizes per proposal and per section. Runs in the child process."""
    from evolve.engine.budgets import Budgets
    from evolve.engine.candidate_cache import CandidateCache
    from evolve.mutators.factory import prompt_context
    from evolve.mutators.prompt import build_prompt
    from evolve.propose.briefing import Briefing
    from evolve.propose.recent_attempts import RecentAttempts
    from evolve.search import make_strategy
    from evolve.search.novelty import NoveltyIndex
    from evolve.search.strategy import Scored
    from evolve.store import Store
    from evolve.task.loading import parse_task

    db = Store(f"sqlite:///{store}")
    run = db.get_run(RUN)
    if run is None:
        raise SystemExit(f"{store} holds no run {RUN}; delete it and run the bench again")
    task = parse_task(run.task_yaml, Path(run.task_path))
    spec = task.spec
    seed = db.seed_candidate(RUN)
    assert seed is not None
    strategy = make_strategy(spec.search, spec.objectives, seed.id)
    candidates = CandidateCache(db)
    novelty = NoveltyIndex(spec.search.novelty_threshold)
    scored = [c for c in db.each_candidate(RUN) if c.score is not None]
    for candidate in scored:
        candidates.remember(candidate)
        novelty.add(candidate.id, candidate.program)
        strategy.add(Scored(candidate.id, candidate.island, candidate.score))
    briefing = Briefing(
        spec, db, RUN, strategy=strategy, candidates=candidates, novelty=novelty,
        budgets=Budgets(spec.budget, db, RUN, wall_used_s=0.0),
        recent=RecentAttempts(db, candidates, spec.search.history),
    )  # fmt: skip
    context = prompt_context(task)
    takes = set(inspect.signature(build_prompt).parameters)
    rng = random.Random(7)
    system_chars, user_chars = [], []
    sections: Counter[str] = Counter()
    for number in range(proposals):
        operator = OPERATORS[number % len(OPERATORS)]
        pick = strategy.pick(rng)
        assert pick is not None
        draw = getattr(briefing, "partner", strategy.partner)
        partner_id = draw(pick, rng) if operator == "crossover" else None
        record = candidates.get(pick.parent_id)
        parent = briefing.parent(record)
        extra: dict[str, Any] = {
            "attempts": briefing.attempts(parent.id),
            "digest": briefing.run_digest(len(scored)),
        }
        if "metric_names" in takes:
            extra["metric_names"] = briefing.metric_names
        if "neighbours" in takes:
            extra["neighbours"] = briefing.near(record, extra["attempts"])
        others = briefing.others(pick, partner_id)
        system, user = build_prompt(operator, context, parent, others, **extra)
        system_chars.append(len(system))
        user_chars.append(len(user))
        for where, text in (("system", system), ("user", user)):
            for title, size in section_sizes(text):
                sections[f"{where}: {title}"] += size
    return {
        "proposals": proposals,
        "population": len(scored),
        "system_chars": sum(system_chars) / proposals,
        "user_chars": sum(user_chars) / proposals,
        "sections": {k: v / proposals for k, v in sections.items()},
    }


def section_sizes(text: str) -> list[tuple[str, int]]:
    """(title, characters) of each `## ` section of a prompt; `### Program #n` headings
    count towards the section they are in. Text before the first heading is "preamble"."""
    marks = [(m.start(), m[2]) for m in HEADING.finditer(text) if m[1] == "##"]
    if not marks or marks[0][0] > 0:
        marks.insert(0, (0, "preamble"))
    ends = [start for start, _ in marks[1:]] + [len(text)]
    return [
        (_plain_title(title), end - start) for (start, title), end in zip(marks, ends, strict=True)
    ]


def _plain_title(title: str) -> str:
    """A section's title without what changes per proposal (ids, scores)."""
    title = re.sub(r", #\d+ \(.*$", "", title)
    return re.sub(r",? best first.*$", " (inspirations)", title)


def _child(checkout: Path, store: Path, proposals: int, scratch: Path) -> dict[str, Any]:
    """The checkout's measure, on a copy of the store of its own: opening a store
    upgrades its schema to the checkout's, which an older checkout could not open."""
    copy = scratch / STORE
    scratch.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):  # SQLite's files, as the population run left them
        if (kept := Path(f"{store}{suffix}")).exists():
            shutil.copyfile(kept, f"{copy}{suffix}")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--measure", str(copy)]
    argv += ["--proposals", str(proposals)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=checkout)
    if done.returncode != 0:
        raise SystemExit(f"measuring {checkout} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def tokens(chars: float) -> float:
    return chars / CHARS_PER_TOKEN


def report(before: dict[str, Any], after: dict[str, Any]) -> None:
    def change(old: float, new: float) -> str:
        return f"{(new - old) / old:+.0%}" if old else "new"

    print(f"matmul_c: {after['proposals']} proposals on a population of {after['population']}")
    print("tokens per proposal (characters / 4)\n")
    print("| | before | after | change |")
    print("|---|---|---|---|")
    rows = (
        ("whole prompt (system + user)", "system_chars", "user_chars"),
        ("system prompt (cacheable)", "system_chars", None),
        ("user message (not cacheable)", "user_chars", None),
    )
    for label, first, second in rows:
        old = before[first] + (before[second] if second else 0.0)
        new = after[first] + (after[second] if second else 0.0)
        print(f"| {label} | {tokens(old):.0f} | {tokens(new):.0f} | {change(old, new)} |")
    for price, provider in CACHE_READ.items():
        old = before["system_chars"] * price + before["user_chars"]
        new = after["system_chars"] * price + after["user_chars"]
        label = f"billed as, system prompt read from cache at {price:g}x ({provider})"
        print(f"| {label} | {tokens(old):.0f} | {tokens(new):.0f} | {change(old, new)} |")
    print("\nsections, tokens per proposal\n")
    print("| section | before | after | change |")
    print("|---|---|---|---|")
    names = sorted(set(before["sections"]) | set(after["sections"]))
    for name in names:
        old, new = before["sections"].get(name, 0.0), after["sections"].get(name, 0.0)
        shown = change(old, new) if old else "new"
        print(f"| {name} | {tokens(old):.0f} | {tokens(new):.0f} | {shown} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--keep", type=Path, help="a folder to keep the population in")
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--proposals", type=int, default=60)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.proposals)))
        return
    oldest = args.before.resolve() if args.before else ROOT
    with tempfile.TemporaryDirectory() as scratch:
        folder = (args.keep or Path(scratch)).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / STORE).exists():
            make_population(folder, args.candidates, oldest)
        store, copies = folder / STORE, Path(scratch) / "copies"
        after = _child(ROOT, store, args.proposals, copies / "after")
        before = _child(oldest, store, args.proposals, copies / "before") if args.before else after
        report(before, after)


if __name__ == "__main__":
    main()
