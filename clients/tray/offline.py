"""The search window's ops answered from the home's index when no daemon answers, as ``deskdex search``
does without one (clients/launch.py, clients/reading.py): the index is on disk, so a stopped daemon
need not stop anyone from searching it.

Only what reads is answered here (``search``, ``duplicates`` to expand a hit, ``document`` for the
preview); everything that changes the daemon's work (pause, watch_add…) still needs the daemon, and
says so. The index is opened for each call, read-only, in the caller's worker thread: it may change under a daemon that comes back,
and a search through the daemon is tried first every time. Each answer carries ``FROM_INDEX``, which
the window shows."""

from __future__ import annotations

import logging
import os
from typing import Any

from deskdex.errors import DaemonUnavailable

logger = logging.getLogger(__name__)

OPS = frozenset({"search", "duplicates", "document"})
FROM_INDEX = "from_index"  # True in an answer read from the index, not from the daemon


class IndexReader:
    """Reads the index in ``data_dir`` (a home's data folder) for the ops in ``OPS``."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir

    def answers(self, op: str) -> bool:
        return op in OPS

    def call(self, op: str, args: dict[str, Any], unavailable: DaemonUnavailable) -> dict[str, Any]:
        """The answer to ``op`` read from the index. ``unavailable`` (why the daemon did not answer)
        is raised again where there is no index to read; an error of the index or of the query is
        raised as its deskdex.errors exception, as the daemon would answer it."""
        if not os.path.exists(os.path.join(self.data_dir, "catalog.sqlite")):
            raise unavailable
        from deskdex.index import Collection, document, search

        with Collection.open(self.data_dir) as coll:
            if op == "search":
                result: dict[str, Any] = dict(search(
                    coll, args["query"], limit=args.get("limit", 10), offset=args.get("offset", 0),
                    sort=args.get("sort", "relevance"), snippets=args.get("snippets", True),
                    collapse=not args.get("all", False), similar=args.get("similar"),
                    facets=args.get("facets", False), words=args.get("words", False)))
            elif op == "document":
                result = dict(document(coll, args["uri"], query=args.get("query", ""), text=args.get("text", True),
                                       max_blocks=args.get("max_blocks", 20_000)))
            elif op == "duplicates":
                row = coll.get(args["uri"])
                others = coll.duplicates_of(row) if row is not None else []
                result = {"paths": [r.uri if "#" in r.uri else r.path for r in others]}
            else:
                raise unavailable
        logger.debug("%s read from the index in %s: no daemon answers", op, self.data_dir)
        result[FROM_INDEX] = True
        return result
