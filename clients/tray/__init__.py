"""``deskdex tray``: a system-tray icon with a search window and a watched-folders window, talking to the
daemon through its socket (searches read the home's index directly when no daemon answers, as
``deskdex search`` does). Qt (PySide6) comes with the optional extra ``deskdex[tray]``; nothing in
this module imports it, so the daemon and the CLI stay light and ``--help`` works without it."""

from __future__ import annotations

import argparse
import logging
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
                    "you type, and the watched folders. Talks to a running `deskdex daemon`; with none, "
                    "searches read the index directly.")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--install-autostart", action="store_true", help="start the tray at login, then exit")
    g.add_argument("--uninstall-autostart", action="store_true", help="stop starting the tray at login, then exit")
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

    h = Home.resolve(home)
    return run(h.socket, h.data_dir)
