"""What ``deskdex status`` tells of an index: its documents and failures (of all, or of what one
account may read), the failures to try again, the last commit, the sizes on disk. Reads only."""

from __future__ import annotations

import json
import os

from .store import Catalog


class Stats:
    def __init__(self, catalog: Catalog, catalog_path: str, tantivy_dir: str) -> None:
        self.catalog = catalog
        self.db = catalog.db
        self._catalog_path = catalog_path
        self._tantivy_dir = tantivy_dir

    def counts(self) -> dict[str, object]:
        total = self.db.execute("SELECT count(*) FROM docs WHERE status='ok'").fetchone()[0]
        # A file a limit cut short (reason "partial", index/collection.py) is indexed and counted
        # with the failures too: what it left out failed.
        failed = dict(self.db.execute(
            "SELECT reason, count(*) FROM docs WHERE status='failed' OR reason='partial' GROUP BY reason").fetchall())
        texts, raw = self.db.execute("SELECT count(*), coalesce(sum(size),0) FROM texts").fetchone()
        return {"documents": total, "failed": sum(failed.values()), "failed_by_reason": failed,
                "texts": texts, "text_bytes": raw}

    def counts_for(self, uid: int) -> dict[str, object]:
        """``counts`` of the documents ``uid`` may read alone (enterprise mode: the rows' ``readers``,
        as the index's ``reader IN (uid, -1)`` filter reads them), without the store's totals."""
        readable = ("readers IS NOT NULL AND (json_extract(readers, '$.everyone') = 1 OR EXISTS "
                    "(SELECT 1 FROM json_each(readers, '$.uids') WHERE value = ?))")
        total = self.db.execute(f"SELECT count(*) FROM docs WHERE status='ok' AND {readable}", (uid,)).fetchone()[0]
        failed = dict(self.db.execute(
            f"SELECT reason, count(*) FROM docs WHERE (status='failed' OR reason='partial') AND {readable} "
            "GROUP BY reason", (uid,)).fetchall())
        return {"documents": total, "failed": sum(failed.values()), "failed_by_reason": failed}

    def retries(self) -> dict[str, object]:
        """How many failures are to be tried again, and when the first is due."""
        return self.catalog.retries.summary()

    def last_commit(self) -> str | None:
        """When the index was last committed (seconds since the epoch, as text), None if never:
        what a cache of the counts is keyed by."""
        return self.catalog.get_meta("last_commit")

    def has_readers(self, uris: list[str] | None = None) -> bool:
        """Whether any document (of ``uris``; None: of all) carries the accounts that may read it,
        which only an enterprise-mode daemon stamps."""
        if uris is None:
            return self.db.execute("SELECT 1 FROM docs WHERE readers IS NOT NULL LIMIT 1").fetchone() is not None
        return self.db.execute("SELECT 1 FROM docs WHERE uri IN (SELECT value FROM json_each(?)) "
                               "AND readers IS NOT NULL LIMIT 1", (json.dumps(uris),)).fetchone() is not None

    def sizes(self) -> dict[str, int]:
        def size(p: str) -> int:
            try:
                return os.path.getsize(p)
            except OSError:  # tantivy removed a temporary file between the listing and now
                return 0

        def du(p: str) -> int:
            if os.path.isfile(p):
                return size(p)
            return sum(size(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs)

        store = sum(du(self._catalog_path + s) for s in ("", "-wal", "-shm") if os.path.exists(self._catalog_path + s))
        return {"index_bytes": du(self._tantivy_dir), "store_bytes": store}
