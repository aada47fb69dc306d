"""RSS and Atom pull feeds, parsed with feedparser: entry links newest first, and when to poll again.

The notes: a pull feed must be checked periodically; RSS ``ttl`` is minutes the feed may be cached,
in practice how often to refresh it. Without ttl, HTTP caching headers (Cache-Control max-age,
Expires) decide, else a default.
"""

from __future__ import annotations

import calendar
import email.utils
import logging
import re
import time
from dataclasses import dataclass

import feedparser

logger = logging.getLogger(__name__)

FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml", "application/rdf+xml", "application/feed+json"})
DEFAULT_POLL = 3600.0
_MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)")


@dataclass(frozen=True, slots=True)
class Feed:
    links: list[str]  # newest entry first
    poll_after: float  # seconds until the feed should be fetched again
    title: str = ""


def is_feed(content_type: str, body: bytes) -> bool:
    if content_type in FEED_TYPES:
        return True
    if content_type in ("application/xml", "text/xml"):
        head = body[:1024].lstrip()
        return b"<rss" in head or b"<feed" in head or b"<rdf:RDF" in head
    return False


def parse(body: bytes, headers: dict[str, str]) -> Feed:
    parsed = feedparser.parse(body, response_headers=headers, sanitize_html=False, resolve_relative_uris=False)
    dated = []
    for i, entry in enumerate(parsed.entries):
        link = entry.get("link")
        if not link:
            continue
        when = entry.get("published_parsed") or entry.get("updated_parsed")
        dated.append((calendar.timegm(when) if when else float("-inf"), -i, link))
    # Newest first; entries without a date keep the feed's own order (feeds list newest first).
    dated.sort(reverse=True)
    return Feed([link for _, _, link in dated], poll_interval(parsed.feed.get("ttl"), headers),
                parsed.feed.get("title", ""))


def poll_interval(ttl: str | None, headers: dict[str, str]) -> float:
    if ttl and str(ttl).strip().isdigit():
        return int(str(ttl).strip()) * 60.0
    m = _MAX_AGE.search(headers.get("cache-control", ""))
    if m:
        return float(m.group(1))
    expires = headers.get("expires")
    if expires:
        try:
            return max(0.0, email.utils.parsedate_to_datetime(expires).timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    return DEFAULT_POLL
