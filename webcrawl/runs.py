"""One ``deskdex crawl``, wherever it runs: in the command's own process when no daemon runs, or in
the daemon, which holds the index's one writer lock (daemon/crawls.py, asked over the socket). Both
build their crawls from the same request and the ``[crawl]`` settings (``plan``), run them the same
way (``CrawlRun``: one crawl after another, counters added to the crawl state file, stoppable from
another thread), and answer with the same summary (``summary``), which the command prints
(deskdex.clients.crawl.format_summary).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import asdict, dataclass
from typing import Any, Callable, TypeVar

from deskdex.errors import ConfigError

from .config import CrawlConfig, allows_private
from .crawler import CrawlSettings, Crawler, Remote
from .fetch import FetchSettings
from .focus import TopicClassifier
from .frontier import Limits
from .sink import PageSink
from .stats import CrawlStats, SiteStats, save_state

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class CrawlRequest:
    """What ``deskdex crawl`` asks for. Its fields are the arguments of the protocol's crawl op."""

    urls: list[str] | None = None  # seeds; None or empty: every configured site
    scope: str | None = None
    max_pages: int | None = None
    max_depth: int | None = None
    topic: str | None = None
    topic_from: list[str] | None = None  # absolute paths of example documents
    delay: float | None = None
    allow_private: bool = False
    shard: str = "0/1"

    def to_args(self) -> dict[str, Any]:
        return asdict(self)


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` as (I, N), with 0 <= I < N; ValueError for anything else."""
    i, n = (int(x) for x in text.split("/"))
    if not 0 <= i < n:
        raise ValueError(f"shard {text!r}: I/N wants 0 <= I < N")
    return i, n


def plan(cfg: CrawlConfig, req: CrawlRequest,
         texts_of: Callable[[list[str]], list[str]]) -> list[CrawlSettings]:
    """The crawls ``req`` asks for: one over its URLs, else one per configured site. ``texts_of``
    turns ``topic_from`` files into their texts (in the daemon: converted in a worker)."""
    try:
        shard = parse_shard(req.shard)
    except ValueError:
        raise ConfigError(f"--shard wants I/N with 0 <= I < N, not {req.shard!r}") from None
    topic = None
    if req.topic:
        topic = TopicClassifier.from_words(req.topic)
    elif req.topic_from:
        topic = TopicClassifier.from_documents(texts_of(req.topic_from))
    runs = [(req.urls, req.scope or "host", topic, None, None)] if req.urls else \
        [([s.url], s.scope, TopicClassifier.from_words(s.topic) if s.topic else topic, s.max_pages, s.max_depth)
         for s in cfg.sites]
    crawl = cfg.settings

    def fetch(seeds: list[str]) -> FetchSettings:
        return FetchSettings(user_agent=cfg.user_agent, timeout=crawl.timeout, deadline=crawl.deadline,
                             max_bytes=crawl.max_mb * 2**20,
                             allow_private=req.allow_private or allows_private(cfg, seeds))

    return [CrawlSettings(seeds=list(seeds), scope=scope, topic=t, shard=shard, fetch=fetch(list(seeds)),
                          max_pages=_first(req.max_pages, site_pages, crawl.max_pages),
                          limits=Limits(max_depth=_first(req.max_depth, site_depth, crawl.max_depth)),
                          delay=_first(req.delay, crawl.delay))
            for seeds, scope, t, site_pages, site_depth in runs]


def _first(*values: T | None) -> T:
    """The first of ``values`` given (not None): the request's, the site's, then the setting's."""
    return next(v for v in values if v is not None)


class CrawlRun:
    """Crawls run one after another into ``sink``; each one's counters are added to the crawl state
    file at ``state_path`` as it ends. ``stop()``, from any thread, ends the crawl under way soon and
    starts no other. ``on_progress`` gets the counters of the whole run after each request. With
    ``remote``, cluster workers make the requests and the frontiers are kept in Redis."""

    def __init__(self, plans: list[CrawlSettings], sink: PageSink, state_path: str,
                 on_progress: Callable[[SiteStats], None] | None = None, remote: Remote | None = None) -> None:
        self.plans, self.sink, self.state_path, self.on_progress = plans, sink, state_path, on_progress
        self.remote = remote
        self.stopped = False
        self.total = CrawlStats()  # of the crawls that have ended
        self.seeds: list[str] = []  # of the crawl under way
        self._crawler: Crawler | None = None
        self._lock = threading.Lock()
        self._done = SiteStats()  # the counters of the crawls that have ended

    def run(self) -> CrawlStats:
        for settings in self.plans:
            crawler = Crawler(settings, self.sink, self._progress, self.remote)
            with self._lock:
                if self.stopped:
                    break
                self._crawler, self.seeds = crawler, settings.seeds
            try:
                stats = asyncio.run(crawler.run())
            finally:
                with self._lock:
                    self._crawler = None
            save_state(self.state_path, stats)
            self.total.sites.update(stats.sites)
            self.total.shards_left.update(stats.shards_left)
            self._done.add(stats.totals())
        return self.total

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            crawler = self._crawler
        if crawler is not None:
            crawler.stop()

    def _progress(self, stats: CrawlStats) -> None:
        if self.on_progress is not None:
            now = stats.totals()
            now.add(self._done)
            self.on_progress(now)


def summary(total: CrawlStats) -> dict[str, Any]:
    """Per site and in all: what ``deskdex crawl --json`` prints, and the crawl_job op's summary."""
    out = {"sites": {k: v.to_json() for k, v in total.sites.items()}, **total.totals().to_json()}
    if total.shards_left:
        out["shards_left"] = {str(k): v for k, v in sorted(total.shards_left.items())}
    return out


def progress_of(t: SiteStats) -> dict[str, int]:
    """The few counters a crawl under way shows (the crawl_job op's ``progress``)."""
    return {"fetched": t.fetched, "stored": t.stored, "failed": sum(t.failed.values())}


def local_texts(paths: list[str]) -> list[str]:
    """The texts of example documents, converted in this process (the command's, not a daemon's)."""
    from deskdex.converters import Source, convert

    return [o.document.text() for f in paths for o in convert(Source.from_path(f)) if o.document]
