"""Opening a paged document at a page, where its viewer can be told the page on its command line:

- Evince (GNOME's document viewer): ``evince --page-index=N FILE`` (``-i N``; N is the 1-based
  page number as the converters count pages, not the document's page label);
- Okular (KDE's): ``okular -p N FILE``.

The viewer is the desktop's default application for the file's MIME type (``xdg-mime query default``),
so a user who chose another viewer is not handed Evince because it happens to be installed. Any other
viewer (a browser, Atril, Zathura...) has no page argument deskdex knows: the file opens with the default
application, at its first page."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
from typing import Callable

logger = logging.getLogger(__name__)

# the desktop file's name, lower-cased, that names the viewer -> its command with the page and the file
PAGE_COMMANDS: dict[str, Callable[[int, str], list[str]]] = {
    "evince": lambda page, path: ["evince", f"--page-index={page}", path],
    "okular": lambda page, path: ["okular", "-p", str(page), path],
}
XDG_MIME_TIMEOUT = 5.0  # seconds: xdg-mime reads a few small files


def default_app(mime: str) -> str | None:
    """The desktop file id of the default application for ``mime`` (``org.gnome.Evince.desktop``), or
    None where xdg-mime is missing or names none."""
    if not mime or not shutil.which("xdg-mime"):
        return None
    try:
        p = subprocess.run(["xdg-mime", "query", "default", mime], capture_output=True, text=True,
                           timeout=XDG_MIME_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.info("xdg-mime query default %s: %s", mime, exc)
        return None
    return p.stdout.strip() or None


def page_command(app: str | None, page: int, path: str) -> list[str] | None:
    """The command that opens ``path`` at ``page`` with the viewer of the desktop file ``app``, or None
    where that viewer takes no page (or is not on PATH)."""
    if not app or page < 1:
        return None
    name = app.lower()
    for viewer, command in PAGE_COMMANDS.items():
        if viewer in name and shutil.which(viewer):
            return command(page, path)
    return None


def page_viewer(mime: str) -> str | None:
    """The name of the viewer ("evince", "okular") that would open a file of ``mime`` at a page, or None."""
    app = default_app(mime)
    return next((v for v in PAGE_COMMANDS if app and v in app.lower() and shutil.which(v)), None)


def open_at_page(path: str, mime: str, page: int, fallback: Callable[[str], None]) -> list[str] | None:
    """Open ``path`` at ``page`` with the default viewer of ``mime`` where it takes a page; else with
    ``fallback`` (the desktop's default application). The command started, or None for the fallback."""
    command = page_command(default_app(mime), page, path) if os.path.isabs(path) else None
    if command is None:
        fallback(path)
        return None
    try:
        # its own session: a Ctrl-C of the tray's terminal does not close the viewer
        viewer = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        logger.warning("%s did not start (%s): opening %s with the default application", command[0], exc, path)
        fallback(path)
        return None
    # reaped when it ends, by a thread that waits on it: no zombie for each document opened
    threading.Thread(target=viewer.wait, name="viewer-reaper", daemon=True).start()
    return command
