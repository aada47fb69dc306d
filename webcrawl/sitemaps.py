"""Sitemaps (sitemaps.org 0.9): url sets and sitemap indexes, plain or gzipped, parsed with lxml.

Each entry keeps lastmod, changefreq and priority: the frontier orders new URLs by priority and
the revisit schedule starts from changefreq until visits have measured the page's change rate.
"""

from __future__ import annotations

import gzip
import io
import logging
import zlib
from dataclasses import dataclass
from datetime import datetime

from lxml import etree

logger = logging.getLogger(__name__)

MAX_BYTES = 50 * 2**20  # the protocol's limit for an uncompressed sitemap
CHANGEFREQ_DAYS = {"always": 1 / 24, "hourly": 1 / 24, "daily": 1.0, "weekly": 7.0, "monthly": 30.0,
                   "yearly": 365.0, "never": 3650.0}


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    url: str
    lastmod: float | None = None  # Unix time
    changefreq: str | None = None
    priority: float = 0.5


@dataclass(slots=True)
class Sitemap:
    entries: list[SitemapEntry]
    children: list[str]  # further sitemaps, when this is a sitemap index


def parse(data: bytes) -> Sitemap:
    """Parse a sitemap or sitemap index; raises ValueError for something that is neither."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.GzipFile(fileobj=io.BytesIO(data)).read(MAX_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"bad gzip: {exc}") from exc
    if len(data) > MAX_BYTES:
        raise ValueError("sitemap over 50 MiB")
    try:
        root = etree.fromstring(data, parser=etree.XMLParser(resolve_entities=False, no_network=True,
                                                             huge_tree=False, recover=True))
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"not XML: {exc}") from exc
    if root is None:
        raise ValueError("empty sitemap")
    kind = etree.QName(root).localname
    if kind not in ("urlset", "sitemapindex"):
        raise ValueError(f"not a sitemap: <{kind}>")
    entries: list[SitemapEntry] = []
    children: list[str] = []
    for item in root:
        if not isinstance(item.tag, str):
            continue
        fields = {etree.QName(c).localname: (c.text or "").strip() for c in item if isinstance(c.tag, str)}
        loc = fields.get("loc")
        if not loc:
            continue
        if kind == "sitemapindex":
            children.append(loc)
        else:
            entries.append(SitemapEntry(loc, _date(fields.get("lastmod")), fields.get("changefreq", "").lower() or None,
                                        _priority(fields.get("priority"))))
    return Sitemap(entries, children)


def _date(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _priority(text: str | None) -> float:
    try:
        return min(1.0, max(0.0, float(text))) if text else 0.5
    except ValueError:
        return 0.5
