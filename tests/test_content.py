"""Main-content marking: the notes' max-subarray method, the DOM method, and a real corpus page."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from deskdex.converters import content
from deskdex.converters.content import PageTokens, content_span, main_text, max_subarray
from deskdex.converters.html import convert, from_text
from deskdex.converters.source import Source

T, W = True, False  # a tag token, a word token

CORPUS = Path("/tmp/corpora/mixed")


def objective(is_tag: list[bool], i: int, j: int) -> int:
    """The notes' quantity: tags before i and after j plus words in [i, j]."""
    return (sum(is_tag[:i]) + sum(not t for t in is_tag[i:j + 1]) + sum(is_tag[j + 1:]))


@pytest.mark.parametrize("seq, span", [
    ([T, T, T, W, W, T, W, W, W, T, T], (3, 8)),   # one tag inside the plateau is worth crossing
    ([T, W, W, T, T, T, W, T], (1, 2)),            # three tags outweigh one more word
    ([W, W, W], (0, 2)),                           # all words: everything
    ([T, T], (0, -1)),                             # all tags: the empty span
    ([W, T, W], (0, 0)),                           # a tie keeps the earliest, shortest span
    ([], (0, -1)),
])
def test_content_span_exact(seq: list[bool], span: tuple[int, int]) -> None:
    assert content_span(seq) == span


def test_content_span_is_optimal_against_brute_force() -> None:
    rng = random.Random(7)
    for _ in range(300):
        seq = [rng.random() < 0.55 for _ in range(rng.randrange(1, 16))]
        i, j = content_span(seq)
        best = max(objective(seq, a, b) for a, b in itertools.combinations_with_replacement(range(len(seq)), 2))
        best = max(best, sum(seq))  # the empty span
        assert objective(seq, i, j) == best, seq


def test_max_subarray_sum() -> None:
    assert max_subarray([2, -3, 4, -1, 2, -5, 3]) == (2, 4, 5)
    assert max_subarray([-1.5, 0.5, 2.0]) == (1, 2, 2.5)


NAV = "".join(f'<li><a href="/s{n}">Section {n}</a></li>' for n in range(12))
PROSE = ("The committee met on Tuesday to discuss the budget for the coming year. Members agreed that "
         "the library needs longer opening hours, and that the roof must be repaired before winter.")


def page(article: str, extra: str = "") -> str:
    return (f"<html><head><title>Town news</title></head><body>"
            f'<div id="top"><ul class="menu">{NAV}</ul></div>'
            f"<div>{article}</div>{extra}"
            f'<div class="bottom"><p><a href="/a">About</a> | <a href="/c">Contact</a> | '
            f'<a href="/p">Privacy</a></p><ul>{NAV}</ul></div></body></html>')


ARTICLE = f"<h1>Budget meeting</h1><p>{PROSE}</p><p>{PROSE}</p><p>{PROSE}</p>"


@pytest.mark.parametrize("method", content.METHODS)
def test_methods_mark_menus_and_keep_the_article(method: str) -> None:
    doc = from_text(page(ARTICLE), "file:///t.html", "text/html", main_content=method)
    main = [b.text for b in doc.blocks if not b.boilerplate]
    boiler = [b.text for b in doc.blocks if b.boilerplate]
    assert main.count(PROSE) == 3
    assert "Section 3" in boiler and "Section 3" not in main
    assert not any("Privacy" in t for t in main)


def test_dom_marks_a_link_list_inside_the_article() -> None:
    related = '<ul class="x">' + "".join(f'<li><a href="/r{n}">Another story number {n}</a></li>'
                                         for n in range(5)) + "</ul>"
    article = f"<h1>Budget meeting</h1><p>{PROSE}</p>{related}<p>{PROSE}</p>"
    doc = from_text(page(article), "file:///t.html", "text/html", main_content="dom")
    flags = {b.text: b.boilerplate for b in doc.blocks}
    assert flags[PROSE] is False
    assert flags["Another story number 2"] is True
    assert flags["Budget meeting"] is False


