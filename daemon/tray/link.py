"""The tray's one line to the daemon: a JSON request over its Unix socket, one JSON response back.

Kept to one function, :func:`call`, with the same shape as ``daemon/client.py`` (written in parallel) so
it can be swapped for it. Nothing here imports Qt: :class:`Caller` in ``app.py`` runs calls off the UI
thread."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

from converters.errors import DeskdexError

logger = logging.getLogger(__name__)

TIMEOUT = 10.0  # seconds; a search over a big index answers in well under one
MAX_LINE = 64 * 1024 * 1024


class DaemonError(DeskdexError):
    """The daemon answered ``{"ok": false}``: ``code`` is one of the protocol's error codes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class DaemonUnavailable(DaemonError):
    """No daemon listens on the socket (not started, crashed, or another home)."""

    def __init__(self, message: str) -> None:
        super().__init__("unavailable", message)


def call(socket_path: str, op: str, timeout: float = TIMEOUT, **args: Any) -> dict[str, Any]:
    """Send ``{"op": op, **args}`` and return the response's ``result``; raise :class:`DaemonError`."""
    request = json.dumps({"op": op, **args}, ensure_ascii=False).encode() + b"\n"
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(socket_path)
            s.sendall(request)
            with s.makefile("rb") as f:
                line = f.readline(MAX_LINE)
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        raise DaemonUnavailable(f"the deskdex daemon is not running (no socket at {socket_path})") from exc
    except OSError as exc:  # timeout, reset, permission
        raise DaemonUnavailable(f"cannot talk to the deskdex daemon at {socket_path}: {exc}") from exc
    if not line:
        raise DaemonUnavailable(f"the deskdex daemon at {socket_path} closed the connection without answering")
    try:
        response = json.loads(line)
    except ValueError as exc:
        raise DaemonError("internal", f"the daemon sent something that is not JSON: {line[:200]!r}") from exc
    if response.get("ok"):
        return response.get("result") or {}
    error = response.get("error") or {}
    raise DaemonError(str(error.get("code", "internal")), str(error.get("message", "unknown error")))
