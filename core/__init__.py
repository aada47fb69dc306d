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

Nothing here is imported by ``import deskdex`` beyond this docstring: the ``deskdex`` command's
fast path (deskdex.clients.launch) must stay light.
"""

__version__ = "0.1.0"
