"""The frontier: one priority queue per site, a politeness gate per site, and a seen-set.

A site is handed to one worker at a time and comes back ``delay`` seconds after its last request
ended, so a site never sees two requests closer than its delay (the notes' politeness policy),
while other sites are fetched meanwhile. Every HTTP request to a site, whoever makes it (robots.txt,
sitemaps, feeds, pages, each hop of a redirect, another site's robots.txt redirected here), is made
inside that site's ``slot``: one at a time, each starting at least the site's delay after the
previous one ended. Traps (calendars, session ids, endless query variants)
are bounded by depth, URL length, a per-site page cap and a cap on query variants per path.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Protocol
from urllib.parse import urlsplit

from .urls import site_of

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Request:
    url: str
    depth: int = 0
    priority: float = 0.5  # higher first within a site
    kind: str = "page"  # "page", "sitemap", "feed", "revisit"
    retries: int = 0
    off_topic_run: int = 0  # how many off-topic pages lead here (focused crawling)


@dataclass(frozen=True, slots=True)
class Limits:
    max_depth: int = 5
    max_url_length: int = 512
    max_pages_per_site: int = 1000
    max_query_variants: int = 50  # distinct queries under one path


class Journal(Protocol):
    """Where a frontier keeps its state beyond the process (deskdex.cluster.crawling: in Redis), so
    that a crawl whose every process stopped takes up where it was: its seen URLs, its queued
    requests (those under way included, until they end) and its count of pages fetched."""

    def resume(self) -> tuple[set[str], list[Request], int] | None:
        """The state of a crawl that did not finish, or None to start afresh."""

    def added(self, req: Request) -> None: ...

    def done(self, url: str) -> None:
        """The request for ``url`` ended, and is not queued again; still resumed until ``durable``."""

    def durable(self) -> list[Request]:
        """What the requests ended so far stored is stored for good (the sink committed): forget
        them, send the requests handed over to other shards; the requests other shards handed
        over to this one since."""

    def hand_over(self, shard: int, req: Request) -> bool:
        """Queue ``req`` for the crawl's shard ``shard`` (sent at the next ``durable``); False
        when this journal's crawl has no other shards to hand it to."""

    def idle(self) -> dict[int, int] | None:
        """Nothing is left here (what was stored is durable): None while another shard may still
        hand this one work; else the crawl ends here, and this is the shards that had work when
        they went silent (stopped, or never started), with the links waiting for each: empty when
        the crawl is over on every shard (all idle, nothing handed over and not taken)."""

    def cleared(self) -> None:
        """Nothing is queued any more (requests under way still end with ``done``)."""

    def fetched(self, pages: int) -> None: ...

    def finished(self) -> None:
        """The crawl ended: nothing to resume."""


@dataclass
class _Site:
    queue: list[tuple[float, int, int, Request]] = field(default_factory=list)
    ready_at: float = 0.0
    busy: bool = False
    taken: int = 0
    delay: float = 1.0
    gate: asyncio.Lock = field(default_factory=asyncio.Lock)  # held for the length of one request
    last_end: float = float("-inf")  # when its last request ended (monotonic)
    hold_until: float = 0.0  # no request before this (the site asked us to back off)


