"""A real ``deskdex daemon`` process on a private home: started, waited for, stopped.

The daemon indexes at idle CPU priority (daemon/run.py): beside a busy program on every core its
indexing gets almost no CPU, so what takes a second on a quiet machine can take minutes. Waits
for something that is not a speed measurement therefore wait for the condition, up to PATIENCE;
a test that measures speed says so and sets its own limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any, Callable

from .conftest import DESKDEX, ROOT

PATIENCE = 240.0  # seconds: the longest wait for the daemon to get something done (not a speed limit)
# The conversion time limit of the daemons tests start: a deadline for hostile files, measured in
# wall-clock seconds, that a starved idle-priority converter would race on a busy machine. These
# tests convert small harmless files; the limit itself is tested with WorkerPool (test_isolation.py,
# test_hostile.py), where a test can choose it.
TIME_LIMIT = 600.0


class DaemonProcess:
    def __init__(self, home: Path, folders: list[Path], extra_config: str = "", args: tuple[str, ...] = (),
                 time_limit: float = TIME_LIMIT) -> None:
        self.home = home
        self.args = args  # more arguments for `deskdex daemon`, e.g. ("--system",)
        (home / "config").mkdir(parents=True, exist_ok=True)
        cfg = ("folders = [" + ", ".join(json.dumps(str(f)) for f in folders) + "]\n"
               f"time_limit = {time_limit}\n" + extra_config)
        (home / "config" / "config.toml").write_text(cfg)
        self.proc: subprocess.Popen[str] | None = None
        self.log = home / "daemon.log"
        self._logf: IO[str] | None = None

    @property
    def socket(self) -> str:
        return str(self.home / "run" / "deskdex.sock")

    def start(self, wait: bool = True) -> "DaemonProcess":
        env = dict(os.environ, DESKDEX_HOME=str(self.home), NO_COLOR="1")
        self._logf = open(self.log, "a")
        self.proc = subprocess.Popen([DESKDEX, "daemon", *self.args], cwd=ROOT, env=env,
                                     stdout=self._logf, stderr=subprocess.STDOUT, text=True)
        if wait:
            try:
                self.wait_for(lambda st: st["state"] == "idle", what="the first reconcile")
            except BaseException:
                self.stop(signal.SIGKILL)  # no daemon outlives a failed start
                raise
        return self

    def call(self, op: str, **args: Any) -> Any:
        from deskdex.clients.client import call

        return call(self.socket, op, timeout=60, **args)

    def wait_for(self, cond: Callable[[dict[str, Any]], bool], timeout: float = PATIENCE,
                 what: str = "") -> dict[str, Any]:
        from deskdex.errors import DaemonUnavailable

        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                last = self.call("status")
                if cond(last):
                    return last
            except DaemonUnavailable:
                pass
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; last status {last}\n{self.log.read_text()[-3000:]}")

    def search(self, query: str, **kw: Any) -> list[str]:
        return sorted(h["path"] for h in self.call("search", query=query, limit=100, **kw)["hits"])

    def eventually(self, query: str, expected: list[str], timeout: float = PATIENCE) -> None:
        deadline = time.monotonic() + timeout
        got: list[str] = []
        while time.monotonic() < deadline:
            got = self.search(query)
            if got == sorted(expected):
                return
            time.sleep(0.1)
        raise AssertionError(f"{query!r}: expected {sorted(expected)}, got {got}\n{self.log.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = PATIENCE) -> int:
        """Signal the daemon and wait for it (SIGTERM: it finishes the file at hand and commits,
        at idle priority). Returns its exit status; it is killed if it does not end in time."""
        assert self.proc is not None
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                    raise AssertionError(f"daemon did not stop within {timeout} s\n{self.log.read_text()[-3000:]}")
        finally:
            if self._logf is not None:
                self._logf.close()
                self._logf = None
        return self.proc.returncode
