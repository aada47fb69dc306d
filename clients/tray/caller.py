"""Daemon calls off the UI thread: the window never freezes while the daemon is busy or gone.

Each request runs :func:`deskdex.clients.client.call` in a small thread pool; its outcome (a result, or the
deskdex.errors exception the daemon's error code stands for, ``DaemonUnavailable`` when no daemon answers)
comes back to the UI thread through a queued Qt signal, and the callback given with the request runs there.

With a ``fallback`` (an :class:`~.offline.IndexReader`), the ops it reads (search) are answered from the
index when no daemon answers, in the same worker thread."""

from __future__ import annotations

import itertools
import logging
from typing import Any, Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from deskdex.errors import DaemonError, DaemonUnavailable, DeskdexError

from .. import client
from .offline import IndexReader

logger = logging.getLogger(__name__)

TIMEOUT = 10.0  # seconds: the window shows the daemon as unreachable rather than wait longer

OnResult = Callable[[dict[str, Any]], None]
OnError = Callable[[DeskdexError], None]


class Caller(QObject):
    """Send requests to the daemon at ``socket_path``; callbacks run on the thread that owns this object."""

    finished = Signal(int, object, object)  # ticket, result or None, DeskdexError or None

    def __init__(self, socket_path: str, parent: QObject | None = None, fallback: IndexReader | None = None) -> None:
        super().__init__(parent)
        self.socket_path, self.fallback = socket_path, fallback
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(2)  # a search and a status poll at once; more buys nothing
        self._tickets = itertools.count(1)
        self._pending: dict[int, tuple[OnResult, OnError | None]] = {}
        self.finished.connect(self._dispatch)

    def request(self, op: str, on_result: OnResult, on_error: OnError | None = None, **args: Any) -> int:
        """Queue ``op``; returns a ticket (increasing), so a caller can drop answers older than its last."""
        ticket = next(self._tickets)
        self._pending[ticket] = (on_result, on_error)
        self.pool.start(_Job(self, ticket, op, args))
        return ticket

    def busy(self) -> bool:
        """Whether an answer is still to come (or to be handed to its callback)."""
        return bool(self._pending)

    @Slot(int, object, object)
    def _dispatch(self, ticket: int, result: Any, error: Any) -> None:
        on_result, on_error = self._pending.pop(ticket)
        if error is None:
            on_result(result)
        elif on_error is not None:
            on_error(error)
        else:
            logger.warning("daemon call failed: %s", error)

    def close(self, timeout_ms: int = int(TIMEOUT * 1000) + 1000) -> None:
        """Wait for calls in flight (each has a socket timeout), so no thread outlives the app."""
        self.pool.waitForDone(timeout_ms)


class _Job(QRunnable):
    def __init__(self, caller: Caller, ticket: int, op: str, args: dict[str, Any]) -> None:
        super().__init__()
        self.caller, self.ticket, self.op, self.args = caller, ticket, op, args

    def run(self) -> None:
        try:
            result = self._call()
        except DeskdexError as exc:
            self.caller.finished.emit(self.ticket, None, exc)
        except Exception as exc:  # a bug here must reach the UI as an error, not kill the pool thread
            logger.exception("daemon call %s failed", self.op)
            self.caller.finished.emit(self.ticket, None, DaemonError(f"{type(exc).__name__}: {exc}"))
        else:
            self.caller.finished.emit(self.ticket, result, None)

    def _call(self) -> dict[str, Any]:
        try:
            return client.call(self.caller.socket_path, self.op, timeout=TIMEOUT, **self.args) or {}
        except DaemonUnavailable as exc:
            fallback = self.caller.fallback
            if fallback is None or not fallback.answers(self.op):
                raise
            return fallback.call(self.op, self.args, exc)
