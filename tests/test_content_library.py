"""Main content by trafilatura (the default): its text aligned onto our blocks, boxes that elements
or class names mark taken out, the DOM method where it finds nothing; the rest stays searchable as
boilerplate, with less weight."""

from __future__ import annotations

import time
from pathlib import Path

import lxml.html
import pytest

from deskdex.converters import Block, Document, content
from deskdex.converters.content import align, library_text, main_text
from deskdex.converters.html import from_text
from deskdex.index import Collection, Row, search

# A page as news and blog sites write them, by hand: a header with a menu, a sidebar of most-read
# stories and a newsletter box, the article, a comment thread, a footer.
ARTICLE = [
    "The river ferry between Oldham Quay and the north bank will stop running in March, the port "
    "authority said on Monday, after forty years of service and a decade of falling passenger numbers.",
    "Engineers found corrosion in the hull last autumn. Repairs would cost more than a new vessel, and "
    "the council has no money set aside for one, according to a report published with the decision.",
    "Commuters who cross daily will be offered a bus link through the tunnel, which adds about twenty "
    "minutes to the journey. Several of them said they would rather cycle over the old swing bridge.",
    "The last crossing is planned for the evening of the thirtieth, when the crew will sound the horn "
    "three times, as they did on the first day in nineteen eighty-five.",
]
OTHER_ARTICLE = [
    "The town library will open on Sundays from April, after volunteers offered to staff the reading "
    "room and the children's corner in turns, the head librarian told the committee on Thursday.",
    "A survey last year found that most families could only visit at weekends, when the building was "
    "closed. Opening costs will be met from a bequest left to the library by a former teacher.",
    "The mobile library van, which visits the villages on the moor, keeps its weekday timetable, and a "
    "second van is being considered for the estates on the eastern edge of the town.",
]
COMMENTS = [
    "I have taken this ferry every morning for twelve years and the tunnel bus is no substitute at all.",
    "Typical council thinking, they never maintained the boat properly and now they act surprised by rust.",
]
SIDEBAR = [
    "Gallery opens a winter exhibition of harbour photographs taken by local schoolchildren",
    "Storm warning issued for the coast as gales are expected to reach the estuary overnight",
]


def news_page(article: list[str] = ARTICLE) -> str:
    menu = "".join(f'<li><a href="/{s}">{s.title()}</a></li>' for s in ("news", "sport", "business", "weather"))
    paragraphs = "".join(f"<p>{p}</p>" for p in article)
    comments = "".join(f'<li class="comment"><span class="author">reader{n}</span><p>{c}</p></li>'
                       for n, c in enumerate(COMMENTS))
    most_read = "".join(f'<li><a href="/story/{n}">{s}</a></li>' for n, s in enumerate(SIDEBAR))
    return (
        "<html><head><title>Ferry to stop in March - Oldham Gazette</title></head><body>"
        f'<header><a href="/">Oldham Gazette</a><nav><ul>{menu}</ul></nav></header>'
        '<div class="layout"><main><article>'
        "<h1>Ferry to stop in March</h1>"
        '<p class="byline">By Ann Reporter, 3 February</p>'
        f"{paragraphs}"
        "<h2>What happens next</h2>"
        "<p>The authority will hold a public meeting at the town hall to hear what passengers want from the "
        "bus link, and will publish the timetable a month before the last crossing.</p>"
        "</article>"
        f'<section class="comments"><h3>Comments</h3><ul>{comments}</ul></section></main>'
        f'<aside class="sidebar"><h3>Most read</h3><ol>{most_read}</ol>'
        '<div class="newsletter"><p>Sign up for our morning briefing, delivered every weekday at seven.</p></div>'
        "</aside></div>"
        '<footer><p><a href="/about">About us</a> | <a href="/privacy">Privacy</a> | '
        "Copyright 2026 Oldham Gazette Ltd. All rights reserved.</p></footer>"
        "</body></html>")


def flags(doc: Document) -> dict[str, bool]:
    return {b.text: b.boilerplate for b in doc.blocks}


def test_the_article_is_main_and_menus_sidebar_comments_footer_are_boilerplate() -> None:
    doc = from_text(news_page(), "file:///ferry.html", "text/html")
    f = flags(doc)
    assert all(f[p] is False for p in ARTICLE)
    assert f["What happens next"] is False  # a heading inside the article, short as a menu item
    assert all(f[c] is True for c in COMMENTS)
    assert all(f[s] is True for s in SIDEBAR)
    assert f["Sign up for our morning briefing, delivered every weekday at seven."] is True
    assert f["Sport"] is True and f["Most read"] is True
    main = main_text(doc)
    assert "swing bridge" in main and "twelve years" not in main and "Copyright" not in main
    # Nothing is lost: the rest is still in the document, marked.
    assert "twelve years" in doc.body_text(boilerplate=True)