def test_dom_uses_class_names_as_hints() -> None:
    side = f'<div class="sidebar"><p>{PROSE.replace("committee", "club")}</p></div>'
    doc = from_text(page(ARTICLE, side), "file:///t.html", "text/html", main_content="dom")
    club = next(b for b in doc.blocks if "club" in b.text)
    assert club.boilerplate
    assert "committee" in main_text(doc) and "club" not in main_text(doc)


def test_dom_keeps_a_page_without_running_text() -> None:
    # An index page: nothing scores as text, so nothing unhinted is thrown to boilerplate.
    html = "<html><body><h1>Index</h1><ul>" + NAV + "</ul><nav><a href='/'>Home</a></nav></body></html>"
    doc = from_text(html, "file:///i.html", "text/html", main_content="dom")
    assert [b.text for b in doc.blocks if b.boilerplate] == ["Home"]
    assert "Section 5" in main_text(doc)


def test_token_method_only_counts_words_of_its_own_blocks() -> None:
    from deskdex.converters.document import Block, Document
    doc = Document(uri="file:///x", blocks=[Block.of("p", "a b"), Block.of("p", "c d e")])
    tokens = PageTokens()
    tokens.tags(3)
    tokens.words(2, 0)
    tokens.tags(4)
    tokens.words(3, 1)
    tokens.tags(1)
    content.mark(doc, tokens, "tokens")
    assert [b.boilerplate for b in doc.blocks] == [True, False]


def test_anchor_words_weigh_nothing_in_the_token_sequence() -> None:
    tokens = PageTokens()
    tokens.words(2, 0)
    tokens.words(3, 0, link=True)
    tokens.tags(1)
    assert tokens.values == [1, 1, 0, 0, 0, -1]


def test_token_method_leaves_out_a_list_of_long_headline_links() -> None:
    # Related stories: many words per tag, so with anchor words counted as text the list would
    # extend the plateau; weighing them 0 leaves it out.
    related = "<ul>" + "".join(f'<li><a href="/r{n}">Council approves plan number {n} for the new '
                               f'library roof and longer hours</a></li>' for n in range(6)) + "</ul>"
    doc = from_text(page(ARTICLE, related), "file:///t.html", "text/html", main_content="tokens")
    flags = {b.text: b.boilerplate for b in doc.blocks}
    assert flags[PROSE] is False
    assert flags["Council approves plan number 3 for the new library roof and longer hours"] is True


def test_dom_retries_without_names_when_they_hide_all_text() -> None:
    # Sphinx gives a section the id of its heading: "Sharing cookies" names no sidebar.
    article = f'<section id="sharing-cookies"><h1>Sharing cookies</h1><p>{PROSE}</p><p>{PROSE}</p></section>'
    side = '<div class="sidebar"><p>Search this site</p></div>'
    doc = from_text(page(article, side), "file:///t.html", "text/html", main_content="dom")
    flags = {b.text: b.boilerplate for b in doc.blocks}
    assert flags[PROSE] is False and flags["Sharing cookies"] is False
    assert flags["Search this site"] is True and flags["Section 3"] is True


def test_dom_keeps_code_and_unlinked_items_inside_named_content() -> None:
    names = "<ul>" + "".join(f"<li>Contributor {n}</li>" for n in "ABCDEF") + "</ul>"
    article = (f'<div class="body"><h1>Release 2.0</h1><p>{PROSE}</p><pre>pip install -U town</pre>'
               f"<p>{PROSE}</p><p>Thanks to all of the contributors to this release:</p>{names}<p>{PROSE}</p></div>")
    doc = from_text(page(article), "file:///t.html", "text/html", main_content="dom")
    main = main_text(doc)
    assert "pip install -U town" in main
    assert all(f"Contributor {n}" in main for n in "ABCDEF")
    assert "Section 3" not in main


def test_unknown_method_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown main-content method"):
        from_text(page(ARTICLE), "file:///t.html", "text/html", main_content="magic")


def test_no_method_keeps_only_element_hints() -> None:
    html = f"<html><body><nav><a href='/'>Home</a></nav><p>{PROSE}</p></body></html>"
    doc = from_text(html, "file:///t.html", "text/html", main_content=None)
    assert [(b.text, b.boilerplate) for b in doc.blocks] == [("Home", True), (PROSE, False)]


