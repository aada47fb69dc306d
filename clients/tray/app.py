"""The tray icon and its menu: the daemon's state in the icon (idle, indexing with progress, paused, error)
and Search…, Pause/Resume indexing, Watched folders…, Status, Quit.

Where no system tray exists (a bare X server, some Wayland desktops) the icon cannot show: the search window
opens instead, and closing it quits."""

from __future__ import annotations

import json
import logging
import os
import signal
from typing import Any, Callable

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QApplication, QMenu, QMessageBox, QSystemTrayIcon, QWidget

from deskdex.errors import DeskdexError

from . import icons
from .caller import Caller
from .folders_window import FoldersWindow
from .history import History
from .offline import IndexReader
from .search_window import SearchWindow

logger = logging.getLogger(__name__)

POLL_MS = 2000


def describe(status: dict[str, Any]) -> str:
    """One line for the menu and the tooltip."""
    state = status.get("state", "idle")
    docs = f"{int(status.get('documents') or 0):,} documents"
    if state in ("indexing", "scanning"):
        return f"Indexing: {int(status.get('queue') or 0):,} to go, {docs}"
    return f"{state.capitalize()}: {docs}" + (f", {status['failed']:,} failed" if status.get("failed") else "")


def progress(status: dict[str, Any]) -> float | None:
    done, queue = int(status.get("documents") or 0), int(status.get("queue") or 0)
    return done / (done + queue) if done + queue else None


class TrayApp(QObject):
    """The tray of the daemon at ``socket_path``; with ``data_dir`` (the home's data folder), searches
    read the index there when no daemon answers; ``history_file``: where the searches are remembered
    (None: for this run only)."""

    def __init__(self, socket_path: str, poll_ms: int = POLL_MS, parent: QObject | None = None,
                 data_dir: str | None = None, history_file: str | None = None) -> None:
        super().__init__(parent)
        self.caller = Caller(socket_path, self, fallback=IndexReader(data_dir) if data_dir else None)
        self.search_window = SearchWindow(self.caller, history=History(history_file))
        self.folders_window = FoldersWindow(self.caller)
        self.status: dict[str, Any] = {}
        self.state = "error"
        self.error: str | None = "waiting for the daemon"
        self.status_box: QMessageBox | None = None

        self.menu = QMenu()
        self.state_action = self.menu.addAction("Connecting to the daemon…")
        self.state_action.setEnabled(False)
        self.menu.addSeparator()
        self.search_action = self._add("Search…", self.show_search)
        self.pause_action = self._add("Pause indexing", self.toggle_pause)
        self.folders_action = self._add("Watched folders…", self.show_folders)
        self.status_action = self._add("Status", self.show_status)
        self.menu.addSeparator()
        self.quit_action = self._add("Quit", self.quit)

        self.tray = QSystemTrayIcon(icons.icon("error"), self)
        self.tray.setContextMenu(self.menu)
        self.tray.activated.connect(self._activated)
        self.timer = QTimer(self, interval=poll_ms)
        self.timer.timeout.connect(self.poll)

    def _add(self, text: str, slot: Callable[[], None]) -> QAction:
        action = self.menu.addAction(text)
        action.triggered.connect(slot)
        return action

    def start(self) -> None:
        self.tray.show()
        self.poll()
        self.timer.start()

    # -- state
    def poll(self) -> None:
        self.caller.request("status", self._update, self._unreachable)

    def _update(self, status: dict[str, Any]) -> None:
        self.status, self.error = status, None
        self.state = str(status.get("state", "idle"))
        self._render(describe(status))

    def _unreachable(self, error: DeskdexError) -> None:
        self.state, self.error = "error", str(error)
        self._render(f"Error: {error}")

    def _render(self, line: str) -> None:
        self.tray.setIcon(icons.icon(self.state, progress(self.status) if self.state == "indexing" else None))
        self.tray.setToolTip(f"deskdex\n{line}")
        self.state_action.setText(line)
        self.pause_action.setText("Resume indexing" if self.state == "paused" else "Pause indexing")
        self.pause_action.setEnabled(self.error is None)

    # -- menu actions
    def show_search(self) -> None:
        _raise(self.search_window)

    def search_for(self, query: str | None) -> None:
        """The search window at ``query`` (``deskdex tray --search``); None: as it was. Not the menu's
        slot: QAction.triggered passes a bool."""
        if query is not None:
            self.search_window.box.setText(query)
            self.search_window.search_now()
        self.show_search()

    def show_folders(self) -> None:
        _raise(self.folders_window)

    def toggle_pause(self) -> None:
        op = "resume" if self.state == "paused" else "pause"
        self.caller.request(op, lambda r: self._update({**self.status, **r}), self._unreachable)

    def show_status(self) -> None:
        s = self.status
        if self.error:
            text = self.error
        else:
            reasons = ", ".join(f"{k} {v}" for k, v in sorted((s.get("failed_by_reason") or {}).items()))
            text = "\n".join([describe(s), f"Queue: {s.get('queue', 0)}", f"Failed: {s.get('failed', 0)}"
                              + (f" ({reasons})" if reasons else ""),
                              "Folders: " + (", ".join(s.get("folders") or []) or "none"),
                              *(s.get("notes") or [])])
        if self.status_box is None:  # not modal: the tray keeps updating behind it
            self.status_box = QMessageBox(QMessageBox.Icon.Information, "deskdex status", "")
            self.status_box.setModal(False)
            self.status_box.setTextFormat(Qt.TextFormat.PlainText)  # folders and notes hold names, not HTML
        self.status_box.setText(text)
        _raise(self.status_box)

    def _activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:  # a left click
            self.show_search()

    def quit(self) -> None:
        self.close()
        QApplication.quit()

    def close(self) -> None:
        self.timer.stop()
        self.tray.hide()
        for w in (self.search_window, self.folders_window, self.status_box):
            if w is not None:
                w.close()
        self.caller.close()


