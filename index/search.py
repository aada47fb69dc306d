"""Queries to ranked hits with snippets, read-only (any number of searchers beside one writer).

A search answers the protocol's ``SearchResults`` (deskdex.protocol): plain dicts, the one form of a
result, whether it crosses the socket or the command line reads the index directly."""

from __future__ import annotations

import itertools
import logging
import re
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import tantivy

from deskdex.errors import BadArgs, QueryError
from deskdex.protocol import MAX_LIMIT

from . import meaning
from . import query as query_language
from .query import WordStats
from .access import EVERYONE
from .as_you_type import as_typed
from .collection import Collection
from .facets import MAX_COUNTED, FacetCounts
from .facets import count as count_facets
from .fulltext import body_field
from .originals import originality
from .readable import ReadableClusters
from .snippets import Snippets, Term

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit, SearchResults

logger = logging.getLogger(__name__)


SORTS = {"relevance": None, "date": "mtime", "size": "size"}
# Hits looked at, at most, to pick one per group of copies: past it, fewer hits than asked for.
MAX_WINDOW = 100_000


def parse(index: tantivy.Index, query: str, readable: ReadableClusters | None = None,
          stats: WordStats | None = None) -> tantivy.Query:
    """The tantivy query; with ``readable``, for that reader: clauses scored by constant weights and
    ``dup:`` about the reader's duplicates (index/query.py). ``stats``: the word statistics fields
    are weighed by (default: this index's)."""
    has_dup = None
    if readable is not None:
        def has_dup() -> tantivy.Query:
            uris = readable.with_duplicates()
            return tantivy.Query.term_set_query(index.schema, "uri", uris) if uris else tantivy.Query.empty_query()
    try:
        return query_language.parse(index.schema, query, constant=readable is not None, has_dup=has_dup,
                                    searcher=stats if stats is not None else index.searcher())
    except ValueError as exc:  # tantivy refused a query we built: still the user's query's fault
        raise QueryError(f"cannot search for {query!r}: {exc}") from exc


