"""The ``deskdex`` command's first step: ``deskdex search`` answered by a running daemon, with
nothing heavy loaded; every other command, and a search no daemon answers, goes on to
``deskdex.clients.cli``. ``deskdex --version`` is answered here too, before anything else is loaded.

Why: a search through the daemon takes about a millisecond, but importing argparse, json,
platformdirs and the rest of the command line takes longer than the whole search (measured in
docs/search.md, "How fast"). So this module reads the command line with the same option table
the full parser is built from (clients/searchargs.py), sends the protocol's ``search`` op with
the one client (clients/client.py) and prints with the same rendering (clients/render.py).
Whatever it cannot read exactly as argparse would (``--help``, an abbreviation, a bad value),
``--open``, or an error from the daemon or the index: the full command line runs instead, so
every message comes from one place. With no daemon, the index is read here directly, still
without the full command line's modules.
"""

from __future__ import annotations

import os
import sys

from deskdex.errors import DaemonUnavailable, DeskdexError
from deskdex.paths import SOCKET_NAME, Home, user_runtime_dir

from .searchargs import parse_fast

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--version"]:  # before anything else: argparse's version action would load the whole CLI
        from deskdex.version import version_line

        print(version_line())
        return 0
    args = parse_fast(argv)
    # --open runs a program, and -0 without --paths is a mistake: the full command line does both
    if args is not None and args["open"] is None and (args["paths"] or not args["null"]):
        code = _through_daemon(args)
        if code is not None:
            return code
    from .cli import main as full

    return full(argv)


def socket_path(home: str | None) -> str | None:
    """The socket of the daemon ``deskdex.clients.cli`` would ask, where finding it costs nothing:
    ``--home`` or $DESKDEX_HOME, else on Linux the user's runtime folder (with or without
    $XDG_RUNTIME_DIR). None otherwise (platformdirs knows the other systems' folders; the full
    command line asks it)."""
    if home or os.environ.get("DESKDEX_HOME"):
        return Home.resolve(home).socket
    return os.path.join(user_runtime_dir(), SOCKET_NAME) if sys.platform.startswith("linux") else None


def _without_daemon(args: dict[str, Any]) -> Any:
    """No daemon answers: the results read from the home's index directly, as the full command
    line would, with only the index's modules loaded (no argparse, settings or converters: a
    quarter of a second on a busy machine). None where the full command line knows more: no
    index here (it may ask the system daemon), or any error (it reports it)."""
    try:
        home = Home.resolve(args["home"]).check()
        if not os.path.exists(os.path.join(home.data_dir, "catalog.sqlite")) or _may_name_shards(home.config_file):
            return None
        from deskdex.index import Collection, search

        with Collection.open(home.data_dir) as coll:
            return search(coll, " ".join(args["query"]), limit=args["limit"], offset=args["offset"],
                          sort=args["sort"], snippets=not args["paths"], collapse=not args["all"],
                          similar=args["similar"], words=args["words"])
    except DeskdexError:
        return None


def _may_name_shards(config_file: str) -> bool:
    """Whether the config may set ``shards`` (other indexes searched with this one), which the
    full command line reads. The word anywhere in the file, a comment included, says maybe: a
    false yes costs the full command line's start, never a wrong answer; parsing TOML here would
    cost every search that start."""
    try:
        with open(config_file, "rb") as f:
            return b"shards" in f.read()
    except OSError:
        return False


def _through_daemon(args: dict[str, Any]) -> int | None:
    """The exit code once the daemon's answer is printed, or None to run the full command."""
    from .client import call
    from .render import print_results

    path = socket_path(args["home"])
    if path is None:
        return None
    try:
        results = call(path, "search", query=" ".join(args["query"]), limit=args["limit"], offset=args["offset"],
                       sort=args["sort"], all=args["all"], snippets=not args["paths"], similar=args["similar"],
                       words=args["words"])
    except DaemonUnavailable:
        results = _without_daemon(args)
        if results is None:
            return None
    except DeskdexError:
        return None  # an error the full command line reports with all it knows
    try:
        print_results(results, as_json=args["json"], paths=args["paths"], null=args["null"],
                      folded=not (args["all"] or args["similar"]))
        sys.stdout.flush()
    except BrokenPipeError:  # `deskdex search x | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
