"""The catalog's SQLite connection, whose every error arrives translated into deskdex.errors
(index/storeerrors.py): a full disk is DiskFull, a lock held by another program StoreLocked, and
so on; and the transaction helpers the catalog's tables share."""

from __future__ import annotations

import functools
import os
import sqlite3
from typing import Any, Callable, Concatenate, Iterable, ParamSpec, TypeVar

from .storeerrors import from_sqlite, translated

# How long a write waits for a lock another program holds on the catalog before giving up with
# StoreLocked. Short: the daemon's main thread waits here and must still stop on SIGTERM within
# seconds; it waits out a longer hold itself, with back-off (daemon/loop.py).
WRITER_WAIT = 2.0

P = ParamSpec("P")
R = TypeVar("R")


def _translating(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A method of sqlite3's Connection or Cursor whose errors come out as deskdex's. A try
    rather than ``translated()``: it runs for every row read."""

    @functools.wraps(method)
    def call(self: Connection | Cursor, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            error = from_sqlite(exc, self.store_path)
            if error is None:
                raise
            raise error from exc

    return call


class Connection(sqlite3.Connection):
    """The catalog's connection: what it executes, and the cursors that returns, raise
    StoreErrors. (sqlite3's own ``execute`` makes a plain cursor: ours make a ``Cursor``.)"""

    store_path = ""

    @_translating
    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor(Cursor).execute(sql, parameters)
        return cursor

    @_translating
    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor(Cursor).executemany(sql, parameters)
        return cursor

    @_translating
    def executescript(self, script: str, /) -> sqlite3.Cursor:
        cursor: sqlite3.Cursor = self.cursor(Cursor).executescript(script)
        return cursor


class Cursor(sqlite3.Cursor):
    @property
    def store_path(self) -> str:
        return self.connection.store_path  # type: ignore[attr-defined, no-any-return]

    execute = _translating(sqlite3.Cursor.execute)
    executemany = _translating(sqlite3.Cursor.executemany)
    executescript = _translating(sqlite3.Cursor.executescript)
    fetchone = _translating(sqlite3.Cursor.fetchone)
    fetchmany = _translating(sqlite3.Cursor.fetchmany)
    fetchall = _translating(sqlite3.Cursor.fetchall)
    __next__ = _translating(sqlite3.Cursor.__next__)


def connect(path: str, read_only: bool = False) -> Connection:
    """A connection to the catalog at ``path``; opening it may fail with a StoreError too."""
    with translated(path):
        if read_only:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False, timeout=30,
                                 factory=Connection)
        else:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=WRITER_WAIT,
                                 factory=Connection)
    db.store_path = path
    return db


# SQLite's own word on whether a transaction is open: after some errors (a full disk) it has
# rolled the transaction back itself.
def begin(db: sqlite3.Connection) -> None:
    """Begin the writer's transaction unless one is open: every write of the catalog's tables
    joins the one the next commit ends."""
    if not db.in_transaction:
        db.execute("BEGIN IMMEDIATE")
