"""Talking to a running daemon over deskdex.protocol: the one client the command line, the tray and the
``deskdex`` fast path share.

``call(socket_path, "status")`` returns the result. It raises ``DaemonUnavailable`` when no daemon
answers (the CLI then reads the index directly; a daemon whose queue of connections is full is
tried again for up to ``CONNECT_PATIENCE`` seconds first) and, when the daemon answers with an error, the
deskdex.errors exception of its code (``QueryError`` with its position, ``Forbidden``, ...).

Built on ``_socket``, CPython's C module that ``socket`` re-exports: importing ``socket`` costs
about 18 ms (its enums, selectors, collections), more than a search through the daemon takes, and
``_socket`` 0.6 ms; no other public module connects a Unix socket. Without ``_socket`` (another
Python) it falls back to ``socket``: slower, never broken. tests/test_private_pins.py checks that
``_socket`` is still what ``socket`` is built on.
"""

from __future__ import annotations

import os
import time

from deskdex import protocol
from deskdex.errors import DaemonUnavailable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TIMEOUT = 30.0  # seconds; a search over a big index answers in well under one
# Seconds a connection refused for a full queue is tried again (backing off from 1 to 50 ms):
# the daemon queues thousands (daemon/server.py), so this takes a burst beyond that.
CONNECT_PATIENCE = 2.0


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
        self.path = socket_path
        if not trusted(socket_path):
            raise DaemonUnavailable(f"the deskdex daemon is not running (no socket folder of ours at "
                                    f"{os.path.dirname(socket_path)})")
        self._sock = _connect(socket_path, timeout)
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


def _connect(path: str, timeout: float | None) -> Any:
    """A socket connected to ``path``, or DaemonUnavailable."""
    try:
        import _socket as net
    except ImportError:  # not CPython: the public module, at its import cost (same names)
        import socket as net  # type: ignore[no-redef]

    start = time.monotonic()
    patience = CONNECT_PATIENCE if timeout is None else min(CONNECT_PATIENCE, timeout)
    pause = 0.001
    while True:
        sock = net.socket(net.AF_UNIX, net.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
            return sock
        except BlockingIOError:
            # The daemon's queue of connections is full (Linux answers EAGAIN): a burst of clients,
            # which the daemon works through in a moment. A fresh socket each time: not every
            # system lets a socket whose connect failed try again.
            sock.close()
            waited = time.monotonic() - start
            if waited + pause > patience:
                raise DaemonUnavailable(f"the deskdex daemon on {path} is too busy: its queue of connections "
                                        f"stayed full for {waited:.1f} s") from None
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
        except OSError as exc:
            sock.close()
            raise DaemonUnavailable(f"the deskdex daemon is not running (no answer on {path}: "
                                    f"{exc.strerror or exc})") from None


def call(socket_path: str, op: str, *, timeout: float | None = TIMEOUT, **args: Any) -> Any:
    """Send one request, return its result (raises DaemonUnavailable or the error's exception)."""
    with Client(os.fspath(socket_path), timeout) as client:
        return client.call(op, **args)
