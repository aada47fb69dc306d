"""Keeping configured crawls fresh from the daemon: each site is crawled on start when it has
never been, and again when the freshness model says some of its pages are due (the crawler
revisits known pages with conditional requests, so unchanged pages cost a 304)."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from .daemon import Daemon

logger = logging.getLogger(__name__)

CHECK_SECONDS = 3600.0  # how often due pages are looked for, only while crawls are configured


class CrawlScheduler:
    def __init__(self, daemon: "Daemon") -> None:
        self.daemon = daemon
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="deskdex-crawls", daemon=True)
        self.last_run: dict[str, float] = {}

    def start(self) -> "CrawlScheduler":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(3)  # a crawl under way is abandoned: the process is ending (pages are journaled)

    def _loop(self) -> None:
        from webcrawl import config as crawlconfig

        while not self.stop_event.is_set():
            sites = crawlconfig.load(self.daemon.cfg.home.config_file).sites
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
        from webcrawl import config as crawlconfig
        from webcrawl.freshness import due

        from .websink import IndexSink

        host = urlsplit(url).netloc
        with self.daemon.writing():
            sink = IndexSink(self.daemon.coll, owns_collection=False)
            try:
                pages = [p for p in sink.known_pages() if urlsplit(p.url).netloc == host]
            finally:
                sink.close()
        if not pages:
            return True
        budget = crawlconfig.load(self.daemon.cfg.home.config_file)["revisit_budget_per_day"]
        return bool(due(pages, budget, time.time()))

    def run_site(self, site: Any) -> None:
        from webcrawl import config as crawlconfig
        from webcrawl.crawler import CrawlSettings, crawl
        from webcrawl.fetch import FetchSettings
        from webcrawl.frontier import Limits

        from .websink import LockedSink

        cfg = crawlconfig.load(self.daemon.cfg.home.config_file)
        fetch = FetchSettings(user_agent=cfg.user_agent, timeout=cfg["timeout"], max_bytes=cfg["max_mb"] * 2**20,
                              allow_private=cfg["allow_private_addresses"])
        settings = CrawlSettings(seeds=[site.url], scope=site.scope, max_pages=site.max_pages or cfg["max_pages"],
                                 limits=Limits(max_depth=site.max_depth or cfg["max_depth"]), delay=cfg["delay"],
                                 fetch=fetch)
        sink = LockedSink(self.daemon)
        try:
            stats, _ = crawl(settings, sink)
        finally:
            sink.close()
        self.last_run[site.url] = time.time()
        t = stats.totals()
        logger.info("crawled %s: fetched %d, stored %d, unchanged %d", site.url, t.fetched, t.stored, t.unchanged)
