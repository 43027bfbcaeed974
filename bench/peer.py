"""evolve and OpenEvolve side by side on the same work: one OpenEvolve folder
(initial_program.py, evaluator.py, config.yaml), its evaluator.py unchanged, run by
`evolve run FOLDER` and by OpenEvolve's `openevolve-run`, the two alternated run by run so
that the machine's background load falls on both alike.

The model is the scripted OpenAI-compatible server of tests/fakes/llm_server.py, which
answers at once; every reply is a SEARCH/REPLACE diff adding a line no program had before,
so every child is a new program that each side evaluates. Both sides get the same
config.yaml: the same model, `max_iterations` children, 2 parallel evaluations
(`evaluator.parallel_evaluations`, and `--workers 2` for evolve), OpenEvolve's defaults
otherwise. Two evaluators, each written into the folder:

- trivial: evaluate() imports the candidate and returns a score at once;
- scipy: evaluator.py imports numpy and scipy at its top and evaluate() uses them; the
  folder's requirements.txt names scipy, which evolve installs into its sandbox (built
  once, before any timing, by `evolve check`).

Measured from outside each command: children per second over the command's whole life
(launch to exit; also from its first child evaluated to its last, from evolve's store and
OpenEvolve's log), the time from launch to the first model request (the server's clock),
and the peak summed RSS of the command's process tree, sampled every 0.2 s (Ray's
processes included, and on the Docker sandbox the processes of the containers the tree
started). Each side's counts are checked: children evaluated, model requests.

Run: `.venv/bin/python bench/peer.py [--children 300 1000 5000] [--repeats 2]
[--evaluators trivial scipy] [--sandbox docker|process] [--openevolve PYTHON]`, where
PYTHON is the interpreter of a virtual environment holding openevolve and scipy, with
`openevolve-run` beside it. Without it, evolve's figures alone.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import docker
import docker.errors
from machine import load_average, machine, say, spread  # bench/machine.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for the tests' scripted server and the sandbox's labels
from evolve.sandboxes.docker import OWNER_PID  # noqa: E402
from tests.fakes.llm_server import Reply, ScriptedLLMServer, prompt_text  # noqa: E402

EVOLVE = ROOT / ".venv" / "bin" / "evolve"
WORKERS = 2
SAMPLE_S = 0.2
RUN_LIMIT_S = 3600  # a command still going by then is stuck, not slow
# Throughput targets: evolve's children per second over OpenEvolve's, by size.
TARGETS = {300: 1.5, 1000: 3.0, 5000: 3.0}
RSS_TARGET = 2.0  # evolve's peak tree RSS at most this many times OpenEvolve's
ANCHOR = "BASE = 1.0"
SEED = f"""# EVOLVE-BLOCK-START
{ANCHOR}
# EVOLVE-BLOCK-END
"""
LOAD_CANDIDATE = """\
import importlib.util


