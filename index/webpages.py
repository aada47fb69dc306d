"""What the crawler keeps per URL in the catalog, beside the documents:

    web_pages     the validators and visit history the crawler needs (JSON, the crawler's own form)
    web_versions  a timestamped version (text blob) each time a page's text changed
    web_anchors   the anchor texts of links pointing to the page, indexed with it

The tables live in the catalog so that a page and its history commit together.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from .store import Catalog

SCHEMA = """
CREATE TABLE IF NOT EXISTS web_pages(url TEXT PRIMARY KEY, info TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS web_versions(url TEXT NOT NULL, fetched_at REAL NOT NULL, blob TEXT NOT NULL,
                                        PRIMARY KEY(url, fetched_at));
CREATE TABLE IF NOT EXISTS web_anchors(url TEXT NOT NULL, anchor TEXT NOT NULL, PRIMARY KEY(url, anchor));
"""


class WebPages:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.db = catalog.db
        if catalog.writable:
            self.db.executescript(SCHEMA)
        # Read-only, the tables exist once a crawl has made them.
        self.present = catalog.writable or self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='web_pages'").fetchone() is not None

    def info(self, url: str) -> str | None:
        if not self.present:
            return None
        r = self.db.execute("SELECT info FROM web_pages WHERE url=?", (url,)).fetchone()
        return r[0] if r else None

    def all(self) -> Iterator[tuple[str, str]]:
        """(url, info) of every page the crawler knows."""
        if self.present:
            yield from self.db.execute("SELECT url, info FROM web_pages")

    def set_info(self, url: str, info: str) -> None:
        self.catalog.begin()
        self.db.execute("INSERT OR REPLACE INTO web_pages(url, info) VALUES(?,?)", (url, info))

    def add_anchors(self, url: str, anchors: Iterable[str]) -> None:
        self.catalog.begin()
        self.db.executemany("INSERT OR IGNORE INTO web_anchors(url, anchor) VALUES(?,?)", ((url, a) for a in anchors))

    def anchors(self, url: str) -> list[str]:
        return [a for (a,) in self.db.execute("SELECT anchor FROM web_anchors WHERE url=?", (url,))]

    def add_version(self, url: str, fetched_at: float, blob: str) -> None:
        self.catalog.begin()
        self.db.execute("INSERT OR REPLACE INTO web_versions(url, fetched_at, blob) VALUES(?,?,?)",
                        (url, fetched_at, blob))
