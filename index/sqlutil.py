"""SQLite helpers for the duplicate tables, which live in the caller's catalog connection."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Iterator

# The stored simhashes (doc -> fingerprint): made by DuplicateIndex, kept by neardup.StoredSimhashes.
DUP_SIMHASH = "CREATE TABLE IF NOT EXISTS dup_simhash(doc INTEGER PRIMARY KEY, fp INTEGER NOT NULL)"


def create(conn: sqlite3.Connection, script: str) -> None:
    """Run DDL one statement at a time: ``executescript`` would commit the caller's transaction."""
    for stmt in script.split(";"):
        if stmt.strip():
            conn.execute(stmt)


@contextmanager
def atomic(conn: sqlite3.Connection) -> Iterator[None]:
    """A SAVEPOINT: atomic on its own, nested inside the caller's transaction when there is one."""
    conn.execute("SAVEPOINT dup")
    try:
        yield
    except BaseException:
        # After some errors (a full disk) SQLite has rolled the whole transaction back already,
        # savepoint and all: rolling back again would fail and hide the error that counts.
        if conn.in_transaction:
            conn.execute("ROLLBACK TO dup")
            conn.execute("RELEASE dup")
        raise
    conn.execute("RELEASE dup")
