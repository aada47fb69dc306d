"""The tray's one line to the daemon: a JSON request over its Unix socket, one JSON response back.

One function, :func:`call`, over ``daemon/client.py``, turning its errors into the tray's
(:class:`DaemonUnavailable` shows as the error state). Nothing here imports Qt: :class:`Caller` in ``app.py`` runs calls off the UI
thread."""

from __future__ import annotations

import logging
from typing import Any

from converters.errors import DeskdexError

logger = logging.getLogger(__name__)

TIMEOUT = 10.0  # seconds; a search over a big index answers in well under one


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
    from .. import client

    try:
        return client.call(socket_path, op, timeout=timeout, **args) or {}
    except client.NotRunning as exc:
        raise DaemonUnavailable(f"the deskdex daemon is not running ({exc})") from exc
    except client.DaemonError as exc:
        raise DaemonError(exc.code, exc.message) from exc
    except OSError as exc:  # timeout, reset, permission
        raise DaemonUnavailable(f"cannot talk to the deskdex daemon at {socket_path}: {exc}") from exc
    except ValueError as exc:
        raise DaemonError("internal", f"the daemon sent something that is not JSON: {exc}") from exc
