"""FictionBook, AbiWord and Gnumeric read by their own structure, not as generic XML (issue 16):
files written here (plain, zipped, gzip'd, in a legacy charset), the corpus's real ones, and hostile
or broken ones (entities never expanded nor fetched, junk ``corrupt``)."""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import pytest

from deskdex.converters import Source, convert
from deskdex.converters.document import Document

from .conftest import CLI, need_corpus

FB2 = """<?xml version="1.0" encoding="{encoding}"?>
<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0" xmlns:l="http://www.w3.org/1999/xlink">
 <description>
  <title-info>
   <genre>sf_history</genre><genre>adventure</genre>
   <author><first-name>Лев</first-name><middle-name>Н.</middle-name><last-name>Окапин</last-name></author>
   <author><nickname>Quagga</nickname></author>
   <book-title>Окапи и зебры</book-title>
   <annotation><p>A book about okapis.</p><p>Second paragraph.</p></annotation>
   <keywords>okapi, zebra</keywords>
   <date value="2021-05-04">May 2021</date>
   <lang>ru</lang>
   <sequence name="Savanna tales" number="2"/>
  </title-info>
  <publish-info><publisher>Zoo Press</publisher></publish-info>
 </description>
 <body>
  <title><p>Окапи и зебры</p></title>
  <epigraph><p>Stripes are a state of mind.</p><text-author>Old zebra</text-author></epigraph>
  <section>
   <title><p>Chapter one</p><p>The river</p></title>
   <p>The okapi drank from the <emphasis>quiet</emphasis> river.</p>
   <subtitle>At dawn</subtitle>
   <section>
    <title><p>A smaller part</p></title>
    <p>Flamingos <strong>waded</strong> past, see <a l:href="https://example.org/flamingo">the flamingo page</a>.</p>
    <poem><stanza><v>Stripe by stripe</v><v>the zebra sleeps</v></stanza></poem>
    <table><tr><th>Animal</th><td>Count</td></tr></table>
    <image l:href="#pic"/>
   </section>
  </section>
 </body>
 <body name="notes"><section id="n1"><title><p>1</p></title><p>A note on quaggas.</p></section></body>
 <binary id="pic" content-type="image/png">iVBORw0KGgo=</binary>
</FictionBook>
"""

ABW = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE abiword PUBLIC "-//ABISOURCE//DTD AWML 1.0 Strict//EN" "http://www.abisource.com/awml.dtd">
<abiword template="false" xmlns="http://www.abisource.com/awml.dtd" xmlns:xlink="http://www.w3.org/1999/xlink"
  version="3.0.5" fileformat="1.1">
<metadata>
<m key="dc.title">Okapi field notes</m>
<m key="dc.creator">Jane Quagga</m>
<m key="dc.subject">Savanna</m>
<m key="abiword.keywords">okapi zebra</m>
<m key="dc.language">en-GB</m>
<m key="dc.format">application/x-abiword</m>
</metadata>
<styles><s type="P" name="Heading 1" basedon="Normal" followedby="Normal" props="font-size:17pt"/></styles>
<pagesize pagetype="A4" orientation="portrait" width="210" height="297" units="mm" page-scale="1"/>
<section props="page-margin-top:1in" header="hdr1">
<p style="Heading 1">Field notes</p>
<p style="Normal">The okapi <c props="font-weight:bold">hides</c> in the
 <a xlink:href="https://example.org/forest">Ituri forest</a>.<br/>Next line.</p>
