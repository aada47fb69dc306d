"""A collection's transient failures, tried again (the catalog's retry table, index/retrytable.py):
their rows change, nothing tantivy holds, but a write is refused while the collection's last failed
write is not recovered, as any other (index/writeguard.py)."""

from __future__ import annotations

from typing import Iterable

from .retrytable import RetryTable
from .writeguard import WriteGuard, writes


class Retries:
    def __init__(self, table: RetryTable, guard: WriteGuard) -> None:
        self.table = table
        self.guard = guard

    @writes
    def retry_all_if_changed(self, made_by: str, reasons: Iterable[str]) -> int:
        """Every failure of one of ``reasons`` made due now when ``made_by`` (the deskdex and its
        limits) differs from what made the failures (RetryTable.retry_all_if_changed)."""
        return self.table.retry_all_if_changed(made_by, reasons)

    @writes
    def retry_now(self, under: Iterable[str] | None = None, now: float = 0.0) -> int:
        """Make the failures at or under ``under`` (None: all) due at ``now``."""
        return self.table.retry_now(under, now)

    @writes
    def set_retry(self, uri: str, retry_at: float) -> None:
        self.table.set_retry(uri, retry_at)

    def scheduled(self, under: Iterable[str] | None = None) -> list[tuple[str, str, float]]:
        """(uri, path, retry_at) of the failures to try again at or under ``under`` (None: all)."""
        return self.table.scheduled(under)
