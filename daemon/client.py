"""Talking to a running daemon. Imports nothing heavy, so quick commands stay quick.

``call(socket_path, "status")`` returns the result, raises ``NotRunning`` when no daemon
answers (the CLI then reads the index directly) and ``DaemonError`` (with ``.code``, see
daemon/server.py ``ERROR_CODES``) when the daemon refuses the request.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any


class NotRunning(ConnectionError):
    """No daemon listens on the socket (none started, or it died and left the file behind)."""


class DaemonError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} [{code}]")
        self.code = code
        self.message = message


class Client:
    """One connection for several calls; ``call()`` below opens one per call."""

    def __init__(self, socket_path: str, timeout: float | None = 30.0) -> None:
        self.path = socket_path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(socket_path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            self._sock.close()
            raise NotRunning(f"no deskdex daemon answers on {socket_path}") from exc
        except OSError:
            self._sock.close()
            raise
        self._reader = self._sock.makefile("rb")

    def call(self, op: str, **args: Any) -> Any:
        try:
            self._sock.sendall(json.dumps({**args, "op": op}).encode() + b"\n")
            line = self._reader.readline()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise NotRunning(f"the daemon on {self.path} went away") from exc
        if not line:
            raise NotRunning(f"the daemon on {self.path} closed the connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            err = reply.get("error") or {}
            raise DaemonError(str(err.get("code", "unknown")), str(err.get("message", reply)))
        return reply.get("result")

    def close(self) -> None:
        self._reader.close()
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call(socket_path: str, op: str, *, timeout: float | None = 30.0, **args: Any) -> Any:
    """Send one request, return its result (raises NotRunning or DaemonError)."""
    with Client(os.fspath(socket_path), timeout) as client:
        return client.call(op, **args)
