"""The crawl loop: seeds into the frontier, workers fetch (robots.txt first), pages go to the sink,
links, sitemaps and feeds come back into the frontier. One bad URL never stops the crawl."""

from __future__ import annotations

import asyncio
import email.utils
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Protocol
from urllib.parse import urlsplit

import httpx

from deskdex.errors import BrokerUnavailable, FetchError

from . import feeds, sitemaps
from .fetch import REDIRECTS, DNSCache, FetchSettings, Gate, conditional_headers, fetch, make_client
from .focus import TopicClassifier
from .frontier import Frontier, Journal, Limits, Request
from .links import extract
from .robots import RobotsCache
from .sink import CommittingSink, FetchedPage, KnownPage, PageSink
from .stats import CrawlStats
from .urls import in_scope, normalise, shard_of, site_of

logger = logging.getLogger(__name__)

HTML = frozenset({"text/html", "application/xhtml+xml"})
IDLE_POLL = 0.5  # seconds between two looks at what other shards of the crawl handed over
# What the converters read, plus what the crawler itself reads; anything else is recorded and skipped.
WANTED = HTML | feeds.FEED_TYPES | {"text/plain", "application/pdf", "application/xml", "text/xml",
                                    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                                    "application/x-gzip", "application/gzip", "application/octet-stream", ""}


# Makes one request of the crawl (redirects to other sites not followed): this process's HTTP client
# by default, a cluster worker's through deskdex.cluster.crawling. Raises FetchError.
Fetcher = Callable[[Request, "KnownPage | None"], Awaitable[FetchedPage]]


class Remote(Protocol):
    """Where a crawl's requests are made and its frontier kept, past this process (deskdex.cluster.crawling)."""

    def fetcher(self, crawler: "Crawler") -> Fetcher: ...

    def journal(self, settings: "CrawlSettings") -> Journal: ...

    def close(self) -> None: ...


@dataclass
class CrawlSettings:
    seeds: list[str]
    scope: str = "host"
    max_pages: int = 1000
    limits: Limits = field(default_factory=Limits)
    delay: float = 1.0
    fetch: FetchSettings = field(default_factory=FetchSettings)
    concurrency: int = 16
    topic: TopicClassifier | None = None
    focused: bool = True  # with a topic: on-topic links first, off-topic pages pruned
    off_topic_depth: int = 1  # off-topic pages in a row still expanded
    shard: tuple[int, int] = (0, 1)
    sitemaps: bool = True
    revisit_known: bool = True
    max_retries: int = 2
    max_backoff: float = 300.0
    head_above: int = 256 * 1024  # known pages without validators larger than this are checked with HEAD first


