"""The page of each search hit (issue 30): a paged document's hit says the page its snippet's first
highlight is on (its start's when it has none), read from the block tags' ``page`` attributes the
snippet maker streams past anyway; a document without pages, and a hit without a snippet, say
None. Checked on random paged texts against the page of the block the word was put in, on a real
PDF through the daemon's socket, and through a shard served over HTTP."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest

from deskdex import wire
from deskdex.converters import Block, Document, Inline, tagged
from deskdex.index import Collection, Row, search
from deskdex.index.snippets import CHUNK, Snippets
from deskdex.paths import path_to_uri

from .daemon_fixture import DaemonProcess
from .test_shards import TOKEN, Served, _home

FILLER = ("alder brook cedar dune ember fjord grove hollow islet jetty knoll larch marsh nettle "
          "orchard pebble quarry ridge spruce thicket upland valley willow yarrow").split()


def snippet_of(doc: Document, query: str) -> tuple[str, list[list[int]], int | None]:
    made = Snippets(query).snippet(io.BytesIO(tagged.dumps(doc).encode()))
    return made.text, made.spans, made.page


def random_block(rnd: random.Random, words: int, page: int | None, plant: str | None = None) -> Block:
    """A block of filler ``words`` long (some inline markup, characters escaped in tagged text, a
    look-alike of a page tag in its text), ``plant`` put at a random word of it."""
    text = [rnd.choice(FILLER) for _ in range(words)]
    if plant is not None:
        text.insert(rnd.randrange(len(text) + 1), plant)
    if rnd.random() < 0.1:
        text.insert(rnd.randrange(len(text) + 1), '<p page="99"> & page="98"')
    runs, i = [], 0
    while i < len(text):
        n = rnd.randint(1, 12)
        style = rnd.choice(["", "", "", "em", "b"])
        runs.append(Inline(" ".join(text[i:i + n]) + " ", style))
        i += n
    kind = rnd.choice(["p", "p", "p", "h", "li", "td", "pre", "quote"])
    return Block(kind, runs, level=rnd.randint(1, 3) if kind in ("h", "li") else 0,
                 boilerplate=rnd.random() < 0.05, page=page)


def random_paged(rnd: random.Random, plants: dict[str, tuple[int, int]], pages: int, long: bool) -> Document:
    """A document of ``pages`` pages; ``plants``: word -> (page, block of that page) it is put in.
    Pages hold one to six blocks, some of a word or two (a page change inside a snippet's window)."""
    doc = Document(uri="file:///random.pdf", mime="application/pdf", title="Random")
    doc.meta["pages"] = str(pages)
    for p in range(1, pages + 1):
        blocks = max([rnd.randint(1, 6)] + [b + 1 for q, b in plants.values() if q == p])
        for b in range(blocks):
            here = [w for w, (q, bb) in plants.items() if (q, bb) == (p, b)]
            words = rnd.choice([1, 2, 5, 20, 60]) * (rnd.randint(5, 30) if long else 1)
            block = random_block(rnd, words, p, here[0] if here else None)
            for extra in here[1:]:
                block.runs.append(Inline(" " + extra))
            doc.blocks.append(block)
    return doc


@pytest.mark.parametrize("seed", range(4))
def test_the_page_is_that_of_the_first_highlight_in_random_paged_texts(seed: int) -> None:
    rnd = random.Random(seed)
    deep = 0  # words past the first 64 KB chunk: their page is looked for back across chunks
    for n in range(60):
        long = n % 6 == 0  # several 64 KB chunks
        pages = rnd.randint(1, 40)
        one = (rnd.randint(1, pages), rnd.randint(0, 6))
        two = (rnd.randint(1, pages), rnd.randint(0, 6))
        doc = random_paged(rnd, {"kingfisher": one, "bitterns": two}, pages, long)
        deep += tagged.dumps(doc).find("kingfisher") > CHUNK
        text, spans, page = snippet_of(doc, "kingfisher")
        assert [text[a:b] for a, b in spans] == ["kingfisher"] and page == one[0], (seed, n, text, one)
        # Two words: the first highlight is the earlier's, whether they share a fragment or not.
        text, spans, page = snippet_of(doc, "kingfisher bittern")
        assert spans and page == min(one, two)[0], (seed, n, text, one, two)
        # No match in the text (a title's word): the snippet is the start, on the first page.
        assert snippet_of(doc, "random")[1:] == ([], 1)
    assert deep >= 2


def test_the_page_changes_exactly_where_a_block_starts() -> None:
    """The page boundary falls inside the snippet's window: the word just before it is on the
    page before, the word just after it on the next, and the page of the window's start counts
    for a word whose block began before the window."""
    long = " ".join(["willow"] * 150)  # 1,050 characters: the window starts inside this block
    before = Document(uri="u", mime="application/pdf", blocks=[
        Block.of("p", long, page=1), Block.of("p", long + " last words of page four: kingfisher", page=4),
        Block.of("p", "Page five starts here.", page=5)])
    assert snippet_of(before, "kingfisher")[2] == 4
    after = Document(uri="u", mime="application/pdf", blocks=[
        Block.of("p", long, page=4), Block.of("p", "kingfisher opens page five", page=5),
        Block.of("h", "six", level=2, page=6)])
    assert snippet_of(after, "kingfisher")[2] == 5
    inside = Document(uri="u", mime="application/pdf", blocks=[
        Block.of("p", "first", page=1), Block.of("p", long + " kingfisher " + long, page=2),
        Block.of("p", "third", page=3)])
    assert snippet_of(inside, "kingfisher")[2] == 2
    # A phrase, a prefix, a fuzzy word and a CJK run find their page the same way.
    for query in ('"opens page"', "kingfi*", "kingfesh~", "検索"):
        doc = Document(uri="u", mime="application/pdf", blocks=[
            Block.of("p", long, page=1), Block.of("p", long, page=2),
            Block.of("p", "kingfisher opens page seven, 全文検索の仕組み", page=7)])
        assert snippet_of(doc, query)[1] and snippet_of(doc, query)[2] == 7, query


def test_texts_without_pages_have_none() -> None:
    plain = Document(uri="u", mime="text/plain", blocks=[
        Block.of("p", 'A note quoting <p page="3"> and page="4" beside the kingfisher.'),
        Block.of("p", "kingfisher again")])
    assert snippet_of(plain, "kingfisher")[2] is None
    assert snippet_of(plain, "absent")[2] is None
    empty = Document(uri="u", mime="application/pdf", blocks=[])
    assert snippet_of(empty, "kingfisher") == ("", [], None)
    assert Snippets("kingfisher").snippet(None).page is None


def test_search_answers_the_page_of_each_hit(tmp_path: Path) -> None:
    """In process, through the store (zstd) and the index: every hit has ``page``; None without
    snippets."""
    paged = Document(uri="file:///d/atlas.pdf", mime="application/pdf", title="Atlas", blocks=[
        Block.of("p", f"Page {p} lists {' '.join(FILLER)}." + (" The kingfisher." if p == 33 else ""), page=p)
        for p in range(1, 300)])
    flat = Document(uri="file:///d/notes.txt", mime="text/plain", title="Notes", blocks=[
        Block.of("p", "A kingfisher on the notes.")])
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        for i, doc in enumerate((paged, flat)):
            path = doc.uri.removeprefix("file://")
            coll.put(Row(uri=doc.uri, path=path, mtime=1.0 + i, size=100, mime=doc.mime, title=doc.title), doc)
        coll.commit()
        got = {h["uri"]: h["page"] for h in search(coll, "kingfisher")["hits"]}
        assert got == {paged.uri: 33, flat.uri: None}
        assert {h["page"] for h in search(coll, "kingfisher", snippets=False)["hits"]} == {None}
        assert [h["page"] for h in search(coll, "title:atlas")["hits"]] == [1]


@pytest.mark.slow  # a daemon
def test_a_pdf_hit_on_page_three_through_the_socket(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for n, text in enumerate(["Herons stand in the shallows.", "Bitterns boom at dusk.",
                              "A kingfisher dives from the alder.", "Rails hide in the reeds."], 1):
        pdf.add_page()
        pdf.multi_cell(w=0, text=f"{text} " + "Nothing else happens on this page. " * 20)
        assert pdf.page_no() == n
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "birds.pdf").write_bytes(bytes(pdf.output()))
    (docs / "notes.txt").write_text("A kingfisher was seen by the river.\n")
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        d.eventually("kingfisher", [str(docs / "birds.pdf"), str(docs / "notes.txt")])
        hits = d.call("search", query="kingfisher")["hits"]
        assert {h["path"]: h["page"] for h in hits} == {str(docs / "birds.pdf"): 3, str(docs / "notes.txt"): None}
        pdf_hit = next(h for h in hits if h["path"].endswith(".pdf"))
        assert [pdf_hit["snippet"][a:b] for a, b in pdf_hit["highlights"]] == ["kingfisher"]
        assert [h["page"] for h in d.call("search", query="bitterns ext:pdf")["hits"]] == [2]
        assert [h["page"] for h in d.call("search", query="ext:pdf")["hits"]] == [1]  # the start's
        assert {h["page"] for h in d.call("search", query="kingfisher", snippets=False)["hits"]} == {None}
    finally:
        d.stop()


@pytest.mark.slow  # a shard server and two indexes
def test_a_served_shard_answers_the_page_too(tmp_path: Path) -> None:
    docs, mine = tmp_path / "docs", tmp_path / "mine"
    docs.mkdir()
    mine.mkdir()
    paged = Document(uri="x", mime="application/pdf", blocks=[
        Block.of("p", f"Page {p} of the shard's ledger." + (" Kingfisher sighted." if p == 5 else ""), page=p)
        for p in range(1, 9)])
    # A text file whose stored text is paged, to keep the shard's side free of PDF tools: the
    # tagged text is what carries pages.
    (docs / "ledger.txt").write_text("placeholder")
    (mine / "local.txt").write_text("A kingfisher in the front's own folder.\n")
    shard = _home(tmp_path, "shard", f'token = "{TOKEN}"\n')
    shard.run("index", str(docs))
    with Collection.open(str(shard.home / "data"), writable=True) as coll:
        uri = path_to_uri(str(docs / "ledger.txt"))
        row = coll.get(uri)
        assert row is not None
        paged.uri = uri
        coll.put(row, paged)
        coll.commit()
    served = Served(shard)
    try:
        front = _home(tmp_path, "front", f'shards = ["{served.url}"]\ntoken = "{TOKEN}"\n')
        front.run("index", str(mine))
        got = {h["path"]: h["page"] for h in front.json("search", "kingfisher")["hits"]}
        assert got == {str(docs / "ledger.txt"): 5, str(mine / "local.txt"): None}
    finally:
        served.stop()


def test_the_wire_carries_pages_and_reads_a_shard_from_before_them() -> None:
    answer = wire.decode(wire.encode(wire.SnippetsAnswer({"u": ("s", [(0, 1)])}, {"u": 3})),
                         wire.SnippetsAnswer, "an answer")
    assert answer.pages == {"u": 3}
    old = wire.decode(json.dumps({"snippets": {"u": ["s", [[0, 1]]]}}), wire.SnippetsAnswer, "an answer")
    assert old.pages == {} and old.snippets == {"u": ("s", [(0, 1)])}
    hit = {"uri": "u", "path": "p", "title": "", "snippet": "", "score": 1.0, "mime": "", "mtime": 0, "size": 0,
           "ext": "", "source": "files", "cluster": 0, "highlights": None, "duplicates": 0, "similar": 0, "lang": None}
    question = {"total": 1, "hits": [hit], "trees": [], "keys": [None], "num_docs": 1}
    assert "page" not in wire.decode(json.dumps(question), wire.SearchAnswer, "an answer").hits[0]
    with_page = dict(question, hits=[dict(hit, page=2)])
    assert wire.decode(json.dumps(with_page), wire.SearchAnswer, "an answer").hits[0]["page"] == 2


# -- the document op's marks of a big document (Snippets.marks_of) ---------------------------------
MARK_WORDS = ("harbour harbours Harbour harbor ledger ledgers led cargo tide pier piers stone happy happily "
              "café Café cafe naïve über Straße москва Москва 検索 全文検索の仕組み abc123 x_y bye the of "
              "harborside harbourmaster misled cafeteria").split()
MARK_QUERIES = ["harbour", "harbor~", "led*", '"stone pier"', '"bye bye"', "happy", "cafe", "naive", "москва",
                "検索", "abc123", "harbour OR cargo", "tide -pier", "title:harbour pier"]


def reference_marks(query: str, text: str) -> list[list[int]]:
    """Every word of ``text`` split and analyzed, as the index does, one by one: what the marks of a
    block must be (merged where they overlap)."""
    from deskdex.index import fulltext
    from deskdex.index.snippets import terms_of

    words = [(m.start(), m.end(), m.group()) for m in fulltext.WORD.finditer(text)]
    stems = [(fulltext.analyze(w) or [None])[0] if len(fulltext.analyze(w)) == 1 else None for _, _, w in words]
    found: list[tuple[int, int]] = []
    for term in terms_of(query):
        key = term.keys[0]
        if term.kind == "cjk":
            found += [(i, i + len(key)) for i in range(len(text)) if text.lower().startswith(key, i)]
        elif term.kind == "word":
            found += [(s, e) for (s, e, _), st in zip(words, stems) if st == key]
        elif term.kind == "prefix":
            found += [(s, e) for (s, e, w), st in zip(words, stems)
                      if st is not None and fulltext.analyze_path(w)[:1] == [p for p in fulltext.analyze_path(w)
                                                                                if p.startswith(key)][:1] != []]
        elif term.kind == "fuzzy":
            found += [(s, e) for (s, e, _), st in zip(words, stems) if st and osa(st, key) <= term.distance]
        else:
            n = len(term.keys)
            for i in range(len(words) - n + 1):
                if tuple(stems[i:i + n]) == term.keys:
                    found += [(words[j][0], words[j][1]) for j in range(i, i + n)]
    out: list[list[int]] = []
    for s, e in sorted(found):
        if out and s < out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def osa(a: str, b: str) -> int:
    """Edit distance, a transposition counting one."""
    d = {(i, -1): i + 1 for i in range(-1, len(a))} | {(-1, j): j + 1 for j in range(-1, len(b))}
    for i, ca in enumerate(a):
        for j, cb in enumerate(b):
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (ca != cb))
            if i and j and ca == b[j - 1] and a[i - 1] == cb:
                d[i, j] = min(d[i, j], d[i - 2, j - 2] + 1)
    return d[len(a) - 1, len(b) - 1]


