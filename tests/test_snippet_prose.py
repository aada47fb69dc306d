"""Snippets of code-heavy pages: among passages holding as many query words, prose is shown, not
a wall of identifiers (issue 17). A real index and text store, as in tests/test_snippets.py."""

from __future__ import annotations

import time

import pytest

from deskdex.converters import Block, Document
from deskdex.index import Collection, Row, search

from .test_snippets import _filler

CODE = ("tokenizer = re.compile(r'[a-z]+'); tokens = [t.lower() for t in tokenizer.findall(text)]; "
        "index[doc_id] = {'tokens': tokens, 'len': len(tokens)}; return index.get(doc_id, {})")
PROSE = "The tokenizer splits the text into words before the index counts how often each word occurs."


@pytest.fixture(scope="module")
def coll(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("prose")
    with Collection.open(str(data), writable=True) as c:
        def put(name: str, blocks: list[Block]) -> None:
            uri = f"file:///home/u/{name}"
            c.put(Row(uri=uri, path=f"/home/u/{name}", size=1000, mtime=time.time()),
                  Document(uri=uri, mime="text/html", title=name, blocks=blocks))

        def filler(seed: int) -> list[Block]:  # each its own, or the two would be near-duplicates
            return [Block.of("p", p) for p in _filler(3_000, seed)]

        put("code-first.html", [Block.of("pre", CODE), *filler(7), Block.of("p", PROSE), *filler(8)])
        put("code-only.html", [*filler(9), Block.of("pre", CODE), *filler(10)])
    c = Collection.open(str(data))
    yield c
    c.close()


def _snippet(coll: Collection, query: str, name: str) -> str:
    hits = search(coll, query, limit=10)["hits"]
    return next(h["snippet"] for h in hits if h["path"].endswith("/" + name))


def test_prose_is_shown_before_code_holding_the_same_word(coll: Collection):
    snippet = _snippet(coll, "tokenizer", "code-first.html")
    assert "splits the text into words" in snippet
    assert "re.compile" not in snippet


def test_code_is_still_shown_when_only_code_holds_the_word(coll: Collection):
    snippet = _snippet(coll, "tokenizer", "code-only.html")
    assert "tokenizer" in snippet and "re.compile" in snippet