def load(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
"""


@dataclass(frozen=True)
class Evaluator:
    name: str
    says: str  # what it does, for the output
    source: str  # evaluator.py
    requirements: str | None = None  # requirements.txt, if the folder has one


EVALUATORS = {
    "trivial": Evaluator(
        "trivial",
        "imports the candidate, returns a score at once",
        LOAD_CANDIDATE
        + """

def evaluate(program_path):
    module = load(program_path)
    return {"combined_score": module.BASE + len(vars(module)) * 1e-6}
""",
    ),
    "scipy": Evaluator(
        "scipy",
        "imports numpy and scipy at its top; evaluate() fits with scipy.optimize",
        "import numpy as np\nfrom scipy import optimize\n\n"
        + LOAD_CANDIDATE
        + """

def evaluate(program_path):
    module = load(program_path)
    target = np.array([module.BASE, len(vars(module)) * 1e-3])
    fit = optimize.minimize(lambda x: float(np.sum((x - target) ** 2)), np.zeros(2))
    return {"combined_score": float(1.0 / (1.0 + fit.fun))}
""",
        "scipy\n",
    ),
}


class NewLineModel:
    """A model that adds a line no program had before under the anchor line, so that every
    answer is a new child. It notes when each request came, on time.monotonic()."""

    def __init__(self) -> None:
        self.counter = itertools.count(1)
        self.lock = threading.Lock()
        self.asked: list[float] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        if ANCHOR not in prompt_text(body):
            raise AssertionError("the prompt did not show the parent's code")
        with self.lock:
            n = next(self.counter)
            self.asked.append(time.monotonic())
        diff = f"<<<<<<< SEARCH\n{ANCHOR}\n=======\n{ANCHOR}\nV{n} = {n}\n>>>>>>> REPLACE\n"
        return Reply(diff, input_tokens=100, output_tokens=20)

    def take(self) -> list[float]:
        """The request times since the last take, forgotten here."""
        with self.lock:
            asked, self.asked = self.asked, []
        return asked


def config_text(children: int, url: str) -> str:
    return textwrap.dedent(
        f"""\
        max_iterations: {children}
        llm:
          api_base: "{url}"
          models:
            - {{name: scripted, weight: 1.0}}
        evaluator:
          parallel_evaluations: {WORKERS}
          cascade_evaluation: false
        """
    )


def write_folder(folder: Path, evaluator: Evaluator, children: int, url: str) -> Path:
    """The OpenEvolve folder both sides run."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "initial_program.py").write_text(SEED)
    (folder / "evaluator.py").write_text(evaluator.source)
    (folder / "config.yaml").write_text(config_text(children, url))
    if evaluator.requirements:
        (folder / "requirements.txt").write_text(evaluator.requirements)
    return folder


@dataclass
class Run:
    """One command's figures, measured from outside it."""

    wall_s: float  # launch to exit
    first_request_s: float | None  # launch to the first model request
    peak_bytes: int  # summed RSS of its process tree
    finished: list[float]  # when each child's evaluation finished, time.time()
    model_requests: int
    extra: dict[str, int] = field(default_factory=dict)  # other counts each side reports

    @property
    def children(self) -> int:
        return len(self.finished)

    @property
    def rate(self) -> float:
        return self.children / self.wall_s

    @property
    def steady_rate(self) -> float | None:
        """Children per second from the first child evaluated to the last."""
        if self.children < 2 or self.finished[-1] <= self.finished[0]:
            return None
        return (self.children - 1) / (self.finished[-1] - self.finished[0])


class TreeMemory:
    """Summed RSS of a process and its descendants, read from /proc; with `containers`, also
    of the processes in the Docker containers a process of the tree started (evolve's
    sandbox labels each container with the pid that started it)."""

    def __init__(self, root: int, containers: bool) -> None:
        self.root = root
        self.engine = docker.from_env() if containers else None
        self.cgroups: dict[tuple[int, str], str | None] = {}  # (pid, start) -> container
        self.owners: dict[str, int] = {}  # container id -> the pid that started it

    def sample(self) -> int:
        table = _process_table()
        tree = _descendants(self.root, table)
        pids = set(tree)
        if self.engine is not None:
            others = (key for key in table.items() if key[0] not in tree)
            pids |= {pid for pid, (_, start) in others if self._owner(pid, start) in tree}
        return sum(_rss(pid) for pid in pids)

    def _owner(self, pid: int, start: str) -> int | None:
        container = self._container(pid, start)
        if container is None or self.engine is None:
            return None
        if container not in self.owners:
            try:
                labels = self.engine.containers.get(container).labels
            except docker.errors.DockerException:
                labels = {}
            self.owners[container] = int(labels.get(OWNER_PID, 0))
        return self.owners[container]

    def _container(self, pid: int, start: str) -> str | None:
        key = (pid, start)  # a pid may be reused by a later process
        if key not in self.cgroups:
            try:
                text = Path(f"/proc/{pid}/cgroup").read_text()
            except OSError:
                text = ""
            found = re.search(r"docker[/-]([0-9a-f]{64})", text)
            self.cgroups[key] = found[1] if found else None
        return self.cgroups[key]


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (which may hold spaces): state, ppid, ..."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _process_table() -> dict[int, tuple[int, str]]:
    """Every process's parent, and its start time (in clock ticks since boot)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and len(fields := _stat_fields(int(entry))) > 19:
            table[int(entry)] = (int(fields[1]), fields[19])
    return table


def _descendants(root: int, table: dict[int, tuple[int, str]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, stack = set(), [root]
    while stack:
        pid = stack.pop()
        found.add(pid)
        stack += children.get(pid, [])
    return found


def _rss(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return int(found[1]) * 1024 if found else 0


@dataclass
class Watched:
    started: float  # time.monotonic() at launch
    started_wall: float  # time.time() at launch
    wall_s: float
    peak_bytes: int


def watched(command: list[str], cwd: Path, log: Path, containers: bool) -> Watched:
    """Run `command` to its end, sampling its process tree's RSS. Its output goes to `log`: a
    pipe nobody reads would stall a chatty one. A failure raises with the log's tail."""
    env = {**os.environ, "OPENAI_API_KEY": "unused"}  # the scripted server checks no key
    with open(log, "w+") as output:
        started, started_wall = time.monotonic(), time.time()
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=output, stderr=output, start_new_session=True
        )
        memory, peak = TreeMemory(process.pid, containers), 0
        while process.poll() is None:
            peak = max(peak, memory.sample())
            if time.monotonic() - started > RUN_LIMIT_S:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait()
                raise RuntimeError(f"{' '.join(command)} ran past {RUN_LIMIT_S} s")
            time.sleep(SAMPLE_S)
        wall_s = time.monotonic() - started
        if process.returncode != 0:
            output.seek(0)
            tail = output.read()[-3000:]
            raise RuntimeError(f"{' '.join(command)} exited {process.returncode}:\n{tail}")
    return Watched(started, started_wall, wall_s, peak)


