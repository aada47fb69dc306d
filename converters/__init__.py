"""Turn files and byte strings of many formats into Documents (tagged text).

Public surface: ``Source``, ``Document``, ``convert`` (in this process), ``WorkerPool`` (in
isolated worker processes under limits), ``Limits``, ``Registry`` and the format table. Other
packages use the names of ``__all__`` alone, imported from here (tests/test_layout.py); those below
the first imports are taken from their modules on first use (core/lazy.py), so that importing the
package loads neither the worker pool nor the language model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deskdex import lazy

from .convert import Outcome, convert
from .document import BLOCK_KINDS, Block, Document, Inline
from .limits import PARTIAL, Limits, OcrOptions
from .registry import FORMATS_BASE, Format, Member, Registry, default_registry
from .source import Source, check_regular, open_regular, special_kind, unreadable, uri_to_path

if TYPE_CHECKING:
    from . import language, tagged
    from .detect import compound_extension, extension
    from .html import parse as parse_html
    from .isolation import Wakeup, WorkerPool, fork_server_idle, lower_priority, release_fork_server
    from .language import CODES as LANGUAGE_CODES
    from .ocr import state as ocr_state
    from .ocr import unavailable as ocr_unavailable
    from .privilege import NOBODY, RunAs, as_user
    from .textcodec import decode as decode_text

__getattr__ = lazy.names(__name__, {
    "compound_extension": ".detect", "extension": ".detect",
    "parse_html": ".html:parse",
    "Wakeup": ".isolation", "WorkerPool": ".isolation", "fork_server_idle": ".isolation",
    "lower_priority": ".isolation", "release_fork_server": ".isolation",
    "LANGUAGE_CODES": ".language:CODES",
    "ocr_state": ".ocr:state", "ocr_unavailable": ".ocr:unavailable",
    "NOBODY": ".privilege", "RunAs": ".privilege", "as_user": ".privilege",
    "decode_text": ".textcodec:decode",
})

# language and tagged: modules of their own (a document's language; the tagged text's reader and writer).
__all__ = [
    "BLOCK_KINDS", "Block", "Document", "FORMATS_BASE", "Format", "Inline", "LANGUAGE_CODES", "Limits", "Member",
    "NOBODY", "OcrOptions", "Outcome", "PARTIAL", "Registry", "RunAs", "Source", "Wakeup", "WorkerPool", "as_user",
    "check_regular", "compound_extension", "convert", "decode_text", "default_registry", "extension",
    "fork_server_idle", "language", "lower_priority", "ocr_state", "ocr_unavailable", "open_regular", "parse_html",
    "release_fork_server", "special_kind", "tagged", "unreadable", "uri_to_path",
]
