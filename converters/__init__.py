"""Turn files and byte strings of many formats into Documents (tagged text).

Public surface: ``Source``, ``Document``, ``convert`` (in this process), ``WorkerPool`` (in
isolated worker processes under limits), ``Limits``, ``Registry`` and the format table.
"""

from __future__ import annotations

from .convert import Outcome, convert
from .document import Block, Document, Inline
from .limits import Limits
from .registry import FORMATS_BASE, Format, Member, Registry, default_registry
from .source import Source, check_regular, display_path, open_regular, path_to_uri, unreadable, uri_to_path

__all__ = [
    "Block", "Document", "FORMATS_BASE", "Format", "Inline", "Limits", "Member", "Outcome",
    "Registry", "Source", "check_regular", "convert", "default_registry", "display_path", "open_regular", "path_to_uri",
    "unreadable", "uri_to_path",
]
