"""deskdex: a quiet desktop and enterprise search indexer.

One import package, installed from the folders at the repository root (pyproject.toml maps them):

    deskdex             core/         errors, paths, settings and the socket protocol: what every part shares
    deskdex.converters  converters/   files and bytes of many formats to Documents (tagged text)
    deskdex.index       index/        the catalog, text store, duplicate tables and tantivy index
    deskdex.pipeline    pipeline/     scan, watch, ignore rules and the Indexer that feeds the index
    deskdex.daemon      daemon/       the long-running process: main loop, socket server and its ops
    deskdex.clients     clients/      the command line, the tray, the socket client and rendering
    deskdex.webcrawl    webcrawl/     the polite web crawler
    deskdex.packaging   packaging/    service units, autostart entries (package data)

Its own names are the Python API for scripts (docs/python-api.md)::

    import deskdex

    for hit in deskdex.search("budget type:sheet", limit=20):
        print(hit.path, hit.title)

``search``, ``document``, ``similar``, ``duplicates``, ``status`` and their answers' types, defined
in deskdex.clients.api and taken from there on first use (PEP 562, core/lazy.py): ``import deskdex``
itself loads nothing but the small lazy.py, as the ``deskdex`` command's fast path
(deskdex.clients.launch) imports it and must stay light.
"""

from . import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:  # what mypy reads; the one import of the core from a layer below (tests/test_layout.py)
    from deskdex.clients import (Block, Document, Duplicate, Hit, Results, Status, document, duplicates, search,
                                 similar, status)

__version__ = "0.1.0"
__all__ = ["Block", "Document", "Duplicate", "Hit", "Results", "Status", "document", "duplicates", "search",
           "similar", "status"]
__getattr__ = lazy.names(__name__, dict.fromkeys(__all__, ".clients"))
