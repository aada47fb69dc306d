"""Snippets from a real index (tantivy and the text store through the Collection): the passage that
matched, highlighted as the index matched it, at a cost that does not grow with the text.

Work is counted, not timed (index/snippets.py, ``Work``): ``looked`` is what Python splits into
words and analyzes, ``read`` what is decompressed and searched in C."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from deskdex.converters import Block, Document
from deskdex.index import Collection, Row, search
from deskdex.index.snippets import CHUNK, CONTEXT, WINDOWS, Snippets, terms_of

NOW = time.time()


def _filler(n_chars: int, seed: int = 1) -> list[str]:
    """Paragraphs of ordinary words (none of the query words below) adding up to ``n_chars``."""
    words = ("the of and to in is that for it as with was on be by this are or from at which an not "
             "system value file line number order table result method change field data page").split()
    rnd = random.Random(seed)
    out, total = [], 0
    while total < n_chars:
        para = " ".join(rnd.choice(words) for _ in range(80)).capitalize() + "."
        out.append(para)
        total += len(para) + 1
    return out


def _put(coll: Collection, name: str, paragraphs: list[str], title: str = "") -> str:
    uri = f"file:///home/u/{name}"
    doc = Document(uri=uri, mime="text/plain", title=title or name, blocks=[Block.of("p", p) for p in paragraphs])
    coll.put(Row(uri=uri, path=f"/home/u/{name}", size=sum(map(len, paragraphs)), mtime=NOW), doc)
    return uri


@pytest.fixture(scope="module")
def coll(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("snippets")
    with Collection.open(str(data), writable=True) as c:
        big = _filler(2_000_000)
        _put(c, "long-end.txt", big + ["At last the lighthouse keeper wrote about zephyrine storms at sea."])
        _put(c, "short-end.txt", _filler(20_000) + ["At last the lighthouse keeper wrote about zephyrine storms at sea."])
        _put(c, "long-start.txt", ["The quokka census of the island opens this report."] + big)
        _put(c, "short-start.txt", ["The quokka census of the island opens this report."] + _filler(20_000))
        _put(c, "heredoc.txt", _filler(3_000, 2) + [
            "Documents here are kept in folders, and here is more documentation about documents.",
            *_filler(3_000, 3),
            "A here document feeds the lines that follow the command to its standard input.",
            *_filler(1_000, 4)])
        _put(c, "tokyo.txt", ["東京の天気は晴れです。" * 200, "このページで全文検索の仕組みを説明します。", "終わり。" * 100],
             title="天気")
        _put(c, "two-places.txt", ["Marmoset colonies were counted in spring."] + _filler(5_000, 5)
             + ["The hibiscus garden closes at dusk."])
        _put(c, "café.txt", _filler(2_000, 6) + ["We met at the Café Zurbarán near the station."])
    c = Collection.open(str(data))
    yield c
    c.close()


def _hit(coll: Collection, query: str, name: str) -> dict:
    hits = search(coll, query, limit=20)["hits"]
    return next(h for h in hits if h["path"].endswith("/" + name))


def _marked(hit: dict) -> list[str]:
    return [hit["snippet"][a:b] for a, b in hit["highlights"]]


def _work(coll: Collection, query: str, name: str) -> Snippets:
    maker = Snippets(query)
    row = coll.catalog.get(f"file:///home/u/{name}")
    assert row is not None and row.blob
    maker.make(coll.catalog.texts.open(row.blob))
    return maker


def test_a_long_document_shows_its_match_near_the_end_not_its_start(coll: Collection):
    hit = _hit(coll, "zephyrine", "long-end.txt")
    assert "zephyrine" in hit["snippet"] and _marked(hit) == ["zephyrine"]
    assert "lighthouse keeper" in hit["snippet"]
    assert not hit["snippet"].startswith(coll.document(coll.catalog.get(hit["uri"])).blocks[0].text[:30])
    assert len(hit["snippet"]) <= 260


def test_the_work_in_python_does_not_grow_with_the_text(coll: Collection):
    long_, short = _work(coll, "zephyrine storms", "long-end.txt"), _work(coll, "zephyrine storms", "short-end.txt")
    # What Python splits into words is a few windows around the matches, whatever the length...
    assert long_.work.looked == short.work.looked <= WINDOWS * (2 * CONTEXT + 1)
    assert long_.work.places == short.work.places
    # ... while finding the place (C: decompression and a literal search) reads what comes before it.
    assert long_.work.read > 2_000_000 > 50_000 > short.work.read


def test_a_match_near_the_start_reads_no_further(coll: Collection):
    long_, short = _work(coll, "quokka census", "long-start.txt"), _work(coll, "quokka census", "short-start.txt")
    assert long_.work.looked == short.work.looked
    assert long_.work.read <= CHUNK and short.work.read <= CHUNK  # one chunk: every word is in it
    hit = _hit(coll, "quokka census", "long-start.txt")
    assert _marked(hit) == ["quokka", "census"]


def test_a_phrase_shows_its_words_adjacent_not_scattered_forms(coll: Collection):
    hit = _hit(coll, '"here document"', "heredoc.txt")
    assert "here document feeds" in hit["snippet"]
    assert _marked(hit) == ["here", "document"]
    a, b = hit["highlights"]
    assert hit["snippet"][a[1]:b[0]] == " "
    assert "documentation" not in hit["snippet"]


def test_separate_words_highlight_every_form_the_index_matched(coll: Collection):
    hit = _hit(coll, "documents here", "heredoc.txt")
    # English stemming, as the index: `documentation` is `document` too
    assert {w.lower() for w in _marked(hit)} == {"documents", "here", "documentation"}


def test_a_cjk_word_is_highlighted_in_its_context(coll: Collection):
    hit = _hit(coll, "検索", "tokyo.txt")
    assert _marked(hit) == ["検索"]
    assert "全文検索の仕組み" in hit["snippet"]
    assert not hit["snippet"].startswith("東京の天気は晴れです。東京の天気")


def test_words_in_two_places_make_two_fragments(coll: Collection):
    hit = _hit(coll, "marmoset hibiscus", "two-places.txt")
    assert " … " in hit["snippet"]
    assert _marked(hit) == ["Marmoset", "hibiscus"]
    assert len(hit["snippet"]) <= 2 * 130


def test_accents_case_prefixes_and_misspellings(coll: Collection):
    assert _marked(_hit(coll, "cafe", "café.txt")) == ["Café"]
    assert _marked(_hit(coll, "zurbaran", "café.txt")) == ["Zurbarán"]
    assert _marked(_hit(coll, "lighth*", "short-end.txt")) == ["lighthouse"]
    assert _marked(_hit(coll, "zephyrin~", "short-end.txt")) == ["zephyrine"]


def test_filters_and_negated_words_are_not_highlighted():
    assert [t.keys for t in terms_of('ext:txt title:report -draft NOT (old OR stale) "here document" lighth*')] \
        == [("here", "document"), ("lighth",)]
    assert [t.kind for t in terms_of("検索 cherry-pick")] == ["cjk", "phrase"]


def test_no_match_in_the_text_shows_its_start(coll: Collection):
    hit = _hit(coll, "title:天気", "tokyo.txt")  # matched by the title alone
    assert hit["snippet"].startswith("東京の天気は晴れです。") and hit["highlights"] == []


def test_snippets_off(coll: Collection, tmp_path: Path):
    hits = search(coll, "zephyrine", snippets=False)["hits"]
    assert hits and all(h["snippet"] == "" for h in hits)


def test_a_word_the_text_does_not_hold_is_not_looked_for(coll: Collection):
    # "keeper" matched the title alone (the index says the text lacks it): no reading of 2 MB for it.
    row = coll.catalog.get("file:///home/u/long-start.txt")
    assert row is not None and row.blob
    maker = Snippets("keeper")
    snippet, spans = maker.make(coll.catalog.texts.open(row.blob), present=set())
    assert maker.work.read <= CHUNK and spans == [] and snippet.startswith("The quokka census")
