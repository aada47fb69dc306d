"""One search over several indexes: this home's and the shards the setting ``shards`` names (other
homes, each with its own catalog and tantivy index, written by its own process: `deskdex index
--shard I/N`, a daemon of their own, another machine's share).

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
one index's (benchmarks/shards_search.py); tests/test_shards.py checks the top tens on real prose."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from deskdex.errors import StoreError
from deskdex.protocol import MAX_LIMIT

from .collection import Collection
from .search import add_snippets, search

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit, SearchResults


def data_dir_of(path: str) -> str:
    """The data folder of a shard named by its home (``--home`` folder) or by its data folder."""
    path = os.path.abspath(os.path.expanduser(path))
    nested = os.path.join(path, "data")
    if not os.path.exists(os.path.join(path, "catalog.sqlite")) and os.path.isdir(nested):
        return nested
    return path


def open_shards(stack: ExitStack, paths: Sequence[str]) -> list[Collection]:
    """The shards of ``paths``, read-only, closed with ``stack``. A shard that cannot be opened
    (not indexed yet, not mounted) raises StoreError naming it: a search that silently left a
    third of the documents out would look complete."""
    out = []
    for p in paths:
        where = data_dir_of(p)
        try:
            out.append(stack.enter_context(Collection.open(where)))
        except StoreError as exc:
            raise StoreError(f"shard {p}: {exc}") from exc
    return out


class Pooled:
    """Word statistics of several indexes as one (index.query.WordStats)."""

    def __init__(self, colls: Sequence[Collection]) -> None:
        self.searchers = []
        for c in colls:
            c.index.reload()
            self.searchers.append(c.index.searcher())
        self._freq: dict[tuple[str, str], int] = {}

    @property
    def num_docs(self) -> int:
        return sum(s.num_docs for s in self.searchers)

    def doc_freq(self, field_name: str, field_value: str) -> int:
        key = (field_name, field_value)
        if key not in self._freq:
            self._freq[key] = sum(s.doc_freq(field_name, field_value) for s in self.searchers)
        return self._freq[key]


def _global_scores(colls: Sequence[Collection], pooled: Pooled, hits: Sequence[list[SearchHit]], query: str) -> None:
    """Each hit's score as one index of every shard's documents would give it: a word's weight
    (BM25's idf) from its document frequency over all shards, not over the hit's own.

    The fields' weights are the pooled statistics' already (``search(stats=)``), but tantivy
    weighs a term with its own index's statistics only. So each hit's score is explained (its
    terms' weights, with the boosts of the fields and clauses above them, summed or, for a word in
    several fields, taken as a disjunction max) and each term's weight scaled by pooled idf over
    the shard's: what a search over the whole collection (DFS then query, in Elasticsearch's
    words) would count. What is not a term's weight (a phrase's, a fuzzy or prefix match's) is
    kept as the shard scored it; so is the field length each shard averages."""
    import json
    import math

    import tantivy

    from .fulltext import FIELD_NAMES
    from .search import parse

    n_all = pooled.num_docs

    def global_idf(field: str, term: str) -> float:
        n = min(pooled.doc_freq(field, term), n_all)  # doc_freq counts deleted documents until a merge
        return math.log(1 + (n_all - n + 0.5) / (n + 0.5))

    def child(node: dict[str, Any], prefix: str) -> dict[str, Any] | None:
        return next((c for c in node.get("details") or [] if str(c.get("description", "")).startswith(prefix)), None)

    def parts(node: dict[str, Any]) -> dict[str, float]:
        return {str(c.get("description", "")).split(",")[0].split(" ")[0]: float(c["value"])
                for c in node.get("details") or []}

    def term_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if str(node.get("description", "")).startswith("TermQuery"):
            yield node
        for c in node.get("details") or []:
            yield from term_nodes(c)

    def rescored(node: dict[str, Any], avgdl: dict[int, float]) -> float:
        """``node``'s value with global weights, computed up the explanation's tree."""
        what = str(node.get("description", ""))
        value = float(node["value"])
        children = node.get("details") or []
        if what.startswith("TermQuery"):
            term = _term(node.get("context") or [])
            idf = child(node, "idf")
            if term is None or idf is None or not idf["value"] or term[0] >= len(FIELD_NAMES):
                return value
            value *= global_idf(FIELD_NAMES[term[0]], term[1]) / float(idf["value"])
            tf = child(node, "freq /")
            if tf is not None and term[0] in avgdl and tf["value"]:
                p = parts(tf)  # freq, k1, b, dl, avgdl
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

    # Every hit explained first: the explanations tell each shard's average field length, which
    # BM25 sets a field's length against; pooled, weighted by the shards' sizes, as one index's.
    explained: list[tuple[SearchHit, dict[str, Any]]] = []
    seen: dict[int, dict[int, float]] = {}  # field id -> shard -> average length
    for i, (coll, searcher, part) in enumerate(zip(colls, pooled.searchers, hits)):
        if not part:
            continue
        q = parse(coll.index, query, stats=pooled)
        for h in part:
            found = searcher.search(tantivy.Query.term_query(coll.index.schema, "uri", h["uri"]), 1).hits
            if not found:
                continue
            tree = json.loads(q.explain(searcher, found[0][1]).to_json())
            explained.append((h, tree))
            for node in term_nodes(tree):
                term = _term(node.get("context") or [])
                tf = child(node, "freq /")
                lengths = parts(tf) if tf is not None else {}
                if term is not None and "avgdl" in lengths:
                    seen.setdefault(term[0], {})[i] = lengths["avgdl"]
    sizes = [s.num_docs for s in pooled.searchers]
    avgdl = {f: sum(sizes[i] * a for i, a in by_shard.items()) / max(1, sum(sizes[i] for i in by_shard))
             for f, by_shard in seen.items()}
    for h, tree in explained:
        h["score"] = float(h["score"]) * rescored(tree, avgdl) / (tree["value"] or 1.0)


_TERM = re.compile(r'Term=Term\(field=(\d+), type=Str, "(.*)"\)$', re.S)


def _term(context: list[str]) -> tuple[int, str] | None:
    """(field id, text) of a TermQuery's explanation."""
    for line in context:
        m = _TERM.match(line)
        if m:
            return int(m.group(1)), m.group(2).encode("latin-1", "backslashreplace").decode("unicode_escape")
    return None


