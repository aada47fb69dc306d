"""The catalog, the text store and the tantivy index, kept consistent: what ``index/`` offers.

One writer per home at a time: ``Collection.open(..., writable=True)`` takes an exclusive lock
file and fails at once with IndexBusy if another process holds it. Readers never lock.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
from typing import Iterator

import tantivy

from converters import tagged
from converters.document import Document
from converters.errors import IndexBusy, IndexMissing, StoreError

from . import fulltext
from .checksums import bytes_checksum, text_checksum
from .store import Catalog, Row

logger = logging.getLogger(__name__)

CATALOG = "catalog.sqlite"
TANTIVY = "tantivy"
LOCK = "writer.lock"


class Collection:
    def __init__(self, data_dir: str, writable: bool) -> None:
        self.data_dir = data_dir
        self.writable = writable
        self._lock_fd: int | None = None
        self._writer: tantivy.IndexWriter | None = None
        self._dirty = 0
        if writable:
            os.makedirs(data_dir, mode=0o700, exist_ok=True)
            self._lock()
        elif not os.path.exists(os.path.join(data_dir, CATALOG)):
            raise IndexMissing(f"nothing indexed yet under {data_dir}: run `deskdex index PATH` first")
        self.catalog = Catalog(os.path.join(data_dir, CATALOG), writable)
        tantivy_dir = os.path.join(data_dir, TANTIVY)
        stale = self.catalog.get_meta("schema") != fulltext.SCHEMA_VERSION and os.path.isdir(tantivy_dir)
        if stale and not writable:
            raise StoreError("the index was made by another version of deskdex: run `deskdex index` or the "
                             "daemon once to rebuild it (nothing is converted again)")
        if stale:
            shutil.rmtree(tantivy_dir, ignore_errors=True)
        self.index = fulltext.open_index(tantivy_dir, create=writable)
        if writable:
            self._writer = fulltext.open_writer(self.index)
            if stale:
                logger.warning("rebuilding the search index from the catalog (new schema)")
                self.rebuild()
            self.catalog.set_meta("schema", fulltext.SCHEMA_VERSION)
            self.catalog.commit()
            self._replay_pending()

    @classmethod
    def open(cls, data_dir: str, writable: bool = False) -> "Collection":
        return cls(data_dir, writable)

    def _lock(self) -> None:
        fd = os.open(os.path.join(self.data_dir, LOCK), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise IndexBusy(f"another deskdex process (pid {holder}) is writing to {self.data_dir}; "
                            "wait for it to finish or stop it") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def close(self) -> None:
        if self._writer is not None:
            self.commit()
            self._writer = None
        self.catalog.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "Collection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------
    def get(self, uri: str) -> Row | None:
        return self.catalog.get(uri)

    def document(self, row: Row) -> Document | None:
        data = self.catalog.get_text(row.blob) if row.blob else None
        if data is None:
            return None
        doc = tagged.loads(data)
        doc.uri = row.uri
        return doc

    def tagged_text(self, row: Row) -> str | None:
        data = self.catalog.get_text(row.blob) if row.blob else None
        if data is None:
            return None
        text = data.decode("utf-8")
        return text.replace('<doc uri=""', f'<doc uri="{_attr(row.uri)}"', 1)

    # -- writing -----------------------------------------------------------------------------
    def put(self, row: Row, doc: Document | None) -> None:
        """Store a converted document (or, with ``doc`` None, a name-only or failed entry)."""
        assert self._writer is not None, "collection opened read-only"
        if doc is not None:
            # The stored text leaves the URI out, so identical files share one stored text.
            uri, doc.uri = doc.uri, ""
            data = tagged.dumps(doc).encode("utf-8")
            doc.uri = uri
            row.blob = bytes_checksum(data)
            row.text_sum = text_checksum(doc.body_text() + "\n" + doc.body_text(boilerplate=True))
            row.title = doc.title
            row.mime = doc.mime
            self.catalog.put_text(row.blob, data)
        self.catalog.put(row)
        self._index(row, doc)

    def reuse(self, row: Row, same: Row) -> None:
        """Store ``row`` with the text of ``same`` (identical bytes): no conversion."""
        row.blob, row.text_sum, row.title, row.mime = same.blob, same.text_sum, same.title, same.mime
        self.catalog.put(row)
        self._index(row, self.document(row))

    def move(self, old_uri: str, new_uri: str, new_path: str) -> int:
        """Give a document (and its members) a new URI and path, keeping its stored text."""
        row = self.catalog.get(old_uri)
        if row is None:
            return 0
        moved = [(row, new_uri)] + [
            (r, new_uri + r.uri[len(old_uri):]) for u in self.catalog.descendants(old_uri)
            if (r := self.catalog.get(u)) is not None
        ]
        self.delete(old_uri)
        for r, uri in moved:
            if r.parent is not None:
                r.parent = new_uri + r.parent[len(old_uri):]
            r.uri, r.path = uri, new_path
            self.catalog.put(r)
            self._index(r, self.document(r) if r.status == "ok" else None)
        return len(moved)

    def delete(self, uri: str) -> int:
        assert self._writer is not None
        gone = self.catalog.delete(uri)
        for u in gone:
            self._writer.delete_documents_by_term("uri", u)
        self._dirty += len(gone)
        return len(gone)

    def _index(self, row: Row, doc: Document | None) -> None:
        assert self._writer is not None
        self._writer.delete_documents_by_term("uri", row.uri)
        self._writer.add_document(fulltext.to_fields(row, doc))
        self._dirty += 1

    @property
    def dirty(self) -> int:
        return self._dirty

    def commit(self) -> None:
        """Make everything written so far durable and searchable, catalog first."""
        assert self._writer is not None
        pending = self.catalog.pending()
        self.catalog.set_meta("last_commit", str(time.time()))
        self.catalog.commit()
        self._writer.commit()
        self.catalog.clear_pending(pending)
        self.catalog.commit()
        self._dirty = 0

    def collect_garbage(self) -> int:
        n = self.catalog.collect_garbage()
        self.catalog.commit()
        return n

    def _replay_pending(self) -> None:
        """Bring tantivy in line with the catalog for URIs a crash left half-done."""
        pending = self.catalog.pending()
        if not pending:
            return
        logger.info("repairing %d index entries left by an interrupted run", len(pending))
        assert self._writer is not None
        for uri in pending:
            self._writer.delete_documents_by_term("uri", uri)
            row = self.catalog.get(uri)
            if row is not None:
                self._writer.add_document(fulltext.to_fields(row, self.document(row) if row.status == "ok" else None))
        self._writer.commit()
        self.catalog.clear_pending(pending)
        self.catalog.commit()

    def rebuild(self) -> int:
        """Re-create the tantivy index from the catalog and store, converting nothing."""
        assert self._writer is not None
        self._writer.delete_all_documents()
        n = 0
        for row in self.catalog.rows():
            self._writer.add_document(fulltext.to_fields(row, self.document(row) if row.status == "ok" else None))
            n += 1
        self._writer.commit()
        return n

    def files_under(self, folder: str) -> Iterator[tuple[str, str, int, float]]:
        return self.catalog.files_under(folder)

    # -- sizes -------------------------------------------------------------------------------
    def sizes(self) -> dict[str, int]:
        def du(p: str) -> int:
            if os.path.isfile(p):
                return os.path.getsize(p)
            return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs)

        store = sum(du(os.path.join(self.data_dir, CATALOG + s)) for s in ("", "-wal", "-shm")
                    if os.path.exists(os.path.join(self.data_dir, CATALOG + s)))
        return {"index_bytes": du(os.path.join(self.data_dir, TANTIVY)), "store_bytes": store}


def _attr(s: str) -> str:
    from xml.sax.saxutils import escape

    return escape(s, {'"': "&quot;"})