@dataclass
class Side:
    """One framework: the command that runs the folder, and how its children are counted."""

    name: str
    command: Callable[[Path, Path], list[str]]  # (folder, output folder) -> command
    count: Callable[[Path], tuple[list[float], dict[str, int]]]  # output folder -> figures
    containers: bool = False  # whether its process tree starts Docker containers

    def run(self, folder: Path, work: Path, model: NewLineModel) -> Run:
        output = work / self.name
        output.mkdir(parents=True)
        model.take()
        run = watched(self.command(folder, output), folder, output / "output.log", self.containers)
        asked = model.take()
        finished, extra = self.count(output)
        first = min(asked) - run.started if asked else None
        return Run(run.wall_s, first, run.peak_bytes, finished, len(asked), extra)


def evolve_side(sandbox: str) -> Side:
    def command(folder: Path, output: Path) -> list[str]:
        return [
            str(EVOLVE), "run", str(folder), "--workers", str(WORKERS), "--plain",
            "--sandbox", sandbox, "--results", str(output / "results"),
        ]  # fmt: skip

    return Side("evolve", command, evolve_children, containers=sandbox == "docker")


def evolve_children(output: Path) -> tuple[list[float], dict[str, int]]:
    """When each child's evaluation finished, from evolve's store; how many of them failed;
    and its re-measurements of candidates already evaluated, evolve's work beyond the
    children."""
    with sqlite3.connect(output / "results" / "evolve.db") as db:
        children = db.execute(
            "SELECT e.finished_at, e.status FROM evaluations e JOIN candidates c"
            " ON c.id = e.candidate_id WHERE e.kind = 'evaluate' AND c.generation > 0"
            " ORDER BY e.finished_at"
        ).fetchall()
        remeasures = db.execute("SELECT COUNT(*) FROM evaluations WHERE kind != 'evaluate'")
        return [finished for finished, _ in children], {
            "failed evaluations": sum(status != "ok" for _, status in children),
            "re-measurements": remeasures.fetchone()[0],
        }


def openevolve_side(python: str) -> Side:
    runner = str(Path(python).parent / "openevolve-run")

    def command(folder: Path, output: Path) -> list[str]:
        return [
            runner, "initial_program.py", "evaluator.py", "--config", "config.yaml",
            "--output", str(output / "out"),
        ]  # fmt: skip

    return Side("OpenEvolve", command, openevolve_children)


STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - [\w.]+ - "
CHILD = re.compile(STAMP + r"INFO - Iteration \d+: Program ", re.M)
FAILED = re.compile(STAMP + r"WARNING - Iteration \d+ error", re.M)
# A child's metrics, logged after its iteration line; without the score, evaluate() failed.
UNSCORED = re.compile(STAMP + r"INFO - Metrics: (?!.*combined_score=)", re.M)


