"""The query language against a real tantivy index built through the Collection."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from deskdex.converters import Block, Document
from deskdex.errors import QueryError
from deskdex.index import Collection, Row, search

DAY = 86400
NOW = time.time()

DOCS = [
    # path, title, body, mime, size, age in days, author
    ("/home/u/docs/cafe.txt", "Café notes", "We met at the café near the station.", "text/plain", 2_000, 0, ""),
    ("/home/u/docs/search.html", "Searching", "Indexing and searching documents quickly.", "text/html", 50_000, 3, ""),
    ("/home/u/docs/sub/report.pdf", "Annual report", "Revenue grew. The quick brown fox jumps.", "application/pdf",
     20_000_000, 40, "Jane Auditor"),
    ("/home/u/other/fox.docx", "Fox facts",
     "A brown fox is quick and a dog is lazy.",
     "application/vnd.openxmlformats-officedocument.wordprocessingml.document", 9_000, 400, "Tom Writer"),
    ("/home/u/other/tokyo.txt", "旅行", "東京都の天気は晴れです。서울 날씨", "text/plain", 300, 1, ""),
]


def _build(data: Path, now: float) -> Collection:
    with Collection.open(str(data), writable=True) as c:
        for path, title, body, mime, size, age, author in DOCS:
            doc = Document(uri="file://" + path, mime=mime, title=title, blocks=[Block.of("p", body)])
            if author:
                doc.meta["author"] = author
            c.put(Row(uri="file://" + path, path=path, size=size, mtime=now - age * DAY), doc)
    return Collection.open(str(data))


@pytest.fixture(scope="module")
def coll(tmp_path_factory):
    c = _build(tmp_path_factory.mktemp("q"), NOW)
    yield c
    c.close()


def names(coll, q, **kw):
    return sorted(Path(h["path"]).name for h in search(coll, q, limit=50, **kw)["hits"])


def test_words_are_anded_stemmed_and_accent_insensitive(coll):
    assert names(coll, "cafe") == ["cafe.txt"]
    assert names(coll, "café station") == ["cafe.txt"]
    assert names(coll, "searched") == ["search.html"]  # stemmed: search
    assert names(coll, "fox quick") == ["fox.docx", "report.pdf"]
    assert names(coll, "fox station") == []


def test_phrases_boolean_operators_and_grouping(coll):
    assert names(coll, '"quick brown fox"') == ["report.pdf"]
    assert names(coll, "fox OR café") == ["cafe.txt", "fox.docx", "report.pdf"]
    assert names(coll, "fox -revenue") == ["fox.docx"]
    assert names(coll, "fox NOT revenue") == ["fox.docx"]
    assert names(coll, "(café OR revenue) AND station") == ["cafe.txt"]
    assert names(coll, "-fox") == ["cafe.txt", "search.html", "tokyo.txt"]


def test_prefix_and_fuzzy(coll):
    assert names(coll, "index*") == ["search.html"]
    assert names(coll, "serch~") == ["search.html"]
    assert names(coll, "revnue~") == ["report.pdf"]


def test_field_filters(coll):
    assert names(coll, "title:fox") == ["fox.docx"]
    assert names(coll, "author:jane") == ["report.pdf"]
    assert names(coll, "in:/home/u/docs") == ["cafe.txt", "report.pdf", "search.html"]
    assert names(coll, "path:/home/u/docs/sub") == ["report.pdf"]
    assert names(coll, "path:other fox") == ["fox.docx"]
    assert names(coll, "ext:PDF") == ["report.pdf"]
    assert names(coll, "type:doc") == ["fox.docx"]
    assert names(coll, "type:web") == ["search.html"]
    assert names(coll, "size:>10MB") == ["report.pdf"]
    assert names(coll, "size:<1k") == ["tokyo.txt"]
    assert names(coll, "size:1kb..10kb") == ["cafe.txt", "fox.docx"]
    assert names(coll, "source:files fox") == ["fox.docx", "report.pdf"]
    assert names(coll, "source:web") == []
    assert names(coll, "dup:no fox") == ["fox.docx", "report.pdf"]


def test_dates(tmp_path):
    # Date words are read against the clock at query time, and ages here are whole days back from the build:
    # the documents are stored and asked about within one local day, again if midnight passed in between.
    for attempt in range(2):
        now = time.time()
        c = _build(tmp_path / str(attempt), now)
        try:
            year = dt.date.fromtimestamp(now - 400 * DAY).isoformat()
            got = [names(c, q) for q in ("after:yesterday", "after:lastweek", "before:lastmonth",
                                         f"after:{year} before:lastyear")]
        finally:
            c.close()
        if dt.date.fromtimestamp(now) == dt.date.today():
            break
    assert got[0] == ["cafe.txt", "tokyo.txt"]
    assert got[1] == ["cafe.txt", "search.html", "tokyo.txt"]
    assert got[2] == ["fox.docx", "report.pdf"]
    assert "fox.docx" in got[3]


def test_cjk_text_is_searchable(coll):
    assert names(coll, "東京") == ["tokyo.txt"]
    assert names(coll, "天気") == ["tokyo.txt"]
    assert names(coll, "京都") == ["tokyo.txt"]  # inside 東京都, as a substring search should
    assert names(coll, "天") == ["tokyo.txt"]
    assert names(coll, "날씨") == ["tokyo.txt"]
    assert names(coll, "大阪") == []


def test_sort_by_date_and_size(coll):
    by_date = [Path(h["path"]).name for h in search(coll, "fox OR café OR searching", sort="date")["hits"]]
    assert by_date == ["cafe.txt", "search.html", "report.pdf", "fox.docx"]
    by_size = [Path(h["path"]).name for h in search(coll, "fox", sort="size")["hits"]]
    assert by_size == ["report.pdf", "fox.docx"]


@pytest.mark.parametrize("query, position, words", [
    ('"unclosed', 0, "unclosed quote"),
    ("(fox OR cat", 0, "never closed"),
    ("fox )", 4, "unmatched"),
    ("fox OR", 4, "nothing after"),
    ("size:>lots", 5, "size"),
    ("after:someday", 6, "bad date"),
    ("type:music", 5, "unknown type"),
    ("title:", 0, "needs a value"),
    ("", 0, "empty query"),
    ("a*", 0, "two letters"),
])
def test_malformed_queries_say_what_and_where(coll, query, position, words):
    with pytest.raises(QueryError) as err:
        search(coll, query)
    assert words in str(err.value)
    assert err.value.position == position


def test_the_word_being_typed_also_matches_as_a_prefix(coll):
    """Search as you type (the tray): the last word, while it is typed, finds the words it starts;
    the whole word still finds its other forms (stemmed); what is not a word being typed is left
    to the query language as typed."""
    from deskdex.index.as_you_type import prefix_last_word as typed

    assert names(coll, "quic") == []
    assert names(coll, typed("quic")) == ["fox.docx", "report.pdf", "search.html"]  # quick, quickly
    assert names(coll, typed("revenue qui")) == ["report.pdf"]
    assert names(coll, typed("searched")) == ["search.html"]  # `searched*` alone finds nothing
    assert names(coll, typed("Caf")) == ["cafe.txt"]
    assert names(coll, typed("title:ann")) == ["report.pdf"]
    assert names(coll, typed("path:oth")) == ["fox.docx", "tokyo.txt"]
    for as_typed in ("quic ", '"quick bro', '"quick brown"', "fox -rev", "fox NOT rev", "ext:pd", "in:/home/u/do",
                     "index*", "serch~", "東京", "q", "fox OR", "(fox quic)", "e-ma", "+qui"):
        assert typed(as_typed) == as_typed
    with pytest.raises(QueryError, match="unclosed quote"):  # the language's own error, as typed
        search(coll, typed('"quick bro'))
