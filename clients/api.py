"""deskdex for scripts and other programs (docs/python-api.md)::

    import deskdex

    for hit in deskdex.search("budget type:sheet", limit=20):
        print(hit.path, hit.title)

``search``, ``document``, ``similar``, ``duplicates`` and ``status``, re-exported by ``deskdex``
itself (lazily: ``import deskdex`` alone loads none of this). Each asks the home's daemon when one
runs and reads the index read-only otherwise, through the functions the command line answers with
(clients/reading.py), so a script finds what ``deskdex search`` prints; the answers are the
protocol's (deskdex.protocol: SearchHit, DocumentAnswer) as frozen dataclasses.

Every error is one of deskdex.errors' (a ``DeskdexError``): ``IndexMissing`` (nothing indexed yet
under the home, and no daemon for it), ``QueryError`` (a malformed query; ``position`` says where),
``NotFound`` (no such document in the index, or no such file), ``BadArgs`` (an argument out of
range, ``limit=0``: refused here as the daemon would refuse it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, overload

from deskdex.errors import ConversionError, NotFound
from deskdex.paths import Home
from deskdex.index import type_group
from deskdex.protocol import MAX_LIMIT, OPS, check_args, indexing_said

from .ask import ask
from .reading import current_status, found, near_duplicates_of, not_one_file, uri_of

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from deskdex.protocol import DocumentAnswer, SearchHit, SearchResults

    PathLike = str | os.PathLike[str]

__all__ = ["Block", "Document", "Duplicate", "Hit", "Results", "Status", "document", "duplicates", "search",
           "similar", "status"]


@dataclass(frozen=True)
class Hit:
    """One search result. A member of an archive or a mail store has the container's ``path`` and
    a ``uri`` of its own (``file:///a.zip#b.txt``); a web page, its URL as ``uri`` and ``path``."""

    uri: str
    path: str
    title: str  # "" when the document has none
    score: float  # the rank's score: comparable within one search only
    snippet: str  # "" with snippets=False
    highlights: tuple[tuple[int, int], ...]  # [start, end) character ranges of the matches in snippet
    mime: str  # the MIME type
    type: str | None  # its `type:` group ("sheet", "pdf": docs/search.md); None for a type of no group
    ext: str  # the file name's extension, lower case, no dot
    size: int  # bytes
    mtime: datetime  # last modified, in UTC
    page: int | None  # paged documents: the page of the snippet's first match; else None
    lang: str | None  # ISO 639-1 code of the text's language; None: not told
    source: str  # "files" or "web"
    duplicates: int  # copies this hit stands for (search(..., all=True) lists them too)
    similar: int  # other documents of its cluster: other formats, versions (deskdex.similar lists them)
    # Found by meaning alone: it holds none of the query's words, and comes after every hit that does
    # (docs/search.md, "Meaning"; search(..., words=True) leaves such hits out).
    related: bool = False


@dataclass(frozen=True)
class Results(Sequence[Hit]):
    """The hits of one search, best first, a sequence: iterate, index, slice or take ``len()`` of it
    as of a tuple. ``total``: every match, as ``deskdex search`` counts them (the copies a hit
    stands for too). ``indexing``: None when the daemon had nothing left to index; else how far it
    is, as ``deskdex search`` says it ("the index is being built: 120 of 3,000 files found so far
    done"), since more may match once it is done."""

    hits: tuple[Hit, ...]
    total: int
    indexing: str | None = None

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    @overload
    def __getitem__(self, index: int) -> Hit: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Hit, ...]: ...

    def __getitem__(self, index: int | slice) -> Hit | tuple[Hit, ...]:
        return self.hits[index]


@dataclass(frozen=True)
class Block:
    """A heading, paragraph, list item, table cell... of a document's text (docs/tagged-text.md)."""

    kind: str  # h, p, li, td, pre, quote
    level: int  # a heading's level; a list item's depth
    text: str
    page: int | None  # the 1-based page it starts on; None: the format has no pages
    boilerplate: bool  # navigation, footers and the like around a web page's main content
    marks: tuple[tuple[int, int], ...]  # [start, end) ranges of text where document(query=...) matches