class Crawler:
    def __init__(self, settings: CrawlSettings, sink: PageSink,
                 on_progress: Callable[[CrawlStats], None] | None = None, remote: Remote | None = None) -> None:
        self.s = settings
        self.sink = sink
        self.on_progress = on_progress
        self.seeds = [u for u in (normalise(x) for x in settings.seeds) if u]
        self.frontier = Frontier(settings.limits, settings.delay,
                                 journal=remote.journal(settings) if remote is not None else None)
        self.fetcher: Fetcher = remote.fetcher(self) if remote is not None else self._fetch_here
        if remote is not None and settings.shard[1] > 1:
            self.frontier.idle_hook = self._idle
        self.stats = CrawlStats()
        self.anchors: dict[str, list[str]] = {}
        self.dns = DNSCache(settings.fetch.dns_ttl, settings.fetch.allow_private)
        self.harvest = [0, 0]  # on-topic pages, pages classified
        self._pages = 0
        # A sink that commits: the journal forgets requests at its commits (others store for good at once).
        self._committing: CommittingSink | None = sink if isinstance(sink, CommittingSink) else None
        self._commits: int | None = self._committing.commits if self._committing is not None else None
        self._started_sites: set[str] = set()
        self._sink_thread = ThreadPoolExecutor(1, thread_name_prefix="deskdex-sink")
        self.stopped = False  # stop() was called: the crawl ended early
        self._loop: asyncio.AbstractEventLoop | None = None  # while run() runs
        self._workers: list[asyncio.Task[None]] = []
        self._stop_lock = threading.Lock()

    def stop(self) -> None:
        """End the crawl soon, from any thread: requests under way are abandoned, a page being
        stored is finished, and ``run`` returns the counters so far."""
        with self._stop_lock:
            self.stopped = True
            loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._cancel_workers)
            except RuntimeError:
                pass  # the loop has just closed: the crawl is over anyway

    def _cancel_workers(self) -> None:
        for task in self._workers:
            task.cancel()

    def mine(self, url: str) -> bool:
        i, n = self.s.shard
        return n <= 1 or shard_of(site_of(url), n) == i

    async def run(self) -> CrawlStats:
        with self._stop_lock:
            self._loop = asyncio.get_running_loop()
        try:
            return await self._run()
        finally:
            with self._stop_lock:
                self._loop = None

    async def _run(self) -> CrawlStats:
        async with make_client(self.s.fetch, self.dns, self.s.concurrency * 2) as client:
            self.client = client
            self.robots = RobotsCache(client, self.s.fetch, gate=self.frontier.slot)
            resumed = self.frontier.resume()
            if resumed is not None:  # a crawl stopped half-way (every process restarted): where it was
                self._pages = resumed
                logger.info("resuming a crawl of %s: %d pages fetched, %d requests queued",
                            ", ".join(self.seeds), resumed, self.frontier.pending())
            else:
                self._seed()
            self._workers = [asyncio.create_task(self._worker()) for _ in range(self.s.concurrency)]
            if self.stopped:
                self._cancel_workers()  # stop() came before there were workers to cancel
            try:
                done, _ = await asyncio.wait(self._workers)
                for task in done:
                    exc = None if task.cancelled() else task.exception()
                    if exc is not None:
                        raise exc
            finally:
                self._sink_thread.shutdown(wait=True)  # a page being stored is stored whole
        if not self.stopped and self.frontier.journal is not None:
            self._commit()  # before the journal forgets the crawl: a kill in between loses no page
            self.frontier.finished()
        return self.stats

    def _seed(self) -> None:
        for url in self.seeds:
            if self.mine(url):
                self.frontier.add(Request(url, 0, 1.0))
        if self.s.revisit_known:
            for kp in self.sink.known_pages():
                if self.mine(kp.url) and in_scope(kp.url, self.seeds, self.s.scope):
                    self.frontier.add(Request(kp.url, kp.depth, kp.priority, "revisit"))

    async def _worker(self) -> None:
        while (req := await self.frontier.get()) is not None:
            backoff = 0.0
            try:
                backoff = await self._handle(req)
            except BrokerUnavailable:
                raise  # where the frontier is kept is gone: the crawl stops, and resumes when started again
            except Exception:  # noqa: BLE001 - a bug on one URL is recorded, the crawl goes on
                logger.exception("crawling %s", req.url)
                self.stats.fail(req.url, "internal_error")
            finally:
                self.frontier.release(req, backoff)
            if self.on_progress:
                self.on_progress(self.stats)

    async def _handle(self, req: Request) -> float:
        parts = urlsplit(req.url)
        site = parts.netloc
        rules = await self.robots.rules(parts.scheme, site)
        if site not in self._started_sites:
            self._started_sites.add(site)
            delay = rules.crawl_delay("deskdex")
            if delay:
                self.frontier.set_delay(site, delay)
            if self.s.sitemaps and not rules.disallow_all:
                for sm in rules.sitemaps() + [f"{parts.scheme}://{site}/sitemap.xml"]:
                    url = normalise(sm)
                    if url and self.mine(url):
                        self.frontier.add(Request(url, 0, 2.0, "sitemap"))
        if rules.status == "private_address":
            self.stats.fail(req.url, "private_address")
            return 0.0
        if not rules.allowed(req.url, self.s.fetch.user_agent):
            self.stats.site(req.url).robots_excluded += 1
            self.stats.record(req.url, "robots_excluded")
            return 0.0
        if req.kind in ("page", "revisit") and self._pages >= self.s.max_pages:
            self.stats.record(req.url, "budget")
            self.frontier.clear()  # the budget is spent: what is still queued waits for the next run
            return 0.0
        known = self.sink.known(req.url) if req.kind in ("page", "revisit") else None
        try:
            page = await self.fetcher(req, known)
        except FetchError as exc:
            return self._failed(req, exc)
        if page.status in REDIRECTS:
            self._redirected(req, page.final_url)
            return 0.0
        if req.kind in ("page", "revisit"):
            self._pages += 1
            self.frontier.fetched(self._pages)
        self.stats.site(req.url).fetched += 1
        if req.kind == "sitemap":
            self._sitemap(req, page)
        elif req.kind == "feed" or feeds.is_feed(page.content_type, page.body):
            self._feed(req, page)
        else:
            await self._page(req, page)
        return 0.0

    async def _fetch_here(self, req: Request, known: KnownPage | None) -> FetchedPage:
        return await fetch_page(self.client, self.s.fetch, req, known, self.s.head_above, self.frontier.slot)

    def _redirected(self, req: Request, target: str) -> None:
        """A redirect to another site: the target is a request of its own, made in that site's turn
        after its robots.txt, and not made at all if the crawl already has it (a bare domain's
        guessed /sitemap.xml redirected to the www. host's, which that host's own turn fetches)."""
        self.stats.record(req.url, "redirected")
        if not self.mine(target):
            self._hand_over(Request(target, req.depth, req.priority, req.kind, off_topic_run=req.off_topic_run))
            return
        self.frontier.add(Request(target, req.depth, req.priority, req.kind, off_topic_run=req.off_topic_run))

    def _hand_over(self, req: Request) -> None:
        """A request for another shard's site: handed to that shard's crawl when the shards share a
        journal (each its coordinator, deskdex.cluster.crawling), else left to it."""
        if not self.frontier.hand_over(shard_of(site_of(req.url), self.s.shard[1]), req):
            self.frontier.rejected["other_shard"] += 1

    async def _idle(self) -> bool:
        """Frontier.idle_hook of a crawl shared with other shards: nothing is left here. What was
        stored is committed (the others learn of what it handed over), then this shard waits for
        requests the others hand over, or for the crawl's end on every shard."""
        await asyncio.get_running_loop().run_in_executor(self._sink_thread, self._commit)
        journal = self.frontier.journal
        assert journal is not None
        while not self.stopped:
            pending = self.frontier.pending()
            self.frontier.durable()  # sends what was handed over; queues what others handed here
            if self.frontier.pending() > pending:
                return True
            left = journal.idle()
            if left is not None:
                self.stats.shards_left = left
                return False
            await asyncio.sleep(IDLE_POLL)
        return False

    def _commit(self) -> None:
        """What the sink stored, made durable."""
        if self._committing is not None:
            self._committing.commit()
            self._commits = self._committing.commits

    async def _put(self, page: FetchedPage) -> str:
        # Conversion can take a while: one thread keeps the event loop fetching and the sink single-threaded.
        result = await asyncio.get_running_loop().run_in_executor(self._sink_thread, self.sink.put_page, page)
        # The requests that ended before this page was stored are in the sink's commit, when it made one.
        commits = self._committing.commits if self._committing is not None else None
        if commits is None or commits != self._commits:
            self._commits = commits
            self.frontier.durable()
        return result

    def _failed(self, req: Request, exc: FetchError) -> float:
        if exc.retry_after is not None and req.retries < self.s.max_retries and exc.retry_after <= self.s.max_backoff:
            self.stats.site(req.url).retried += 1
            req.retries += 1
            self.frontier.add(req, force=True)
            logger.info("%s: %s, retrying after %.1f s", req.url, exc, exc.retry_after)
            return exc.retry_after
        if req.kind == "sitemap" and exc.reason == "http_404":
            return 0.0  # /sitemap.xml is only a guess
        self.stats.fail(req.url, exc.reason)
        logger.info("%s: %s", req.url, exc)
        return exc.retry_after or 0.0

    def _sitemap(self, req: Request, page: FetchedPage) -> None:
        try:
            sm = sitemaps.parse(page.body)
        except ValueError as exc:
            if req.kind == "sitemap":
                self.stats.fail(req.url, "bad_sitemap")
                logger.info("%s: %s", req.url, exc)
            return
        for child in sm.children:
            url = normalise(child, req.url)
            if url and self.mine(url):
                self.frontier.add(Request(url, 0, 2.0, "sitemap"))
        for e in sm.entries:
            url = normalise(e.url, req.url)
            if url and self.mine(url) and in_scope(url, self.seeds, self.s.scope):
                known = self.sink.known(url)
                if known is not None:
                    known.hint_changefreq = e.changefreq or known.hint_changefreq
                    known.priority = e.priority
                    if e.lastmod is not None and e.lastmod <= known.fetched_at:
                        continue  # the sitemap says it has not changed since our copy
                self.frontier.add(Request(url, 1, e.priority))
        self.stats.record(req.url, "sitemap")

    def _feed(self, req: Request, page: FetchedPage) -> None:
        feed = feeds.parse(page.body, page.headers)
        self.stats.feeds[req.url] = page.fetched_at + feed.poll_after
        n = len(feed.links)
        for i, link in enumerate(feed.links):
            url = normalise(link, page.final_url)
            if url and self.mine(url) and in_scope(url, self.seeds, self.s.scope):
                # Newest entries first: priorities above every ordinary link, falling with age.
                self.frontier.add(Request(url, req.depth + 1, 3.0 + (n - i) / n))
        self.stats.record(req.url, "feed")

    async def _page(self, req: Request, page: FetchedPage) -> None:
        site = self.stats.site(req.url)
        page.anchors = self.anchors.get(req.url, [])
        if page.not_modified:
            await self._put(page)
            site.unchanged += 1
            self.stats.record(req.url, "not_modified")
            return
        links = extract(page.body, page.final_url, page.charset) if page.content_type in HTML else None
        on_topic = True
        score = 0.5
        if self.s.topic is not None and links is not None:
            score = self.s.topic.score(links.text)
            on_topic = score >= self.s.topic.threshold
            self.harvest[0] += on_topic
            self.harvest[1] += 1
        if self.s.topic is not None and self.s.focused and not on_topic:
            site.off_topic += 1
            self.stats.record(req.url, "off_topic")
        elif links is not None and links.noindex:
            self.stats.record(req.url, "noindex")
        else:
            result = await self._put(page)
            if result == "stored":
                site.stored += 1
            elif result == "unchanged":
                site.unchanged += 1
            else:
                site.duplicates += 1
            self.stats.record(req.url, result)
        if links is None or links.nofollow:
            return
        run = 0 if on_topic else req.off_topic_run + 1
        if self.s.topic is not None and self.s.focused and run > self.s.off_topic_depth:
            return
        for feed_url in links.feeds:
            if self.mine(feed_url) and in_scope(feed_url, self.seeds, self.s.scope):
                self.frontier.add(Request(feed_url, req.depth + 1, 2.5, "feed"))
        for url, anchor in links.links:
            if anchor:
                self.anchors.setdefault(url, []).append(anchor)
            if not in_scope(url, self.seeds, self.s.scope):
                continue
            priority = score if self.s.topic is not None and self.s.focused else 0.5
            if not self.mine(url):
                self._hand_over(Request(url, req.depth + 1, priority, off_topic_run=run))
                continue
            self.frontier.add(Request(url, req.depth + 1, priority, off_topic_run=run))


