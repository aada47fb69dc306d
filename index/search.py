"""Queries to ranked hits with snippets, read-only (any number of searchers beside one writer).

A search answers the protocol's ``SearchResults`` (deskdex.protocol): plain dicts, the one form of a
result, whether it crosses the socket or the command line reads the index directly."""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import tantivy

from deskdex.converters import tagged
from deskdex.errors import BadArgs, QueryError
from deskdex.protocol import MAX_LIMIT

from . import fulltext
from . import query as query_language
from .access import EVERYONE
from .collection import Collection
from .readable import ReadableClusters

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit, SearchResults

logger = logging.getLogger(__name__)


SORTS = {"relevance": None, "date": "mtime", "size": "size"}
# Hits looked at, at most, to pick one per duplicate cluster: past it, fewer hits than asked for.
MAX_WINDOW = 100_000


def parse(index: tantivy.Index, query: str, readable: ReadableClusters | None = None) -> tantivy.Query:
    """The tantivy query; with ``readable``, for that reader: clauses scored by constant weights and
    ``dup:`` about the reader's duplicates (index/query.py)."""
    has_dup = None
    if readable is not None:
        def has_dup() -> tantivy.Query:
            uris = readable.with_duplicates()
            return tantivy.Query.term_set_query(index.schema, "uri", uris) if uris else tantivy.Query.empty_query()
    try:
        return query_language.parse(index.schema, query, constant=readable is not None, has_dup=has_dup)
    except ValueError as exc:  # tantivy refused a query we built: still the user's query's fault
        raise QueryError(f"cannot search for {query!r}: {exc}") from exc


def search(coll: Collection, query: str, limit: int = 10, offset: int = 0, snippets: bool = True,
           sort: str = "relevance", collapse: bool = True, reader: int | None = None) -> SearchResults:
    """Ranked hits; with ``collapse`` one per duplicate cluster (the best: most relevant, then
    most recent), each saying how many near-duplicates it stands for.

    ``reader``: a uid (None: no filter, root's view). Only documents that user may read are found,
    and nothing in the answer depends on the others (docs/search.md, "Enterprise mode"): the
    score of a hit is the sum of the weights of the fields its words matched, not BM25 (whose
    statistics count every document); hits of equal score go newest first, then by URI;
    duplicate clusters, counts and ``dup:`` count readable documents only; snippets are chosen
    with word statistics of the hits shown."""
    if sort not in SORTS:
        raise QueryError(f"cannot sort by {sort!r}: use one of {', '.join(SORTS)}")
    if not (0 < limit <= MAX_LIMIT and 0 <= offset <= MAX_LIMIT):  # the protocol's bounds, for every caller
        raise BadArgs(f"limit must be 1 to {MAX_LIMIT} and offset 0 to {MAX_LIMIT}, not {limit} and {offset}")
    readable = ReadableClusters(coll.catalog.db, reader) if reader is not None else None
    q = parse(coll.index, query, readable)
    if reader is not None:
        allowed = tantivy.Query.term_set_query(coll.index.schema, "reader", [reader, EVERYONE])
        # Scored 0: a reader's scores are the query's weights alone.
        q = tantivy.Query.boolean_query([(tantivy.Occur.Must, q),
                                         (tantivy.Occur.Must, tantivy.Query.const_score_query(allowed, 0.0))])
    try:
        coll.index.reload()
    except ValueError as exc:
        # tantivy takes a lock file to load new commits, which a read-only file system refuses:
        # the commits loaded before still answer (the daemon cannot write new ones meanwhile).
        logger.debug("searching without the latest commits: %s", exc)
    searcher = coll.index.searcher()
    if readable is not None:
        picked, total = _reader_hits(searcher, q, sort, offset + limit, collapse, readable)
        return _results(coll, searcher, q, picked[offset:offset + limit], total, sort, snippets, readable)
    if not collapse:
        # limit 0 panics inside tantivy (a BaseException): always ask for at least one hit.
        result = searcher.search(q, max(1, limit), count=True, offset=offset, order_by_field=SORTS[sort])
        return _results(coll, searcher, q, result.hits[:limit], result.count or 0,  # type: ignore[attr-defined]  # at run time, not in tantivy 0.27's stub
                        sort, snippets, None)
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
    return _results(coll, searcher, q, picked[offset:offset + limit], total, sort, snippets, None)


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