<p style="Heading 2">Sightings</p>
<p style="Bulleted List" listid="1" level="1">Two zebras at the waterhole</p>
<table props="table-column-props:1in/1in/"><cell props="left-attach:0"><p style="Normal">Animal</p></cell>
<cell><p>Count</p></cell></table>
<p style="Normal"><field type="page_number"/><image dataid="img1"/>After the picture.</p>
</section>
<section id="hdr1" type="header"><p style="Normal">Okapi field notes - running header</p></section>
<data><d name="img1" mime-type="image/png" base64="yes">iVBORw0KGgo=</d></data>
</abiword>
"""

GNUMERIC = """<?xml version="1.0" encoding="UTF-8"?>
<gnm:Workbook xmlns:gnm="http://www.gnumeric.org/v10.dtd">
  <gnm:Version Epoch="1" Major="12" Minor="55" Full="1.12.55"/>
  <office:document-meta xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
      xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0">
    <office:meta>
      <dc:title>Zebra census</dc:title>
      <meta:initial-creator>Jane Quagga</meta:initial-creator>
      <dc:creator>Someone Else</dc:creator>
      <meta:keyword>zebra</meta:keyword><meta:keyword>census</meta:keyword>
      <meta:creation-date>2024-03-05T10:00:00Z</meta:creation-date>
    </office:meta>
  </office:document-meta>
  <gnm:Sheets>
    <gnm:Sheet>
      <gnm:Name>Herd counts</gnm:Name>
      <gnm:Cells>
        <gnm:Cell Row="1" Col="1" ValueType="40">3.5</gnm:Cell>
        <gnm:Cell Row="0" Col="0" ValueType="60">Animal</gnm:Cell>
        <gnm:Cell Row="0" Col="1" ValueType="60">Count</gnm:Cell>
        <gnm:Cell Row="1" Col="0" ValueType="60">Plains   zebra</gnm:Cell>
        <gnm:Cell Row="2" Col="1">=SUM(B2:B2)</gnm:Cell>
        <gnm:Cell Row="3" Col="0" ValueType="20">TRUE</gnm:Cell>
      </gnm:Cells>
      <gnm:Objects>
        <gnm:CellComment ObjectBound="A2" Author="jq" Text="counted at the waterhole"/>
      </gnm:Objects>
    </gnm:Sheet>
    <gnm:Sheet>
      <gnm:Name>Okapi</gnm:Name>
      <gnm:Cells><gnm:Cell Row="0" Col="0" ValueType="60">Ituri forest</gnm:Cell></gnm:Cells>
    </gnm:Sheet>
  </gnm:Sheets>
</gnm:Workbook>
"""

# The old (Gnumeric 1.0) form: the gmr namespace, values in Content children, a Summary.
GNUMERIC_OLD = """<?xml version="1.0"?>
<gmr:Workbook xmlns:gmr="http://www.gnome.org/gnumeric/v7">
  <gmr:Summary>
    <gmr:Item><gmr:name>title</gmr:name><gmr:val-string>Old okapi sheet</gmr:val-string></gmr:Item>
    <gmr:Item><gmr:name>author</gmr:name><gmr:val-string>Old Author</gmr:val-string></gmr:Item>
  </gmr:Summary>
  <gmr:Sheets><gmr:Sheet><gmr:Name>Sheet1</gmr:Name><gmr:Cells>
    <gmr:Cell Col="0" Row="0" Style="0"><gmr:Content>Okapi stripes</gmr:Content></gmr:Cell>
    <gmr:Cell Col="1" Row="0" Style="0"><gmr:Content>=A1</gmr:Content></gmr:Cell>
  </gmr:Cells></gmr:Sheet></gmr:Sheets>