async def fetch_page(client: httpx.AsyncClient, settings: FetchSettings, req: Request, known: KnownPage | None,
                     head_above: int, gate: Gate) -> FetchedPage:
    """One request of a crawl, each request to a site made through ``gate``: a conditional GET
    when ``known`` has validators; a large known page without them is asked with HEAD first, and
    comes back as a 304 when its Last-Modified is not newer than our copy. Raises FetchError."""
    if known and not known.etag and not known.last_modified and known.size > head_above:
        head = await fetch(client, settings, req.url, method="HEAD", depth=req.depth, gate=gate,
                           follow_off_site=False)
        lm = head.headers.get("last-modified")
        try:
            if lm and email.utils.parsedate_to_datetime(lm).timestamp() <= known.fetched_at:
                head.status = 304
                return head
        except (TypeError, ValueError):
            pass
    return await fetch(client, settings, req.url, headers=conditional_headers(known), depth=req.depth,
                       accept=WANTED, gate=gate, follow_off_site=False)


def wants_text(req: Request, page: FetchedPage) -> bool:
    """Whether the crawl stores ``page``'s text (a page, not a sitemap, a feed or a 304), so that a
    worker that fetched it converts it too."""
    return (req.kind in ("page", "revisit") and page.status not in REDIRECTS and not page.not_modified
            and not feeds.is_feed(page.content_type, page.body))


def crawl(settings: CrawlSettings, sink: PageSink,
          on_progress: Callable[[CrawlStats], None] | None = None) -> tuple[CrawlStats, Crawler]:
    """Run one crawl to the end (blocking)."""
    crawler = Crawler(settings, sink, on_progress)
    stats = asyncio.run(crawler.run())
    return stats, crawler

