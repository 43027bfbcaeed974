"""The host side of clang's interactive inlining channel; it runs inside the sandbox.

This file is shipped into the sandbox as text and run by the image's python3, so it imports
nothing from evolve. It compiles each unit of a manifest with clang-19 and does one of:

- `decide`: answers every inlining question with the candidate's `should_inline`, and
  records the answers. It compiles to LLVM IR and throws that away: only the decisions
  leave this run, because the candidate's code shared it and could have forged any file.
- `replay`: answers from recorded decisions, writes the objects, measures their text with
  llvm-size-19 and clang's CPU time, and runs the guard programs. No candidate code runs
  in this mode.
- `stock`: compiles with no channel, for the baselines.

A `decide` manifest that names a `plugin` (the C++ route) loads that pass plugin into clang
instead: its inline advisor asks the candidate's shouldInline and writes the answers to the
file in EVOLVE_INLINE_DECISIONS, which `replay` then feeds through the channel as usual.

The report is written to report.json. The protocol (LLVM 19): clang writes a JSON header
line naming the int64 features, then `{"context":""}`, then per decision
`{"observation":N}`, the raw little-endian features in header order and a newline; the
host answers with one little-endian int64. Clang spins forever if the host goes away, so
every failure here kills clang before it reports.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import resource
import select
import signal
import struct
import subprocess
import sys
import time
import traceback

CHANNEL_FLAGS = ("-mllvm", "-enable-ml-inliner=release")
INCLUDE_DEFAULT = ("-mllvm", "-inliner-interactive-include-default")
# LLVM 17-20 write the default advice into the slot after the inline-cost features, which is
# callee_basic_block_count, and leave inlining_default at 0. The driver moves it back.
CLOBBERED = "callee_basic_block_count"
DEFAULT = "inlining_default"
POLL_MS = 50
GUARD_OUTPUT_BYTES = 64 * 1024


class PolicyFailed(Exception):
    """The candidate's policy misbehaved: the candidate fails, the run goes on."""


class ChannelFailed(Exception):
    """The conversation with clang broke or clang failed."""


class _DecisionTimeout(BaseException):
    """Raised inside the policy by the per-decision alarm; a BaseException so that a plain
    `except Exception` in the policy does not swallow it."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _DecisionTimeout


class Pipe:
    """Buffered reads from the .out FIFO that give up when clang dies or the deadline passes.

    The FIFO is opened non-blocking, so opening never waits for a clang that already failed;
    poll() then waits for data, or for the hang-up once clang closes its end.
    """

    def __init__(self, path: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.proc = proc
        self.deadline = deadline
        self.buffer = bytearray()
        self.closed = False

    def _fill(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP)
        while True:
            if time.monotonic() > self.deadline:
                raise ChannelFailed("the compile ran past its time limit")
            if poller.poll(POLL_MS):
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    self.closed = True
                else:
                    self.buffer += chunk
                return
            if self.proc.poll() is not None:  # exited without ever opening its end
                self.closed = True
                return

    def readline(self) -> bytes:
        """One line with its newline, or b"" at the end of the conversation."""
        while b"\n" not in self.buffer:
            if self.closed:
                return b""
            self._fill()
        end = self.buffer.index(b"\n") + 1
        line = bytes(self.buffer[:end])
        del self.buffer[:end]
        return line

    def read_exact(self, size: int) -> bytes:
        while len(self.buffer) < size:
            if self.closed:
                raise ChannelFailed(f"clang closed the channel inside a message ({size} bytes)")
            self._fill()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _open_writer(path: str, proc: subprocess.Popen[bytes], deadline: float) -> int:
    """Open .in for writing once clang has opened it for reading (clang opens it first)."""
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != 6:  # ENXIO: no reader yet
                raise
        else:
            os.set_blocking(fd, True)
            return fd
        if proc.poll() is not None or time.monotonic() > deadline:
            raise ChannelFailed("clang never opened the channel")
        time.sleep(0.001)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _header(line: bytes) -> tuple[list[str], int]:
    """Feature names in tensor order and the byte size of one observation's tensors."""
    try:
        header = json.loads(line)
        specs = header["features"]
        names = [spec["name"] for spec in specs]
    except (ValueError, KeyError, TypeError) as exc:
        raise ChannelFailed(f"unexpected header from clang: {line[:200]!r} ({exc})") from None
    for spec in specs:
        if spec.get("type") != "int64_t" or spec.get("shape") != [1]:
            raise ChannelFailed(f"feature {spec.get('name')} is not one int64: {spec}")
    return names, 8 * len(names)