</gmr:Workbook>
"""


def converted(path: Path) -> tuple[str, str, Document | None]:
    outcome = convert(Source.from_path(path))[0]
    return outcome.reason, outcome.message, outcome.document


def blocks(doc: Document) -> list[tuple[str, int, str]]:
    return [(b.kind, b.level, b.text) for b in doc.blocks]


@pytest.mark.parametrize("name,encoding", [("book.fb2", "UTF-8"), ("book-1251.fb2", "windows-1251"),
                                           ("zipped.fb2.zip", "UTF-8"), ("book-without-suffix", "UTF-8")])
def test_fictionbook_metadata_and_structure(tmp_path: Path, name: str, encoding: str) -> None:
    data = FB2.format(encoding=encoding).encode(encoding)
    if name.endswith(".zip"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("book.fb2", data)
        data = buf.getvalue()
    (tmp_path / name).write_bytes(data)
    reason, message, doc = converted(tmp_path / name)
    assert doc is not None, (reason, message)
    assert doc.mime == "application/x-fictionbook+xml" and doc.title == "Окапи и зебры"
    doc.meta.pop("lang", None)  # the detected language: tests/test_tokens.py
    assert doc.meta == {"author": "Лев Н. Окапин; Quagga", "genre": "sf_history, adventure", "language": "ru",
                        "keywords": "okapi, zebra", "description": "A book about okapis. Second paragraph.",
                        "created": "2021-05-04", "series": "Savanna tales 2", "publisher": "Zoo Press"}
    assert blocks(doc) == [
        ("h", 1, "Окапи и зебры"), ("quote", 0, "Stripes are a state of mind."), ("quote", 0, "Old zebra"),
        ("h", 2, "Chapter one The river"), ("p", 0, "The okapi drank from the quiet river."),
        ("h", 3, "At dawn"), ("h", 3, "A smaller part"),
        ("p", 0, "Flamingos waded past, see the flamingo page."),
        ("p", 0, "Stripe by stripe"), ("p", 0, "the zebra sleeps"), ("td", 0, "Animal"), ("td", 0, "Count"),
        ("h", 2, "1"), ("p", 0, "A note on quaggas.")]
    runs = {(r.text, r.style, r.href) for b in doc.blocks for r in b.runs}
    assert ("quiet", "em", None) in runs and ("waded", "strong", None) in runs
    assert ("the flamingo page", "", "https://example.org/flamingo") in runs
    assert "iVBORw0KGgo" not in doc.text()  # embedded images are not text


def test_fictionbook_without_book_title_is_named_by_its_body_not_a_note(tmp_path: Path) -> None:
    (tmp_path / "untitled.fb2").write_text(
        '<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0"><body><section><p>Just text.</p>'
        '</section></body><body name="notes"><section><title><p>1</p></title><p>A note.</p></section></body>'
        "</FictionBook>")
    reason, message, doc = converted(tmp_path / "untitled.fb2")
    assert doc is not None, (reason, message)
    assert doc.title == "untitled.fb2"


@pytest.mark.parametrize("name", ["notes.abw", "notes.awt", "notes.zabw", "notes-without-suffix"])
def test_abiword_metadata_headings_lists_and_cells(tmp_path: Path, name: str) -> None:
    data = ABW.encode()
    (tmp_path / name).write_bytes(gzip.compress(data) if name.endswith(".zabw") else data)
    reason, message, doc = converted(tmp_path / name)
    assert doc is not None, (reason, message)
    assert doc.mime.startswith("application/x-abiword") and doc.title == "Okapi field notes"
    doc.meta.pop("lang", None)  # the detected language: tests/test_tokens.py
    assert doc.meta == {"author": "Jane Quagga", "subject": "Savanna", "keywords": "okapi zebra", "language": "en-GB"}
    assert blocks(doc) == [
        ("h", 1, "Field notes"), ("p", 0, "The okapi hides in the Ituri forest. Next line."), ("h", 2, "Sightings"),
        ("li", 1, "Two zebras at the waterhole"), ("td", 0, "Animal"), ("td", 0, "Count"),
        ("p", 0, "After the picture."), ("p", 0, "Okapi field notes - running header")]
    assert [b.boilerplate for b in doc.blocks] == [False] * 7 + [True]  # the page header
    assert any(r.href == "https://example.org/forest" and r.text == "Ituri forest" for b in doc.blocks for r in b.runs)


@pytest.mark.parametrize("name,gzipped", [("census.gnumeric", True), ("plain.gnumeric", False),
                                          ("census-without-suffix.gz", True)])
def test_gnumeric_sheets_cells_and_metadata(tmp_path: Path, name: str, gzipped: bool) -> None:
    data = GNUMERIC.encode()
    (tmp_path / name).write_bytes(gzip.compress(data) if gzipped else data)
    reason, message, doc = converted(tmp_path / name)
    assert doc is not None, (reason, message)
    assert doc.mime == "application/x-gnumeric" and doc.title == "Zebra census"
    assert doc.meta["author"] == "Jane Quagga" and doc.meta["keywords"] == "zebra, census"
    assert doc.meta["created"] == "2024-03-05T10:00:00Z"
    # Row by row (the file's order is not), formulas as written, the comment after its sheet's cells.
    assert blocks(doc) == [
        ("h", 2, "Herd counts"), ("td", 0, "Animal"), ("td", 0, "Count"), ("td", 0, "Plains zebra"),
        ("td", 0, "3.5"), ("td", 0, "=SUM(B2:B2)"), ("td", 0, "TRUE"), ("td", 0, "counted at the waterhole"),
        ("h", 2, "Okapi"), ("td", 0, "Ituri forest")]


def test_gnumeric_old_format_with_summary(tmp_path: Path) -> None:
    (tmp_path / "old.gnumeric").write_bytes(gzip.compress(GNUMERIC_OLD.encode()))
    reason, message, doc = converted(tmp_path / "old.gnumeric")
    assert doc is not None, (reason, message)
    assert doc.title == "Old okapi sheet" and doc.meta["author"] == "Old Author"
    assert blocks(doc) == [("h", 2, "Sheet1"), ("td", 0, "Okapi stripes"), ("td", 0, "=A1")]


BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lollollollollollollollollollol">
<!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
<!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
<!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
<!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
<!ENTITY secret SYSTEM "file://{secret}">]>
"""