def _key(hit: SearchHit, sort: str) -> tuple[Any, ...]:
    # Ties go by URI, so the merged order does not depend on the order shards are named in.
    if sort == "date":
        return (-hit["mtime"], hit["uri"])
    if sort == "size":
        return (-hit["size"], hit["uri"])
    return (-hit["score"], hit["uri"])


def search_shards(colls: Sequence[Collection], query: str, limit: int = 10, offset: int = 0,
                  snippets: bool = True, sort: str = "relevance", collapse: bool = True,
                  reader: int | None = None, similar: str | None = None) -> SearchResults:
    """index.search over every collection of ``colls`` as one (see the module's docstring)."""
    if len(colls) == 1:
        return search(colls[0], query, limit=limit, offset=offset, snippets=snippets, sort=sort,
                      collapse=collapse, reader=reader, similar=similar)
    if similar is not None:
        # A cluster lives in one shard: the one whose catalog holds the hit.
        holder = next((c for c in colls if c.catalog.get(similar) is not None), colls[0])
        return search(holder, query, limit=limit, offset=offset, snippets=snippets, sort=sort,
                      collapse=collapse, reader=reader, similar=similar)
    need = min(2 * (offset + limit) + 10, MAX_LIMIT)
    pooled = Pooled(colls)
    parts = [search(c, query, limit=need, offset=0, snippets=False, sort=sort, collapse=collapse, reader=reader,
                    stats=pooled) for c in colls]
    total = sum(p["total"] for p in parts)
    if sort == "relevance" and reader is None:
        _global_scores(colls, pooled, [p["hits"] for p in parts], query)
    hits = sorted(((h, c) for p, c in zip(parts, colls) for h in p["hits"]), key=lambda hc: _key(hc[0], sort))
    if collapse:
        picked: list[tuple[SearchHit, Collection]] = []
        seen: dict[tuple[str, str], SearchHit] = {}
        for h, c in hits:
            row = c.catalog.get(h["uri"])
            key = (row.text_sum, row.mime or "") if row is not None and row.text_sum else None
            if key is not None and key in seen:
                seen[key]["duplicates"] += 1 + h["duplicates"]  # ``total`` counts every match, copies too, as search's
                continue
            if key is not None:
                seen[key] = h
            picked.append((h, c))
        hits = picked
    page = hits[offset:offset + limit]
    if snippets:
        for coll in colls:
            add_snippets(coll, query, [h for h, c in page if c is coll])
    return {"total": total, "hits": [h for h, _ in page]}
