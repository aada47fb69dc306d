"""A real ``deskdex daemon`` process on a private home: started, waited for, stopped.

The daemon works at idle CPU priority (daemon/run.py): an idle-priority thread runs when a CPU
would otherwise be idle, so beside a busy program on every core it gets almost nothing (0.3 % of
a core, measured beside two ``while True: pass`` on two cores), and what takes a second on a
quiet machine takes minutes. A wait for the daemon is therefore not measured in wall-clock
seconds, which a busy machine stretches at will, but in the time the daemon could have worked
(``Patience``): a daemon that had the machine and did not get there fails as fast as before; a
starved one is waited for, up to a cap. A test that measures speed says so and sets its own limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any, Callable

from .conftest import DESKDEX, ROOT, worded

QUIET_SECONDS = 30.0  # the longest wait, in seconds of a quiet machine (see Patience)
WALL_CAP = 1800.0  # and in wall-clock seconds, however busy the machine
# A test that waits for the daemon outlives pytest's 300 s timeout on a busy machine: modules of
# daemon tests give theirs this one (the waits themselves fail a daemon that is stuck).
BUSY_TIMEOUT = 3600
CLIENT_TIMEOUT = 240.0  # wall-clock guard on a client process (normal priority: slowed, not starved)
# The conversion time limit of the daemons tests start: a deadline for hostile files, in
# wall-clock seconds, that a starved idle-priority converter would race on a busy machine. These
# tests convert small harmless files; the limit itself is tested with WorkerPool (test_isolation.py,
# test_hostile.py), where a test can choose it.
TIME_LIMIT = 600.0

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _idle_cpu_seconds() -> float | None:
    """CPU-seconds the machine's CPUs spent idle since boot, all CPUs summed (Linux /proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    return (int(fields[4]) + int(fields[5])) / _TICK  # idle, iowait


def _cpu_seconds(pid: int | None) -> float:
    """CPU-seconds a process used, with its ended children (/proc/PID/stat); 0 where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(f) for f in fields[11:15]) / _TICK  # utime, stime, cutime, cstime


class Patience:
    """How long a wait for the daemon has lasted, in seconds of a quiet machine: each wall-clock
    second counts as the share of the machine's CPUs that were idle (where an idle-priority thread
    runs) or used by the daemon. On a quiet machine that is the wall clock; beside a busy program
    on every core it nearly stops. Over at ``quiet`` seconds, or at ``wall`` seconds of wall clock
    (where /proc/stat is missing, the wall clock alone counts)."""

    def __init__(self, quiet: float = QUIET_SECONDS, pid: int | None = None, wall: float = WALL_CAP) -> None:
        self.quiet, self.pid, self.wall = quiet, pid, wall
        self.cpus = os.cpu_count() or 1
        self.start = time.monotonic()
        self.idle0, self.cpu0 = _idle_cpu_seconds(), _cpu_seconds(pid)

    def waited(self) -> float:
        idle = _idle_cpu_seconds()
        if idle is None or self.idle0 is None:
            return time.monotonic() - self.start
        return (idle - self.idle0 + _cpu_seconds(self.pid) - self.cpu0) / self.cpus

    def over(self) -> bool:
        return self.waited() > self.quiet or time.monotonic() - self.start > self.wall

    def __str__(self) -> str:
        return (f"{self.waited():.1f} s of a quiet machine ({time.monotonic() - self.start:.0f} s of wall clock, "
                f"limits {self.quiet:g} and {self.wall:g})")


class DaemonProcess:
    def __init__(self, home: Path, folders: list[Path], extra_config: str = "", args: tuple[str, ...] = (),
                 time_limit: float = TIME_LIMIT, env: dict[str, str] | None = None, own_group: bool = False) -> None:
        self.home = home
        self.args = args  # more arguments for `deskdex daemon`, e.g. ("--system",)
        self.env = env or {}  # more environment
        # In a process group of its own, which stop() signals as a terminal's Ctrl-C or a service
        # manager does: the daemon and its converter processes together.
        self.own_group = own_group
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
        env = dict(os.environ, DESKDEX_HOME=str(self.home), NO_COLOR="1", **self.env)
        program, cwd = DESKDEX, ROOT
        if "--system" in self.args:
            # Its converter processes drop to the accounts, who may not read the checkout or this
            # venv (a clone in a 0700 folder): it runs from the session's readable install.
            from .accounts import readable_install

            installed = readable_install()
            program, cwd = installed.deskdex, installed.root
        self._logf = open(self.log, "a")
        self.proc = subprocess.Popen([program, "daemon", *self.args], cwd=cwd, env=env,
                                     stdout=self._logf, stderr=subprocess.STDOUT, text=True,
                                     process_group=0 if self.own_group else None)
        if wait:
            try:
                self.wait_for(lambda st: st["state"] == "idle", quiet=4 * QUIET_SECONDS, what="the first reconcile")
            except BaseException:
                self.stop(signal.SIGKILL)  # no daemon outlives a failed start
                raise
        return self

    def call(self, op: str, timeout: float = 60, **args: Any) -> Any:
        from deskdex.clients.client import call

        return call(self.socket, op, timeout=timeout, **args)

    def patience(self, quiet: float = QUIET_SECONDS) -> Patience:
        return Patience(quiet, self.proc.pid if self.proc is not None else None)

    def wait_for(self, cond: Callable[[dict[str, Any]], bool], quiet: float = QUIET_SECONDS,
                 what: str = "") -> dict[str, Any]:
        from deskdex.errors import DaemonUnavailable

        patience = self.patience(quiet)
        last: dict[str, Any] = {}
        while not patience.over():
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
        raise AssertionError(f"waited {patience} for {what}; last status {last}\n{self.log.read_text()[-3000:]}")

    def search(self, query: str, **kw: Any) -> list[str]:
        """The paths of the documents holding ``query``'s words, sorted (not those related by meaning)."""
        return sorted(h["path"] for h in worded(self.call("search", query=query, limit=100, **kw)))

    def eventually(self, query: str, expected: list[str], quiet: float = QUIET_SECONDS) -> None:
        patience = self.patience(quiet)
        got: list[str] = []
        while not patience.over():
            got = self.search(query)
            if got == sorted(expected):
                return
            time.sleep(0.1)
        raise AssertionError(f"{query!r}: expected {sorted(expected)}, got {got} after waiting {patience}\n"
                             f"{self.log.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM, quiet: float = QUIET_SECONDS) -> int:
        """Signal the daemon and wait for it (SIGTERM: it finishes the file at hand and commits,
        at idle priority). Returns its exit status; it is killed if it does not end in time."""
        assert self.proc is not None
        try:
            if self.proc.poll() is None:
                if self.own_group:
                    os.killpg(self.proc.pid, sig)
                else:
                    self.proc.send_signal(sig)
                patience = self.patience(quiet)
                while self.proc.poll() is None and not patience.over():
                    try:
                        self.proc.wait(0.5)
                    except subprocess.TimeoutExpired:
                        pass
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait()
                    if self.own_group:
                        try:
                            os.killpg(self.proc.pid, signal.SIGKILL)  # its converters too
                        except ProcessLookupError:
                            pass
                    raise AssertionError(f"daemon did not stop in {patience}\n{self.log.read_text()[-3000:]}")
        finally:
            if self._logf is not None:
                self._logf.close()
                self._logf = None
        return self.proc.returncode