def converse(argv: list[str], base: str, answer, deadline: float) -> tuple[str, float]:
    """Run clang with the channel at `base`; `answer(features, index)` gives each advice.

    Returns the decisions as a string of 0/1 and the seconds spent; kills clang on failure.
    """
    for suffix in (".in", ".out"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(base + suffix)
        os.mkfifo(base + suffix)
    log = open(base + ".log", "wb")  # noqa: SIM115 -- closed in finally; a file, not a pipe
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    writer, reader, finished = -1, None, False
    decisions: list[str] = []
    try:
        writer = _open_writer(base + ".in", proc, deadline)
        reader = Pipe(base + ".out", proc, deadline)
        first = reader.readline()
        if first:
            names, size = _header(first)
            context = reader.readline()
            if not context.startswith(b'{"context"'):
                raise ChannelFailed(f"expected the context line, got {context[:200]!r}")
            layout = struct.Struct(f"<{len(names)}q")
            while True:
                line = reader.readline()
                if not line:
                    break
                if not line.startswith(b'{"observation"'):
                    raise ChannelFailed(f"expected an observation, got {line[:200]!r}")
                values = layout.unpack(reader.read_exact(size))
                if reader.read_exact(1) != b"\n":
                    raise ChannelFailed("an observation does not end with a newline")
                inline = answer(dict(zip(names, values, strict=True)), len(decisions))
                decisions.append("1" if inline else "0")
                try:
                    _write_all(writer, struct.pack("<q", 1 if inline else 0))
                except OSError as exc:
                    raise ChannelFailed(
                        f"writing advice to clang failed ({exc}): was the channel closed?"
                    ) from None
        remaining = max(deadline - time.monotonic(), 0.1)
        code = proc.wait(timeout=remaining)
        finished = True
    except subprocess.TimeoutExpired:
        raise ChannelFailed("the compile ran past its time limit") from None
    finally:
        if not finished:
            proc.kill()
            proc.wait()
        for fd in (writer,):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if reader is not None:
            reader.close()
        log.close()
    if code != 0:
        raise ChannelFailed(f"clang exited with code {code}:\n{_tail(base + '.log')}")
    return "".join(decisions), time.monotonic() - started


def _tail(path: str, limit: int = 2000) -> str:
    with open(path, "rb") as handle:
        data = handle.read()
    return data[-limit:].decode(errors="replace")


def load_policy(path: str, timeout_s: float):
    """The candidate's should_inline, imported under a time limit."""
    spec = importlib.util.spec_from_file_location("policy", path)
    if spec is None or spec.loader is None:
        raise PolicyFailed(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        spec.loader.exec_module(module)
    except _DecisionTimeout:
        raise PolicyFailed(f"importing {path} took longer than {timeout_s}s") from None
    except BaseException:
        raise PolicyFailed(f"importing {path} raised:\n{_short_traceback()}") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    function = getattr(module, "should_inline", None)
    if not callable(function):
        raise PolicyFailed(f"{path} does not define a function should_inline(features)")
    return function


def _short_traceback(limit: int = 1500) -> str:
    text = traceback.format_exc()
    return text if len(text) <= limit else "[...]\n" + text[-limit:]


def policy_answer(function, timeout_s: float, include_default: bool):
    """Wrap the policy: one fresh dict per call, a time limit, and a strict bool result."""

    def answer(features: dict[str, int], index: int) -> bool:
        if include_default:
            default = features[CLOBBERED]
            if default not in (0, 1) or features.get(DEFAULT, 0) != 0:
                raise ChannelFailed(
                    f"{CLOBBERED}={default}, {DEFAULT}={features.get(DEFAULT)}: this clang does "
                    "not have the LLVM 17-20 bug the driver corrects; update the driver"
                )
            features[DEFAULT], features[CLOBBERED] = default, -1
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            result = function(features)
        except _DecisionTimeout:
            raise PolicyFailed(
                f"should_inline took longer than {timeout_s * 1000:g} ms on decision {index}"
            ) from None
        except BaseException:
            raise PolicyFailed(
                f"should_inline raised on decision {index}:\n{_short_traceback()}"
            ) from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if type(result) is not bool:
            shown = repr(result)
            shown = shown if len(shown) <= 80 else shown[:80] + "..."
            raise PolicyFailed(
                f"should_inline returned {type(result).__name__} {shown} on decision {index}; "
                "it must return True or False"
            )
        return result

    return answer


def children_cpu_seconds() -> float:
    """User + system CPU of every child waited for so far. Units compile one at a time, so
    the difference across one compile is that clang's own CPU: the driver's answers on the
    channel and any wait for a CPU on a busy machine are not in it, as they are in the wall
    time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def replay_answer(recorded: str):
    def answer(features: dict[str, int], index: int) -> bool:
        if index >= len(recorded):
            raise ChannelFailed(
                f"clang asked more than the {len(recorded)} recorded decisions: "
                "the decisions do not replay"
            )
        return recorded[index] == "1"

    return answer


def text_bytes(size_tool: str, obj: str) -> int:
    """The bytes of every .text section, from `llvm-size -A`."""
    listing = subprocess.run([size_tool, "-A", obj], capture_output=True, check=True, text=True)
    total = 0
    for line in listing.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and (parts[0] == ".text" or parts[0].startswith(".text.")):
            total += int(parts[1])
    return total


def run_guard(clang: str, obj: str, guard: dict, timeout_s: float) -> dict:
    """Link the unit into a program and run its script; its exit code and output."""
    binary = guard["binary"]
    linked = subprocess.run(
        [clang, obj, *guard["link"], "-o", binary], capture_output=True, timeout=timeout_s
    )
    if linked.returncode != 0:
        return {"exit": None, "output": "link failed:\n" + linked.stderr.decode(errors="replace")}
    try:
        ran = subprocess.run(
            ["sh", "-c", guard["script"]],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return {"exit": None, "output": f"timed out after {timeout_s}s"}
    output = (ran.stdout + ran.stderr)[:GUARD_OUTPUT_BYTES]
    return {"exit": ran.returncode, "output": output.decode(errors="replace")}


def plugin_decisions(manifest: dict, argv: list[str], name: str) -> dict:
    """Compile with the candidate's advisor plugin loaded; the decisions it wrote, and the
    time. Any failure is the plugin's: the same compile without it succeeds in `stock`."""
    path = f"channels/{name}.decisions"
    env = {**os.environ, "EVOLVE_INLINE_DECISIONS": path}
    plugin = [f"-fpass-plugin={manifest['plugin']}", "-fno-crash-diagnostics"]
    argv = [argv[0], *plugin, *argv[1:]]
    started = time.monotonic()
    limit = min(manifest["unit_timeout_s"], manifest["plugin_timeout_s"])
    try:
        done = subprocess.run(argv, capture_output=True, timeout=limit, env=env)
    except subprocess.TimeoutExpired:
        raise PolicyFailed(
            f"clang with the policy's plugin ran past {limit:g}s: does shouldInline loop?"
        ) from None
    if done.returncode != 0:
        raise PolicyFailed(
            f"clang with the policy's plugin exited with code {done.returncode}:\n"
            + done.stderr[:2000].decode(errors="replace")  # the frames nearest the crash
        )
    try:
        with open(path, "rb") as handle:
            decisions = handle.read(1 << 24).decode(errors="replace")
    except FileNotFoundError:
        decisions = ""  # no question was asked
    return {"decisions": decisions, "seconds": time.monotonic() - started}


def compile_unit(manifest: dict, unit: dict, answer) -> dict:
    """One unit in the manifest's mode; its record for the report."""
    mode, clang = manifest["mode"], manifest["clang"]
    name = unit["name"]
    obj = f"objects/{name}.o"
    output = ["-emit-llvm", "-o", "/dev/null"] if mode == "decide" else ["-o", obj]
    argv = [clang, *manifest["flags"], *unit["flags"], "-c", unit["source"], *output]
    record: dict = {"name": name}
    deadline = time.monotonic() + manifest["unit_timeout_s"]
    if mode == "decide" and manifest.get("plugin"):
        record.update(plugin_decisions(manifest, argv, name))
    elif mode == "stock":
        started, started_cpu = time.monotonic(), children_cpu_seconds()
        done = subprocess.run(argv, capture_output=True, timeout=manifest["unit_timeout_s"])
        if done.returncode != 0:
            raise ChannelFailed(f"clang exited with code {done.returncode}:\n{done.stderr[-2000:]}")
        record["seconds"] = time.monotonic() - started
        record["cpu_seconds"] = children_cpu_seconds() - started_cpu
    else:
        argv[1:1] = CHANNEL_FLAGS
        if manifest.get("include_default"):
            argv[1:1] = INCLUDE_DEFAULT
        argv += ["-mllvm", f"-inliner-interactive-channel-base=channels/{name}"]
        started_cpu = children_cpu_seconds()
        decisions, seconds = converse(argv, f"channels/{name}", answer(unit), deadline)
        cpu_seconds = children_cpu_seconds() - started_cpu
        if mode == "replay" and len(decisions) != len(unit["decisions"]):
            raise ChannelFailed(
                f"clang asked {len(decisions)} questions, {len(unit['decisions'])} were "
                "recorded: the decisions do not replay"
            )
        record.update(decisions=decisions, seconds=seconds, cpu_seconds=cpu_seconds)
    if mode != "decide":
        record["text_bytes"] = text_bytes(manifest["size_tool"], obj)
        with open(obj, "rb") as handle:
            record["sha256"] = hashlib.sha256(handle.read()).hexdigest()
        if unit.get("guard"):
            record["guard"] = run_guard(clang, obj, unit["guard"], manifest["guard_timeout_s"])
    return record


def main(manifest_path: str) -> int:
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    os.makedirs("objects", exist_ok=True)
    os.makedirs("channels", exist_ok=True)
    report: dict = {"units": [], "failure": None, "policy_failed": False}
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        if manifest["mode"] == "decide" and manifest.get("plugin"):

            def answer(unit: dict):
                return None  # the plugin answers inside clang

        elif manifest["mode"] == "decide":
            function = load_policy(manifest["policy"], manifest["import_timeout_s"])
            shared = policy_answer(
                function, manifest["decision_timeout_s"], manifest.get("include_default", False)
            )

            def answer(unit: dict):
                return shared

        else:

            def answer(unit: dict):
                return replay_answer(unit.get("decisions", ""))

        for unit in manifest["units"]:
            try:
                report["units"].append(compile_unit(manifest, unit, answer))
            except ChannelFailed as exc:
                raise ChannelFailed(f"{unit['name']}: {exc}") from None
            except PolicyFailed as exc:
                raise PolicyFailed(f"{unit['name']}: {exc}") from None
    except PolicyFailed as exc:
        report["failure"], report["policy_failed"] = str(exc), True
    except ChannelFailed as exc:
        report["failure"] = str(exc)
    signal.setitimer(signal.ITIMER_REAL, 0)
    with open(manifest.get("report", "report.json"), "w") as handle:
        json.dump(report, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