def search(coll: Collection, query: str, limit: int = 10, offset: int = 0, snippets: bool = True,
           sort: str = "relevance", collapse: bool = True, reader: int | None = None,
           similar: str | None = None, stats: WordStats | None = None, facets: bool = False,
           words: bool = False) -> SearchResults:
    """Ranked hits; with ``collapse`` one per group of copies (index/readable.py: the same text
    in the same format, or near-copies of one format and language), where its best hit ranks,
    each saying how many copies it stands for (``duplicates``) and how many other documents of
    its cluster are similar (``similar``: other formats, versions, translations; never hidden).
    Shown for a group: the best-matching copy and, among equally matching ones, the original
    (index/originals.py: not in an archive, not named like a copy, the oldest).

    ``similar``: a hit's URI; every document of its cluster (its copies and similar documents,
    itself included), ranked by ``query`` (which may be empty), none collapsed: what a hit's
    "N similar" expands to.

    ``reader``: a uid (None: no filter, root's view). Only documents that user may read are found,
    and nothing in the answer depends on the others (docs/search.md, "Enterprise mode"): the
    score of a hit is the sum of the weights of the fields its words matched, not BM25 (whose
    statistics count every document); hits of equal score go newest first, then by URI;
    copies, similar documents, counts and ``dup:`` count readable documents only; snippets are chosen
    with word statistics of the hits shown.

    ``facets``: the answer gains ``facets``, the first matches counted by type, language, folder
    and year (index/facets.py), found by a search of their own: a search without them costs nothing more.

    ``words``: by the words alone. Otherwise a plain query of words, ranked by relevance for root's
    view, is fused with the documents nearest in meaning when the index holds vectors (index/meaning.py)."""
    if sort not in SORTS:
        raise QueryError(f"cannot sort by {sort!r}: use one of {', '.join(SORTS)}")
    if not (0 < limit <= MAX_LIMIT and 0 <= offset <= MAX_LIMIT):  # the protocol's bounds, for every caller
        raise BadArgs(f"limit must be 1 to {MAX_LIMIT} and offset 0 to {MAX_LIMIT}, not {limit} and {offset}")
    readable = ReadableClusters(coll.catalog.db, reader) if reader is not None else None
    view = readable or ReadableClusters(coll.catalog.db, None)
    q = _query(coll, query, readable, view, similar, stats)
    if similar is not None:
        collapse, snippets = False, snippets and bool(query.strip())
    try:
        coll.index.reload()
    except ValueError as exc:
        # tantivy takes a lock file to load new commits, which a read-only file system refuses:
        # the commits loaded before still answer (the daemon cannot write new ones meanwhile).
        logger.debug("searching without the latest commits: %s", exc)
    searcher = coll.index.searcher()
    # Meaning is asked once, before the words' window is widened for copies (below).
    typed = as_typed(query)  # a search as you type: the word being typed, not its prefix pattern
    near = (meaning.near_hits(coll.catalog.path, coll.catalog.db, searcher, coll.index.schema, typed)
            if readable is None and not words and sort == "relevance" and similar is None
            and meaning.plain_words(typed) else [])
    alone = _meaning_alone(searcher, coll.index.schema, q, near)
    added = len(alone)  # counted in the total on every page, whether or not it reaches them
    if readable is not None:
        picked, total = _reader_hits(searcher, q, sort, offset + limit, collapse, readable)
        out = _results(coll, searcher, query, picked[offset:offset + limit], total, sort, snippets, readable)
    elif not collapse:
        # limit 0 panics inside tantivy (a BaseException): always ask for at least one hit.
        if alone:  # the words' ranking from the top, to be fused
            result = searcher.search(q, offset + limit, count=True, order_by_field=SORTS[sort])
            hits, related = _fused(result, alone)
            hits = hits[offset:offset + limit]
        else:
            result = searcher.search(q, max(1, limit), count=True, offset=offset, order_by_field=SORTS[sort])
            hits, related = result.hits[:limit], set()
        out = _results(coll, searcher, query, hits, (result.count or 0) + added,  # type: ignore[attr-defined]  # at run time, not in tantivy 0.27's stub
                       sort, snippets, view, related)
    else:
        window = (offset + limit) * 3 + 20
        while True:
            result = searcher.search(q, window, count=True, order_by_field=SORTS[sort])
            hits, related = _fused(result, alone)
            picked = _collapse(searcher, hits, sort, view)
            if len(picked) >= offset + limit or len(result.hits) < window or window >= MAX_WINDOW:
                break
            # Many duplicates among the first hits: look further, but not through the whole index
            # (each hit looked at is a document read).
            window = min(window * 4, MAX_WINDOW)
        total = (result.count or 0) + added  # type: ignore[attr-defined]  # at run time, not in tantivy 0.27's stub
        out = _results(coll, searcher, query, picked[offset:offset + limit], total, sort, snippets, view, related)
    if added:
        out["related"] = added
    if facets:
        out["facets"] = _facet_counts(searcher, q, sort, readable).answer()
    return out


def facet_counts(coll: Collection, query: str, sort: str = "relevance", reader: int | None = None,
                 stats: WordStats | None = None) -> FacetCounts:
    """The facet counts of ``query``'s first matches in ``coll`` (as ``search`` with ``facets``),
    to be merged with other shards' (index/shards.py)."""
    if sort not in SORTS:
        raise QueryError(f"cannot sort by {sort!r}: use one of {', '.join(SORTS)}")
    readable = ReadableClusters(coll.catalog.db, reader) if reader is not None else None
    q = _query(coll, query, readable, readable or ReadableClusters(coll.catalog.db, None), None, stats)
    return _facet_counts(coll.index.searcher(), q, sort, readable)


def _query(coll: Collection, query: str, readable: ReadableClusters | None, view: ReadableClusters,
           similar: str | None, stats: WordStats | None) -> tantivy.Query:
    """The tantivy query of a search: ``query``, among ``similar``'s cluster when given, and for a
    reader among the documents it may read."""
    if similar is None:
        q = parse(coll.index, query, readable, stats)
    else:
        q = _among_similar(coll, parse(coll.index, query, readable, stats) if query.strip() else None, similar, view)
    if readable is not None:
        allowed = tantivy.Query.term_set_query(coll.index.schema, "reader", [readable.uid, EVERYONE])
        # Scored 0: a reader's scores are the query's weights alone.
        q = tantivy.Query.boolean_query([(tantivy.Occur.Must, q),
                                         (tantivy.Occur.Must, tantivy.Query.const_score_query(allowed, 0.0))])
    return q


