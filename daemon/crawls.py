"""Keeping configured crawls fresh from the daemon: each site is crawled on start when it has
never been, and again when the freshness model says some of its pages are due (the crawler
revisits known pages with conditional requests, so unchanged pages cost a 304).

The crawl thread shares the daemon's one writer: each page is stored under the daemon's write
lock, so crawled pages and file changes take turns."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from deskdex.converters import Limits
from deskdex.pipeline.websink import IndexSink
from deskdex.webcrawl import config as crawlconfig
from deskdex.webcrawl.sink import FetchedPage, PutResult

if TYPE_CHECKING:
    from deskdex.index import Collection
    from deskdex.webcrawl.config import CrawlSite

logger = logging.getLogger(__name__)

CHECK_SECONDS = 3600.0  # how often due pages are looked for, only while crawls are configured


class LockedSink(IndexSink):
    """An IndexSink over the daemon's writable collection, each page stored under ``lock``."""

    def __init__(self, coll: Collection, lock: threading.RLock, limits: Limits) -> None:
        self.lock = lock
        with lock:
            super().__init__(coll, limits, owns_collection=False)

    def put_page(self, page: FetchedPage) -> PutResult:
        with self.lock:
            return super().put_page(page)

    def close(self) -> None:
        with self.lock:
            super().close()


class CrawlScheduler:
    def __init__(self, config_file: str, coll: Collection, lock: threading.RLock, limits: Limits) -> None:
        self.config_file = config_file
        self.coll, self.lock, self.limits = coll, lock, limits
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="deskdex-crawls", daemon=True)
        self.last_run: dict[str, float] = {}

    def start(self) -> CrawlScheduler:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(3)  # a crawl under way is abandoned: the process is ending (pages are journaled)

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            sites = crawlconfig.load(self.config_file).sites
            if not sites:
                # Nothing to keep fresh: sleep until stopped (a restart picks up new sites).
                self.stop_event.wait()
                return
            for site in sites:
                if self.stop_event.is_set():
                    return
                try:
                    if self._due(site.url):
                        self.run_site(site)
                except Exception:  # a crawl must never take the daemon down
                    logger.exception("crawl of %s failed", site.url)
            self.stop_event.wait(CHECK_SECONDS)

    def _due(self, url: str) -> bool:
        from deskdex.webcrawl.freshness import due

        host = urlsplit(url).netloc
        with self.lock:
            sink = IndexSink(self.coll, owns_collection=False)
            try:
                pages = [p for p in sink.known_pages() if urlsplit(p.url).netloc == host]
            finally:
                sink.close()
        if not pages:
            return True
        budget = crawlconfig.load(self.config_file)["revisit_budget_per_day"]
        return bool(due(pages, budget, time.time()))

    def run_site(self, site: CrawlSite) -> None:
        from deskdex.webcrawl.crawler import CrawlSettings, crawl
        from deskdex.webcrawl.fetch import FetchSettings
        from deskdex.webcrawl.frontier import Limits as CrawlLimits

        cfg = crawlconfig.load(self.config_file)
        fetch = FetchSettings(user_agent=cfg.user_agent, timeout=cfg["timeout"], deadline=cfg["deadline"],
                              max_bytes=cfg["max_mb"] * 2**20, allow_private=cfg["allow_private_addresses"])
        settings = CrawlSettings(seeds=[site.url], scope=site.scope, max_pages=site.max_pages or cfg["max_pages"],
                                 limits=CrawlLimits(max_depth=site.max_depth or cfg["max_depth"]), delay=cfg["delay"],
                                 fetch=fetch)
        sink = LockedSink(self.coll, self.lock, self.limits)
        try:
            stats, _ = crawl(settings, sink)
        finally:
            sink.close()
        self.last_run[site.url] = time.time()
        t = stats.totals()
        logger.info("crawled %s: fetched %d, stored %d, unchanged %d", site.url, t.fetched, t.stored, t.unchanged)
