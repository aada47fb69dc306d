"""Links and their anchor texts from an HTML page, parsed with lxml through converters.html.

Honours ``<base href>``, ``rel="nofollow"`` and the robots meta tag (noindex, nofollow).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from deskdex.converters import decode_text as decode, parse_html as parse
from deskdex.errors import ConversionError

from .urls import normalise

logger = logging.getLogger(__name__)

LINK_TAGS = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}


@dataclass(slots=True)
class PageLinks:
    links: list[tuple[str, str]] = field(default_factory=list)  # (normalised url, anchor text)
    feeds: list[str] = field(default_factory=list)  # <link rel="alternate" type="application/rss+xml">
    noindex: bool = False
    nofollow: bool = False
    text: str = ""  # all visible text, for the topic classifier


def extract(body: bytes, url: str, charset: str | None = None) -> PageLinks:
    """Links of an HTML page; malformed HTML yields what lxml can recover, never an exception."""
    out = PageLinks()
    try:
        text, _ = decode(body, charset)
        root = parse(text)
    except ConversionError as exc:
        logger.debug("%s: no links: %s", url, exc)
        return out
    base = url
    for b in root.iter("base"):
        if b.get("href"):
            base = normalise(b.get("href", ""), url) or url
            break
    for meta in root.iter("meta"):
        if (meta.get("name") or "").lower() in ("robots", "deskdex"):
            content = (meta.get("content") or "").lower()
            out.noindex = out.noindex or "noindex" in content or "none" in content
            out.nofollow = out.nofollow or "nofollow" in content or "none" in content
    for link in root.iter("link"):
        if "alternate" in (link.get("rel") or "").lower() and "xml" in (link.get("type") or "") and link.get("href"):
            feed = normalise(link.get("href", ""), base)
            if feed:
                out.feeds.append(feed)
    for el in root.iter(*LINK_TAGS):
        target = el.get(LINK_TAGS[str(el.tag)])
        if not target or "nofollow" in (el.get("rel") or "").lower():
            continue
        norm = normalise(target, base)
        if norm:
            anchor = " ".join((el.text_content() if el.tag == "a" else el.get("alt", "") or "").split())
            out.links.append((norm, anchor))
    for bad in list(root.iter("script", "style", "noscript")):
        bad.drop_tree()
    out.text = " ".join(root.text_content().split())
    return out
