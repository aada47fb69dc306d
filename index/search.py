"""Queries to ranked hits with snippets, read-only (any number of searchers beside one writer).

A search answers the protocol's ``SearchResults`` (deskdex.protocol): plain dicts, the one form of a
result, whether it crosses the socket or the command line reads the index directly."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import tantivy

from deskdex.converters import tagged
from deskdex.errors import BadArgs, QueryError
from deskdex.protocol import MAX_LIMIT

from . import query as query_language
from .access import EVERYONE
from .collection import Collection

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit, SearchResults

logger = logging.getLogger(__name__)


SORTS = {"relevance": None, "date": "mtime", "size": "size"}
# Hits looked at, at most, to pick one per duplicate cluster: past it, fewer hits than asked for.
MAX_WINDOW = 100_000


def parse(index: tantivy.Index, query: str) -> tantivy.Query:
    try:
        return query_language.parse(index.schema, query)
    except ValueError as exc:  # tantivy refused a query we built: still the user's query's fault
        raise QueryError(f"cannot search for {query!r}: {exc}") from exc


def search(coll: Collection, query: str, limit: int = 10, offset: int = 0, snippets: bool = True,
           sort: str = "relevance", collapse: bool = True, reader: int | None = None) -> SearchResults:
    """Ranked hits; with ``collapse`` one per duplicate cluster (the best: most relevant, then
    most recent), each saying how many near-duplicates it stands for. ``reader``: a uid; only
    documents that user may read are found (None: no filter), and duplicate counts, which would
    tell of documents the reader may not see, are left out."""
    if sort not in SORTS:
        raise QueryError(f"cannot sort by {sort!r}: use one of {', '.join(SORTS)}")
    if not (0 < limit <= MAX_LIMIT and 0 <= offset <= MAX_LIMIT):  # the protocol's bounds, for every caller
        raise BadArgs(f"limit must be 1 to {MAX_LIMIT} and offset 0 to {MAX_LIMIT}, not {limit} and {offset}")
    q = parse(coll.index, query)
    if reader is not None:
        allowed = tantivy.Query.term_set_query(coll.index.schema, "reader", [reader, EVERYONE])
        q = tantivy.Query.boolean_query([(tantivy.Occur.Must, q), (tantivy.Occur.Must, allowed)])
    try:
        coll.index.reload()
    except ValueError as exc:
        # tantivy takes a lock file to load new commits, which a read-only file system refuses:
        # the commits loaded before still answer (the daemon cannot write new ones meanwhile).
        logger.debug("searching without the latest commits: %s", exc)
    searcher = coll.index.searcher()
    if not collapse:
        # limit 0 panics inside tantivy (a BaseException): always ask for at least one hit.
        result = searcher.search(q, max(1, limit), count=True, offset=offset, order_by_field=SORTS[sort])
        return _results(coll, searcher, q, result.hits, result.count or 0,  # type: ignore[attr-defined]  # at run time, not in tantivy 0.27's stub
                        sort, snippets, limit,
                        counts=reader is None)
    window = (offset + limit) * 3 + 20
    while True:
        result = searcher.search(q, window, count=True, order_by_field=SORTS[sort])
        picked = _collapse(searcher, result.hits, sort)
        if len(picked) >= offset + limit or len(result.hits) < window or window >= MAX_WINDOW:
            break
        # Many duplicates among the first hits: look further, but not through the whole index
        # (each hit looked at is a document read).
        window = min(window * 4, MAX_WINDOW)
    total = result.count or 0  # type: ignore[attr-defined]  # at run time, not in tantivy 0.27's stub
    return _results(coll, searcher, q, picked[offset:offset + limit], total, sort, snippets, limit,
                    counts=reader is None)


def _collapse(searcher: tantivy.Searcher, hits: list[Any], sort: str) -> list[Any]:
    """One hit per cluster: the first in rank order, ties in score going to the newest."""
    docs = [(key, address, searcher.doc(address).to_dict()) for key, address in hits]
    if sort == "relevance":
        docs.sort(key=lambda t: (-float(t[0]), -int(_one(t[2], "mtime", 0))))
    seen: set[int] = set()
    out = []
    for key, address, d in docs:
        cluster = int(_one(d, "cluster", 0))
        if cluster:
            if cluster in seen:
                continue
            seen.add(cluster)
        out.append((key, address))
    return out


def _results(coll: Collection, searcher: tantivy.Searcher, q: tantivy.Query, hits: list[Any], total: int,
             sort: str, snippets: bool, limit: int, counts: bool) -> SearchResults:
    """Hits with their stored fields, snippets and duplicate counts."""
    gen = tantivy.SnippetGenerator.create(searcher, q, coll.index.schema, "body") if snippets else None
    if gen is not None:
        gen.set_max_num_chars(200)
    out: list[SearchHit] = []
    for score, address in hits[:limit]:
        d = searcher.doc(address).to_dict()
        snippet, highlights = _snippet(coll, gen, _one(d, "blob")) if gen is not None else ("", None)
        cluster = int(_one(d, "cluster", 0))
        duplicates = 0
        if counts and cluster:
            duplicates = coll.catalog.db.execute("SELECT count(*) - 1 FROM docs WHERE cluster=?",
                                                 (cluster,)).fetchone()[0]
        out.append({"uri": _one(d, "uri"), "path": _one(d, "path"), "title": _one(d, "title"), "snippet": snippet,
                    "score": float(score) if sort == "relevance" else 0.0, "mime": _one(d, "mime"),
                    "mtime": int(_one(d, "mtime", 0)), "size": int(_one(d, "size", 0)), "ext": _one(d, "ext"),
                    "source": _one(d, "source", "files"), "cluster": cluster, "highlights": highlights,
                    "duplicates": duplicates})
    return {"total": total, "hits": out}


def _one(d: dict[str, list[Any]], key: str, default: Any = "") -> Any:
    v = d.get(key)
    return v[0] if v else default


def _snippet(coll: Collection, gen: tantivy.SnippetGenerator, blob: str) -> tuple[str, list[list[int]]]:
    data = coll.catalog.get_text(blob) if blob else None
    if not data:
        return "", []
    text = tagged.plain_text(data)
    sn = gen.snippet_from_doc(tantivy.Document(body=text))
    fragment = sn.fragment()
    if not fragment:
        lines = [ln for ln in text.split("\n") if ln.strip()] or [text]
        return " ".join(" ".join(lines).split())[:200], []
    raw = fragment.encode("utf-8")
    # tantivy gives UTF-8 byte offsets; callers want character offsets.
    spans = [[len(raw[: h.start].decode("utf-8", "ignore")), len(raw[: h.end].decode("utf-8", "ignore"))]
             for h in sn.highlighted()]
    return fragment, spans
