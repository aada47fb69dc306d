"""The boundary between the crawler and the index: where fetched pages go, and what is known of them.

The crawler never converts or indexes. It hands each fetched page to a ``PageSink`` and asks the
sink what it knows of a URL (validators for conditional requests, the visit history that the
change-rate estimate needs). ``MemorySink`` keeps everything in memory, for tests and benchmarks;
the real sink (daemon side) converts with ``converters.convert`` and stores in the index.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Protocol, runtime_checkable

from deskdex.index import normalise

if TYPE_CHECKING:
    from deskdex.converters import Source

PutResult = Literal["stored", "unchanged", "duplicate"]


@dataclass(slots=True)
class FetchedPage:
    """One successful response (2xx, or 304 with ``body`` empty), as the crawler saw it."""

    url: str  # the normalised URL that was requested
    final_url: str  # after redirects
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes
    content_type: str  # the MIME type without parameters ("text/html")
    fetched_at: float  # Unix time
    depth: int = 0
    anchors: list[str] = field(default_factory=list)  # anchor texts of links pointing to this page
    charset: str | None = None
    # What converting the body gave (converters.convert's Outcomes), when it was converted where it
    # was fetched (a cluster worker, deskdex.cluster.fetching); None: the sink converts it.
    converted: list[Any] | None = None

    @property
    def not_modified(self) -> bool:
        return self.status == 304


@dataclass(slots=True)
class Visit:
    at: float
    changed: bool
    modified_at: float | None = None  # the server's Last-Modified, when it gave one


@dataclass(slots=True)
class KnownPage:
    url: str
    etag: str | None = None
    last_modified: str | None = None  # the header as the server sent it, replayed in If-Modified-Since
    fetched_at: float = 0.0  # the last visit
    changed_at: float = 0.0  # the last visit that saw a change (or the first fetch)
    size: int = 0
    visits: list[Visit] = field(default_factory=list)  # oldest first; the first is the first fetch
    hint_changefreq: str | None = None  # from a sitemap, until visits say more
    priority: float = 0.5
    depth: int = 0


class PageSink(Protocol):
    def put_page(self, page: FetchedPage) -> PutResult:
        """Store ``page`` (or record a 304): "stored", "unchanged" (same text as before) or "duplicate"."""

    def known(self, url: str) -> KnownPage | None:
        """What is known of ``url`` from earlier visits, or None for a new URL."""

    def known_pages(self) -> Iterable[KnownPage]:
        """Every known page, for revisit scheduling and for freshness in ``crawl status``."""


@runtime_checkable
class CommittingSink(PageSink, Protocol):
    """A sink whose pages are durable only once it commits (an index); other sinks store for good at once."""

    commits: int  # commits made so far: a crawl's journal forgets a request once a commit holds its page

    def commit(self) -> None:
        """Make every page stored so far durable."""


def shingles(text: str, n: int = 4) -> set[int]:
    words = normalise(text).split()
    return {hash(tuple(words[i:i + n])) for i in range(max(1, len(words) - n + 1))}


def page_source(page: FetchedPage) -> "Source":
    """The page as a file to convert: the same name and type wherever it is converted."""
    from deskdex.converters import Source

    mime = page.content_type + (f"; charset={page.charset}" if page.charset else "")
    name = page.final_url.split("?", 1)[0].rsplit("/", 1)[-1] or "index.html"
    if "." not in name and page.content_type in ("text/html", "application/xhtml+xml"):
        name += ".html"
    return Source(uri=page.url, name=name, data=page.body, mime=mime)


def text_of(page: FetchedPage) -> str:
    """The main text of a page through the converters, as the real sink stores it."""
    from deskdex.converters import convert

    outcomes = page.converted if page.converted is not None else convert(page_source(page))
    doc = outcomes[0].document
    return doc.text(main_only=True) if doc is not None else ""


def record_visit(kp: KnownPage, page: FetchedPage, changed: bool) -> PutResult:
    """Note a visit on ``kp``: the validators to replay, and whether the page had changed (every
    sink keeps this history the same way: the change-rate estimate depends on it)."""
    kp.etag = page.headers.get("etag") or kp.etag
    kp.last_modified = page.headers.get("last-modified") or kp.last_modified
    kp.fetched_at = page.fetched_at
    if page.body:
        kp.size = len(page.body)
    if changed:
        kp.changed_at = page.fetched_at
    kp.visits.append(Visit(page.fetched_at, changed))
    return "stored" if changed else "unchanged"


class MemorySink:
    """A sink in memory: stores page texts, records visits, finds near-duplicates by shingle overlap.

    A page whose word 4-gram set overlaps an already stored page's by ``near`` (Jaccard) or more
    is a near-duplicate: recorded, not stored (the patent: skip near-duplicates while crawling).
    """

    def __init__(self, near: float = 0.9) -> None:
        self.near = near
        self.pages: dict[str, KnownPage] = {}
        self.texts: dict[str, str] = {}
        self.versions: dict[str, list[tuple[float, str]]] = {}
        self.anchors: dict[str, set[str]] = {}
        self.duplicates: dict[str, str] = {}  # url -> the stored url it duplicates
        self._digests: dict[str, str] = {}
        self._shingles: dict[str, set[int]] = {}

    def known(self, url: str) -> KnownPage | None:
        return self.pages.get(url)

    def known_pages(self) -> Iterable[KnownPage]:
        return list(self.pages.values())

    def put_page(self, page: FetchedPage) -> PutResult:
        kp = self.pages.get(page.url)
        self.anchors.setdefault(page.url, set()).update(a for a in page.anchors if a.strip())
        if page.not_modified and kp is not None:
            return self._visit(kp, page, changed=False)
        text = text_of(page)
        digest = hashlib.blake2b(normalise(text).encode(), digest_size=16).hexdigest()
        if kp is not None and self._digests.get(page.url) == digest:
            return self._visit(kp, page, changed=False)
        dup = self._near_duplicate(page.url, text)
        kp = kp or KnownPage(page.url, depth=page.depth)
        self.pages[page.url] = kp
        changed = bool(kp.visits)
        self._visit(kp, page, changed=changed)
        if not changed:
            kp.changed_at = page.fetched_at
        if dup is not None:
            self.duplicates[page.url] = dup
            return "duplicate"
        self.texts[page.url] = text
        self._digests[page.url] = digest
        self._shingles[page.url] = shingles(text)
        self.versions.setdefault(page.url, []).append((page.fetched_at, text))
        return "stored"

    def _visit(self, kp: KnownPage, page: FetchedPage, changed: bool) -> PutResult:
        return record_visit(kp, page, changed)

    def _near_duplicate(self, url: str, text: str) -> str | None:
        mine = shingles(text)
        if not mine:
            return None
        for other, theirs in self._shingles.items():
            if other != url and theirs and len(mine & theirs) / len(mine | theirs) >= self.near:
                return other
        return None
