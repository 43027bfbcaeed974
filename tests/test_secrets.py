"""Model keys reach the model and nothing else: not the evaluation workers (a local run's child
processes, or Ray's processes), not a candidate, not the store, the results or Ray's logs. A
real `evolve run` with a planted key and a model that answers with a candidate hunting for
it, on this machine's processes and on a local Ray instance."""

from __future__ import annotations

import glob
import itertools
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evolve.plugin.secrets import Keys, is_secret, lookup, secret_names, withheld
from tests.conftest import descendants, write_matmul_task
from tests.fakes.llm_server import Reply, ScriptedLLMServer, prompt_text

KEY_VAR = "EVOLVE_FAKE_MODEL_ACCESS"  # named by the task alone: no rule calls it a secret
KEY = "sk-planted-b7e1c0ffee5a1d"
BYSTANDER = "sk-bystander-0a9d33f1c2"  # a key the task never uses, in OPENAI_API_KEY
PROBE_LINE = "PROBE read"

SIGNATURE = (
    "void matmul(int n, const float *restrict A, const float *restrict B, float *restrict C) {"
)
PROBE = r"""#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void probe(void) {
  static char env[1 << 16];
  char path[64];
  int seen = 0;
  DIR *proc = opendir("/proc");
  for (struct dirent *entry; proc && (entry = readdir(proc));) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%s/environ", entry->d_name);
    FILE *file = fopen(path, "rb");
    if (!file) continue;
    size_t size = fread(env, 1, sizeof env - 1, file);
    fclose(file);
    env[size] = 0;
    seen++;
    for (size_t at = 0; at < size; at += strlen(env + at) + 1)
      if (strstr(env + at, "KEY") || strstr(env + at, "CREDENTIAL"))
        fprintf(stderr, "PROBE found %s\n", env + at);
  }
  const char *own = getenv("EVOLVE_FAKE_CREDENTIAL");
  fprintf(stderr, "PROBE read %d environments; own: %s\n", seen, own ? own : "none");
  exit(3);
}
"""


def test_what_counts_as_a_secret() -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN", "MY_VLLM_KEY", "PGPASSWORD"):
        assert is_secret(name), name
    assert is_secret("AWS_SECRET_ACCESS_KEY") and is_secret("client_secret")
    for name in (
        "OPENAI_API_KEY_2",
        "AWS_ACCESS_KEY_ID",
        "GEMINI_APIKEY",
        "DB_PWD",
        "GCP_CREDENTIALS",
    ):
        assert is_secret(name), name
    assert is_secret("DATABASE_URL", "postgresql://evolve:hunter2@db:5432/evolve")
    assert not is_secret("DATABASE_URL", "sqlite:///results/evolve.db")
    assert secret_names({"DSN": "redis://u:p@h/0", "PATH": "/usr/bin"}) == ["DSN"]
    for name in ("PATH", "HOME", "CUDA_HOME", "RAY_AUTH_TOKEN", "KEYBOARD_LAYOUT"):
        assert not is_secret(name), name
    assert secret_names(["PATH", "ODD_NAME", "X_TOKEN"], also=["ODD_NAME"]) == [
        "ODD_NAME",
        "X_TOKEN",
    ]


def test_withheld_secrets_come_back_and_lent_keys_never_show() -> None:
    os.environ["EVOLVE_TEST_WITHHELD_TOKEN"] = "t0ken-value"
    try:
        with withheld() as names:
            assert "EVOLVE_TEST_WITHHELD_TOKEN" in names
            assert "EVOLVE_TEST_WITHHELD_TOKEN" not in os.environ
        assert os.environ["EVOLVE_TEST_WITHHELD_TOKEN"] == "t0ken-value"
        keys = Keys.read(["EVOLVE_TEST_WITHHELD_TOKEN", "EVOLVE_TEST_UNSET_KEY"])
    finally:
        del os.environ["EVOLVE_TEST_WITHHELD_TOKEN"]
    assert "t0ken-value" not in repr(keys) and "t0ken-value" not in str(keys)
    assert keys.values == {"EVOLVE_TEST_WITHHELD_TOKEN": "t0ken-value"}
    with keys.lent():
        assert lookup("EVOLVE_TEST_WITHHELD_TOKEN") == "t0ken-value"
        assert lookup("PATH") is None  # lent keys are all there is
    assert lookup("EVOLVE_TEST_WITHHELD_TOKEN") is None