@dataclass(frozen=True)
class Document:
    """One indexed document: its metadata and its text, block by block, as the index keeps them."""

    uri: str
    path: str
    title: str
    mime: str
    size: int
    mtime: datetime  # UTC
    lang: str | None
    pages: int | None  # paged formats (PDF, DjVu...): the page count; else None
    source: str  # "files" or "web"
    duplicates: int  # its copies (same text and format)
    similar: int  # other documents of its cluster
    blocks: tuple[Block, ...]  # empty for a document indexed by its name only
    truncated: bool  # it has more blocks than max_blocks

    @property
    def text(self) -> str:
        """The plain text, one block a line (as ``deskdex convert`` prints it, without the title)."""
        return "\n".join(b.text for b in self.blocks)


@dataclass(frozen=True)
class Duplicate:
    """A near-duplicate of a file: an indexed document with most of its words in common."""

    uri: str
    path: str
    similarity: float  # the share of words in common, 0 to 1


@dataclass(frozen=True)
class Status:
    """The index and its daemon, as ``deskdex status`` shows them."""

    daemon: bool  # a daemon answered (else the index was read directly)
    state: str  # the daemon's: idle, indexing, paused, stalled ...; "idle" without a daemon
    state_reason: str | None  # why it is stalled (disk full ...)
    queue: int  # files waiting to be indexed
    documents: int  # documents indexed
    failed: int  # files that failed to convert
    failed_by_reason: Mapping[str, int]
    last_commit: datetime | None  # when the index last changed (UTC); None: never
    data_dir: str  # where the home's index lives
    notes: tuple[str, ...]  # what the daemon or the index has to say (nothing indexed yet ...)
    details: Mapping[str, Any] = field(repr=False)  # all of `deskdex status --json`, whose keys may change


def search(query: str, limit: int = 10, *, offset: int = 0, sort: str = "relevance", all: bool = False,
           snippets: bool = True, words: bool = False, home: PathLike | None = None) -> Results:
    """The documents matching ``query`` (the query language of ``deskdex search``, docs/search.md),
    best first; ``sort``: "relevance", "date" (newest first) or "size" (largest first); ``all``:
    every copy, not one hit per group of copies; ``words``: by the words alone, without the documents
    related by meaning that follow the words' hits (``Hit.related``); ``home``: as the command's
    ``--home`` (None: $DESKDEX_HOME, else the platform's folders).

    >>> for hit in deskdex.search("budget type:sheet", limit=20):  # doctest: +SKIP
    ...     print(hit.path, hit.title, hit.mtime.date())

    Raises QueryError (with ``position``) for a malformed query, IndexMissing before anything is
    indexed, BadArgs for an argument out of range."""
    check_args(OPS["search"], {"query": query, "limit": limit, "offset": offset, "sort": sort, "all": all,
                               "snippets": snippets, "words": words})
    return _results(found(_given(home), query, limit=limit, offset=offset, sort=sort, all=all, snippets=snippets,
                          words=words))


def document(target: PathLike, *, query: str = "", max_blocks: int = 20_000, home: PathLike | None = None) -> Document:
    """The indexed document at path ``target`` (relative to the working folder), or of the URI
    ``target`` (a hit's ``uri``: an archive's member, a web page), with its text as the index keeps
    it; the blocks' ``marks`` say where ``query``'s words match.

    >>> doc = deskdex.document(os.path.expanduser("~/notes/budget.odt"))  # doctest: +SKIP
    >>> print(doc.title, doc.pages, doc.text[:200])  # doctest: +SKIP

    Raises NotFound when the index has no such document, QueryError for a malformed ``query``."""
    wanted = os.fspath(target)
    args = check_args(OPS["document"], {"uri": uri_of(wanted), "query": query, "max_blocks": max_blocks})
    given = _given(home)
    try:
        answer: DocumentAnswer | None = ask(given, "document", **args)
        if answer is None:
            from deskdex.index import Collection
            from deskdex.index import document as read

            with Collection.open(Home.resolve(given).check().data_dir) as coll:
                answer = read(coll, **args)
    except NotFound:
        raise NotFound(f"not in the index: {wanted}") from None
    return Document(
        uri=answer["uri"], path=answer["path"], title=answer["title"], mime=answer["mime"], size=answer["size"],
        mtime=_utc(answer["mtime"]), lang=answer["lang"], pages=answer["pages"], source=answer["source"],
        duplicates=answer["duplicates"], similar=answer["similar"], truncated=answer["truncated"],
        blocks=tuple(Block(kind=b["kind"], level=b["level"], text=b["text"], page=b["page"],
                           boilerplate=b["boilerplate"], marks=_spans(b["marks"])) for b in answer["blocks"]))


