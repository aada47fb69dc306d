"""robots.txt per RFC 9309, parsed by Protego, fetched before the first page of a site and cached.

RFC 9309 section 2.3.1: a 4xx answer ("unavailable") means no rules, crawl everything; a 5xx or an
unreachable server means the crawler must assume complete disallow. Rules are cached at most 24 h.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import httpx
from protego import Protego

from deskdex.errors import FetchError

from .fetch import FetchSettings, Gate, open_gate, fetch

logger = logging.getLogger(__name__)

MAX_AGE = 24 * 3600.0
MAX_BYTES = 500 * 1024  # RFC 9309 2.5: crawlers must parse at least 500 KiB


@dataclass(slots=True)
class Rules:
    fetched_at: float
    parser: Protego | None  # None: no rules (allow all)
    disallow_all: bool = False
    status: str = "ok"  # "ok", "missing" (4xx), "unreachable" (5xx, network), "private_address"

    def allowed(self, url: str, agent: str) -> bool:
        if self.disallow_all:
            return False
        return self.parser is None or self.parser.can_fetch(url, agent)

    def crawl_delay(self, agent: str) -> float | None:
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(agent)
        rate = self.parser.request_rate(agent)
        if rate is not None and rate.requests:
            per = rate.seconds / rate.requests
            delay = max(delay or 0.0, per)
        return float(delay) if delay is not None else None

    def sitemaps(self) -> list[str]:
        return list(self.parser.sitemaps) if self.parser is not None else []


@dataclass
class RobotsCache:
    client: httpx.AsyncClient
    settings: FetchSettings
    agent: str = "deskdex"
    gate: Gate = open_gate  # the crawl's per-site politeness gate (Frontier.slot)
    max_age: float = MAX_AGE
    _rules: dict[str, Rules] = field(default_factory=dict)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    async def rules(self, scheme: str, site: str) -> Rules:
        """The rules for ``scheme://site``, fetched once per site (concurrent callers wait for one fetch)."""
        key = f"{scheme}://{site}"
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            cached = self._rules.get(key)
            if cached is not None and time.time() - cached.fetched_at < self.max_age:
                return cached
            rules = await self._fetch(key + "/robots.txt")
            self._rules[key] = rules
            return rules

    async def _fetch(self, url: str) -> Rules:
        try:
            # Redirects are followed, to other sites too (RFC 9309 2.3.1.2), each hop in its site's turn.
            page = await fetch(self.client, self.settings, url, gate=self.gate)
        except FetchError as exc:
            if exc.reason.startswith("http_4") and exc.reason != "http_429":
                logger.debug("%s: %s, allowing all", url, exc)
                return Rules(time.time(), None, status="missing")
            logger.info("%s: %s, disallowing all for now", url, exc)
            return Rules(time.time(), None, disallow_all=True,
                         status="private_address" if exc.reason == "private_address" else "unreachable")
        text = page.body[:MAX_BYTES].decode("utf-8", errors="replace")
        return Rules(time.time(), Protego.parse(text))