class Frontier:
    def __init__(self, limits: Limits = Limits(), delay: float = 1.0, journal: Journal | None = None) -> None:
        self.limits = limits
        self.journal = journal
        self._queued: Counter[str] = Counter()  # URL -> times queued, for the journal
        # With a journal shared by a crawl's shards: called when nothing is left here; True when
        # it queued more (handed over by another shard), False when the crawl is over everywhere.
        self.idle_hook: Callable[[], Awaitable[bool]] | None = None
        self._hooked = False  # a worker is in the hook: the others wait
        self._over = False
        self.delay = delay
        self.seen: set[str] = set()
        self.rejected: Counter[str] = Counter()  # reason -> URLs not queued
        self._sites: dict[str, _Site] = {}
        self._ready: list[tuple[float, int, str]] = []  # (ready_at, seq, site) for idle sites with work
        self._seq = itertools.count()
        self._variants: Counter[tuple[str, str]] = Counter()
        self._wake = asyncio.Event()
        self.in_flight = 0

    def site(self, name: str) -> _Site:
        s = self._sites.get(name)
        if s is None:
            s = self._sites[name] = _Site(delay=self.delay)
        return s

    def set_delay(self, site: str, delay: float) -> None:
        self.site(site).delay = max(self.delay, delay)

    @asynccontextmanager
    async def slot(self, name: str) -> AsyncIterator[None]:
        """Make one request to site ``name`` inside this: it waits for any other request to the
        site to end, then for the site's delay after it (or a back-off the site asked for)."""
        s = self.site(name)
        async with s.gate:
            wait = max(s.last_end + s.delay, s.hold_until) - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                yield
            finally:
                s.last_end = time.monotonic()

    def add(self, req: Request, force: bool = False) -> bool:
        """Queue ``req`` unless seen or past a trap bound; ``force`` re-queues a retry or a sitemap."""
        reason = None if force else self._check(req)
        if reason:
            self.rejected[reason] += 1
            return False
        self.seen.add(req.url)
        if self.journal is not None:
            self.journal.added(req)
            self._queued[req.url] += 1
        name = site_of(req.url)
        s = self.site(name)
        was_empty = not s.queue
        heapq.heappush(s.queue, (-req.priority, req.depth, next(self._seq), req))
        if was_empty and not s.busy:
            heapq.heappush(self._ready, (s.ready_at, next(self._seq), name))
        self._wake.set()
        return True

    def _check(self, req: Request) -> str | None:
        if req.url in self.seen:
            return "seen"
        if req.depth > self.limits.max_depth:
            return "too_deep"
        if len(req.url) > self.limits.max_url_length:
            return "url_too_long"
        s = self.site(site_of(req.url))
        if req.kind == "page" and s.taken + len(s.queue) >= self.limits.max_pages_per_site:
            return "site_cap"
        parts = urlsplit(req.url)
        if parts.query:
            key = (parts.netloc, parts.path)
            if self._variants[key] >= self.limits.max_query_variants:
                return "query_variants"
            self._variants[key] += 1
        return None

    async def get(self) -> Request | None:
        """The next request whose site is due, waiting for politeness; None when the crawl is done."""
        while True:
            if self._ready:
                ready_at, _, name = self._ready[0]
                wait = ready_at - time.monotonic()
                if wait <= 0:
                    heapq.heappop(self._ready)
                    s = self._sites[name]
                    _, _, _, req = heapq.heappop(s.queue)
                    self._unqueued(req.url)
                    s.busy = True
                    s.taken += 1
                    self.in_flight += 1
                    return req
            elif self.in_flight == 0 and (self._over or self.idle_hook is None):
                self._over = True
                self._wake.set()  # let every other waiting worker see the end too
                return None
            elif self.in_flight == 0 and not self._hooked:
                hook = self.idle_hook
                assert hook is not None
                self._hooked = True
                try:
                    self._over = not await hook()
                finally:
                    self._hooked = False
                continue
            elif self.in_flight == 0:
                wait = 1.0  # another worker is in the hook
            else:
                wait = 3600.0
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=wait)
            except TimeoutError:
                pass

    def release(self, req: Request, backoff: float = 0.0) -> None:
        """The request for ``req`` ended; its site may be asked again after its delay (or ``backoff``)."""
        name = site_of(req.url)
        s = self._sites[name]
        s.busy = False
        s.ready_at = time.monotonic() + max(s.delay, backoff)
        s.hold_until = max(s.hold_until, time.monotonic() + backoff)
        self.in_flight -= 1
        if self.journal is not None and not self._queued[req.url]:
            self.journal.done(req.url)  # not when it was queued again (a retry)
        if s.queue:
            heapq.heappush(self._ready, (s.ready_at, next(self._seq), name))
        self._wake.set()

    def clear(self) -> None:
        """Drop every queued request (the crawl's budget is spent); requests in flight finish."""
        for s in self._sites.values():
            s.queue.clear()
        self._ready.clear()
        self._queued.clear()
        if self.journal is not None:
            self.journal.cleared()
        self._wake.set()

    def _unqueued(self, url: str) -> None:
        if self.journal is not None:
            self._queued[url] -= 1
            if not self._queued[url]:
                del self._queued[url]

    def resume(self) -> int | None:
        """With a journal holding a crawl that did not finish: its state taken up, and its count of
        pages fetched; else None."""
        state = self.journal.resume() if self.journal is not None else None
        if state is None:
            return None
        seen, queued, pages = state
        self.seen |= seen
        for req in queued:
            self.add(req, force=True)
        return pages

    def fetched(self, pages: int) -> None:
        if self.journal is not None:
            self.journal.fetched(pages)

    def durable(self) -> None:
        if self.journal is not None:
            for req in self.journal.durable():
                self.add(req)

    def hand_over(self, shard: int, req: Request) -> bool:
        return self.journal is not None and self.journal.hand_over(shard, req)

    def finished(self) -> None:
        if self.journal is not None:
            self.journal.finished()

    def pending(self) -> int:
        return sum(len(s.queue) for s in self._sites.values())