def similar(target: PathLike, limit: int = 10, *, home: PathLike | None = None) -> Results:
    """The other documents of the cluster of the indexed document ``target`` (a path or a hit's
    URI): its copies and the documents much like it (other formats, versions, translations), as
    ``deskdex search --similar URI`` lists them, ``target`` itself left out.

    >>> for hit in deskdex.similar("/home/ann/report-v3.docx"):  # doctest: +SKIP
    ...     print(hit.path, hit.duplicates)

    Raises NotFound when the index has no such document."""
    wanted = os.fspath(target)
    uri = uri_of(wanted)
    check_args(OPS["search"], {"query": "", "limit": limit, "similar": uri})
    # The cluster holds the document itself: asked for one more, which is then left out.
    answer = found(_given(home), "", limit=min(limit + 1, MAX_LIMIT), similar=uri)
    if answer["total"] == 0:
        raise NotFound(f"not in the index: {wanted}")
    others = [h for h in answer["hits"] if h["uri"] != uri][:limit]
    return Results(hits=tuple(_hit(h) for h in others), total=answer["total"] - 1, indexing=_indexing(answer))


def duplicates(path: PathLike, *, home: PathLike | None = None) -> tuple[Duplicate, ...]:
    """The indexed documents with most of the words of the file at ``path`` (indexed or not), most
    alike first, the file itself left out: what ``deskdex dups FILE`` lists. The file is converted
    for it (in an isolated worker, under the home's limits).

    >>> for d in deskdex.duplicates("draft.txt"):  # doctest: +SKIP
    ...     print(f"{d.similarity:.0%}", d.path)

    Raises NotFound when ``path`` is no file, ConversionError when it cannot be converted."""
    absolute = os.path.abspath(os.fspath(path))
    problem = not_one_file(absolute)
    if problem:
        raise NotFound(problem)
    answer = near_duplicates_of(_given(home), absolute)
    if answer.get("error"):
        raise ConversionError(f"{absolute} could not be converted: {answer['error']}")
    return tuple(Duplicate(uri=d["uri"], path=d["path"], similarity=float(d["similarity"]))
                 for d in answer["duplicates"])


def status(*, home: PathLike | None = None) -> Status:
    """How the index and its daemon are: documents, failures, the daemon's state and queue.
    Without an index there is no error: no documents, and a note saying so.

    >>> s = deskdex.status()  # doctest: +SKIP
    >>> print(s.documents, "documents;", "daemon" if s.daemon else "no daemon", s.state)"""
    info = current_status(_given(home))
    notes = ([info["note"]] if info.get("note") else []) + list(info.get("notes") or [])
    return Status(
        daemon=bool(info["daemon"]), state=info["state"], state_reason=info.get("state_reason"),
        queue=info["queue"], documents=info["documents"], failed=info["failed"],
        failed_by_reason=dict(info["failed_by_reason"]),
        last_commit=_utc(info["last_commit"]) if info.get("last_commit") else None,
        data_dir=info["home"]["data"], notes=tuple(notes), details=info)


def _given(home: PathLike | None) -> str | None:
    return None if home is None else os.fspath(home)


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _spans(spans: list[list[int]] | None) -> tuple[tuple[int, int], ...]:
    return tuple((a, b) for a, b in spans or ())


def _hit(h: SearchHit) -> Hit:
    return Hit(uri=h["uri"], path=h["path"], title=h["title"], score=h["score"], snippet=h["snippet"],
               highlights=_spans(h.get("highlights")), mime=h["mime"], type=type_group(h["mime"]), ext=h["ext"],
               size=h["size"],
               mtime=_utc(h["mtime"]), page=h.get("page"), lang=h.get("lang"), source=h.get("source", "files"),
               duplicates=h.get("duplicates") or 0, similar=h.get("similar") or 0, related=bool(h.get("related")))


def _results(answer: SearchResults) -> Results:
    return Results(hits=tuple(_hit(h) for h in answer["hits"]), total=answer["total"], indexing=_indexing(answer))


def _indexing(answer: SearchResults) -> str | None:
    indexing = answer.get("indexing")
    return indexing_said(indexing) if indexing else None
