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
