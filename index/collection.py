"""The catalog, the text store and the tantivy index, kept consistent: what ``index/`` offers.

One writer per home at a time: ``Collection.open(..., writable=True)`` takes an exclusive lock
file and fails at once with IndexBusy if another process holds it. Readers never lock.

A write that fails with a StoreError (a full disk, a lock another program holds, a read-only
file system) may leave the catalog and tantivy out of step: the collection then refuses every
write with the same error until ``recover()``, which drops what neither committed and replays
the ``pending`` journal (index/store.py) into tantivy. What was committed to the catalog is
never lost; what was not is still on disk for the caller to index again.

A Collection holds the parts with a job of their own: the writer's lock (index/writerlock.py), the
failed write that stops the others (index/writeguard.py), the cluster ids documents carry
(index/clustering.py), the failures tried again (``retries``, index/retries.py) and what ``status``
tells (``stats``, index/stats.py); its catalog holds the text store and the retry table (index/store.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import TYPE_CHECKING, Iterator

import tantivy

from deskdex.converters import PARTIAL, Document, compound_extension, extension
from deskdex.errors import CorruptFile, IndexMissing, StoreError, StoreUnwritable

from . import fulltext, meaning
from .checksums import bytes_checksum, text_checksum
from .clustering import ClusterUpkeep
from .retries import Retries
from .stats import Stats
from .store import Catalog, Row
from .storeerrors import translated
from .writeguard import WriteGuard
from .writeguard import writes as _writes
from .writerlock import WriterLock

if TYPE_CHECKING:
    import threading

    from deskdex.settings import Config

    from .features import Features
    from .webpages import WebPages

# Imported where used: duplicates (numpy) and tagged text (lxml) by writers and `document()`
# alone; a search without a daemon loads neither (docs/search.md, "How fast").

logger = logging.getLogger(__name__)

CATALOG = "catalog.sqlite"
TANTIVY = "tantivy"

class Collection:
    def __init__(self, data_dir: str, writable: bool, dup_k: int | None = None,
                 dup_min_similarity: float | None = None, unwritable_ok: bool = False) -> None:
        """``unwritable_ok`` (writable only): a store that cannot be written now (StoreUnwritable)
        does not fail the open; the collection starts failed, and ``recover()`` finishes opening it."""
        self.data_dir = data_dir
        self.writable = writable
        self._dup_params = (dup_k, dup_min_similarity)
        self._lock = WriterLock(data_dir)
        self._tantivy_dir = os.path.join(data_dir, TANTIVY)
        self._tantivy: tantivy.Index | None = None
        self._writer: fulltext.Writer | None = None
        self._dirty = 0
        self.guard = WriteGuard()  # a failed write, until recover()
        self._opened = False  # _open() went through
        self.meaning: meaning.Model | None = None  # with it, every stored text's passages are embedded
        if writable:
            with translated(data_dir):
                os.makedirs(data_dir, mode=0o700, exist_ok=True)
            self._lock.acquire()
        elif not os.path.exists(os.path.join(data_dir, CATALOG)):
            raise IndexMissing(f"nothing indexed yet under {data_dir}: run `deskdex index PATH` first")
        try:
            self.catalog = Catalog(os.path.join(data_dir, CATALOG), writable)
        except BaseException:
            self._lock.release()
            raise
        self.retries = Retries(self.catalog.retries, self.guard)  # failures tried again
        self.stats = Stats(self.catalog, os.path.join(data_dir, CATALOG), self._tantivy_dir)
        try:
            self._open()
        except StoreUnwritable as exc:
            if not (writable and unwritable_ok):
                self._close_stores()
                raise
            logger.warning("the index cannot be written for now: %s", exc)
            self.guard.fail(exc)
        except BaseException:
            self._close_stores()
            raise

    def _open(self) -> None:
        """tantivy's side, and (writable) what a crash left half-done repaired."""
        writable = self.writable
        tantivy_dir = self._tantivy_dir
        stale = self.catalog.get_meta("schema") != fulltext.SCHEMA_VERSION and os.path.isdir(tantivy_dir)
        if stale and not writable:
            raise StoreError("the index was made by another version of deskdex: run `deskdex index` or the "
                             "daemon once to rebuild it (nothing is converted again)")
        if stale:
            shutil.rmtree(tantivy_dir, ignore_errors=True)
        self._tantivy = fulltext.open_index(tantivy_dir, create=writable)
        if writable:
            self._writer = fulltext.Writer(self.index, tantivy_dir)
            if stale:
                logger.warning("rebuilding the search index from the catalog (new schema)")
                self.rebuild()
            self.catalog.set_meta("schema", fulltext.SCHEMA_VERSION)
            self.catalog.commit()
            self._replay_pending()
            # New thresholds rewrite the duplicate tables inside one savepoint: its journal, as
            # big as the tables, goes to a file, not to memory.
            self.catalog.journal_in_memory(False)
            self.catalog.begin()
            from .duplicates import DEFAULT_K, DEFAULT_MIN_SIMILARITY, DuplicateIndex

            dup_k, dup_min_similarity = self._dup_params
            self.dups = DuplicateIndex(self.catalog.db, dup_k or DEFAULT_K,
                                       dup_min_similarity if dup_min_similarity is not None else DEFAULT_MIN_SIMILARITY)
            self._clusters = ClusterUpkeep(self.catalog, self.dups, self.document, self._index)
            if self.dups.rebuilt.docs:  # new thresholds: every cluster id may have moved
                self._clusters.recluster(set(self.dups.rebuilt.docs))
            self.commit()
            self.catalog.journal_in_memory(True)
        self._opened = True

    @classmethod
    def open(cls, data_dir: str, writable: bool = False, dup_k: int | None = None,
             dup_min_similarity: float | None = None) -> "Collection":
        return cls(data_dir, writable, dup_k, dup_min_similarity)

    @classmethod
    def from_settings(cls, cfg: Config, writable: bool = False, unwritable_ok: bool = False) -> Collection:
        """The collection of ``cfg``'s home, with its duplicate thresholds; a writer embeds passages
        with the setting ``meaning`` on (index/meaning.py), and drops every vector with it off."""
        # Loaded first: a model file that is missing or damaged is one clear error at start.
        model = meaning.model() if writable and cfg.settings.meaning else None
        coll = cls(cfg.home.data_dir, writable, dup_k=cfg.settings.dup_k,
                   dup_min_similarity=cfg.settings.dup_min_similarity, unwritable_ok=unwritable_ok)
        if writable and not coll.failed:
            if model is not None:
                meaning.create(coll.catalog.db)
            else:
                meaning.drop_all(coll.catalog.db)
            coll.meaning = model
        return coll

    @property
    def index(self) -> tantivy.Index:
        if self._tantivy is None:
            self._tantivy = fulltext.open_index(self._tantivy_dir, create=False)
        return self._tantivy

    @property
    def writer(self) -> fulltext.Writer:
        assert self.writable, "collection opened read-only"
        if self._writer is None:
            self._writer = fulltext.Writer(self.index, self._tantivy_dir)
        return self._writer

    @_writes
    def suspend(self) -> None:
        """Commit and let go of tantivy's objects, opened again on the next use. An open tantivy
        index keeps threads (one polls meta.json twice a second) and caches: an idle daemon needs
        neither. The catalog and the writer lock stay, so no other writer slips in."""
        if self._writer is not None:
            self.commit()
            self._writer = None
        self._tantivy = None
        self.catalog.release_memory()
        if self.meaning is not None:
            self.meaning.release_memory()

    @property
    def suspended(self) -> bool:
        return self._tantivy is None

    def close(self) -> None:
        """Commit and close; a failed collection (or a commit that fails now) keeps only what was
        committed before, and the journal repairs tantivy on the next open."""
        try:
            if self._writer is not None and not self.guard.failed:
                self.commit()
                self._writer = None
        finally:
            self._close_stores()

    def _close_stores(self) -> None:
        self._discard_writer()
        self._tantivy = None
        self.catalog.close()  # rolls back what is not committed
        self._lock.release()

    @property
    def failed(self) -> bool:
        """A write failed and ``recover()`` has not succeeded since."""
        return self.guard.failed

    def recover(self) -> None:
        """After a failed write: drop what was not committed, on both sides; open tantivy's writer
        again and replay the pending journal into it; then commit both, which shows they can be
        written. Raises the StoreError of a condition that still holds: try again later."""
        assert self.writable
        self.guard.clear()
        try:
            self.catalog.rollback()
            if self._opened:
                self.dups.forget()  # its simhashes in memory held what was rolled back
            self._discard_writer()
            self._tantivy = None  # opened again, with tantivy's view of its files as they are now
            if not self._opened:
                self._open()  # it failed while opening: finish that
                return
            self._writer = fulltext.Writer(self.index, self._tantivy_dir)
            self._replay_pending()
            self.commit()
        except StoreError as exc:
            self.guard.fail(exc)
            raise

    def _discard_writer(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            try:
                writer.discard()
            except StoreError as exc:
                logger.debug("tantivy's writer ended with an error: %s", exc)

    def __enter__(self) -> "Collection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------
    def get(self, uri: str) -> Row | None:
        return self.catalog.get(uri)

    def get_many(self, uris: list[str]) -> dict[str, Row]:
        """The rows of those of ``uris`` that have one, by one query."""
        return self.catalog.get_many(uris)

    def stamps(self, uris: list[str]) -> dict[str, tuple[int, float, float | None]]:
        """(size, mtime, retry_at) of those of ``uris`` that are indexed, by one query."""
        return self.catalog.stamps(uris)

    def descendants(self, uri: str) -> list[str]:
        """The URIs of the members of ``uri``, and of theirs, all the way down."""
        return self.catalog.descendants(uri)

    def find_ok_by_raw_sum(self, raw_sum: str) -> Row | None:
        """A converted file (not a member) with these bytes, if any: its text may be reused."""
        return self.catalog.find_ok_by_raw_sum(raw_sum)

    def document(self, row: Row) -> Document | None:
        data = self.catalog.texts.get(row.blob) if row.blob else None
        if data is None:
            return None
        from deskdex.converters import tagged

        doc = tagged.loads(data)
        doc.uri = row.uri
        return doc

    def tagged_text(self, row: Row) -> str | None:
        data = self.catalog.texts.get(row.blob) if row.blob else None
        if data is None:
            return None
        text = data.decode("utf-8")
        return text.replace('<doc uri=""', f'<doc uri="{_attr(row.uri)}"', 1)

    # -- writing -----------------------------------------------------------------------------
    @_writes
    def put(self, row: Row, doc: Document | None, feats: Features | None = None) -> None:
        """Store a converted document (or, with ``doc`` None, a name-only or failed entry).
        ``feats``: its duplicate-detection features when computed already (in a worker)."""
        assert self.writable, "collection opened read-only"
        new_text = False
        if doc is not None:
            # The stored text leaves the URI out, so identical files share one stored text.
            from deskdex.converters import tagged

            uri, doc.uri = doc.uri, ""
            data = tagged.dumps_utf8(doc)
            doc.uri = uri
            row.blob = bytes_checksum(data)
            row.text_sum = feats.group if feats is not None and feats.group else \
                text_checksum(doc.body_text() + "\n" + doc.body_text(boilerplate=True))
            row.title = doc.title
            row.mime = doc.mime
            row.lang = doc.meta.get("lang")
            if partial := doc.meta.get(PARTIAL):  # a limit left part of it out: listed with the failures
                row.reason, row.error = PARTIAL, partial
            new_text = self.catalog.texts.put(row.blob, data)
            del data  # a large text's bytes, not kept through the rest of the work on it
        self._store(row, doc, feats, new_text)

    def _store(self, row: Row, doc: Document | None, feats: Features | None = None, new_text: bool = False) -> None:
        """Catalog row, duplicate clusters and tantivy entry for one document; ``new_text``: its
        stored text is one the text store did not have (its passages are embedded, with meaning on)."""
        written = row.cluster
        self.catalog.put(row)
        doc_id = self.catalog.doc_id(row.uri)
        assert doc_id is not None, "put() has just written the row"
        old = self.dups.cluster_of(doc_id)
        changed: set[int] = set()
        cluster: int | None = None
        if doc is not None and row.status == "ok":
            # Features from a worker stand for the texts: joining them here would be wasted.
            changes = (self.dups.add(doc_id, feats=feats) if feats is not None else
                       self.dups.add(doc_id, doc.body_text(), doc.body_text(boilerplate=True), text_sum=row.text_sum))
            changed = changes.docs
            cluster = changes.changed.get(doc_id, old)  # not in the change set: it kept its cluster
        elif old is not None:  # with no cluster it has no duplicate rows at all (DuplicateIndex.add)
            changed = self.dups.remove(doc_id).docs
        members: dict[int, list[int]] = {}
        row.cluster = self._clusters.carried(cluster, members)
        if row.cluster != written:  # put() wrote the row with ``written``: the same needs no UPDATE
            self.catalog.set_cluster(doc_id, row.cluster)
        if self.meaning is not None and new_text and doc is not None and row.status == "ok" and row.blob:
            meaning.store(self.catalog.db, self.meaning, row.blob, doc.body_text(limit=meaning.TEXT_CHARS), row.title or "",
                          os.path.basename(row.path or row.uri))
        self._index(row, doc)
        self._clusters.recluster(changed | {doc_id}, {old} if old is not None else set(), skip=doc_id,
                        known={doc_id: cluster}, members=members)

    @staticmethod
    def reusable(row: Row, same: Row) -> bool:
        """Whether ``row``, a file with the bytes of ``same``, may take ``same``'s stored text and
        metadata (``reuse``): only when converting ``row``'s own file would give the same.

        A conversion reads a file's name besides its bytes: its suffixes choose the format
        (converters/detect.py), and where the content has no title, the title is the name
        (every converter's fallback is ``Source.name``, its base name), stored in the text. So
        same suffixes, and either the same name or a stored title that is not ``same``'s name
        (it came from the content). A title equal to that name may still have come from the
        content: the file is converted then, never shown another file's name (someone else's,
        in enterprise mode)."""
        if same.source != "files" or not same.path or not row.path:
            return False
        name, other = os.path.basename(row.path), os.path.basename(same.path)
        if name == other:
            return True
        return extension(name) == extension(other) and compound_extension(name) == compound_extension(other) \
            and bool(same.title) and same.title != other

    @_writes
    def reuse(self, row: Row, same: Row) -> None:
        """Store ``row`` with the text of ``same``: no conversion. ``same`` is ``row`` itself, or
        a file with identical bytes that ``reusable`` allows."""
        row.blob, row.text_sum, row.title, row.mime = same.blob, same.text_sum, same.title, same.mime
        row.lang = same.lang
        if same.reason == PARTIAL:  # the same text leaves the same out: still listed with the failures
            row.reason, row.error = same.reason, same.error
        self._store(row, self.document(row))

    @_writes
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

    @_writes
    def delete(self, uri: str) -> int:
        assert self.writable
        ids = [i for u in [uri] + self.catalog.descendants(uri) if (i := self.catalog.doc_id(u)) is not None]
        before = {c for i in ids if (c := self.dups.cluster_of(i)) is not None}
        changed: set[int] = set()
        for i in ids:
            changed |= self.dups.remove(i).docs
        gone = self.catalog.delete(uri)
        for u in gone:
            self.writer.delete(u)
        self._dirty += len(gone)
        self._clusters.recluster(changed - set(ids), before)
        return len(gone)

    # -- duplicate clusters -----------------------------------------------------------------
    def near(self, doc: Document) -> list[tuple[Row, float]]:
        """The stored exact and near-duplicates of ``doc`` (which need not be stored itself) with
        their similarity, most similar first. Works on a read-only collection too."""
        from .duplicates import DuplicateIndex

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

    def copies_readable_by(self, row: Row, uid: int) -> list[Row]:
        """The other documents of a row's readable cluster for ``uid`` (index/readable.py): its
        copies and similar documents ``uid`` may read, linked through documents ``uid`` may read."""
        from .readable import ReadableClusters

        members = ReadableClusters(self.catalog.db, uid).component(row.uri, row.cluster or 0)
        own = self.catalog.doc_id(row.uri)
        return [r for d in members if d != own and (r := self.catalog.row_by_id(d)) is not None]

    def web_pages(self) -> WebPages:
        """The crawler's per-URL tables, in this collection's catalog (index/webpages.py)."""
        from .webpages import WebPages

        return WebPages(self.catalog)

    def _index(self, row: Row, doc: Document | None) -> None:
        assert self.writable
        self.writer.delete(row.uri)
        self.writer.add(fulltext.to_fields(row, doc))
        self._dirty += 1

    @property
    def dirty(self) -> int:
        return self._dirty

    @_writes
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

    @_writes
    def collect_garbage(self) -> int:
        n = self.catalog.texts.collect_garbage()
        meaning.collect_garbage(self.catalog.db)  # in the transaction the text store began
        self.catalog.commit()
        return n

    @_writes
    def embed_missing(self, stop: threading.Event | None = None) -> int:
        """With meaning on, vectors for the stored texts that have none (stored while it was off, or
        by an earlier release), a committed batch at a time (index/meaning.py ``backfill``); stops
        between batches when ``stop`` is set, and the next pass goes on. How many were embedded."""
        if self.meaning is None or not meaning.backfill_due(self.catalog.db):
            return 0
        from deskdex.converters import tagged

        def read(blob: str) -> tuple[str, str] | None:
            data = self.catalog.texts.get(blob)
            try:
                doc = tagged.loads(data) if data is not None else None
            except CorruptFile:
                return None
            return (doc.body_text(), doc.title or "") if doc is not None else None

        todo = meaning.missing(self.catalog.db)
        done = 0
        while done < len(todo) and (stop is None or not stop.is_set()):
            batch = todo[done:done + meaning.BACKFILL_BATCH]
            self.catalog.begin()
            meaning.backfill(self.catalog.db, self.meaning, read, batch)
            self.catalog.commit()
            done += len(batch)
        if done == len(todo):
            self.catalog.begin()
            meaning.backfill_done(self.catalog.db)
            self.catalog.commit()
        return done

    def _replay_pending(self) -> None:
        """Bring tantivy in line with the catalog for URIs a crash left half-done."""
        pending = self.catalog.pending()
        if not pending:
            return
        logger.info("repairing %d index entries left by an interrupted run", len(pending))
        assert self.writable
        for uri in pending:
            self.writer.delete(uri)
            row = self.catalog.get(uri)
            if row is not None:
                self.writer.add(fulltext.to_fields(row, self.document(row) if row.status == "ok" else None))
        self.writer.commit()
        self.catalog.clear_pending(pending)
        self.catalog.commit()

    @_writes
    def rebuild(self) -> int:
        """Re-create the tantivy index from the catalog and store, converting nothing."""
        assert self.writable
        self.writer.delete_all()
        n = 0
        told: list[tuple[str, str]] = []
        for row in self.catalog.rows():
            doc = self.document(row) if row.status == "ok" else None
            if doc is not None and row.lang is None:
                # Text stored by a deskdex that told no languages (its catalog has them NULL):
                # told here, once, rather than converting every file again.
                from deskdex.converters import language

                language.tag(doc)
                row.lang = doc.meta.get("lang")
                if row.lang:
                    told.append((row.uri, row.lang))
            self.writer.add(fulltext.to_fields(row, doc))
            n += 1
        for uri, lang in told:  # after the scan of the table: no update under a running SELECT
            self.catalog.set_lang(uri, lang)
        self.writer.commit()
        return n

    def files_under(self, folder: str) -> Iterator[tuple[str, str, int, float]]:
        return self.catalog.files_under(folder)

    def under(self, prefix: str, source: str) -> list[tuple[str, str, int, float]]:
        """(uri, path, size, mtime) of ``source``'s top-level documents whose URI starts with ``prefix``."""
        return list(self.catalog.under(prefix, source))

    def count_under(self, prefix: str, source: str) -> int:
        return self.catalog.count_under(prefix, source)

    def meta(self, key: str) -> str | None:
        return self.catalog.get_meta(key)

    @_writes
    def set_meta(self, key: str, value: str | None) -> None:
        """Keep ``value`` under ``key`` with the documents: committed, and rolled back, with them."""
        self.catalog.set_meta(key, value)


def _attr(s: str) -> str:
    from xml.sax.saxutils import escape

    return escape(s, {'"': "&quot;"})
