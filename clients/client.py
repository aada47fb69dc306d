"""Talking to a running daemon over deskdex.protocol: the one client the command line, the tray and the
``deskdex`` fast path share.

``call(socket_path, "status")`` returns the result. It raises ``DaemonUnavailable`` when no daemon
answers (the CLI then reads the index directly) and, when the daemon answers with an error, the
deskdex.errors exception of its code (``QueryError`` with its position, ``Forbidden``, ...).

Built on ``_socket``, the C module: ``socket`` costs more to import than a search takes.
"""

from __future__ import annotations

import os

from deskdex import protocol
from deskdex.errors import DaemonUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TIMEOUT = 30.0  # seconds; a search over a big index answers in well under one


def trusted(socket_path: str) -> bool:
    """Whether the folder holding the socket is ours or root's and nobody else may write in it, as
    deskdex.paths makes it: a socket someone else placed could answer with anything."""
    try:
        st = os.stat(os.path.dirname(socket_path))
    except OSError:
        return False
    return st.st_uid in (os.getuid(), 0) and not st.st_mode & 0o022


class Client:
    """One connection for several calls; ``call()`` below opens one per call."""

    def __init__(self, socket_path: str, timeout: float | None = TIMEOUT) -> None:
        import _socket

        self.path = socket_path
        if not trusted(socket_path):
            raise DaemonUnavailable(f"the deskdex daemon is not running (no socket folder of ours at "
                                    f"{os.path.dirname(socket_path)})")
        self._sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        try:
            self._sock.connect(socket_path)
        except OSError as exc:
            self._sock.close()
            raise DaemonUnavailable(f"the deskdex daemon is not running (no answer on {socket_path}: "
                                    f"{exc.strerror or exc})") from None
        self._buffer = b""

    def call(self, op: str, **args: Any) -> Any:
        try:
            self._sock.sendall(protocol.request_line(op, args))
            line = self._readline()
        except OSError as exc:  # reset, broken pipe, timeout
            raise DaemonUnavailable(f"the daemon on {self.path} went away ({exc})") from None
        if not line:
            raise DaemonUnavailable(f"the daemon on {self.path} closed the connection")
        return protocol.parse_reply(line)

    def _readline(self) -> bytes:
        chunks = [self._buffer]
        while b"\n" not in chunks[-1]:
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                return b""
            chunks.append(chunk)
        line, _, self._buffer = b"".join(chunks).partition(b"\n")
        return line

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def call(socket_path: str, op: str, *, timeout: float | None = TIMEOUT, **args: Any) -> Any:
    """Send one request, return its result (raises DaemonUnavailable or the error's exception)."""
    with Client(os.fspath(socket_path), timeout) as client:
        return client.call(op, **args)