# A page of a manual as the Debian handbook's generator writes it: paragraphs are ``div.para`` with
# inline code and spans, a tip box has the class "sidebar", prev/next lists above and below.
MANUAL_S = ("Debian keeps a list of every file that each package ships, so a missing command can be traced "
            "to the package that provides it even before that package is installed on the machine.")


def _manual_para(n: int) -> str:
    return (f'<div class="para">If <code class="command">apt-file search <em>name{n}</em></code> finds the file, '
            f'the <span class="pkg">package{n}</span> that ships it is printed first. {MANUAL_S}</div>')


MANUAL = ('<html><head><title>6.4. The apt-file Command</title></head><body>'
          '<div id="banner"><a href="/"><span>The Debian Administrator\'s Handbook</span></a></div>'
          '<ul class="docnav top"><li class="previous"><a href="a.html">Prev</a></li>'
          '<li class="next"><a href="c.html">Next</a></li></ul>'
          '<div class="section"><div class="titlepage"><h2 class="title">6.4. The apt-file Command</h2></div>'
          + _manual_para(1) + _manual_para(2) + '<h3>6.4.1. Searching in names</h3>' + _manual_para(3) +
          '<div class="itemizedlist"><ul><li>apt-file list shows the files of a package</li>'
          '<li>apt-file search finds the package of a file</li><li>dpkg -S does the same for installed ones</li></ul></div>'
          '<pre class="screen">$ apt-file search bin/axi-cache\napt-xapian-index: /usr/bin/axi-cache</pre>'
          '<div class="sidebar"><div class="titlepage"><p class="title"><strong>TIP</strong> Listing a package</p></div>'
          f'<div class="para">Similar to apt-file list, the command dpkg -L lists the files of an installed package. '
          f'{MANUAL_S}</div></div>' + _manual_para(4) + _manual_para(5) +
          '</div><ul class="docnav"><li class="previous"><a href="a.html">Prev 6.3. The apt-cache Command</a></li>'
          '<li class="home"><a href="index.html">Home</a></li>'
          '<li class="next"><a href="c.html">Next 6.5. Frontends</a></li></ul></body></html>')


def test_default_keeps_the_headings_lists_and_tip_boxes_of_a_manual_page() -> None:
    # trafilatura drops the section heading, the list and the tip box between its paragraphs (the
    # DOM method's class hint drops the box too): they are put back from our own blocks.
    doc = from_text(MANUAL, "file:///t.html", "text/html")
    main = main_text(doc)
    assert "6.4.1. Searching in names" in main.splitlines()
    assert "dpkg -S does the same for installed ones" in main.splitlines()
    assert "the command dpkg -L lists the files of an installed package" in main
    assert "$ apt-file search bin/axi-cache" in main
    # Sentences with inline code and spans stay whole, in one block each.
    assert [b.text.startswith("If apt-file search name") for b in doc.blocks].count(True) == 5
    assert "If apt-file search name3 finds the file, the package3 that ships it is printed first." in main
    boiler = [b.text for b in doc.blocks if b.boilerplate]
    assert "Prev" in boiler and "Home" in boiler and "Next 6.5. Frontends" in boiler


def test_default_leaves_out_figures_captions_and_teasers_inside_an_article() -> None:
    # What trafilatura leaves out of a news article on purpose stays out when gaps are filled: a
    # figure's caption, an image alone, a heading over a link list.
    figure = ('<figure><img src="roof.jpg" alt="The library roof seen from the square"/>'
              "<figcaption>Workers on the library roof in March, before the storm damaged it again.</figcaption></figure>")
    image = '<p><img src="a.jpg" alt="A crowd outside the library waiting for the doors to open"/></p>'
    related = "<h3>More stories</h3><ul>" + "".join(
        f'<li><a href="/s{n}">Council story {n}</a></li>' for n in range(6)) + "</ul>"
    article = f"<h1>Budget meeting</h1><p>{PROSE}</p>{figure}<p>{PROSE}</p>{image}{related}<p>{PROSE}</p>"
    doc = from_text(page(article), "file:///t.html", "text/html")
    main = main_text(doc)
    assert main.count(PROSE) == 3
    for text in ("Workers on the library roof", "A crowd outside",
                 "More stories", "Council story"):
        assert text not in main, text


