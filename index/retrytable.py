"""Transient failures in the catalog, tried again: a failed file whose failure may not happen
again (errors.TRANSIENT_REASONS) has a ``retry_at`` and counts its ``attempts`` (index/store.py)."""

from __future__ import annotations

import sqlite3
from typing import Callable, Iterable

from deskdex.paths import folder_of

from .sqlconn import begin


class RetryTable:
    def __init__(self, db: sqlite3.Connection, get_meta: Callable[[str], str | None],
                 set_meta: Callable[[str, str], None], has_column: Callable[[str], bool]) -> None:
        """``get_meta``/``set_meta``: the catalog's meta table; ``has_column``: whether the
        catalog has a column yet (an earlier deskdex's lacks ``retry_at`` until a writer adds it)."""
        self.db = db
        self._get_meta, self._set_meta, self._has_column = get_meta, set_meta, has_column

    def retry_all_if_changed(self, made_by: str, reasons: Iterable[str]) -> int:
        """When the files' failures were made by another deskdex or other limits than ``made_by``
        says (or nothing says), make every failure of one of ``reasons`` due now, its back-off
        started anew; remember ``made_by``. Returns how many were made due."""
        if self._get_meta("converted_by") == made_by:
            return 0
        reasons = sorted(reasons)
        begin(self.db)
        cur = self.db.execute(
            "UPDATE docs SET retry_at=0, attempts=0 WHERE status='failed' AND parent IS NULL AND source='files' "
            f"AND reason IN ({','.join('?' * len(reasons))})", reasons)
        self._set_meta("converted_by", made_by)
        return cur.rowcount

    def scheduled(self, under: Iterable[str] | None = None) -> list[tuple[str, str, float]]:
        """(uri, path, retry_at) of every failure to be tried again, of the files at or under the
        paths ``under`` (None: everywhere)."""
        rows: list[tuple[str, str, float]] = self.db.execute(
            "SELECT uri, path, retry_at FROM docs WHERE retry_at IS NOT NULL").fetchall()
        if under is None:
            return rows
        # Filtered here, not by a condition per folder: SQLite refuses one with thousands of
        # terms, and an enterprise server watches a home per account. The rows come from the
        # retry_at index (failures to try again are few).
        folders = {p.rstrip("/") or "/" for p in under}  # as folder_of looks them up: no trailing "/"
        return [r for r in rows if folder_of(r[1], folders) is not None]

    def retry_now(self, under: Iterable[str] | None = None, now: float = 0.0) -> int:
        """Make the failures to be tried again at or under ``under`` (None: all) due at ``now``."""
        begin(self.db)
        if under is None:
            return self.db.execute("UPDATE docs SET retry_at=? WHERE retry_at IS NOT NULL", (now,)).rowcount
        uris = [uri for uri, _, _ in self.scheduled(under)]
        self.db.executemany("UPDATE docs SET retry_at=? WHERE uri=?", ((now, uri) for uri in uris))
        return len(uris)

    def set_retry(self, uri: str, retry_at: float) -> None:
        begin(self.db)
        self.db.execute("UPDATE docs SET retry_at=? WHERE uri=? AND retry_at IS NOT NULL", (retry_at, uri))

    def summary(self) -> dict[str, object]:
        """How many failures are to be tried again, and when the first is due (quick: an index
        holds them, so a status asked every few seconds may ask each time)."""
        if not self._has_column("retry_at"):  # read before a writer of this version added it
            return {"retries": 0, "next_retry": None}
        n, first = self.db.execute("SELECT count(*), min(retry_at) FROM docs WHERE retry_at IS NOT NULL").fetchone()
        return {"retries": n, "next_retry": first}
