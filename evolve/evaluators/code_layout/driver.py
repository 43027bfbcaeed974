"""The trusted driver of the code_layout evaluator, run in the sandbox with no candidate code.

    python3 -I driver.py manifest.json     # writes report.json

Modes:
- `build`: compile the program's sources into objects, one function a section.
- `profile`: link in the linker's own order, run each workload natively (its output is the
  guard's reference) and under callgrind: self instruction counts, call edges and counts.
- `measure`: link with an ordering (a symbol ordering file, or lld's call-graph sort), run
  each workload natively (the guard, wall time, perf counters where readable) and under
  callgrind's cache simulator: I1 and LL instruction misses, and the distinct 64 B lines
  and 4 KiB pages of the program's text that executed.

The report carries `failure` (a message, or null) so the host can tell a broken program
from a broken driver. Standard library only: it runs in the sandbox's own Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import perfstat  # shipped beside this file
from callgrind import parse

PROGRAM = "prog"
LINE, PAGE = 64, 4096
# A line of `llvm-objdump -t`; non-default visibility comes before the name (".hidden f").
SYMBOL = re.compile(
    r"^(?P<address>[0-9a-f]+) (?P<flags>.{7}) (?P<section>\S+)\t(?P<size>[0-9a-f]+) "
    r"(?:\.hidden |\.internal |\.protected )?(?P<name>.+)$"
)
OUTPUT_KEPT = 2000  # bytes of a workload's stdout quoted back when it differs


class Failure(Exception):
    """The program or a workload is at fault; the message goes back as the report's failure."""


# Every tool and workload sees the same environment in any sandbox: its size and contents
# move the stack, and so the instruction counts, of the program measured. TMPDIR (where
# valgrind writes its own files) is relative to the work dir for the same reason.
SCRATCH = "tmp"
ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LC_ALL": "C",
    "HOME": "/nonexistent",
    "TMPDIR": SCRATCH,
}


class Deadline:
    """The run's own end, set a little before the sandbox's limit, so that a slow step is
    named in the report instead of the sandbox killing the run without one."""

    end = float("inf")
    seconds = float("inf")

    @classmethod
    def start(cls, seconds: float) -> None:
        cls.seconds, cls.end = seconds, time.monotonic() + seconds

    @classmethod
    def cap(cls, timeout: float, what: str) -> float:
        left = cls.end - time.monotonic()
        if left <= 0:
            raise Failure(f"the run's {cls.seconds:g} s (the task's sandbox timeout_s) ran out "
                          f"before {what}")  # fmt: skip
        return min(timeout, left)


def run(argv: list[str], timeout: float, what: str) -> subprocess.CompletedProcess[bytes]:
    allowed = Deadline.cap(timeout, what)
    try:
        return subprocess.run(
            argv, capture_output=True, timeout=allowed, stdin=subprocess.DEVNULL, env=ENVIRONMENT
        )
    except subprocess.TimeoutExpired:
        limit = (
            f"{timeout:g} s" if allowed == timeout else "the run's time limit (sandbox timeout_s)"
        )
        raise Failure(f"{what} took longer than {limit}") from None
    except FileNotFoundError:
        raise Failure(f"{what} needs `{argv[0]}`, which is not installed in the sandbox") from None


def checked(argv: list[str], timeout: float, what: str, *, stderr: bool = False) -> bytes:
    """The command's stdout (or its stderr), once it has exited 0."""
    done = run(argv, timeout, what)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace")[-2000:]
        raise Failure(f"{what} failed with code {done.returncode}:\n{tail}")
    return done.stderr if stderr else done.stdout


def build(plan: dict) -> dict:
    def compile_one(source: str) -> str:
        out = f"objects/{Path(source).stem}.o"
        checked(
            [plan["cc"], *plan["cflags"], "-c", source, "-o", out],
            Deadline.seconds,
            f"compiling {source}",
        )
        return out

    Path("objects").mkdir()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        objects = list(pool.map(compile_one, plan["sources"]))
    return {"objects": objects}


def link(plan: dict, ordering: dict) -> str:
    """Link `prog` and return its sha256; `ordering` is {} (the linker's order),
    {"order": file}, or {"cg_profile": file, "sort": "cdsort" | "hfsort"}."""
    argv = [plan["cc"], "-fuse-ld=lld", "-no-pie", "-o", PROGRAM, *plan["objects"], *plan["libs"]]
    if "order" in ordering:
        argv.append(f"-Wl,--symbol-ordering-file={ordering['order']}")
    elif "cg_profile" in ordering:
        argv.append(f"-Wl,--call-graph-ordering-file={ordering['cg_profile']}")
        argv.append(f"-Wl,--call-graph-profile-sort={ordering['sort']}")
    warnings = checked(argv, plan["timeout_s"], "linking", stderr=True)
    if b"symbol ordering file" in warnings:  # every name was checked, so this is a bug
        raise Failure(f"lld did not place every name:\n{warnings.decode(errors='replace')[:2000]}")
    return hashlib.sha256(Path(PROGRAM).read_bytes()).hexdigest()


def workload_argv(workload: dict) -> list[str]:
    return [f"./{PROGRAM}" if arg == "{program}" else arg for arg in workload["argv"]]


def native(plan: dict, workload: dict) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """One plain run and its wall-clock seconds."""
    started = time.perf_counter()
    done = run(workload_argv(workload), plan["timeout_s"], f"workload {workload['name']}")
    return done, time.perf_counter() - started