@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus absent: build it with shared/corpus/build.sh")
def test_corpus_handbook_page_keeps_its_paragraphs_whole() -> None:
    # trafilatura's own reading of this page keeps 38 % of its words: it cuts paragraphs at their
    # first inline element ("If <code>apt show</code> returns ...") and drops the first and last.
    path = CORPUS / "deb/debian-handbook/en-US/sect.searching-packages.html"
    if not path.exists():
        pytest.skip(f"{path} not in this corpus")
    main = main_text(convert(Source.from_path(path), "text/html"))
    for text in ("With the large and ever-growing amount of software in Debian, there emerges a paradox",
                 "The most trivial search possible is looking up an exact package name. If apt show package",
                 "To sum up, the best tool for the job depends on the complexity of the search",
                 "finally, when the searches involve complex expressions with logic operations"):
        assert text in main, text
    assert "Download the ebook" not in main


@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus absent: build it with shared/corpus/build.sh")
def test_corpus_sphinx_page_navigation_is_boilerplate() -> None:
    path = CORPUS / "deb/debian-policy/policy.html/ch-scope.html"
    if not path.exists():
        pytest.skip(f"{path} not in this corpus")
    for method, share in (("dom", 5), (content.DEFAULT, 1.5)):
        doc = convert(Source.from_path(path), "text/html", main_content=method)
        boiler = doc.body_text(boilerplate=True)
        main = main_text(doc)
        assert "Quick search" in boiler and "Previous topic" in boiler
        assert "Navigation" not in main.splitlines()
        assert "This manual describes the policy requirements for the Debian distribution" in main
        # Most of the words are the chapter's, few of them navigation. Trafilatura leaves out the
        # section "Authors and Maintainers" (its rules drop what an id says is about authors).
        assert content.count_words(main) > share * content.count_words(boiler), method


# Boxes of the text and the article's element (the second round of issue 17, on the own pages).
TIP_PAGE = ('<html><head><title>9.6. The inetd Super-Server</title></head><body>'
            '<div id="banner"><a href="/get/">Download the ebook</a></div>'
            '<ul class="docnav top"><li class="previous"><a href="a.html">Prev</a></li>'
            '<li class="next"><a href="c.html">Next</a></li></ul>'
            '<div class="section"><div class="titlepage"><h2 class="title">9.6. The inetd Super-Server</h2></div>'
            + _manual_para(1) + _manual_para(2) + _manual_para(3) +
            '<div class="para">The project keeps a guide to these servers online:</div>'
            '<div class="para">→ <a href="https://example.org/inetd-guide">https://example.org/inetd-guide</a></div>'
            + _manual_para(4) +
            '<div class="sidebar"><div class="titlepage"><p class="title"><strong>TIP</strong> Other super-servers</p></div>'
            '<div class="para">While Debian installs openbsd-inetd by default, xinetd and rlinetd are there too, '
            'and systemd can listen on a socket for a server it starts on demand.</div>'
            '<div class="para">→ <a href="https://example.org/xinetd">https://example.org/xinetd</a></div></div>'
            '<div class="sidebar"><div class="titlepage"><p class="title"><strong>NOTE</strong> Ports</p></div>'
            '<div class="para">The services file maps the names of the servers to their port numbers, so the '
            'configuration file can use either.</div></div>'
            '</div><ul class="docnav"><li class="previous"><a href="a.html">Prev 9.5. syslog</a></li>'
            '<li class="home"><a href="index.html">Home</a></li>'
            '<li class="next"><a href="c.html">Next 9.7. cron</a></li></ul></body></html>')


