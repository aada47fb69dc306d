"""The home a command works on, and asking that home's daemon, if one runs: what every command
that can go either way (through the daemon, or to the index directly) calls first."""

from __future__ import annotations

import argparse
import os
from typing import Any

from deskdex.errors import DaemonUnavailable
from deskdex.paths import ENV, Home
from deskdex.protocol import OPS

from .client import call


def home_of(args: argparse.Namespace) -> Home:
    """``--home`` (else $DESKDEX_HOME, else the platform's folders), refused if it names a file."""
    return Home.resolve(home_given(args)).check()


def home_given(args: argparse.Namespace) -> str | None:
    """The command's ``--home``, None when not given (the parser sets no default: it may come before or
    after the command)."""
    return getattr(args, "home", None)


def ask_daemon(args: argparse.Namespace, op: str, **kw: Any) -> Any:
    """The daemon of the command's home (``ask``)."""
    return ask(home_given(args), op, **kw)


def ask(chosen: str | None, op: str, **kw: Any) -> Any:
    """The answer of the daemon of ``chosen`` (a ``--home``; None: $DESKDEX_HOME, else the
    platform's folders), or None when no daemon runs for that home. An error the daemon answers
    with is raised as its deskdex.errors exception (a QueryError with its position, ...).

    A user with no daemon and no index of their own who chose no home is answered by the system
    daemon (`deskdex daemon --system`) for its public ops, with what that user may read."""
    for path in daemon_sockets(chosen, op):
        try:
            return call(path, op, **kw)
        except DaemonUnavailable:
            continue
    return None


def daemon_sockets(chosen: str | None, op: str) -> list[str]:
    """The sockets ``ask`` tries for ``op``, in order: the daemon of ``chosen``'s home, then, for a
    user with no index of their own who chose no home and a public op, the system daemon's."""
    home = Home.resolve(chosen).check()
    sockets = [home.socket]
    chosen = chosen or os.environ.get(ENV)
    if not chosen and OPS[op].public and not os.path.exists(os.path.join(home.data_dir, "catalog.sqlite")):
        sockets.append(Home.resolve(system=True).socket)
    return sockets