@pytest.mark.parametrize("seed", range(3))
def test_marks_of_blocks_are_every_match_of_each_block(seed: int) -> None:
    """Blocks of ASCII text (looked at only around the words the candidate search finds) and of
    other scripts (split whole) give the marks of every word analyzed one by one; a phrase is
    never marked across two blocks."""
    rnd = random.Random(seed)
    ascii_words = [w for w in MARK_WORDS if w.isascii()]
    for _ in range(120):
        vocab = ascii_words if rnd.random() < 0.6 else MARK_WORDS
        blocks = [rnd.choice(["", " ", ", ", "-", "'", "\n"]).join(rnd.choice(vocab) for _ in range(rnd.choice([0, 1, 3, 12, 40])))
                  for _ in range(rnd.randint(1, 8))]
        query = rnd.choice(MARK_QUERIES)
        assert Snippets(query).marks_of(blocks) == [reference_marks(query, b) for b in blocks], (query, blocks)
    across = Snippets('"stone pier"').marks_of(["the stone", "pier", "stone pier"])
    assert across == [[], [], [[0, 5], [6, 10]]]


def test_marks_of_a_big_document_split_only_around_its_matches() -> None:
    """20,000 blocks of ASCII text, the word in one block in a hundred: the characters split into
    words in Python are those around the matched words (a phrase: the next too), not the whole text."""
    blocks = [f"the harbour master kept a ledger of every ship and its cargo ({i})" + (" okapi" if i % 100 == 7 else "")
              for i in range(20_000)]
    total = sum(map(len, blocks))
    for query, count, most in (("okapi", 200, 10 * 200), ("harbour", 20_000, 10 * 20_000),
                               ('"its cargo"', 20_000, 16 * 20_000)):
        maker = Snippets(query)
        marks = maker.marks_of(blocks)
        assert sum(1 for m in marks if m) == count
        assert maker.work.looked <= most < total / 3, (query, maker.work.looked)
    fuzzy = Snippets("okapy~")
    assert sum(1 for m in fuzzy.marks_of(blocks) if m) == 200  # a fuzzy word: every word may match


def test_marks_of_long_blocks_and_a_fuzzy_word_over_a_whole_document() -> None:
    """Stretches too long to split word by word (a fuzzy word's whole document, a long block of
    other scripts) have their matching words found by a pattern of them: the same marks."""
    rnd = random.Random(7)
    for vocab in ([w for w in MARK_WORDS if w.isascii()], MARK_WORDS):
        blocks = [" ".join(rnd.choice(vocab) for _ in range(rnd.choice([3, 900]))) for _ in range(12)]
        assert max(map(len, blocks)) > 4096
        for query in ("harbor~", "harbour~2", "led*", "москва", "cafe", "happy", "harbour cargo~"):
            assert Snippets(query).marks_of(blocks) == [reference_marks(query, b) for b in blocks], query