def _facet_counts(searcher: tantivy.Searcher, q: tantivy.Query, sort: str,
                  readable: ReadableClusters | None) -> FacetCounts:
    """The facets of the first MAX_COUNTED matches of ``q``, every copy counted. A reader's are
    picked in the order that depends on what it may read alone (``_reader_hits``), so that the
    counts tell nothing of others' documents."""
    picked = searcher.search(q, MAX_COUNTED + 1, order_by_field=SORTS[sort]).hits
    if readable is not None and len(picked) > MAX_COUNTED:  # fewer: all are counted, in any order
        picked, _ = _reader_hits(searcher, q, sort, MAX_COUNTED, False, readable)
    return count_facets(searcher, [address for _, address in picked[:MAX_COUNTED]])


def _among_similar(coll: Collection, q: tantivy.Query | None, uri: str, view: ReadableClusters) -> tantivy.Query:
    """The documents of ``uri``'s cluster (as ``view``'s reader sees it), ranked by ``q`` when given."""
    row = coll.get(uri)
    ids = view.component(uri, row.cluster or 0) if row is not None else []
    marks = ",".join("?" * len(ids))
    uris = [u for (u,) in coll.catalog.db.execute(f"SELECT uri FROM docs WHERE id IN ({marks})", ids)] or [uri]
    among = tantivy.Query.term_set_query(coll.index.schema, "uri", uris)
    if q is None:
        return among
    return tantivy.Query.boolean_query([(tantivy.Occur.Must, among), (tantivy.Occur.Should, q)])


def _collapse(searcher: tantivy.Searcher, hits: list[Any], sort: str, view: ReadableClusters) -> list[Any]:
    """One hit per group of copies, where its best hit ranks (ties in score going to the newest);
    shown for it: the original among its copies that match as well as the best (``_original``).
    A copy that matches better than the original is the one shown: nothing hidden matches better."""
    docs = [(key, address, searcher.doc(address).to_dict()) for key, address in hits]
    if sort == "relevance":
        docs.sort(key=lambda t: (-float(t[0]), -int(_one(t[2], "mtime", 0))))
    best: dict[int, list[tuple[Any, Any, dict[str, Any]]]] = {}  # copies -> those that match best
    out: list[Any] = []
    for key, address, d in docs:
        cluster = view.copy_id(_one(d, "uri"), int(_one(d, "cluster", 0)))
        if not cluster:
            out.append((key, address))
        elif cluster not in best:
            best[cluster] = [(key, address, d)]
            out.append(cluster)  # its place; which member stands there is chosen below
        elif _same_key(best[cluster][0][0], key):
            best[cluster].append((key, address, d))
    return [_original(best[x])[:2] if isinstance(x, int) else x for x in out]


def _same_key(a: Any, b: Any) -> bool:
    """Two hits match equally: the same sort key (a score, to within float noise)."""
    x, y = float(a), float(b)
    return abs(x - y) <= 1e-6 * max(abs(x), abs(y), 1.0)


def _original(members: list[tuple[Any, Any, dict[str, Any]]]) -> tuple[Any, Any, dict[str, Any]]:
    """Of a cluster's equally matching hits, the original (index/originals.py): not in an archive,
    not named like a copy, the oldest."""
    return min(members, key=lambda m: originality(_one(m[2], "uri"), _one(m[2], "path"),
                                                  float(_one(m[2], "mtime", 0))))


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
        picked = _readable_originals(searcher, _collapse_readable(searcher, ordered, need, readable), known,
                                     readable) if collapse else list(itertools.islice(ordered, need))
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
    """The first ``need`` hits, one per group of readable copies."""
    seen: set[int] = set()
    out: list[Any] = []
    for key, address in hits:
        d = searcher.doc(address).to_dict()
        cluster = readable.copy_id(_one(d, "uri"), int(_one(d, "cluster", 0)))
        if cluster:
            if cluster in seen:
                continue
            seen.add(cluster)
        out.append((key, address))
        if len(out) >= need:
            break
    return out