@pytest.mark.parametrize("method", ("trafilatura", "dom"))
def test_tip_boxes_at_the_end_of_a_manual_section_are_text(method: str) -> None:
    # The handbook's tips (div.sidebar) after the section's last paragraph: trafilatura stops before
    # them and the DOM method took their class for a sidebar's; a box of running text among the
    # article's paragraphs is kept whole, title and link line with it.
    doc = from_text(TIP_PAGE, "file:///t.html", "text/html", main_content=method)
    lines = main_text(doc).splitlines()
    for text in ("TIP Other super-servers", "NOTE Ports", "→ https://example.org/xinetd"):
        assert text in lines, (method, text)
    assert any(line.startswith("While Debian installs openbsd-inetd") for line in lines)
    assert any(line.startswith("The services file maps") for line in lines)
    boiler = [b.text for b in doc.blocks if b.boilerplate]
    assert "Home" in boiler and "Next 9.7. cron" in boiler and "Download the ebook" in boiler


def test_default_keeps_a_manual_sections_title_and_its_printed_links() -> None:
    doc = from_text(TIP_PAGE, "file:///t.html", "text/html")
    lines = main_text(doc).splitlines()
    assert "9.6. The inetd Super-Server" in lines[1:]  # the heading, not only the document's title
    # A link whose text is its own address is a reference printed in the text, not navigation.
    assert "→ https://example.org/inetd-guide" in lines


@pytest.mark.parametrize("method", ("trafilatura", "dom"))
def test_a_blogs_sidebar_of_text_beside_the_article_stays_out(method: str) -> None:
    # The same class beside the article's element (a blog's column), not among its paragraphs.
    side = ('<div class="sidebar"><h3>About this blog</h3><p>The club writes here about the town, its library '
            'and its budget meetings, every week since the library reopened in the spring.</p></div>')
    doc = from_text(page(ARTICLE, side), "file:///t.html", "text/html", main_content=method)
    assert "The club writes here" not in main_text(doc)
    assert main_text(doc).count(PROSE) == 3


def test_admonitions_at_the_end_of_a_docbook_chapter_are_text() -> None:
    # DocBook XSL's note: a div.note holding a table with the icon, the word "Note" and the text.
    note = ('<div class="note"><table border="0" summary="Note"><tr><td rowspan="2"><img alt="[Note]" src="note.png"/></td>'
            '<th align="left">Note</th></tr><tr><td><p>Keep a copy of the old configuration file, since the '
            'upgrade replaces it without asking when it has not been changed.</p></td></tr></table></div>')
    warning = ('<div class="admonition warning"><p class="admonition-title">Warning</p><p>Never run the '
               'script as root on a machine that holds data you have no backup of.</p></div>')
    article = f'<div class="chapter"><h1>Upgrading</h1><p>{PROSE}</p><p>{PROSE}</p>{note}{warning}</div>'
    for method in ("trafilatura", "dom"):
        lines = main_text(from_text(page(article), "file:///t.html", "text/html", main_content=method)).splitlines()
        assert any(line.startswith("Keep a copy of the old configuration") for line in lines), method
        assert any(line.startswith("Never run the script as root") for line in lines), method


def test_fill_gaps_reads_a_lone_code_block_as_a_damaged_reading() -> None:
    # trafilatura read a handbook page as its one (long) code block: that is no reading of the
    # page's prose, however many words the code has; the DOM run's paragraphs around it come back.
    from deskdex.converters.document import Block
    code = "\n".join(f"$ fakeroot alien --to-deb package{n}.rpm" for n in range(40))
    blocks = [Block.of("h", "Coexistence with other packaging systems"), Block.of("p", PROSE),
              Block.of("p", PROSE.replace("committee", "club")), Block.of("pre", code),
              Block.of("p", PROSE.replace("committee", "council"))]
    tokens = PageTokens()
    tokens.paths = [(1, 2, 3), (1, 2, 4), (1, 2, 5), (1, 2, 6), (1, 2, 7)]
    assert content._fill_gaps(blocks, {3}, tokens, dom={0, 1, 2, 3, 4}) == {0, 1, 2, 3, 4}