def test_boilerplate_stays_searchable_with_less_weight(tmp_path: Path) -> None:
    # One page says "corrosion" in its article, the other (another story) only in a comment.
    other = news_page(OTHER_ARTICLE).replace(
        COMMENTS[1], "The corrosion on the old ferry was obvious to anyone who rode it last winter, really.")
    with Collection.open(str(tmp_path), writable=True) as coll:
        for name, html in (("article.html", news_page()), ("comment.html", other)):
            doc = from_text(html, f"file:///n/{name}", "text/html")
            coll.put(Row(uri=f"file:///n/{name}", path=f"/n/{name}", size=len(html), mtime=time.time()), doc)
    with Collection.open(str(tmp_path)) as coll:
        hits = [Path(h["path"]).name for h in search(coll, "corrosion", limit=10)["hits"]]
        assert hits == ["article.html", "comment.html"]
        # A word only in boilerplate (the sidebar) still finds the page.
        assert {Path(h["path"]).name for h in search(coll, "schoolchildren", limit=10)["hits"]} == {
            "article.html", "comment.html"}


def test_where_trafilatura_finds_nothing_the_dom_method_decides() -> None:
    # A photo page: its only text is in alt attributes, which trafilatura does not read.
    photos = "".join(f'<p><img src="{n}.jpg" alt="{alt}"></p>' for n, alt in enumerate(SIDEBAR))
    html = f"<html><body>{photos}<footer><a href='/'>Home</a> | <a href='/photos'>Photos</a></footer></body></html>"
    assert library_text(lxml.html.document_fromstring(html)) == ""
    got = from_text(html, "file:///g.html", "text/html")
    dom = from_text(html, "file:///g.html", "text/html", main_content="dom")
    assert [b.boilerplate for b in got.blocks] == [b.boilerplate for b in dom.blocks]
    assert SIDEBAR[0] in main_text(got) and "Home" not in main_text(got)


def test_a_page_too_large_for_the_library_goes_to_the_dom_method(monkeypatch: pytest.MonkeyPatch) -> None:
    html = news_page()
    library = from_text(html, "file:///f.html", "text/html")
    monkeypatch.setattr(content, "LIBRARY_MAX_BLOCKS", 10)
    large = from_text(html, "file:///f.html", "text/html")
    dom = from_text(html, "file:///f.html", "text/html", main_content="dom")
    assert [b.boilerplate for b in large.blocks] == [b.boilerplate for b in dom.blocks]
    assert [b.boilerplate for b in large.blocks] != [b.boilerplate for b in library.blocks]


def test_an_id_naming_boilerplate_does_not_hide_the_article() -> None:
    # Sphinx and wikis make ids from headings: a section about comments is not a comment box.
    html = news_page().replace("<article>", '<article id="comments-and-sharing">')
    f = flags(from_text(html, "file:///f.html", "text/html"))
    assert all(f[p] is False for p in ARTICLE)


def test_a_class_over_the_whole_article_does_not_hide_it() -> None:
    html = news_page().replace("<article>", '<article class="story social-share">')
    f = flags(from_text(html, "file:///f.html", "text/html"))
    assert all(f[p] is False for p in ARTICLE)
    assert all(f[c] is True for c in COMMENTS)


def words(text: str) -> list[str]:
    return [w.lower() for w in content.WORD.findall(text)]


def blocks(*texts: str) -> list[Block]:
    return [Block.of("h" if len(t.split()) < 3 else "p", t) for t in texts]


def test_align_takes_a_repeated_lede_once_at_the_copy_that_fits() -> None:
    lede = "the council voted last night to close the ferry"
    body = "engineers had found corrosion in the hull of the old boat"
    bs = blocks(lede, "Home", "Ferry to close", lede, body)
    main = align(bs, words(f"Ferry to close {lede} {body}"))
    assert main == {2, 3, 4}  # the lede above the menu is not the article's


def test_align_short_blocks_count_only_between_their_main_neighbours() -> None:
    text = "first paragraph of the story here. Background. second paragraph of the story here. share this"
    bs = blocks("Share", "first paragraph of the story here.", "Background", "second paragraph of the story here.",
                "Share")
    # "share" is in the text but after the last main block, where the page's last "Share" is not.
    assert align(bs, words(text)) == {1, 2, 3, 4}
    assert align(bs, words(text.replace(" share this", ""))) == {1, 2, 3}


def test_align_keeps_every_copy_of_a_repeated_paragraph_and_tolerates_dropped_words() -> None:
    note = "new in version three point two"
    long = " ".join(f"word{n}" for n in range(40))
    bs = blocks(note, "some text between the notes", note, long + " [edit] [citation needed]")
    assert align(bs, words(f"{note} some text between the notes {note} {long}")) == {0, 1, 2, 3}


def test_align_leaves_out_blocks_the_text_does_not_hold() -> None:
    bs = blocks("a paragraph the extractor kept", "a list of links it left out", "kept too, this one")
    assert align(bs, words("a paragraph the extractor kept kept too, this one")) == {0, 2}
    assert align(bs, []) == set()


@pytest.mark.slow
def test_a_huge_page_goes_to_the_dom_method_quickly() -> None:
    # 40,000 paragraphs (5 MB): trafilatura would take most of a file's time limit on it.
    html = "<html><body><nav><a href='/'>Home</a></nav>" + "".join(
        f"<p>{ARTICLE[n % 4]} Paragraph {n}.</p>" for n in range(40_000)) + "</body></html>"
    start = time.process_time()
    doc = from_text(html, "file:///huge.html", "text/html")
    assert time.process_time() - start < 30
    assert len(doc.blocks) > content.LIBRARY_MAX_BLOCKS
    assert doc.blocks[0].boilerplate and not doc.blocks[1].boilerplate and not doc.blocks[-1].boilerplate