def _reader_hits(searcher: tantivy.Searcher, q: tantivy.Query, sort: str, need: int, collapse: bool,
                 readable: ReadableClusters) -> tuple[list[Any], int]:
    """A reader's first ``need`` hits (or all there are) in an order that depends on the readable
    documents alone, and how many match. tantivy breaks ties by where documents sit in its
    segments, which others' documents move: so the hits are fetched until every hit that ranks
    above the last one fetched is known, and ordered here (key, then the newest, then the URI)."""
    window = need * 3 + 20
    while True:
        result = searcher.search(q, window, count=True, order_by_field=SORTS[sort])
        hits, total = result.hits, result.count or 0  # type: ignore[attr-defined]  # at run time, not in tantivy 0.27's stub
        complete = len(hits) < window
        # Hits that tie with the last one fetched may have more of their kind not fetched yet.
        known = hits if complete else [h for h in hits if h[0] > hits[-1][0]]
        ordered = _exact_order(searcher, known, sort)
        picked = _collapse_readable(searcher, ordered, need, readable) if collapse else \
            list(itertools.islice(ordered, need))
        if len(picked) >= need or complete:
            return picked, total
        window *= 4


def _exact_order(searcher: tantivy.Searcher, hits: list[Any], sort: str) -> Iterator[Any]:
    """Hits by key (score, date or size) then, for relevance, the newest; the URI breaks the
    ties left, read for tied hits only and as far as the caller takes hits (thousands of files
    unpacked from one archive share their date)."""
    mtimes = searcher.fast_field_values("mtime", [a for _, a in hits]) if sort == "relevance" and hits else []
    keyed = [(float(key), int(mtimes[i] or 0) if mtimes else 0, i) for i, (key, _) in enumerate(hits)]
    keyed.sort(key=lambda t: (-t[0], -t[1]))
    for _, group in itertools.groupby(keyed, key=lambda t: (t[0], t[1])):
        members = [hits[i] for _, _, i in group]
        if len(members) > 1:
            members.sort(key=lambda h: str(_one(searcher.doc(h[1]).to_dict(), "uri")))
        yield from members


def _collapse_readable(searcher: tantivy.Searcher, hits: Iterable[Any], need: int,
                       readable: ReadableClusters) -> list[Any]:
    """The first ``need`` hits, one per readable cluster."""
    seen: set[int] = set()
    out: list[Any] = []
    for key, address in hits:
        d = searcher.doc(address).to_dict()
        cluster = readable.cluster_id(_one(d, "uri"), int(_one(d, "cluster", 0)))
        if cluster:
            if cluster in seen:
                continue
            seen.add(cluster)
        out.append((key, address))
        if len(out) >= need:
            break
    return out


def _results(coll: Collection, searcher: tantivy.Searcher, q: tantivy.Query, hits: list[Any], total: int,
             sort: str, snippets: bool, readable: ReadableClusters | None) -> SearchResults:
    """Hits with their stored fields, snippets and duplicate counts (``readable``: a reader's)."""
    docs = [(score, searcher.doc(address).to_dict()) for score, address in hits]
    texts = [_text(coll, _one(d, "blob")) for _, d in docs] if snippets else []
    gen = _snippet_generator(searcher if readable is None else _page_searcher(texts), q, coll.index.schema) \
        if snippets and docs else None
    out: list[SearchHit] = []
    for i, (score, d) in enumerate(docs):
        snippet, highlights = _snippet(gen, texts[i]) if gen is not None else ("", None)
        cluster = int(_one(d, "cluster", 0))
        duplicates = 0
        if readable is not None:
            members = readable.component(_one(d, "uri"), cluster)
            cluster = members[0] if len(members) > 1 else 0
            duplicates = max(0, len(members) - 1)
        elif cluster:
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


def _text(coll: Collection, blob: str) -> str:
    """The plain text of a stored text, for its snippet."""
    data = coll.catalog.get_text(blob) if blob else None
    return tagged.plain_text(data) if data else ""


def _snippet_generator(searcher: tantivy.Searcher, q: tantivy.Query, schema: tantivy.Schema) -> tantivy.SnippetGenerator:
    gen = tantivy.SnippetGenerator.create(searcher, q, schema, "body")
    gen.set_max_num_chars(200)
    return gen


def _page_searcher(texts: list[str]) -> tantivy.Searcher:
    """A searcher over the texts of the hits shown alone, in memory. tantivy weighs each query word
    of a snippet by how many documents of the searcher's index hold it: over the whole index,
    which passage a reader is shown would tell how common a word is in others' documents."""
    page = tantivy.Index(fulltext.build_schema())
    for name, analyzer in fulltext.ANALYZERS.items():
        page.register_tokenizer(name, analyzer)
    writer = page.writer(heap_size=15_000_000, num_threads=1)
    for text in texts:
        writer.add_document(tantivy.Document(body=text))
    writer.commit()
    writer.wait_merging_threads()  # ends the writer's threads
    page.reload()
    return page.searcher()


def _snippet(gen: tantivy.SnippetGenerator, text: str) -> tuple[str, list[list[int]]]:
    if not text:
        return "", []
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