def openevolve_children(output: Path) -> tuple[list[float], dict[str, int]]:
    """When each child was added, from OpenEvolve's log (it logs one line per iteration
    whose child was evaluated and kept); how many of them have no score, their evaluation
    having failed; and its iterations that made no child."""
    log = "\n".join(path.read_text() for path in (output / "out" / "logs").glob("*.log"))
    stamps = [datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f").timestamp() for s in CHILD.findall(log)]
    return sorted(stamps), {
        "failed evaluations": len(UNSCORED.findall(log)),
        "failed iterations": len(FAILED.findall(log)),
    }


def prepare(folder: Path, sandbox: str) -> tuple[float, list[str]]:
    """`evolve check` on the folder: builds what its requirements.txt asks of the sandbox
    once (an image, or the process sandbox's environment), out of every timed run, and
    checks the seed. Its seconds, and its lines that say which sandbox evolve uses."""
    started = time.monotonic()
    command = [str(EVOLVE), "check", str(folder), "--sandbox", sandbox]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    said = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{said[-3000:]}")
    return time.monotonic() - started, [s for s in said.splitlines() if s.startswith("sandbox")]


def compiled() -> str:
    """evolve's own modules compiled to bytecode, as pip does when it installs a wheel (and
    did for OpenEvolve): an editable checkout is otherwise compiled afresh at every start
    where Python may not write bytecode (PYTHONDONTWRITEBYTECODE)."""
    command = [sys.executable, "-m", "compileall", "-q", str(ROOT / "evolve")]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return "evolve's modules compiled to bytecode first, as a wheel's install would"


def versions(python: str | None) -> list[str]:
    evolve = subprocess.run([str(EVOLVE), "--version"], capture_output=True, text=True)
    lines = [f"{evolve.stdout.strip()} ({sys.executable}, Python {sys.version.split()[0]})"]
    if python:
        ask = "import openevolve, scipy, numpy, sys; print(openevolve.__version__, " \
              "scipy.__version__, numpy.__version__, sys.version.split()[0])"  # fmt: skip
        found = subprocess.run([python, "-c", ask], capture_output=True, text=True)
        if found.returncode != 0:
            sys.exit(f"--openevolve {python}: needs openevolve and scipy:\n{found.stderr[-1000:]}")
        oe, scipy, numpy, py = found.stdout.split()
        lines.append(f"OpenEvolve {oe} ({python}, Python {py}; scipy {scipy}, numpy {numpy})")
    return lines


def median_spread(values: list[float], form: str) -> str:
    return f"{statistics.median(values):{form}} ({spread(values, form)})"


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def report(size: int, runs: dict[str, list[Run]]) -> None:
    """Print one size's figures, side by side, and the targets evolve meets or misses."""
    names = list(runs)
    say(f"  {size} children, {len(runs['evolve'])} run(s) each (median, low-high):")
    say("    " + f"{'':24}" + "".join(f"{name:>26}" for name in names))

    def row(label: str, figure: Callable[[Run], float | None], form: str, unit: str = "") -> None:
        cells = []
        for name in names:
            values = [v for v in map(figure, runs[name]) if v is not None]
            cells.append(median_spread(values, form) + unit if values else "-")
        say("    " + f"{label:24}" + "".join(f"{cell:>26}" for cell in cells))

    row("command wall time", lambda r: r.wall_s, ".1f", " s")
    row("children/s, whole run", lambda r: r.rate, ".1f")
    row("children/s, steady", lambda r: r.steady_rate, ".1f")
    row("first model request", lambda r: r.first_request_s, ".2f", " s")
    row("peak tree RSS", lambda r: r.peak_bytes / 2**20, ".0f", " MB")
    row("children evaluated", lambda r: r.children, ".0f")
    row("model requests", lambda r: r.model_requests, ".0f")
    for key in sorted({key for name in names for r in runs[name] for key in r.extra}):
        row(key, lambda r, key=key: r.extra.get(key), ".0f")
    short = [f"{name} {r.children}" for name in names for r in runs[name] if r.children != size]
    if short:
        say(f"    WRONG COUNT: runs that evaluated other than {size} children: {', '.join(short)}")
    if "OpenEvolve" in runs:
        targets(size, runs["evolve"], runs["OpenEvolve"])


def targets(size: int, ours: list[Run], theirs: list[Run]) -> None:
    def median(runs: list[Run], figure: Callable[[Run], float | None]) -> float:
        values = [v for v in map(figure, runs) if v is not None]
        return statistics.median(values) if values else float("nan")

    ratio = median(ours, lambda r: r.rate) / median(theirs, lambda r: r.rate)
    steady = median(ours, lambda r: r.steady_rate) / median(theirs, lambda r: r.steady_rate)
    wanted = TARGETS.get(size)
    aim = f"target >= {wanted:g}x: {verdict(ratio >= wanted)}" if wanted else "no target"
    say(
        f"    evolve / OpenEvolve, children/s: {ratio:.2f}x whole run ({aim}), {steady:.2f}x steady"
    )
    first = (median(ours, lambda r: r.first_request_s), median(theirs, lambda r: r.first_request_s))
    say(f"    first model request: {first[0]:.2f} s vs {first[1]:.2f} s "
        f"(target no slower: {verdict(first[0] <= first[1])})")  # fmt: skip
    rss = median(ours, lambda r: r.peak_bytes) / median(theirs, lambda r: r.peak_bytes)
    say(f"    peak tree RSS: {rss:.2f}x OpenEvolve's "
        f"(target <= {RSS_TARGET:g}x: {verdict(rss <= RSS_TARGET)})")  # fmt: skip


def measure(
    evaluator: Evaluator, size: int, sides: list[Side], args: argparse.Namespace,
    server: ScriptedLLMServer, model: NewLineModel, work: Path,
) -> dict[str, list[Run]]:  # fmt: skip
    """`args.repeats` runs of each side on one folder, alternated; the side that goes first
    alternates too."""
    folder = write_folder(work / f"{evaluator.name}-{size}", evaluator, size, server.openai_url)
    runs: dict[str, list[Run]] = {side.name: [] for side in sides}
    for repeat in range(args.repeats):
        order = sides if repeat % 2 == 0 else sides[::-1]
        for side in order:
            runs[side.name].append(side.run(folder, work / f"{folder.name}-{repeat}", model))
            server.requests.clear()  # the server keeps each request's body; none is needed
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--children", type=int, nargs="+", default=[300, 1000, 5000])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--evaluators", nargs="+", choices=list(EVALUATORS), default=["trivial", "scipy"]
    )
    parser.add_argument("--sandbox", choices=["docker", "process"], default="docker")
    parser.add_argument("--openevolve", metavar="PYTHON", help="python of a venv with openevolve")
    args = parser.parse_args()
    say(f"{machine()}, {load_average()} before")
    for line in versions(args.openevolve):
        say(line)
    say(compiled())
    sides = [evolve_side(args.sandbox)]
    if args.openevolve:
        sides.append(openevolve_side(args.openevolve))
    model = NewLineModel()
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(default=model) as server:
        work = Path(tmp)
        folder = work / "FOLDER"
        say(f"scripted model answering at once at {server.openai_url}; the folder's "
            f"config.yaml (max_iterations: each size):")  # fmt: skip
        say(textwrap.indent(config_text(args.children[0], server.openai_url), "    "))
        for side in sides:
            say(f"{side.name} runs, in FOLDER: {' '.join(side.command(folder, work / 'OUT'))}")
        for name in args.evaluators:
            evaluator = EVALUATORS[name]
            checked = write_folder(work / f"{name}-check", evaluator, 1, server.openai_url)
            seconds, sandbox = prepare(checked, args.sandbox)
            say(f"\n{name} evaluator ({evaluator.says}); `evolve check` prepared the "
                f"{args.sandbox} sandbox in {seconds:.1f} s, before any timing:")  # fmt: skip
            say(textwrap.indent("\n".join(sandbox), "    "))
            for size in args.children:
                report(size, measure(evaluator, size, sides, args, server, model, work))
        say(f"\n{load_average()} after")  # before the outputs' removal, which takes a while


if __name__ == "__main__":
    main()