@pytest.mark.parametrize("name,body", [
    ("bomb.fb2", '<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0"><body><section>'
                 "<p>&lol6; &secret;</p></section></body></FictionBook>"),
    ("bomb.abw", '<abiword xmlns="http://www.abisource.com/awml.dtd"><section><p>&lol6; &secret;</p>'
                 "</section></abiword>"),
    ("bomb.gnumeric", '<gnm:Workbook xmlns:gnm="http://www.gnumeric.org/v10.dtd"><gnm:Sheets><gnm:Sheet>'
                      '<gnm:Name>&lol6;&secret;</gnm:Name><gnm:Cells><gnm:Cell Row="0" Col="0" ValueType="60">'
                      "&lol6; &secret;</gnm:Cell></gnm:Cells></gnm:Sheet></gnm:Sheets></gnm:Workbook>")])
def test_entities_are_never_expanded_nor_fetched(tmp_path: Path, name: str, body: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-password-is-okapi")
    (tmp_path / name).write_text(BOMB.format(secret=secret) + body)
    outcome = convert(Source.from_path(tmp_path / name))[0]
    if outcome.document is None:
        assert outcome.reason == "hostile", (outcome.reason, outcome.message)
    else:
        text = outcome.document.text()
        assert len(text) < 1000 and "lollollol" not in text and "okapi" not in text, text[:200]


@pytest.mark.parametrize("name,data", [
    ("junk.fb2", b"\x00\x01\x02 not a book \xff" * 10),
    ("cut.fb2", FB2.format(encoding="UTF-8").encode()[:700]),
    ("zip-without-book.fb2.zip", b"PK\x05\x06" + b"\x00" * 18),
    ("cut.abw", ABW.encode()[:900]),
    ("cut.zabw", gzip.compress(ABW.encode())[:200]),
    ("cut.gnumeric", gzip.compress(GNUMERIC.encode())[:300]),
    ("junk.gnumeric", b"\x1f\x8b\x08\x00 this is no gzip stream at all \xff\xfe" * 5)])
def test_junk_and_truncated_files_are_corrupt(tmp_path: Path, name: str, data: bytes) -> None:
    (tmp_path / name).write_bytes(data)
    outcome = convert(Source.from_path(tmp_path / name))[0]
    assert outcome.document is None and outcome.reason == "corrupt", (outcome.reason, outcome.message)


def test_a_suffix_that_lies_gives_way_to_the_content(tmp_path: Path) -> None:
    (tmp_path / "page.fb2").write_bytes(b'<?xml version="1.0"?><html><body><p>not a book</p></body></html>')
    (tmp_path / "notes.gnumeric").write_bytes(gzip.compress(ABW.encode()))
    for name, mime in [("page.fb2", "application/xhtml+xml"), ("notes.gnumeric", "application/x-abiword")]:
        reason, message, doc = converted(tmp_path / name)
        assert doc is not None and doc.mime == mime, (name, reason, message)


def test_corpus_books_and_sheets_convert_with_content_and_title() -> None:
    corpus = need_corpus()
    files = sorted(p for pattern in ("*.fb2", "*.fb2.zip", "*.abw", "*.awt", "*.zabw", "*.gnumeric")
                   for p in corpus.rglob(pattern))
    if not files:
        pytest.skip(f"no FictionBook, AbiWord or Gnumeric files in the corpus at {corpus}")
    empty = []
    for path in files:
        reason, message, doc = converted(path)
        assert doc is not None, (path, reason, message)
        assert doc.title.strip(), path
        assert doc.mime in ("application/x-fictionbook+xml", "application/x-abiword", "application/x-gnumeric"), path
        if not doc.blocks:
            empty.append(path.name)
    # Only AbiWord's blank page templates have nothing in them.
    assert set(empty) <= {"A4.awt", "US-Letter.awt", "Two-Columns.awt", "normal.awt"}, empty


@pytest.mark.slow
def test_each_new_format_is_indexed_and_found_through_the_worker_pool(cli: CLI, tmp_path: Path) -> None:
    """The whole path: detected, converted in a worker (helpers included), indexed, searched."""
    import shutil

    if any(shutil.which(p) is None for p in ("gs", "pdftotext", "cjb2", "djvused", "djvutxt")):
        pytest.skip("Ghostscript, poppler-utils or djvulibre-bin is not installed")
    from .test_formats_djvu import djvused, page, text_layer
    from .test_formats_postscript import EPS

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "book.fb2").write_text(FB2.format(encoding="UTF-8"))
    (docs / "notes.zabw").write_bytes(gzip.compress(ABW.encode()))
    (docs / "census.gnumeric").write_bytes(gzip.compress(GNUMERIC.encode()))
    (docs / "label.eps.gz").write_bytes(gzip.compress(EPS))
    scan = page(tmp_path, "scan", "x")
    (tmp_path / "t").write_text(text_layer("Aardvark tunnels"))
    djvused(scan, f"select 1; set-txt {tmp_path / 't'}")
    shutil.copy(scan, docs / "scan.djvu")
    summary = cli.json("index", str(docs))
    assert summary["indexed"] == 5 and summary["failed"] == 0, summary
    for word, name, title in [("flamingos", "book.fb2", "Окапи и зебры"),
                              ("picture", "notes.zabw", "Okapi field notes"),
                              ("herd", "census.gnumeric", "Zebra census"),
                              ("sanctuary", "label.eps.gz", "Okapi (label)"), ("aardvark", "scan.djvu", "scan.djvu")]:
        found = cli.json("search", word)["hits"]
        assert [(h["path"], h["title"]) for h in found] == [(str(docs / name), title)], (word, found)
    assert {h["path"] for h in cli.json("search", "type:doc")["hits"]} >= {str(docs / n) for n in
                                                                           ("book.fb2", "notes.zabw", "label.eps.gz")}
    assert [h["path"] for h in cli.json("search", "type:sheet")["hits"]] == [str(docs / "census.gnumeric")]