# sphinx-tabs (Flask's manual): one panel per system, all but the first ``hidden`` until its tab is
# clicked; each is the text as much as the first. A hidden menu is still boilerplate.
TABS = ('<div class="sphinx-tabs docutils container"><div aria-label="Tabbed content" role="tablist">'
        '<button role="tab">Linux</button><button role="tab">macOS</button><button role="tab">Windows</button></div>'
        '<div class="sphinx-tabs-panel" role="tabpanel"><pre>$ netstat -nlp | grep 5000</pre></div>'
        '<div class="sphinx-tabs-panel" hidden="true" role="tabpanel"><pre>$ lsof -P -i :5000</pre></div>'
        '<div class="sphinx-tabs-panel" hidden="true" role="tabpanel"><pre>&gt; netstat -ano | findstr 5000</pre>'
        '</div></div>')
HIDDEN_MENU = '<ul hidden="true"><li><a href="/m1">Mobile menu home</a></li><li><a href="/m2">Mobile menu news</a></li></ul>'


@pytest.mark.parametrize("method", ("trafilatura", "dom"))
def test_hidden_tab_panels_are_text_and_a_hidden_menu_is_not(method: str) -> None:
    article = f"<h1>Development server</h1><p>{PROSE}</p>{TABS}<p>{PROSE}</p><p>{PROSE}</p>"
    doc = from_text(page(article, HIDDEN_MENU), "file:///t.html", "text/html", main_content=method)
    lines = main_text(doc).splitlines()
    for command in ("$ netstat -nlp | grep 5000", "$ lsof -P -i :5000", "> netstat -ano | findstr 5000"):
        assert command in lines, (method, command)
    assert "Mobile menu home" in [b.text for b in doc.blocks if b.boilerplate]


def _sphinx_page(body: str) -> str:
    return ('<html><head><title>Internet Data Handling</title></head><body>'
            '<div class="related" role="navigation"><ul><li><a href="genindex.html">index</a></li>'
            '<li><a href="email.html">next</a> |</li></ul></div>'
            f'<div class="document"><div class="body" role="main"><section id="s"><h1>Internet Data Handling</h1>'
            f'{body}</section></div></div>'
            '<div class="footer">© Copyright 2001-2023, Python Software Foundation.</div></body></html>')


# A chapter page of the Python manual: a sentence, then the toctree, a list of the pages below by
# their titles, which trafilatura keeps whole (the reST source has only their file names).
TOCTREE = '<div class="toctree-wrapper compound"><ul>' + "".join(
    f'<li class="toctree-l1"><a class="reference internal" href="{m}.html"><code>{m}</code> — {title}</a><ul>'
    + "".join(f'<li class="toctree-l2"><a class="reference internal" href="{m}.html#{m}.{f}">'
              f'<code>{m}.{f}()</code></a></li>' for f in ("load", "loads", "dump", "dumps"))
    + "</ul></li>"
    for m, title in (("json", "JSON encoder and decoder"), ("mailbox", "Manipulate mailboxes in various formats"),
                     ("base64", "Base16, Base32, Base64, Base85 Data Encodings"),
                     ("binascii", "Convert between binary and ASCII"), ("quopri", "Encode and decode MIME quoted-printable data"))
) + "</ul></div>"
CHAPTER_S = "This chapter describes modules which support handling data formats commonly used on the internet."


def test_default_leaves_out_a_list_of_the_sites_own_pages() -> None:
    doc = from_text(_sphinx_page(f"<p>{CHAPTER_S}</p>{TOCTREE}"), "file:///t.html", "text/html")
    main = main_text(doc)
    assert CHAPTER_S in main
    for text in ("JSON encoder and decoder", "json.loads()", "Convert between binary and ASCII"):
        assert text not in main, text


def test_default_keeps_a_list_of_links_to_other_sites() -> None:
    # A page of talks and books (pytest's manual): links away are references, the page's text.
    talks = "<ul>" + "".join(
        f'<li><p><a class="reference external" href="https://example.org/talk{n}">Testing with fixtures, part {n}</a>,'
        f" PyCon {2010 + n}</p></li>" for n in range(8)) + "</ul>"
    doc = from_text(_sphinx_page(f"<p>{CHAPTER_S}</p>{talks}"), "file:///t.html", "text/html")
    main = main_text(doc)
    for n in range(8):
        assert f"Testing with fixtures, part {n}" in main, n
