"""The type of what ``argparse.ArgumentParser.add_subparsers()`` returns, which argparse gives no
public name (its class is the private ``argparse._SubParsersAction``): modules that add their own
subcommands to the CLI (``deskdex crawl``, ``deskdex tray``) take it as this Protocol."""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class Subcommands(Protocol):
    """What adds a subcommand's parser: ``add_parser(name, help=..., parents=[...], ...)``."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...