def _raise(w: QWidget) -> None:
    w.show()
    w.raise_()
    w.activateWindow()


# One tray per daemon: a second ``deskdex tray`` (the desktop's "show all", clients/shellsearch.py, runs
# ``deskdex tray --search QUERY``) hands its request to the running one over a local socket in the
# daemon's runtime folder (0700, the user's own) and exits, rather than show a second icon.
INSTANCE_NAME = "tray"
MAX_REQUEST = 64 * 1024  # bytes of one request line: a query is at most a few KB


def instance_name(socket_path: str) -> str:
    return os.path.join(os.path.dirname(socket_path), INSTANCE_NAME)


def hand_over(name: str, query: str | None, timeout_ms: int = 1000) -> bool:
    """Ask the tray listening at ``name`` to show its search window (at ``query``); False when
    none listens there."""
    sock = QLocalSocket()
    sock.connectToServer(name)
    if not sock.waitForConnected(timeout_ms):
        return False
    sock.write(json.dumps({"search": query}).encode() + b"\n")
    done = sock.waitForBytesWritten(timeout_ms)
    sock.disconnectFromServer()
    return done


class Instance(QObject):
    """The running tray's end of ``hand_over``: each request line shows the search window."""

    def __init__(self, name: str, on_request: Callable[[str | None], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.on_request = on_request
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        os.makedirs(os.path.dirname(name), mode=0o700, exist_ok=True)
        QLocalServer.removeServer(name)  # left by a tray that was killed: no one answered at it
        if not self.server.listen(name):
            logger.warning("a second deskdex tray cannot hand its search over to this one: %s",
                           self.server.errorString())
        self.server.newConnection.connect(self._accept)

    def _accept(self) -> None:
        while (conn := self.server.nextPendingConnection()) is not None:
            conn.readyRead.connect(lambda c=conn: self._read(c))
            conn.disconnected.connect(conn.deleteLater)

    def _read(self, conn: QLocalSocket) -> None:
        if not conn.canReadLine():
            if conn.bytesAvailable() > MAX_REQUEST:
                logger.warning("a request to the tray longer than %d bytes: refused", MAX_REQUEST)
                conn.abort()
            return
        line = bytes(conn.readLine(MAX_REQUEST).data())
        conn.disconnectFromServer()
        try:
            request = json.loads(line)
            query = request["search"] if isinstance(request, dict) else None
            if query is not None and not isinstance(query, str):
                raise ValueError("search is not a string")
        except (ValueError, KeyError) as exc:
            logger.warning("a malformed request to the tray: %s", exc)
            return
        self.on_request(query)

    def close(self) -> None:
        self.server.close()


def run(socket_path: str, data_dir: str | None = None, history_file: str | None = None,
        search: str | None = None) -> int:
    """The ``deskdex tray`` process: the icon until Quit (or the search window, where there is no tray).
    ``data_dir``: the index searched when no daemon answers; ``history_file``: the search history's;
    ``search``: a query to show at once. With a tray of this daemon running already, it is asked to
    show its search window instead, and this process exits."""
    existing = QApplication.instance()  # typed as the QCoreApplication it may be; ours is a QApplication
    app = existing if isinstance(existing, QApplication) else QApplication(["deskdex"])
    app.setApplicationName("deskdex")
    name = instance_name(socket_path)
    if hand_over(name, search):
        logger.info("a deskdex tray runs already: it shows the search window")
        return 0
    tray = TrayApp(socket_path, data_dir=data_dir, history_file=history_file)
    instance = Instance(name, tray.search_for)
    if QSystemTrayIcon.isSystemTrayAvailable():
        app.setQuitOnLastWindowClosed(False)  # closing a window must not end the tray
        if search is not None:
            tray.search_for(search)
    else:
        logger.warning("no system tray on this desktop: showing the search window instead")
        tray.search_for(search)
    tray.start()
    # Qt's loop never returns to Python on its own: a timer lets Ctrl-C and SIGTERM be handled
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: tray.quit())
    wake = QTimer(interval=250)
    wake.timeout.connect(lambda: None)
    wake.start()
    code = app.exec()
    instance.close()
    tray.close()
    return code
