"""One search over several indexes: this home's and the shards the setting ``shards`` names (other
homes, each with its own catalog and tantivy index, written by its own process: `deskdex index
--shard I/N`, a daemon of their own, another machine's share, or a shard another machine serves
with `deskdex serve`, reached over HTTP with a token: index/remote.py).

A search asks each shard three things, the same whether it is here or elsewhere: the statistics
of the query's words (``shard_stats``), its candidates under the pooled statistics, explained
(``shard_search``), and snippets for the hits of the page shown (``add_snippets``).

Each shard answers the query for its first 2 x (offset + limit) + 10 hits (more than the page: a
shard ranks by its own word statistics, and a hit it ranks eleventh may be among the collection's
first ten), with its own collapsing. The answers are merged by the sort key (score, date or size);
snippets are made for the page shown only. Copies that sit in two shards (the same text in the same
format: ``text_sum`` and ``mime`` of their catalog rows) are collapsed into the better-ranked one,
whose ``duplicates`` counts the other's copies too. What a shard cannot see stays per shard:
``similar`` counts the similar documents of the hit's own shard, and a near-copy in another shard
(not the same text) is not collapsed.

Scores are made as one index of every shard's documents would make them: the query is built with
the shards' pooled word statistics (``Pooled``), and each candidate's BM25 re-weighed from tantivy's
explanation of it (``_global_scores``). On 6,000 notes over 3 shards the re-weighed scores equal the
one index's (benchmarks/shards_search.py); tests/test_shards.py checks the top tens on real prose.

Facets (``facets``) are counted over the first matches of each shard on this machine, merged; a
shard served elsewhere adds none (its answer has no facet counts)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, closing
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from deskdex.errors import StoreError
from deskdex.protocol import MAX_LIMIT

from .answers import FixedStats, Part
from .collection import Collection
from .query import scored_terms
from .readable import CopyKey, are_copies, copy_keys
from .remote import RemoteShard
from .facets import FacetCounts
from .search import add_snippets, facet_counts, search

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit, SearchResults

T = TypeVar("T")
logger = logging.getLogger(__name__)


def data_dir_of(path: str) -> str:
    """The data folder of a shard named by its home (``--home`` folder) or by its data folder."""
    path = os.path.abspath(os.path.expanduser(path))
    nested = os.path.join(path, "data")
    if not os.path.exists(os.path.join(path, "catalog.sqlite")) and os.path.isdir(nested):
        return nested
    return path


def open_shards(stack: ExitStack, paths: Sequence[str], token: str = "", ca: str = "",
                served: dict[tuple[str, str, str], RemoteShard] | None = None) -> list[Collection | RemoteShard]:
    """The shards of ``paths``, read-only, closed with ``stack``: a folder is opened here, an
    ``http(s)://`` URL is a shard served elsewhere (``deskdex serve``), asked with ``token`` (an
    https:// one checked against the certificates of ``ca``, or the system's), and taken from
    ``served`` when given (a daemon's, kept between searches with their connections). A
    shard that cannot be opened (not indexed yet, not mounted) raises StoreError naming it: a
    search that silently left a third of the documents out would look complete."""
    out: list[Collection | RemoteShard] = []
    for p in paths:
        if p.startswith(("http://", "https://")):
            if served is None:
                out.append(stack.enter_context(closing(RemoteShard(p, token, ca))))
            else:
                key = (p, token, ca)  # a changed setting makes another
                if key not in served:
                    served[key] = RemoteShard(p, token, ca)
                out.append(served[key])
            continue
        where = data_dir_of(p)
        try:
            out.append(stack.enter_context(Collection.open(where)))
        except StoreError as exc:
            raise StoreError(f"shard {p}: {exc}") from exc
    return out


def shard_stats(coll: Collection, terms: Iterable[tuple[str, str]]) -> FixedStats:
    """Phase one on a shard: its document count and the document frequency of ``terms``."""
    coll.index.reload()
    searcher = coll.index.searcher()
    return FixedStats(searcher.num_docs, {t: searcher.doc_freq(*t) for t in terms})


def shard_search(coll: Collection, query: str, need: int, sort: str, collapse: bool, reader: int | None,
                 stats: FixedStats) -> Part:
    """Phase two on a shard: its first ``need`` hits under the pooled ``stats``, explained."""
    import json

    import tantivy

    from .search import parse

    res = search(coll, query, limit=need, offset=0, snippets=False, sort=sort, collapse=collapse, reader=reader,
                 stats=stats, words=True)
    trees: list[dict[str, Any] | None] = []
    if sort == "relevance" and reader is None and res["hits"]:
        searcher = coll.index.searcher()
        q = parse(coll.index, query, stats=stats)
        for h in res["hits"]:
            found = searcher.search(tantivy.Query.term_query(coll.index.schema, "uri", h["uri"]), 1).hits
            trees.append(json.loads(q.explain(searcher, found[0][1]).to_json()) if found else None)
    copies = copy_keys(coll.catalog.db, [h["uri"] for h in res["hits"]])
    keys = [copies.get(h["uri"]) for h in res["hits"]]
    return Part(res["total"], res["hits"], trees, keys, int(coll.index.searcher().num_docs))


def _global_scores(parts: Sequence[Part], pooled: FixedStats) -> None:
    """Each hit's score as one index of every shard's documents would give it: a word's weight
    (BM25's idf) from its document frequency over all shards, not over the hit's own.

    The fields' weights are the pooled statistics' already (``search(stats=)``), but tantivy
    weighs a term with its own index's statistics only. So each hit's score is explained (its
    terms' weights, with the boosts of the fields and clauses above them, summed or, for a word in
    several fields, taken as a disjunction max) and each term's weight scaled by pooled idf over
    the shard's: what a search over the whole collection (DFS then query, in Elasticsearch's
    words) would count. What is not a term's weight (a phrase's, a fuzzy or prefix match's) is
    kept as the shard scored it; so is the field length each shard averages."""
    import math

    from .fulltext import FIELD_NAMES

    n_all = pooled.num_docs

    def global_idf(field: str, term: str) -> float:
        n = min(pooled.doc_freq(field, term), n_all)  # doc_freq counts deleted documents until a merge
        return math.log(1 + (n_all - n + 0.5) / (n + 0.5))

    def child(node: dict[str, Any], prefix: str) -> dict[str, Any] | None:
        return next((c for c in node.get("details") or [] if str(c.get("description", "")).startswith(prefix)), None)

    def parts_of(node: dict[str, Any]) -> dict[str, float]:
        return {str(c.get("description", "")).split(",")[0].split(" ")[0]: float(c["value"])
                for c in node.get("details") or []}

    def rescored(node: dict[str, Any], avgdl: dict[int, float]) -> float:
        """``node``'s value with global weights, computed up the explanation's tree."""
        what = str(node.get("description", ""))
        value = float(node["value"])
        children = node.get("details") or []
        if what.startswith("TermQuery"):
            term = _term(node.get("context") or [])
            idf = child(node, "idf")
            if (term is None or idf is None or not idf["value"] or term[0] >= len(FIELD_NAMES)
                    or not pooled.knows(FIELD_NAMES[term[0]], term[1])):
                return value
            value *= global_idf(FIELD_NAMES[term[0]], term[1]) / float(idf["value"])
            tf = child(node, "freq /")
            if tf is not None and term[0] in avgdl and tf["value"]:
                p = parts_of(tf)  # freq, k1, b, dl, avgdl
                if {"freq", "k1", "b", "dl"} <= p.keys():
                    norm = p["freq"] / (p["freq"] + p["k1"] * (1 - p["b"] + p["b"] * p["dl"] / avgdl[term[0]]))
                    value *= norm / float(tf["value"])
            return value
        if what.startswith("Boost x") and len(children) == 1:
            return float(what.split("x", 1)[1].split()[0]) * rescored(children[0], avgdl)
        if what.startswith("BooleanClause") and children:
            old = [float(c["value"]) for c in children]
            new = [rescored(c, avgdl) for c in children]
            if math.isclose(value, sum(old), rel_tol=1e-3, abs_tol=1e-6):
                return sum(new)
            # A disjunction max (a word in several fields, index/query.py): the best field's
            # score and a share (the tie-breaker) of the others'.
            rest = sum(old) - max(old)
            if rest > 0:
                tie = (value - max(old)) / rest
                return max(new) + tie * (sum(new) - max(new))
            return max(new)
        return value  # a phrase, a constant, a fuzzy or prefix match: as the shard scored it

    # The explanations tell each shard's average field length, which BM25 sets a field's length
    # against; pooled, weighted by the shards' sizes, as one index's.
    seen: dict[int, dict[int, float]] = {}  # field id -> shard -> average length
    for i, part in enumerate(parts):
        for tree in part.trees:
            for node in scored_term_nodes(tree or {}):
                term = _term(node.get("context") or [])
                tf = child(node, "freq /")
                lengths = parts_of(tf) if tf is not None else {}
                if term is not None and "avgdl" in lengths:
                    seen.setdefault(term[0], {})[i] = lengths["avgdl"]
    sizes = [p.num_docs for p in parts]
    avgdl = {f: sum(sizes[i] * a for i, a in by_shard.items()) / max(1, sum(sizes[i] for i in by_shard))
             for f, by_shard in seen.items()}
    for part in parts:
        for h, tree in zip(part.hits, part.trees):
            if tree is not None:
                h["score"] = float(h["score"]) * rescored(tree, avgdl) / (tree["value"] or 1.0)


def scored_term_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The term queries of an explained hit whose weights ``_global_scores`` rescales: those
    reached through clauses and boosts only. A term inside a phrase or a constant-score clause
    (index/query.py's proximity clause) is not a weight of the hit's score; tantivy 0.26.0 even
    explains the phrase's own weight as a TermQuery that names no term."""
    what = str(node.get("description", ""))
    if what.startswith("TermQuery"):
        yield node
    elif what.startswith(("BooleanClause", "Boost x")):
        for c in node.get("details") or []:
            yield from scored_term_nodes(c)


# tantivy-py's Explanation has no accessor but to_json(), and a term query names its term in the
# explanation's context only as the Rust Debug text of the term: no public interface gives the term.
# So it is parsed; tests/test_shards_explain.py fails, naming the version, when a tantivy release
# writes it (or the descriptions read above) otherwise. The same in tantivy-py 0.25.1, 0.26.0, 0.26.2, 0.27.0;
# 0.24 and before have no Query.explain.
_TERM = re.compile(r'Term=Term\(field=(\d+), type=Str, "(.*)"\)$', re.S)
_unread: list[str] = []  # the first context not understood, warned about once


def _term(context: list[str]) -> tuple[int, str] | None:
    """(field id, text) of a TermQuery's explanation; None (and a warning, once) when tantivy
    wrote it in a form this does not read: the hit keeps its shard's own weight for that term."""
    for line in context:
        m = _TERM.match(line)
        if m:
            return int(m.group(1)), m.group(2).encode("latin-1", "backslashreplace").decode("unicode_escape")
    if not _unread:
        from importlib.metadata import version

        _unread.append(repr(context))
        logger.warning("tantivy %s explains a term as %r, which index/shards.py does not read: shards' scores "
                       "are merged without the collection's word weights", version("tantivy"), context)
    return None


def _key(hit: SearchHit, sort: str) -> tuple[Any, ...]:
    # Ties go by URI, so the merged order does not depend on the order shards are named in.
    if sort == "date":
        return (-hit["mtime"], hit["uri"])
    if sort == "size":
        return (-hit["size"], hit["uri"])
    return (-hit["score"], hit["uri"])


def search_shards(shards: Sequence[Collection | RemoteShard], query: str, limit: int = 10, offset: int = 0,
                  snippets: bool = True, sort: str = "relevance", collapse: bool = True,
                  reader: int | None = None, similar: str | None = None, facets: bool = False,
                  words: bool = False) -> SearchResults:
    """index.search over every shard of ``shards`` as one (see the module's docstring). The first
    is this home's collection. Meaning (``words`` False) is fused in a search of one index only: the
    shards' scores are re-weighed from the words' statistics, which meaning has none of."""
    first = shards[0]
    assert isinstance(first, Collection)
    if len(shards) == 1:
        return search(first, query, limit=limit, offset=offset, snippets=snippets, sort=sort,
                      collapse=collapse, reader=reader, similar=similar, facets=facets, words=words)
    local = [c for c in shards if isinstance(c, Collection)]
    if similar is not None:
        # A cluster lives in one shard: the one whose catalog holds the hit (of those on this machine).
        holder = next((c for c in local if c.catalog.get(similar) is not None), first)
        return search(holder, query, limit=limit, offset=offset, snippets=snippets, sort=sort,
                      collapse=collapse, reader=reader, similar=similar, facets=facets)
    if reader is not None and len(local) < len(shards):
        raise StoreError("a shard served elsewhere answers with everything it holds: it is not searched for "
                         "another account (enterprise mode); name its folder instead")
    need = min(2 * (offset + limit) + 10, MAX_LIMIT)
    # Phase one: every shard's statistics of the query's words, added up; phase two: each shard's
    # candidates under them, re-weighed here; phase three: snippets of the page shown.
    terms = sorted(scored_terms(first.index.schema, query))
    pooled = FixedStats.pooled(_each(shards, lambda r: r.stats(terms), lambda c: shard_stats(c, terms)))
    parts = _each(shards, lambda r: r.search(query, need, sort, collapse, pooled),
                  lambda c: shard_search(c, query, need, sort, collapse, reader, pooled))
    total = sum(p.total for p in parts)
    if sort == "relevance" and reader is None:
        _global_scores(parts, pooled)
    ranked = sorted(((h, k, s) for p, s in zip(parts, shards) for h, k in zip(p.hits, p.keys)),
                    key=lambda hks: _key(hks[0], sort))
    picked: list[tuple[SearchHit, Collection | RemoteShard]] = []
    # The picked hits with a text, by format: copies are of one format.
    shown: dict[str, list[tuple[SearchHit, CopyKey, Collection | RemoteShard]]] = {}
    for h, key, s in ranked:
        if collapse and key is not None:
            # Copies in one shard are collapsed by it; here, those of different shards.
            same_format = shown.setdefault(key.mime, [])
            twin = next((x for x, k, holder in same_format if holder is not s and are_copies(k, key)), None)
            if twin is not None:
                twin["duplicates"] += 1 + h["duplicates"]  # ``total`` counts every match, copies too, as search's
                continue
            same_format.append((h, key, s))
        picked.append((h, s))
    page = picked[offset:offset + limit]
    if snippets:
        def mine(s: Collection | RemoteShard) -> list[SearchHit]:
            return [h for h, holder in page if holder is s]

        _each(shards, lambda r: r.snippets(query, mine(r)), lambda c: add_snippets(c, query, mine(c)))
    out: SearchResults = {"total": total, "hits": [h for h, _ in page]}
    if facets:
        counts = FacetCounts()
        for c in local:
            counts.add(facet_counts(c, query, sort, reader, pooled))
        out["facets"] = counts.answer()
    return out


def _each(shards: Sequence[Collection | RemoteShard], remote: Callable[[RemoteShard], T],
          local: Callable[[Collection], T]) -> list[T]:
    """``remote`` of each shard served elsewhere, all at once on threads (a search waits for the
    slowest, not for their sum), and meanwhile ``local`` of each shard here, on this thread (a
    collection's catalog is this thread's); in the order of ``shards``."""
    from concurrent.futures import ThreadPoolExecutor

    far = [s for s in shards if isinstance(s, RemoteShard)]
    if not far:
        return [local(s) for s in shards if isinstance(s, Collection)]
    with ThreadPoolExecutor(min(len(far), 32), thread_name_prefix="deskdex-shard") as pool:
        asked = {id(s): pool.submit(remote, s) for s in far}
        here = {id(s): local(s) for s in shards if isinstance(s, Collection)}
        return [asked[id(s)].result() if id(s) in asked else here[id(s)] for s in shards]
