"""What the tests' own servers (Dovecot, Samba, Redis, a served shard, the web UI) share: a free port
on 127.0.0.1, and ending a server's whole session of processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

HOST = "127.0.0.1"


def free_port() -> int:
    """A port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def end_session(proc: subprocess.Popen[bytes] | subprocess.Popen[str] | None, timeout: float) -> None:
    """End a server started in a session of its own (``start_new_session``): SIGTERM to its parent,
    which ends its children; after ``timeout`` seconds, or once it has exited, SIGKILL to whatever of
    its session is left (a connection's process that outlived it). A process already reaped is left
    alone: its pid, and so its group's id, may belong to another process now."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    # WNOWAIT: the parent's exit is seen but it stays a zombie, which keeps its pid (the process
    # group's id) from being reused while the group is emptied below
    while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def launch_session(argv: list[str], log: Path, ready: Callable[[], bool], what: str, timeout: float,
                   log_tail: Callable[[], str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start a server in a session of its own (a terminal's Ctrl-C does not reach it, and
    ``end_session`` ends its group), its output appended to ``log``, and wait until ``ready()``.
    RuntimeError, once it is ended, if it exits or is not ready within ``timeout`` seconds: ``what``
    says what it should have done (``greet on HOST:PORT``), with ``log_tail()``."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, **popen)
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            why = f"exited with {proc.returncode}" if proc.poll() is not None else f"did not {what} within {timeout:.0f} s"
            end_session(proc, timeout)
            raise RuntimeError(f"{Path(argv[0]).name} {why}; its log ends:\n{log_tail()}")
        time.sleep(0.1)
    return proc