def callgrind(plan: dict, workload: dict, *, cache: bool):
    out = f"callgrind.{workload['name']}.out"
    argv = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        "--dump-instr=yes",
        "--dump-line=no",
        "--compress-strings=no",
        "--compress-pos=no",
        "--separate-recs=1",  # one name per function, not f'2 for its second recursion level
        "--error-exitcode=0",
    ]
    if cache:
        caches = plan["caches"]
        argv += ["--cache-sim=yes", f"--I1={caches['I1']}", f"--D1={caches['D1']}"]
        argv += [f"--LL={caches['LL']}"]
    done = run(
        [*argv, *workload_argv(workload)],
        plan["timeout_s"] * plan["valgrind_slowdown"],
        f"workload {workload['name']} under callgrind",
    )
    if done.returncode != 0 or not Path(out).exists():
        tail = done.stderr.decode(errors="replace")[-2000:]
        raise Failure(
            f"workload {workload['name']} under callgrind exited with code {done.returncode}:"
            f"\n{tail}"
        )
    with open(out) as text:
        profile = parse(text, f"/{PROGRAM}")
    os.unlink(out)
    return profile


def symbols(plan: dict, path: str) -> list[re.Match[str]]:
    """The function symbols of an object or of the program, as `llvm-objdump -t` lists them."""
    listing = checked([plan["objdump"], "-t", path], plan["timeout_s"], f"reading {path}")
    matches = (SYMBOL.match(line) for line in listing.decode().splitlines())
    return [m for m in matches if m and "F" in m["flags"] and m["section"].startswith(".text")]


def functions(plan: dict) -> list[dict]:
    """Every function with a section of its own, in the order the default link placed them
    (by address in `prog`): the objects give each one's section and size."""
    placed: dict[str, int] = {}
    for match in symbols(plan, PROGRAM):
        address = int(match["address"], 16)
        placed[match["name"]] = min(address, placed.get(match["name"], address))
    found = [
        {"name": m["name"], "section": m["section"], "size": int(m["size"], 16), "object": obj}
        for obj in plan["objects"]
        for m in symbols(plan, obj)
    ]
    return sorted(found, key=lambda f: placed.get(f["name"], sys.maxsize))


def output_of(done: subprocess.CompletedProcess[bytes]) -> dict:
    return {
        "exit": done.returncode,
        "sha256": hashlib.sha256(done.stdout).hexdigest(),
        "stdout": done.stdout[:OUTPUT_KEPT].decode(errors="replace"),
    }


def profile(plan: dict) -> dict:
    binary = link(plan, {})
    workloads = []
    for workload in plan["workloads"]:
        done, _ = native(plan, workload)
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace")[-1500:]
            raise Failure(
                f"workload {workload['name']} exits with code {done.returncode} in the default "
                f"build; a workload must succeed there:\n{tail}"
            )
        recorded = callgrind(plan, workload, cache=False)
        workloads.append(
            {
                "name": workload["name"],
                "output": output_of(done),
                "self": dict(recorded.self_cost),
                "calls": [[a, b, n] for (a, b), n in sorted(recorded.calls.items())],
            }
        )
    return {"binary_sha256": binary, "functions": functions(plan), "workloads": workloads}


def perf_counts(plan: dict, workload: dict) -> tuple[dict[str, float], str]:
    """perf's counts of the events for one native run, or ({}, why they are unavailable)."""
    events = plan["perf_events"]
    argv = ["perf", "stat", "-x", ",", "-e", ",".join(events), "--", *workload_argv(workload)]
    try:
        done = run(argv, plan["timeout_s"], "perf stat")
    except Failure as failure:
        return {}, f"unavailable: {failure}"
    return perfstat.counts(done.stderr.decode(errors="replace"), events)


def measure(plan: dict) -> dict:
    started = time.perf_counter()
    binary = link(plan, plan["ordering"])
    link_s = time.perf_counter() - started
    results = []
    perf_source = "off" if not plan["perf_events"] else ""
    for workload in plan["workloads"]:
        times = []
        for _ in range(plan["wall_repeats"]):
            done, seconds = native(plan, workload)
            times.append(seconds)
        output = output_of(done)
        counts: dict[str, float] = {}
        if not perf_source or perf_source == "perf":
            counts, perf_source = perf_counts(plan, workload)
        started = time.perf_counter()
        simulated = callgrind(plan, workload, cache=True)
        simulated_s = time.perf_counter() - started
        lines = {address // LINE for address in simulated.addresses}
        pages = {address // PAGE for address in simulated.addresses}
        results.append(
            {
                "name": workload["name"],
                "output": output,
                "wall_s": statistics.median(times),
                "perf": counts,
                "instructions": simulated.totals.get("Ir", 0),
                "I1_misses": simulated.totals.get("I1mr", 0),
                "LLi_misses": simulated.totals.get("ILmr", 0),
                "lines": len(lines),
                "pages": len(pages),
                "callgrind_s": simulated_s,
            }
        )
    return {
        "binary_sha256": binary,
        "workloads": results,
        "perf_source": perf_source,
        "link_s": link_s,
    }


MODES = {"build": build, "profile": profile, "measure": measure}


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    Deadline.start(plan["deadline_s"])
    Path(SCRATCH).mkdir(exist_ok=True)
    try:
        report = {"failure": None, **MODES[plan["mode"]](plan)}
    except Failure as failure:
        report = {"failure": str(failure)}
    Path("report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
