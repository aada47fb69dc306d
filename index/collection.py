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
from typing import TYPE_CHECKING, Iterator

import tantivy

from deskdex.converters import tagged
from deskdex.converters.document import Document
from deskdex.errors import IndexBusy, IndexMissing, StoreError

from . import fulltext
from .checksums import bytes_checksum, text_checksum
from .duplicates import DEFAULT_K, DEFAULT_MIN_SIMILARITY, DuplicateIndex, Features
from .store import Catalog, Row

if TYPE_CHECKING:
    from deskdex.settings import Config

logger = logging.getLogger(__name__)

CATALOG = "catalog.sqlite"
TANTIVY = "tantivy"
LOCK = "writer.lock"


class Collection:
    def __init__(self, data_dir: str, writable: bool, dup_k: int | None = None,
                 dup_min_similarity: float | None = None) -> None:
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
        self._tantivy_dir = tantivy_dir
        self._tantivy: tantivy.Index | None = fulltext.open_index(tantivy_dir, create=writable)
        if writable:
            self._writer = fulltext.open_writer(self.index)
            if stale:
                logger.warning("rebuilding the search index from the catalog (new schema)")
                self.rebuild()
            self.catalog.set_meta("schema", fulltext.SCHEMA_VERSION)
            self.catalog.commit()
            self._replay_pending()
            self.catalog.begin()
            self.dups = DuplicateIndex(self.catalog.db, dup_k or DEFAULT_K,
                                       dup_min_similarity if dup_min_similarity is not None else DEFAULT_MIN_SIMILARITY)
            if self.dups.rebuilt.docs:  # new thresholds: every cluster id may have moved
                self._recluster(set(self.dups.rebuilt.docs))
            self.commit()

    @classmethod
    def open(cls, data_dir: str, writable: bool = False, dup_k: int | None = None,
             dup_min_similarity: float | None = None) -> "Collection":
        return cls(data_dir, writable, dup_k, dup_min_similarity)

    @classmethod
    def from_settings(cls, cfg: Config, writable: bool = False) -> Collection:
        """The collection of ``cfg``'s home, with its duplicate thresholds."""
        return cls(cfg.home.data_dir, writable, dup_k=int(cfg["dup_k"]),
                   dup_min_similarity=float(cfg["dup_min_similarity"]))

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

    @property
    def index(self) -> tantivy.Index:
        if self._tantivy is None:
            self._tantivy = fulltext.open_index(self._tantivy_dir, create=False)
        return self._tantivy

    @property
    def writer(self) -> tantivy.IndexWriter:
        assert self.writable, "collection opened read-only"
        if self._writer is None:
            self._writer = fulltext.open_writer(self.index)
        return self._writer

    def suspend(self) -> None:
        """Commit and let go of tantivy's objects, opened again on the next use. An open tantivy
        index keeps threads (one polls meta.json twice a second) and caches: an idle daemon needs
        neither. The catalog and the writer lock stay, so no other writer slips in."""
        if self._writer is not None:
            self.commit()
            self._writer = None
        self._tantivy = None

    @property
    def suspended(self) -> bool:
        return self._tantivy is None

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
    def put(self, row: Row, doc: Document | None, feats: Features | None = None) -> None:
        """Store a converted document (or, with ``doc`` None, a name-only or failed entry).
        ``feats``: its duplicate-detection features when computed already (in a worker)."""
        assert self.writable, "collection opened read-only"
        if doc is not None:
            # The stored text leaves the URI out, so identical files share one stored text.
            uri, doc.uri = doc.uri, ""
            data = tagged.dumps(doc).encode("utf-8")
            doc.uri = uri
            row.blob = bytes_checksum(data)
            row.text_sum = feats.group if feats is not None and feats.group else \
                text_checksum(doc.body_text() + "\n" + doc.body_text(boilerplate=True))
            row.title = doc.title
            row.mime = doc.mime
            self.catalog.put_text(row.blob, data)
        self._store(row, doc, feats)

    def _store(self, row: Row, doc: Document | None, feats: Features | None = None) -> None:
        """Catalog row, duplicate clusters and tantivy entry for one document."""
        self.catalog.put(row)
        doc_id = self.catalog.doc_id(row.uri)
        touched = {doc_id}
        before = {c for c in (self.dups.cluster_of(doc_id),) if c is not None}
        if doc is not None and row.status == "ok":
            changes = self.dups.add(doc_id, doc.body_text(), doc.body_text(boilerplate=True), text_sum=row.text_sum,
                                    feats=feats)
        else:
            changes = self.dups.remove(doc_id)
        row.cluster = self._cluster_value(doc_id)
        self.catalog.set_cluster(doc_id, row.cluster)
        self._index(row, doc)
        self._recluster(set(changes.docs) | touched, before, skip=doc_id)

    def reuse(self, row: Row, same: Row) -> None:
        """Store ``row`` with the text of ``same`` (identical bytes): no conversion."""
        row.blob, row.text_sum, row.title, row.mime = same.blob, same.text_sum, same.title, same.mime
        self._store(row, self.document(row))

    def move(self, old_uri: str, new_uri: str, new_path: str) -> int:
        """Give a document (and its members) a new URI and path, keeping its stored text."""
        row = self.catalog.get(old_uri)
        if row is None:
            return 0
        # The moved rows get new ids: their duplicate entries follow through delete and _store.
        moved = [(row, new_uri)] + [
            (r, new_uri + r.uri[len(old_uri):]) for u in self.catalog.descendants(old_uri)
            if (r := self.catalog.get(u)) is not None
        ]
        self.delete(old_uri)
        for r, uri in moved:
            if r.parent is not None:
                r.parent = new_uri + r.parent[len(old_uri):]
            r.uri, r.path = uri, new_path
            self._store(r, self.document(r) if r.status == "ok" else None)
        return len(moved)

    def delete(self, uri: str) -> int:
        assert self.writable
        ids = [i for u in [uri] + self.catalog.descendants(uri) if (i := self.catalog.doc_id(u)) is not None]
        before = {c for i in ids if (c := self.dups.cluster_of(i)) is not None}
        changed: set[int] = set()
        for i in ids:
            changed |= self.dups.remove(i).docs
        gone = self.catalog.delete(uri)
        for u in gone:
            self.writer.delete_documents_by_term("uri", u)
        self._dirty += len(gone)
        self._recluster(changed - set(ids), before)
        return len(gone)

    # -- duplicate clusters -----------------------------------------------------------------
    def _cluster_value(self, doc_id: int) -> int | None:
        """The cluster id a document carries: its cluster's, when that holds two or more documents."""
        c = self.dups.cluster_of(doc_id)
        return c if c is not None and len(self.dups.clusters_.members(c)) > 1 else None

    def _recluster(self, docs: set[int], clusters_before: set[int] = frozenset(), skip: int | None = None) -> None:
        """Bring the cluster id of ``docs`` (and of every member of their clusters, before and
        after) up to date in the catalog and in tantivy."""
        check = set(docs)
        for c in set(clusters_before) | {c for d in docs if (c := self.dups.cluster_of(d)) is not None}:
            check.update(self.dups.clusters_.members(c))
        check.discard(skip)  # type: ignore[arg-type]
        for d in check:
            row = self.catalog.row_by_id(d)
            if row is None:
                continue
            value = self._cluster_value(d)
            if row.cluster != value:
                row.cluster = value
                self.catalog.set_cluster(d, value)
                self.catalog.mark_pending(row.uri)
                self._index(row, self.document(row) if row.status == "ok" else None)

    def near(self, doc: Document) -> list[tuple[Row, float]]:
        """The stored exact and near-duplicates of ``doc`` (which need not be stored itself) with
        their similarity, most similar first. Works on a read-only collection too."""
        dups = self.dups if self.writable else DuplicateIndex.read_only(self.catalog.db)
        if dups is None:
            return []
        return [(row, similarity) for doc_id, similarity in dups.near(doc.body_text(), doc.body_text(boilerplate=True))
                if (row := self.catalog.row_by_id(doc_id)) is not None]

    def duplicates_of(self, row: Row) -> list[Row]:
        """The other documents of a row's cluster."""
        if row.cluster is None:
            return []
        return [r for r in self.catalog.rows("cluster=?", (row.cluster,)) if r.uri != row.uri]

    def _index(self, row: Row, doc: Document | None) -> None:
        assert self.writable
        self.writer.delete_documents_by_term("uri", row.uri)
        self.writer.add_document(fulltext.to_fields(row, doc))
        self._dirty += 1

    @property
    def dirty(self) -> int:
        return self._dirty

    def commit(self) -> None:
        """Make everything written so far durable and searchable, catalog first."""
        assert self.writable
        pending = self.catalog.pending()
        if self._writer is None and not pending:
            self.catalog.commit()  # nothing for tantivy: do not wake it up
            return
        self.catalog.set_meta("last_commit", str(time.time()))
        self.catalog.commit()
        self.writer.commit()
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
        assert self.writable
        for uri in pending:
            self.writer.delete_documents_by_term("uri", uri)
            row = self.catalog.get(uri)
            if row is not None:
                self.writer.add_document(fulltext.to_fields(row, self.document(row) if row.status == "ok" else None))
        self.writer.commit()
        self.catalog.clear_pending(pending)
        self.catalog.commit()

    def rebuild(self) -> int:
        """Re-create the tantivy index from the catalog and store, converting nothing."""
        assert self.writable
        self.writer.delete_all_documents()
        n = 0
        for row in self.catalog.rows():
            self.writer.add_document(fulltext.to_fields(row, self.document(row) if row.status == "ok" else None))
            n += 1
        self.writer.commit()
        return n

    def files_under(self, folder: str) -> Iterator[tuple[str, str, int, float]]:
        return self.catalog.files_under(folder)

    # -- sizes -------------------------------------------------------------------------------
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

        store = sum(du(os.path.join(self.data_dir, CATALOG + s)) for s in ("", "-wal", "-shm")
                    if os.path.exists(os.path.join(self.data_dir, CATALOG + s)))
        return {"index_bytes": du(os.path.join(self.data_dir, TANTIVY)), "store_bytes": store}


def _attr(s: str) -> str:
    from xml.sax.saxutils import escape

    return escape(s, {'"': "&quot;"})
