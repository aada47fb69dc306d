"""A real ``deskdex daemon`` process on a private home: started, waited for, stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from .conftest import DESKDEX, ROOT


class DaemonProcess:
    def __init__(self, home: Path, folders: list[Path], extra_config: str = "", args: tuple[str, ...] = ()) -> None:
        self.home = home
        self.args = args  # more arguments for `deskdex daemon`, e.g. ("--system",)
        (home / "config").mkdir(parents=True, exist_ok=True)
        cfg = "folders = [" + ", ".join(json.dumps(str(f)) for f in folders) + "]\n" + extra_config
        (home / "config" / "config.toml").write_text(cfg)
        self.proc: subprocess.Popen[str] | None = None
        self.log = home / "daemon.log"

    @property
    def socket(self) -> str:
        return str(self.home / "run" / "deskdex.sock")

    def start(self, wait: bool = True) -> "DaemonProcess":
        env = dict(os.environ, DESKDEX_HOME=str(self.home), NO_COLOR="1")
        self._logf = open(self.log, "a")
        self.proc = subprocess.Popen([DESKDEX, "daemon", *self.args], cwd=ROOT, env=env,
                                     stdout=self._logf, stderr=subprocess.STDOUT, text=True)
        if wait:
            self.wait_for(lambda st: st["state"] == "idle", timeout=120, what="the first reconcile")
        return self

    def call(self, op: str, **args: Any) -> Any:
        from deskdex.clients.client import call

        return call(self.socket, op, timeout=30, **args)

    def wait_for(self, cond: Callable[[dict[str, Any]], bool], timeout: float = 20.0, what: str = "") -> dict[str, Any]:
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

    def eventually(self, query: str, expected: list[str], timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        got: list[str] = []
        while time.monotonic() < deadline:
            got = self.search(query)
            if got == sorted(expected):
                return
            time.sleep(0.1)
        raise AssertionError(f"{query!r}: expected {sorted(expected)}, got {got}\n{self.log.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"daemon did not stop within {timeout} s\n{self.log.read_text()[-3000:]}")
        self._logf.close()
        return self.proc.returncode
