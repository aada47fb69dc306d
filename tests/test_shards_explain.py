"""What index/shards.py reads of tantivy's explanation of a hit, checked on a real index: the
sharded search re-weighs each hit from it (``_global_scores``), and part of it is the Rust Debug
text of a term, which no public interface of tantivy-py gives otherwise. A tantivy release that
writes it differently fails here, naming its version, instead of merging shards' scores quietly
without the collection's word weights.

Tested with tantivy-py 0.25.1, 0.26.0, 0.26.2 and 0.27.0 (0.24 and before have no ``Query.explain``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest

from deskdex.index import shards
from deskdex.index.collection import Collection
from deskdex.index.query import scored_terms

from .conftest import CLI

TESTED = "0.25.1, 0.26.0, 0.26.2, 0.27.0"
CHANGED = (f"tantivy {version('tantivy')} explains a hit otherwise than the versions index/shards.py was "
           f"written for ({TESTED}); update _term / _global_scores there, or keep tantivy below this version "
           f"in pyproject.toml")


def _nodes(tree: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield tree
    for child in tree.get("details") or []:
        yield from _nodes(child)


@pytest.fixture(scope="module")
def explained(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    root = tmp_path_factory.mktemp("explain")
    docs = root / "docs"
    docs.mkdir()
    (docs / "lighthouse.txt").write_text("Lighthouse keepers\n\nThe lighthouse keeper counted herons at dawn.")
    (docs / "herons.txt").write_text("Herons\n\nHerons nest near the old lighthouse; a keeper's notes on herons.")
    (docs / "other.txt").write_text("Bread\n\nFlour, water and salt, and an oven hot enough.")
    home = root / "home"
    (home / "config").mkdir(parents=True)
    CLI(home).run("index", str(docs))
    query = "lighthouse herons keeper"
    with Collection.open(str(home / "data")) as coll:
        terms = sorted(scored_terms(coll.index.schema, query))
        stats = shards.shard_stats(coll, terms)
        part = shards.shard_search(coll, query, 10, "relevance", True, None, stats)
    trees = [t for t in part.trees if t is not None]
    assert len(trees) == 2, part.hits  # the two documents that hold all three words
    return trees, set(terms)


def test_each_term_query_names_its_term_as_index_shards_reads_it(explained, caplog) -> None:
    trees, terms = explained
    from deskdex.index.fulltext import FIELD_NAMES

    term_nodes = [n for t in trees for n in shards.scored_term_nodes(t)]
    assert term_nodes, CHANGED + ": no node's description starts with 'TermQuery'"
    with caplog.at_level(logging.WARNING, logger="deskdex.index.shards"):
        read = [shards._term(n.get("context") or []) for n in term_nodes]
    assert None not in read, CHANGED + f": a term's context reads {term_nodes[read.index(None)].get('context')!r}"
    named = {(FIELD_NAMES[f], word) for f, word in read if f < len(FIELD_NAMES)}  # type: ignore[misc]
    assert named and named <= terms, CHANGED + f": the terms read {sorted(named)} are not the query's {sorted(terms)}"
    assert "does not read" not in caplog.text


def test_the_weights_index_shards_rescales_are_where_it_looks(explained) -> None:
    trees, _ = explained
    descriptions = [str(n.get("description", "")) for t in trees for n in _nodes(t)]
    for term in (n for t in trees for n in shards.scored_term_nodes(t)):
        kids = {str(c.get("description", "")): c for c in term.get("details") or []}
        idf = [d for d in kids if d.startswith("idf")]
        tf = [kids[d] for d in kids if d.startswith("freq /")]
        assert idf and tf, CHANGED + f": a term's explanation holds {sorted(kids)}, not 'idf' and 'freq /'"
        parts = {str(c.get("description", "")).split(",")[0].split(" ")[0] for c in tf[0].get("details") or []}
        assert {"freq", "k1", "b", "dl", "avgdl"} <= parts, CHANGED + f": BM25's parts read {sorted(parts)}"
    # The query's field boosts and its clauses: what _global_scores walks up through.
    for prefix in ("Boost x", "BooleanClause"):
        assert any(d.startswith(prefix) for d in descriptions), \
            CHANGED + f": no node described '{prefix}...' among {sorted(set(descriptions))}"
    boost = next(d for d in descriptions if d.startswith("Boost x"))
    float(boost.split("x", 1)[1].split()[0])  # the factor, as _global_scores reads it


def test_a_context_written_otherwise_is_not_read_and_is_warned_about_once(caplog) -> None:
    shards._unread.clear()
    with caplog.at_level(logging.WARNING, logger="deskdex.index.shards"):
        assert shards._term(['Term=Term { field: 1, kind: Str, value: "hello" }']) is None
        assert shards._term(["something else"]) is None
    assert caplog.text.count("does not read") == 1 and f"tantivy {version('tantivy')}" in caplog.text
    shards._unread.clear()
