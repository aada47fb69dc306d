"""Where crawled pages go: converted in an isolated worker, stored and indexed like files.

Per URL the catalog keeps the crawler's validators and visit history, a version each time the
text changed, and the anchor texts of links pointing to the page, indexed with it
(index/webpages.py). A page whose text is already stored under another URL is recorded as a
duplicate and not stored again (the patent: skip near-duplicates while crawling).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Iterable

from deskdex.converters import Document, Limits, Outcome, WorkerPool
from deskdex.errors import IndexMissing
from deskdex.index import CATALOG, Catalog, Collection, Row, WebPages, bytes_checksum, text_checksum
from deskdex.webcrawl import FetchedPage, KnownPage, PutResult, Visit, page_source, record_visit

logger = logging.getLogger(__name__)

class IndexSink:
    def __init__(self, coll: Collection, limits: Limits = Limits(), commit_every: int = 200,
                 owns_collection: bool = True, commit_seconds: float = 30.0) -> None:
        self.coll = coll
        self.owns_collection = owns_collection
        self.pages = coll.web_pages()
        self.pool = WorkerPool(1, limits, idle=True)
        # Pages are searchable, and a crawl's journal in Redis forgets them, after a commit: every
        # ``commit_every`` pages, or ``commit_seconds`` (the setting) after the first page not yet committed.
        self.commit_every, self.commit_seconds = commit_every, commit_seconds
        self._since_commit = 0
        self._first_uncommitted = 0.0
        self.commits = 0  # times what was stored was made durable (a crawl's journal forgets what it holds)

    def close(self) -> None:
        self.pool.close()
        if self.owns_collection:
            self.coll.close()
        else:
            self.coll.commit()

    # -- what the crawler asks ---------------------------------------------------------------
    def known(self, url: str) -> KnownPage | None:
        info = self.pages.info(url)
        return _load(url, info) if info is not None else None

    def known_pages(self) -> Iterable[KnownPage]:
        return known_pages(self.pages)

    # -- storing -------------------------------------------------------------------------------
    def put_page(self, page: FetchedPage) -> PutResult:
        kp = self.known(page.url)
        anchors = [a.strip() for a in page.anchors if a.strip()]
        self.pages.add_anchors(page.url, anchors)
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
        all_anchors = self.pages.anchors(page.url)
        if all_anchors:
            doc.meta["anchors"] = " | ".join(all_anchors)
        row = Row(uri=page.url, path=page.final_url, source="web", size=len(page.body), mtime=page.fetched_at,
                  raw_sum=bytes_checksum(page.body))
        self.coll.put(row, doc)
        assert row.blob is not None  # put() stored the text
        self.pages.add_version(page.url, page.fetched_at, row.blob)
        self._tick()
        return "stored"

    def _stored_duplicate(self, url: str, doc: Document) -> str | None:
        """The URI of a stored exact or near-duplicate of ``doc`` other than ``url`` itself."""
        return next((row.uri for row, _similarity in self.coll.near(doc) if row.uri != url), None)

    def _convert(self, page: FetchedPage) -> Document | None:
        outcomes: list[Outcome]
        if page.converted is not None:  # on the cluster worker that fetched it
            outcomes = page.converted
        else:
            outcomes = next((o for _, o in self.pool.map([page_source(page)])), [])
        if not outcomes:
            return None
        first = outcomes[0]
        if first.document is None:
            logger.warning("%s: %s (%s)", page.url, first.message, first.reason)
            return None
        return first.document

    def _visit(self, kp: KnownPage, page: FetchedPage, changed: bool) -> PutResult:
        if not kp.visits:
            kp.changed_at = page.fetched_at
        result = record_visit(kp, page, changed)
        kp.visits = kp.visits[-50:]  # enough history for the rate estimate, bounded
        self.pages.set_info(kp.url, _dump(kp))
        self._tick()
        return result

    def commit(self) -> None:
        """Make every page stored so far durable."""
        self.coll.commit()
        self._since_commit = 0
        self.commits += 1

    def _tick(self) -> None:
        now = time.monotonic()
        if not self._since_commit:
            self._first_uncommitted = now
        self._since_commit += 1
        if self._since_commit >= self.commit_every or now - self._first_uncommitted >= self.commit_seconds:
            self.commit()


def known_pages(pages: WebPages) -> list[KnownPage]:
    """Every page the crawler knows, with its visits."""
    return [_load(u, i) for u, i in pages.all()]


def read_known_pages(data_dir: str) -> list[KnownPage]:
    """Every page the crawler knows, read without the writer lock (so beside a running daemon,
    which holds it); none before anything is indexed."""
    try:
        catalog = Catalog(os.path.join(data_dir, CATALOG), writable=False)
    except IndexMissing:
        return []
    try:
        return known_pages(WebPages(catalog))
    finally:
        catalog.close()


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

