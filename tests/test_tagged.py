from deskdex.converters import Block, Document, Inline
from deskdex.converters import tagged


def sample() -> Document:
    return Document(
        uri="file:///tmp/a%20b.html", mime="text/html", title="Café & <friends>",
        meta={"author": "Zoë \"Z\" Quinn", "language": "fr"},
        blocks=[
            Block("h", [Inline("Intro")], level=1),
            Block("p", [Inline("Plain "), Inline("bold", "strong"), Inline(" and "), Inline("it", "em"),
                        Inline(", see "), Inline("the docs", "", "https://example.org/?a=1&b=2"), Inline(".")]),
            Block("li", [Inline("one item")], level=2),
            Block("td", [Inline("cell")]),
            Block("pre", [Inline("  code\n    indented  ")]),
            Block("quote", [Inline("quoted")]),
            Block("p", [Inline("Home | About")], boilerplate=True),
        ],
    )


def test_round_trip_is_exact():
    doc = sample()
    again = tagged.loads(tagged.dumps(doc))
    assert again == doc


def test_characters_xml_cannot_hold_are_dropped_not_fatal():
    doc = Document(uri="u", title="nul\x00here", blocks=[Block.of("p", "bell\x07 and \ud800 surrogate")])
    again = tagged.loads(tagged.dumps(doc))
    assert again.title == "nulhere"
    assert again.blocks[0].text == "bell and  surrogate"


def test_plain_text_of_tagged_text_has_the_blocks_not_title_or_meta():
    text = tagged.plain_text(tagged.dumps(sample()))
    assert "the docs" in text and "Intro" in text
    assert "Quinn" not in text and "friends" not in text


def test_dumps_shows_the_documented_elements():
    out = tagged.dumps(sample())
    for piece in ('<h level="1">Intro</h>', "<strong>bold</strong>", '<a href="https://example.org/?a=1&amp;b=2">',
                  '<p boilerplate="1">', '<meta name="author">'):
        assert piece in out


def test_a_long_text_is_written_and_cut_in_pieces_that_change_nothing():
    """``dumps_utf8`` (a writer's, piece by piece) gives ``dumps``'s bytes, a line end "\r\n" astride
    two pieces included; ``body_chunks`` holds the body's words in the same order, cut between
    blocks and, in a block longer than a piece, at a space."""
    from deskdex.converters.tagged import _CHUNK

    long_run = ("a & b < c\r\n" * (_CHUNK // 11 + 3))[:_CHUNK - 1] + "\r\n" + "tail \U0001F600 text\x00 " * 50
    doc = Document(uri="u", mime="text/plain", title="T", blocks=[
        Block.of("p", "first"), Block("p", [Inline(long_run)]), Block.of("p", "Home", boilerplate=True),
        Block("p", [Inline("x" * 10), Inline("styled", "em")]), Block.of("p", "last words")])
    assert tagged.dumps_utf8(doc) == tagged.dumps(doc).encode("utf-8")
    assert tagged.loads(tagged.dumps_utf8(doc)).blocks[1].text.count("\n") == long_run.count("\r\n")
    small = sample()
    assert tagged.dumps_utf8(small) == tagged.dumps(small).encode("utf-8")

    pieces = doc.body_chunks(size=1000)
    assert len(pieces) > 3 and all(len(p) <= 1000 for p in pieces)
    assert " ".join(pieces).split() == doc.body_text().split()
    assert doc.body_chunks(boilerplate=True) == ["Home"] and small.body_chunks() == [small.body_text()]
    assert Document(uri="u").body_chunks() == [""]
    assert Document(uri="u", blocks=[Block.of("p", "y" * 2500)]).body_chunks(size=1000) == ["y" * 1000] * 2 + ["y" * 500]
    # The writer's text for meaning: the first blocks only, cut at the limit
    assert doc.body_text(limit=20) == doc.body_text()[:20] and small.body_text(limit=10**6) == small.body_text()
