"""``deskdex tray``: a system-tray icon with a search window and a watched-folders window, talking to the
daemon through its socket (searches read the home's index directly when no daemon answers, as
``deskdex search`` does). Qt (PySide6) comes with the optional extra ``deskdex[tray]``; nothing in
this module imports it, so the daemon and the CLI stay light and ``--help`` works without it."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING

from deskdex.paths import Home

if TYPE_CHECKING:
    from ..subcommands import Subcommands

logger = logging.getLogger(__name__)

MISSING_QT = ("deskdex tray needs Qt, which comes with the tray extra: pip install 'deskdex[tray]'\n"
              "(on Linux it also needs the X11/EGL libraries listed in packaging/system-deps.sh)")


def add_command(subparsers: Subcommands,
                common_parent: argparse.ArgumentParser) -> None:
    """Add ``deskdex tray`` to the CLI's subcommands."""
    s = subparsers.add_parser(
        "tray", parents=[common_parent], help="a tray icon with search and folder windows (extra: deskdex[tray])",
        description="Show deskdex in the system tray: its state in the icon, a search window that searches as "
                    "you type (with a preview of the hits, filters with counts, sorting and a history: "
                    "docs/tray.md), and the watched folders. Talks to a running `deskdex daemon`; with none, "
                    "searches read the index directly.")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--install-autostart", action="store_true", help="start the tray at login, then exit")
    g.add_argument("--uninstall-autostart", action="store_true", help="stop starting the tray at login, then exit")
    g.add_argument("--search", metavar="QUERY",
                   help="open the search window at QUERY (in the tray already running, if there is one)")
    s.set_defaults(func=cmd_tray)


def cmd_tray(args: argparse.Namespace) -> int:
    from . import autostart

    home = getattr(args, "home", None)
    if args.install_autostart:
        print(f"deskdex tray will start at login: {autostart.install(home)}")
        return 0
    if args.uninstall_autostart:
        path = autostart.uninstall()
        print(f"removed {path}" if path else "no autostart entry to remove")
        return 0
    no_display = _no_display()
    if no_display is not None:
        print(f"deskdex tray: {no_display}", file=sys.stderr)
        return 1
    try:
        import PySide6.QtWidgets  # noqa: F401
    except ImportError as exc:
        print(f"{MISSING_QT}\n({exc})", file=sys.stderr)
        return 1
    from .binding import binding_problem

    problem = binding_problem()  # before any thread: a binding that would crash the tray is named here
    if problem is not None:
        print(f"deskdex tray: {problem}", file=sys.stderr)
        return 1
    from .app import run
    from .history import history_file

    h = Home.resolve(home)
    return run(h.socket, h.data_dir, history_file(home), search=args.search)


# Qt platforms that show windows on a display server: without one, Qt aborts the process with a
# page of text (SIGABRT), so the missing display is said first, in one line.
_DISPLAYED = {"": ("DISPLAY", "WAYLAND_DISPLAY"), "xcb": ("DISPLAY",),
              "wayland": ("WAYLAND_DISPLAY",), "wayland-egl": ("WAYLAND_DISPLAY",)}


def _no_display() -> str | None:
    """Why no window can be shown here (an ssh session, a console), or None. Only where a display
    server is needed: not on macOS or Windows, nor with a QT_QPA_PLATFORM that needs none
    (offscreen, vnc, eglfs)."""
    if sys.platform in ("darwin", "win32"):
        return None
    wanted = [p.split(":", 1)[0] for p in os.environ.get("QT_QPA_PLATFORM", "").split(";")]
    if any(p not in _DISPLAYED for p in wanted):
        return None
    needed = sorted({v for p in wanted for v in _DISPLAYED[p]})
    if any(os.environ.get(v) for v in needed):
        return None
    return (f"no display to show the tray on ({' and '.join(needed)} "
            f"{'is' if len(needed) == 1 else 'are'} unset): run it in a desktop session")