def hunter() -> Callable[[dict[str, Any]], Reply]:
    """A model whose first child hunts for keys (and fails its check, saying what it found),
    and whose later children halve TILE_K, so that the run has honest work too."""
    calls = itertools.count()

    def answer(body: dict[str, Any]) -> Reply:
        text = prompt_text(body)
        assert KEY not in text and BYSTANDER not in text
        if next(calls) == 0:
            replace = f"{PROBE}{SIGNATURE}\n  probe();"
            return Reply(f"<<<<<<< SEARCH\n{SIGNATURE}\n=======\n{replace}\n>>>>>>> REPLACE\n")
        tile = re.search(r"^#define TILE_K (\d+)(.*)$", text, re.M)
        assert tile, "the prompt did not show the parent's code"
        smaller = f"#define TILE_K {max(int(tile.group(1)) // 2, 1)}{tile.group(2)}"
        return Reply(f"<<<<<<< SEARCH\n{tile.group(0)}\n=======\n{smaller}\n>>>>>>> REPLACE\n")

    return answer


@pytest.mark.system
@pytest.mark.parametrize("ray", [False, True], ids=["local", "ray"])
def test_no_key_reaches_a_worker_a_candidate_the_store_the_results_or_the_logs(
    tmp_path: Path, ray: bool
) -> None:
    with ScriptedLLMServer(default=hunter()) as server:
        assert not is_secret(KEY_VAR), "the key's variable must be a secret by the task alone"
        model = {"model": "scripted", "base_url": server.openai_url, "api_key_env": KEY_VAR}
        task = write_matmul_task(tmp_path, model, mutator="diff", candidates=3, n=64)
        env = {**os.environ, KEY_VAR: KEY, "OPENAI_API_KEY": BYSTANDER}
        started = time.time()
        driver = subprocess.Popen(
            [sys.executable, "-m", "evolve", "run", str(task), "--name", "keys", "--workers", "1",
             "--plain", *(["--ray-address", "local"] if ray else [])],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        worker = is_ray_worker if ray else is_local_worker
        holders, workers_seen = _watch_environments(driver, worker)
        out, err = driver.communicate(timeout=60)
        requests = list(server.requests)

    assert driver.returncode in (0, 1), err  # 1: nothing beat the seed, which is fine here
    assert workers_seen, "no worker process of the run was seen: the scan proves nothing"
    assert holders <= {driver.pid}, f"processes started with a key: {holders}"
    assert requests and {r.api_key for r in requests} == {KEY}, "the model got the key"

    db = tmp_path / "results" / "evolve.db"
    feedback = _column_values(db, "evaluations", "feedback")
    assert any(PROBE_LINE in text and "own: none" in text for text in feedback), (
        "the hunting candidate did not run, or its report was not stored"
    )
    # Ray names the folder after the driver's pid; on a shared machine an older session of
    # a process that had the same pid may still lie there.
    sessions = [
        path
        for path in glob.glob(f"/tmp/ray/session_*_{driver.pid}")
        if os.path.getmtime(path) >= started - 1
    ]
    assert len(sessions) == (1 if ray else 0), sessions
    for secret in (KEY, BYSTANDER):
        assert secret not in out + err
        assert not _store_holds(db, secret), f"{secret} is in the store"
        assert not _files_holding(tmp_path / "results", secret), "a results file holds a key"
        for session in sessions:
            assert not _files_holding(Path(session), secret), "Ray's session files hold a key"


def _watch_environments(
    driver: subprocess.Popen[str], worker: Callable[[bytes], bool]
) -> tuple[set[int], set[int]]:
    """Until the driver exits: the processes whose environment holds a key, and the worker
    processes of the run (by their command line) that were looked at."""
    holders: set[int] = set()
    workers_seen: set[int] = set()
    deadline = time.monotonic() + 400
    while driver.poll() is None and time.monotonic() < deadline:
        for pid in descendants(driver.pid) | {driver.pid}:
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                title = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if KEY.encode() in environ or BYSTANDER.encode() in environ:
                holders.add(pid)
            if worker(title):
                workers_seen.add(pid)
        time.sleep(0.2)
    return holders, workers_seen


def is_ray_worker(cmdline: bytes) -> bool:
    return cmdline.startswith(b"ray::")


def is_local_worker(cmdline: bytes) -> bool:
    return b"evolve.executors.actor_process" in cmdline


def _store_holds(db: Path, secret: str) -> bool:
    """Whether any value of any column of any table holds `secret`."""
    with sqlite3.connect(db) as connection:
        tables = [
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        assert {"runs", "candidates", "evaluations", "llm_calls"} <= set(tables)
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    data = value if isinstance(value, bytes) else str(value).encode()
                    if secret.encode() in data:
                        return True
    return False


def _column_values(db: Path, table: str, column: str) -> list[str]:
    with sqlite3.connect(db) as connection:
        return [row[0] for row in connection.execute(f"SELECT {column} FROM {table}")]


def _files_holding(root: Path, secret: str) -> list[Path]:
    return [
        path
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and secret.encode() in path.read_bytes()
    ]