def _readable_originals(searcher: tantivy.Searcher, picked: list[Any], known: list[Any],
                        readable: ReadableClusters) -> list[Any]:
    """``picked`` with each hit replaced by the original (``_original``) among its readable copies
    with the same key. ``known`` holds every hit of each key of ``picked`` (``_reader_hits``):
    the candidates are found by the cluster fast field, and only theirs are read."""
    if not picked or not known:
        return picked
    clusters = searcher.fast_field_values("cluster", [a for _, a in known])
    by: dict[tuple[float, int], list[Any]] = {}  # (key, cluster over every document) -> hits
    for (key, address), cluster in zip(known, clusters):
        if cluster:
            by.setdefault((float(key), int(cluster)), []).append((key, address))
    out = []
    for key, address in picked:
        d = searcher.doc(address).to_dict()
        cluster = int(_one(d, "cluster", 0))
        same = by.get((float(key), cluster), [])
        if len(same) < 2:
            out.append((key, address))
            continue
        mine = readable.copy_id(_one(d, "uri"), cluster)
        members = [(key, address, d)]
        for k, a in same:
            if (a.segment_ord, a.doc) != (address.segment_ord, address.doc):
                other = searcher.doc(a).to_dict()
                if mine and readable.copy_id(_one(other, "uri"), cluster) == mine:
                    members.append((k, a, other))
        out.append(_original(members)[:2])
    return out


def _meaning_alone(searcher: tantivy.Searcher, schema: tantivy.Schema, q: tantivy.Query,
                   near: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """The documents of ``near`` (``meaning.near_hits``) that ``q`` does not match, asked of the
    index once per search: the related ones, whatever part of the words' ranking a page fetches."""
    if not near:
        return []
    uris = [str(searcher.doc(a).get_first("uri")) for _, a in near]
    among = tantivy.Query.boolean_query([(tantivy.Occur.Must, q),
                                         (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, "uri", uris))])
    worded = {(a.segment_ord, a.doc) for _, a in searcher.search(among, len(near)).hits}
    return [(rank, a) for rank, a in near if (a.segment_ord, a.doc) not in worded]


def _fused(result: Any, alone: list[tuple[int, Any]]) -> tuple[list[Any], set[tuple[int, int]]]:
    """The words' hits of ``result`` then, when these are all the words' matches, the documents only
    meaning found (``meaning.fuse``), and the addresses of these; a document further down the words'
    ranking would otherwise pass for one that holds none of them."""
    if not alone or (result.count or 0) > len(result.hits):
        return result.hits, set()
    return meaning.fuse(result.hits, alone), {(a.segment_ord, a.doc) for _, a in alone}


def _results(coll: Collection, searcher: tantivy.Searcher, query: str, hits: list[Any], total: int,
             sort: str, snippets: bool, view: ReadableClusters,
             related: set[tuple[int, int]] | None = None) -> SearchResults:
    """Hits with their stored fields, snippets, and counts of copies and similar documents (a
    reader's when ``view`` is one reader's); those at an address of ``related`` are marked as found
    by meaning alone."""
    related = related or set()
    docs = [(score, searcher.doc(address).to_dict()) for score, address in hits]
    maker = Snippets(query) if snippets and docs else None
    langs = [_one(d, "lang") or None for _, d in docs]
    present = _present(searcher, coll.index.schema, maker, [_one(d, "uri") for _, d in docs],
                       [address for _, address in hits], langs) if maker else []
    out: list[SearchHit] = []
    for i, ((score, d), (_, address)) in enumerate(zip(docs, hits)):
        blob = _one(d, "blob")
        made = maker.snippet(coll.catalog.texts.open(blob) if blob else None, present[i], langs[i]) if maker else None
        cluster = int(_one(d, "cluster", 0))
        members = view.component(_one(d, "uri"), cluster)
        copies = view.copies(_one(d, "uri"), cluster)
        if view.uid is not None:  # the id of every document's cluster would tell of others'
            cluster = members[0] if len(members) > 1 else 0
        out.append({"uri": _one(d, "uri"), "path": _one(d, "path"), "title": _one(d, "title"),
                    "snippet": made.text if made else "",
                    "score": float(score) if sort == "relevance" else 0.0, "mime": _one(d, "mime"),
                    "mtime": int(_one(d, "mtime", 0)), "size": int(_one(d, "size", 0)), "ext": _one(d, "ext"),
                    "source": _one(d, "source", "files"), "cluster": cluster,
                    "highlights": made.spans if made else None, "page": made.page if made else None,
                    "duplicates": max(0, len(copies) - 1), "similar": len(members) - len(copies),
                    "lang": langs[i], "related": (address.segment_ord, address.doc) in related})
    return {"total": total, "hits": out}


