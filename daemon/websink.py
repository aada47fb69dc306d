"""Where crawled pages go: converted in an isolated worker, stored and indexed like files.

The store keeps, per URL, the validators and visit history the crawler needs (``web_pages``),
a timestamped version each time the text changed (``web_versions``), and the anchor texts of
links pointing to the page, which are indexed with the page. A page whose text is already
stored under another URL is recorded as a duplicate and not stored again (the patent: skip
near-duplicates while crawling).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable

from converters import Limits, Source
from converters.isolation import WorkerPool
from index import Collection, Row
from index.checksums import bytes_checksum, text_checksum
from webcrawl.sink import FetchedPage, KnownPage, PutResult, Visit, record_visit

logger = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS web_pages(url TEXT PRIMARY KEY, info TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS web_versions(url TEXT NOT NULL, fetched_at REAL NOT NULL, blob TEXT NOT NULL,
                                        PRIMARY KEY(url, fetched_at));
CREATE TABLE IF NOT EXISTS web_anchors(url TEXT NOT NULL, anchor TEXT NOT NULL, PRIMARY KEY(url, anchor));
"""


class IndexSink:
    def __init__(self, coll: Collection, limits: Limits = Limits(), commit_every: int = 200,
                 owns_collection: bool = True) -> None:
        self.coll = coll
        self.owns_collection = owns_collection
        self.db = coll.catalog.db
        self.db.executescript(SCHEMA)
        self.pool = WorkerPool(1, limits, idle=True)
        self.commit_every = commit_every
        self._since_commit = 0

    def close(self) -> None:
        self.pool.close()
        if self.owns_collection:
            self.coll.close()
        else:
            self.coll.commit()

    # -- what the crawler asks ---------------------------------------------------------------
    def known(self, url: str) -> KnownPage | None:
        r = self.db.execute("SELECT info FROM web_pages WHERE url=?", (url,)).fetchone()
        return _load(url, r[0]) if r else None

    def known_pages(self) -> Iterable[KnownPage]:
        return [_load(u, i) for u, i in self.db.execute("SELECT url, info FROM web_pages")]

    # -- storing -------------------------------------------------------------------------------
    def put_page(self, page: FetchedPage) -> PutResult:
        kp = self.known(page.url)
        anchors = [a.strip() for a in page.anchors if a.strip()]
        self.coll.catalog.begin()
        self.db.executemany("INSERT OR IGNORE INTO web_anchors(url, anchor) VALUES(?,?)",
                            ((page.url, a) for a in anchors))
        if page.not_modified and kp is not None:
            return self._visit(kp, page, changed=False)
        doc = self._convert(page)
        old = self.coll.get(page.url)
        new_sum = text_checksum(doc.body_text() + "\n" + doc.body_text(boilerplate=True)) if doc else None
        if kp is not None and old is not None and old.text_sum == new_sum:
            return self._visit(kp, page, changed=False)
        first = kp is None
        kp = kp or KnownPage(page.url, depth=page.depth)
        self._visit(kp, page, changed=not first)
        if doc is None:
            return "unchanged"
        same = self._stored_duplicate(page.url, doc)
        if same is not None:
            logger.info("%s duplicates %s: not stored", page.url, same)
            return "duplicate"
        all_anchors = [a for (a,) in self.db.execute("SELECT anchor FROM web_anchors WHERE url=?", (page.url,))]
        if all_anchors:
            doc.meta["anchors"] = " | ".join(all_anchors)
        row = Row(uri=page.url, path=page.final_url, source="web", size=len(page.body), mtime=page.fetched_at,
                  raw_sum=bytes_checksum(page.body))
        self.coll.put(row, doc)
        self.db.execute("INSERT OR REPLACE INTO web_versions(url, fetched_at, blob) VALUES(?,?,?)",
                        (page.url, page.fetched_at, row.blob))
        self._tick()
        return "stored"

    def _stored_duplicate(self, url: str, doc: Any) -> str | None:
        """The URI of a stored exact or near-duplicate of ``doc`` other than ``url`` itself."""
        for doc_id, _similarity in self.coll.dups.near(doc.body_text(), doc.body_text(boilerplate=True)):
            row = self.coll.catalog.row_by_id(doc_id)
            if row is not None and row.uri != url:
                return row.uri
        return None

    def _convert(self, page: FetchedPage):  # type: ignore[no-untyped-def]
        mime = page.content_type + (f"; charset={page.charset}" if page.charset else "")
        name = page.final_url.split("?", 1)[0].rsplit("/", 1)[-1] or "index.html"
        if "." not in name and page.content_type in ("text/html", "application/xhtml+xml"):
            name += ".html"
        src = Source(uri=page.url, name=name, data=page.body, mime=mime)
        for _, outcomes in self.pool.map([src]):
            first = outcomes[0]
            if first.document is None:
                logger.warning("%s: %s (%s)", page.url, first.message, first.reason)
                return None
            return first.document
        return None

    def _visit(self, kp: KnownPage, page: FetchedPage, changed: bool) -> PutResult:
        if not kp.visits:
            kp.changed_at = page.fetched_at
        result = record_visit(kp, page, changed)
        kp.visits = kp.visits[-50:]  # enough history for the rate estimate, bounded
        self.db.execute("INSERT OR REPLACE INTO web_pages(url, info) VALUES(?,?)", (kp.url, _dump(kp)))
        self._tick()
        return result

    def _tick(self) -> None:
        self._since_commit += 1
        if self._since_commit >= self.commit_every:
            self.coll.commit()
            self._since_commit = 0


def _dump(kp: KnownPage) -> str:
    return json.dumps({"etag": kp.etag, "last_modified": kp.last_modified, "fetched_at": kp.fetched_at,
                       "changed_at": kp.changed_at, "size": kp.size, "changefreq": kp.hint_changefreq,
                       "priority": kp.priority, "depth": kp.depth,
                       "visits": [[v.at, v.changed, v.modified_at] for v in kp.visits]})


def _load(url: str, info: str) -> KnownPage:
    d = json.loads(info)
    return KnownPage(url, etag=d["etag"], last_modified=d["last_modified"], fetched_at=d["fetched_at"],
                     changed_at=d["changed_at"], size=d["size"], hint_changefreq=d.get("changefreq"),
                     priority=d.get("priority", 0.5), depth=d.get("depth", 0),
                     visits=[Visit(a, c, m) for a, c, m in d["visits"]])




class LockedSink(IndexSink):
    """The sink the daemon's crawl thread uses: each page is stored under the daemon's write lock,
    so crawled pages and file changes take turns on the one writer."""

    def __init__(self, daemon: Any) -> None:
        self.daemon = daemon
        with daemon.writing():
            super().__init__(daemon.coll, daemon.cfg.limits, owns_collection=False)

    def put_page(self, page: FetchedPage) -> PutResult:
        with self.daemon.writing():
            return super().put_page(page)

    def close(self) -> None:
        with self.daemon.writing():
            super().close()
