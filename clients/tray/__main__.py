"""``python -m deskdex.clients.tray [--home DIR] [--install-autostart]``: the tray without going through deskdex.clients.cli."""

from __future__ import annotations

import argparse
import logging
import sys

from . import add_command


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", metavar="DIR", default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="deskdex")
    add_command(parser.add_subparsers(dest="command", required=True), common)
    args = parser.parse_args(["tray", *(sys.argv[1:] if argv is None else argv)])
    logging.basicConfig(level=logging.WARNING, format="deskdex: %(message)s")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