def add_snippets(coll: Collection, query: str, hits: list[SearchHit]) -> None:
    """Give ``hits``, found in ``coll`` by a search made without snippets, their snippets: a merged
    search (index/shards.py) makes them for the page it shows only, not for every candidate."""
    if not hits:
        return
    searcher = coll.index.searcher()
    addresses, docs = [], []
    for h in hits:
        found = searcher.search(tantivy.Query.term_query(coll.index.schema, "uri", h["uri"]), 1).hits
        if not found:  # gone since the search (a commit in between): no snippet rather than a wrong one
            return
        addresses.append(found[0][1])
        docs.append(searcher.doc(found[0][1]).to_dict())
    maker = Snippets(query)
    langs = [h["lang"] for h in hits]
    present = _present(searcher, coll.index.schema, maker, [h["uri"] for h in hits], addresses, langs)
    for i, (h, d) in enumerate(zip(hits, docs)):
        blob = _one(d, "blob")
        made = maker.snippet(coll.catalog.texts.open(blob) if blob else None, present[i], langs[i])
        h["snippet"], h["highlights"], h["page"] = made.text, made.spans, made.page


def _present(searcher: tantivy.Searcher, schema: tantivy.Schema, maker: Snippets, uris: list[str],
             addresses: list[Any], langs: list[str | None]) -> list[set[int]]:
    """For each hit, the terms of the snippets' query its text holds (its body or boilerplate:
    what the stored text has), asked of the index, one search per term over the hits shown: a
    word that matched the title or the path alone is not looked for in the text. A text in a
    language with a stemmer of its own has its body in that language's field, stemmed so."""
    page = tantivy.Query.term_set_query(schema, "uri", uris)
    where = {(a.segment_ord, a.doc): i for i, a in enumerate(addresses)}
    out: list[set[int]] = [set() for _ in uris]
    bodies = {body_field(lang): maker.terms_for(lang) for lang in set(langs)}
    for k, term in enumerate(maker.terms):
        where_k = [(tantivy.Occur.Should, _term_query(schema, term, "boiler"))]
        where_k += [(tantivy.Occur.Should, _term_query(schema, terms[k], field)) for field, terms in bodies.items()]
        q = tantivy.Query.boolean_query([(tantivy.Occur.Must, page),
                                         (tantivy.Occur.Must, tantivy.Query.boolean_query(where_k))])
        for _, a in searcher.search(q, len(uris)).hits:
            if (a.segment_ord, a.doc) in where:
                out[where[a.segment_ord, a.doc]].add(k)
    return out


def _term_query(schema: tantivy.Schema, term: Term, field: str) -> tantivy.Query:
    """Where ``term`` is in ``field`` of a document's text, as index/query.py searches for it."""
    if term.kind == "cjk":
        return query_language.cjk_query(schema, term.keys[0])
    if term.kind == "word":
        return tantivy.Query.term_query(schema, field, term.keys[0])
    if term.kind == "phrase":
        return tantivy.Query.phrase_query(schema, field, list(term.keys))
    if term.kind == "prefix":
        return tantivy.Query.regex_query(schema, field, re.escape(term.keys[0]) + ".*")
    return tantivy.Query.fuzzy_term_query(schema, field, term.keys[0], term.distance, True, False)


def _one(d: dict[str, list[Any]], key: str, default: Any = "") -> Any:
    v = d.get(key)
    return v[0] if v else default
