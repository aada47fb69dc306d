"""Office formats and PDF: files made here with each format's own library (or by hand where the
format is a zip of XML), converted, and checked for title, a heading, a body phrase and metadata.
Corpus checks convert a handful of real files of each format (marker ``corpus``)."""

from __future__ import annotations

import datetime as dt
import io
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from deskdex.converters import opendocument, pdf, rtf
from deskdex.converters.convert import convert
from deskdex.converters.document import Document
from deskdex.errors import CorruptFile, Encrypted, HostileInput, SizeLimit
from deskdex.converters.limits import Limits
from deskdex.converters.registry import default_registry
from deskdex.converters.source import Source
from deskdex.converters.zipcheck import open_zip

CORPUS = Path("/tmp/corpora/mixed")


def one(path: Path) -> Document:
    """Convert a file on disk through the whole pipeline (detection, registry, converter)."""
    outcomes = convert(Source.from_path(path))
    assert outcomes[0].ok, f"{path.name}: {outcomes[0].reason}: {outcomes[0].message}"
    assert outcomes[0].document is not None
    return outcomes[0].document


def blocks(doc: Document, kind: str) -> list[str]:
    return [b.text for b in doc.blocks if b.kind == kind]


def make_pdf(**kw: object) -> bytes:
    from fpdf import FPDF

    p = FPDF()
    p.set_title("Quarterly Report")
    p.set_author("Jane Doe")
    p.set_lang("de-DE")
    p.set_creation_date(dt.datetime(2024, 3, 5, 10, 30, tzinfo=dt.timezone.utc))
    if kw.get("encrypt"):
        p.set_encryption(owner_password="owner", user_password="user")
    p.add_page()
    p.set_font("Helvetica", size=12)
    p.start_section("Introduction")
    p.cell(text="Introduction")
    p.ln()
    p.multi_cell(w=0, text="The quick brown fox jumps over the lazy dog. " * 5)
    p.ln()
    p.multi_cell(w=0, text="Second paragraph about zebras.")
    return bytes(p.output())


def test_pdf_fast_path(tmp_path: Path) -> None:
    f = tmp_path / "report.pdf"
    f.write_bytes(make_pdf())
    doc = one(f)
    assert doc.title == "Quarterly Report"
    assert doc.meta["author"] == "Jane Doe"
    assert doc.meta["created"] == "2024-03-05T10:30:00+00:00"
    assert doc.meta["language"] == "de-DE"
    assert ("h", 1, "Introduction") in [(b.kind, b.level, b.text) for b in doc.blocks]  # from the outline
    assert "Second paragraph about zebras." in blocks(doc, "p")
    assert any(p.startswith("The quick brown fox") and p.count("lazy dog") == 5 for p in blocks(doc, "p"))


def test_pdf_pdfminer_fallback_reads_the_same_file() -> None:
    data = make_pdf()
    doc = pdf.convert_pdfminer(data, Source(uri="mem:a.pdf", name="a.pdf", data=data), "application/pdf")
    assert doc.title == "Quarterly Report" and doc.meta["author"] == "Jane Doe"
    assert "zebras" in doc.body_text()


@pytest.mark.parametrize("name,data,error,message", [
    ("encrypted", make_pdf(encrypt=True), Encrypted, "password"),
    ("truncated", make_pdf()[:400], CorruptFile, "damaged or truncated"),
    ("junk", b"%PDF-1.4\n" + bytes(range(256)) * 20, CorruptFile, "unreadable PDF"),
    ("not-pdf", b"hello, I am text", CorruptFile, "not a PDF"),
])
def test_pdf_bad_files_say_why(name: str, data: bytes, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        pdf.convert(Source(uri="mem:" + name, name=name + ".pdf", data=data), "application/pdf")


def qpdf_encrypt(data: bytes, user: str, owner: str, tmp_path: Path) -> bytes:
    """``data`` encrypted by qpdf with AES-256 (R6) and these passwords ("": none)."""
    qpdf = shutil.which("qpdf")
    if qpdf is None:
        pytest.skip("qpdf is not installed (Debian package qpdf)")
    src, out = tmp_path / "plain.pdf", tmp_path / "encrypted.pdf"
    src.write_bytes(data)
    # --allow-insecure: qpdf refuses an empty owner password with a user password (anyone can open it).
    subprocess.run([qpdf, "--encrypt", user, owner, "256", "--allow-insecure", "--", str(src), str(out)],
                   check=True, capture_output=True)
    return out.read_bytes()


@pytest.mark.parametrize("user,owner,opens", [
    ("", "owner-secret", True),  # permissions only: the empty user password opens it
    ("user-secret", "", True),  # the empty owner password opens it: PDFium alone refuses it
    ("user-secret", "owner-secret", False),
])
def test_pdf_aes256_opens_without_a_password_when_any_is_empty(
        tmp_path: Path, user: str, owner: str, opens: bool) -> None:
    data = qpdf_encrypt(make_pdf(), user, owner, tmp_path)
    source = Source(uri="mem:locked.pdf", name="locked.pdf", data=data)
    if opens:
        doc = pdf.convert(source, "application/pdf")
        assert doc.title == "Quarterly Report" and "zebras" in doc.body_text()
    else:
        with pytest.raises(Encrypted, match="needs a password"):
            pdf.convert(source, "application/pdf")


@pytest.mark.corpus
def test_pdf_encrypted_corpus_files_as_pdftotext_reads_them() -> None:
    """pypdf's encryption test files: those pdftotext opens without a password convert (the R5 and
    R6 ones with a user password only among them), the other encrypted ones fail as encrypted."""
    folder = CORPUS / "pypi/pypdf/resources/encryption"
    if not folder.is_dir():
        pytest.skip(f"{folder} absent (the corpus is built by shared/corpus/build.sh)")
    refused = {"r2-user-password", "r3-user-password", "r4-aes-user-password", "r4-user-password",
               "r6-both-passwords", "r6-cleartext-metadata"}
    for f in sorted(folder.glob("*.pdf")):
        outcome = convert(Source.from_path(f))[0]
        if f.stem in refused:
            assert not outcome.ok and outcome.reason == "encrypted", f
        else:
            assert outcome.ok, f"{f.name}: {outcome.reason}: {outcome.message}"
            assert outcome.document is not None and "asdfzxcv" in outcome.document.text(), f


def test_pdf_running_heads_are_boilerplate() -> None:
    doc = Document(uri="x")
    pages = [f"Acme Manual\nBody text of page {i} goes on.\n{i}" for i in range(1, 6)]
    pdf.fill(doc, pages)
    assert [b.text for b in doc.blocks if b.boilerplate][:2] == ["Acme Manual", "1"]
    assert "Body text of page 3 goes on." in doc.body_text()


W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _in_sdt(*children: object) -> object:
    """A content control (w:sdt) holding ``children`` in its w:sdtContent, as Word writes it."""
    from lxml import etree

    sdt = etree.Element(W + "sdt")
    etree.SubElement(etree.SubElement(sdt, W + "sdtPr"), W + "id").set(W + "val", "1")
    content = etree.SubElement(sdt, W + "sdtContent")
    content.extend(children)
    return sdt


def test_docx_content_controls_are_read_in_order(tmp_path: Path) -> None:
    """Paragraphs, tables, cells and runs inside content controls (w:sdt, nested) are text, in
    document order: python-docx's iter_inner_content returns none of them."""
    import docx

    d = docx.Document()
    d.add_paragraph("before the controls")
    first, inner, last = (d.add_paragraph(t) for t in ("first wrapped", "nested wrapped", "last wrapped"))
    table = d.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "plain cell", "wrapped cell"
    mixed = d.add_paragraph("a run outside, ")
    mixed.add_run("a run inside")
    d.add_paragraph("after the controls")
    body = d.element.body
    at = body.index(first._p)
    body.insert(at, _in_sdt(first._p, _in_sdt(inner._p), last._p))  # nested, as pandoc's nested_sdt.docx
    tc = table._tbl.tr_lst[0].tc_lst[1]
    tr = tc.getparent()
    tr.insert(tr.index(tc), _in_sdt(tc))  # a whole cell in a control
    run = mixed._p.r_lst[1]
    mixed._p.insert(mixed._p.index(run), _in_sdt(run))  # an inline control
    body.insert(body.index(table._tbl), _in_sdt(table._tbl))  # and the table in one too
    f = tmp_path / "form.docx"
    d.save(str(f))
    assert [(b.kind, b.text) for b in one(f).blocks] == [
        ("p", "before the controls"), ("p", "first wrapped"), ("p", "nested wrapped"), ("p", "last wrapped"),
        ("td", "plain cell"), ("td", "wrapped cell"), ("p", "a run outside, a run inside"),
        ("p", "after the controls")]


@pytest.mark.corpus
def test_docx_nested_content_controls_corpus_file() -> None:
    f = CORPUS / "debsrc/pandoc/test/docx/nested_sdt.docx"
    if not f.is_file():
        pytest.skip(f"{f} absent (the corpus is built by shared/corpus/build.sh)")
    assert blocks(one(f), "p") == ["Test Paragraph1", "Test Paragraph2", "Test Paragraph3"]


def zip_of(members: dict[str, str | bytes], first: tuple[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        if first:  # ODF and EPUB want their mimetype member first and stored
            z.writestr(zipfile.ZipInfo(first[0]), first[1], compress_type=zipfile.ZIP_STORED)
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


ODF_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
          'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
          'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
          'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
          'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
          'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
          'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:xlink="http://www.w3.org/1999/xlink"')
ODF_META = (f'<office:document-meta {ODF_NS}><office:meta><dc:title>Field Notes</dc:title>'
            '<meta:initial-creator>Ada Lovelace</meta:initial-creator><dc:language>en-GB</dc:language>'
            '<meta:creation-date>2023-05-01T09:00:00</meta:creation-date><meta:keyword>birds</meta:keyword>'
            '</office:meta></office:document-meta>')


def odf(kind: str, body: str, doctype: str = "") -> bytes:
    content = f'{doctype}<office:document-content {ODF_NS}><office:body>{body}</office:body></office:document-content>'
    return zip_of({"content.xml": content, "meta.xml": ODF_META},
                  first=("mimetype", f"application/vnd.oasis.opendocument.{kind}"))


def test_odt(tmp_path: Path) -> None:
    body = ('<office:text><text:h text:outline-level="2">Migration</text:h>'
            '<text:p>Swallows fly<text:s text:c="3"/>south, see <text:a xlink:href="https://birds.example/">the map</text:a>.'
            '<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>A footnote.</text:p>'
            '</text:note-body></text:note></text:p>'
            '<text:list><text:list-item><text:p>first bird</text:p><text:list><text:list-item>'
            '<text:p>nested bird</text:p></text:list-item></text:list></text:list-item></text:list>'
            '<table:table table:name="T1"><table:table-row><table:table-cell><text:p>wing span</text:p>'
            '</table:table-cell><table:table-cell table:number-columns-repeated="9"/></table:table-row></table:table>'
            '</office:text>')
    f = tmp_path / "notes.odt"
    f.write_bytes(odf("text", body))
    doc = one(f)
    assert doc.title == "Field Notes"
    assert doc.meta["author"] == "Ada Lovelace" and doc.meta["language"] == "en-GB"
    assert doc.meta["created"] == "2023-05-01T09:00:00" and doc.meta["keywords"] == "birds"
    assert [(b.kind, b.level, b.text) for b in doc.blocks] == [
        ("h", 2, "Migration"), ("p", 0, "Swallows fly south, see the map."), ("p", 0, "A footnote."),
        ("li", 1, "first bird"), ("li", 2, "nested bird"), ("td", 0, "wing span")]
    assert [(r.text, r.href) for r in doc.blocks[1].runs if r.href] == [("the map", "https://birds.example/")]


def test_ods_and_odp_and_template(tmp_path: Path) -> None:
    sheet = ('<office:spreadsheet><table:table table:name="Budget"><table:table-row>'
             '<table:table-cell><text:p>rent</text:p></table:table-cell>'
             '<table:table-cell><text:p>1200</text:p></table:table-cell></table:table-row></table:table>'
             '</office:spreadsheet>')
    (tmp_path / "b.ods").write_bytes(odf("spreadsheet", sheet))
    doc = one(tmp_path / "b.ods")
    assert [(b.kind, b.text) for b in doc.blocks] == [("h", "Budget"), ("td", "rent"), ("td", "1200")]
    slides = ('<office:presentation><draw:page draw:name="page1">'
              '<draw:frame presentation:class="outline"><draw:text-box><text:p>Point one</text:p></draw:text-box></draw:frame>'
              '<draw:frame presentation:class="title"><draw:text-box><text:p>Opening</text:p></draw:text-box></draw:frame>'
              '<presentation:notes><draw:frame><draw:text-box><text:p>Say hello</text:p></draw:text-box></draw:frame>'
              '</presentation:notes></draw:page></office:presentation>')
    (tmp_path / "s.otp").write_bytes(odf("presentation-template", slides))
    doc = one(tmp_path / "s.otp")
    assert [(b.kind, b.text) for b in doc.blocks] == [("h", "Opening"), ("p", "Point one"), ("p", "Say hello")]


def test_odf_entities_are_not_resolved(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    doctype = (f'<!DOCTYPE office:document-content [<!ENTITY ext SYSTEM "file://{secret}">'
               '<!ENTITY boom "BOOMBOOMBOOM">]>')
    body = '<office:text><text:p>before &ext; &boom; after</text:p></office:text>'
    doc = opendocument.convert(Source(uri="mem:e.odt", name="e.odt", data=odf("text", body, doctype)),
                               "application/vnd.oasis.opendocument.text")
    text = doc.body_text()
    assert "before" in text and "after" in text
    assert "TOPSECRET" not in text and "BOOM" not in text


def test_zip_limits() -> None:
    data = zip_of({"content.xml": "x" * 5000})
    with pytest.raises(SizeLimit):
        open_zip(data, "test file", Limits(member_bytes=1000))
    with pytest.raises(HostileInput):
        open_zip(data, "test file", Limits(members=0))
    with pytest.raises(CorruptFile, match="broken zip"):
        opendocument.convert(Source(uri="mem:x", name="x.odt", data=b"PK\x03\x04junk"), "application/vnd.oasis.opendocument.text")


RTF = (r"{\rtf1\ansi\ansicpg1252\deff0\deflang1036{\fonttbl{\f0 Times;}}"
       r"{\info{\title Rapport annuel}{\author Marie Curie}{\creatim\yr2022\mo11\dy7\hr8\min5}}"
       r"\pard\outlinelevel0 Chapitre un\par"
       r"\pard Le caf\'e9 est pr\u234?t.\par"
       r"{\listtext\pard\plain \'95\tab}\pard\ls1 premier point\par"
       r" second point\par"
       r"\pard\ls1\ilvl1 sous-point\par"
       r"\pard\intbl Nom\cell Valeur\cell\row"
       r"\pard Fin.\par}")


def test_rtf(tmp_path: Path) -> None:
    f = tmp_path / "rapport.rtf"
    f.write_text(RTF, encoding="ascii")
    doc = one(f)
    assert doc.title == "Rapport annuel"
    assert doc.meta["author"] == "Marie Curie"
    assert doc.meta["created"] == "2022-11-07T08:05:00"
    assert doc.meta["language"] == "fr-FR"
    assert [(b.kind, b.level, b.text) for b in doc.blocks] == [
        ("h", 1, "Chapitre un"), ("p", 0, "Le café est prêt."), ("li", 1, "premier point"),
        ("li", 1, "second point"), ("li", 2, "sous-point"), ("td", 0, "Nom"), ("td", 0, "Valeur"), ("p", 0, "Fin.")]


@pytest.mark.parametrize("title_paragraph, expected", [
    # pandoc's title block (its test suite's writer.rtf), Word's Title style, and paragraphs that are
    # not titles: centred body text in the body's size, a large left-aligned line.
    (r"{\pard \qc \f0 \sa180 \b \fs36 Pandoc Test Suite\par}", "Pandoc Test Suite"),
    (r"\pard\plain \ltrpar\s15\qc\rtlch\fcs1 \af0\afs56 \ltrch\fcs0 \fs56\insrsid1 {\rtlch\fcs1 \af0 Quarterly Report\par}",
     "Quarterly Report"),
    (r"{\pard \qc \f0 \fs24 a centred line of the body\par}", "Headers"),
    (r"{\pard \ql \f0 \fs36 a large line on the left\par}", "Headers"),
])
def test_rtf_title_paragraph_above_the_first_heading(tmp_path: Path, title_paragraph: str, expected: str) -> None:
    """Without an \\info title, a centred bold or large first paragraph is the title, not the first heading."""
    f = tmp_path / "t.rtf"
    f.write_text(r"{\rtf1\ansi{\fonttbl{\f0 Helvetica;}}" "\n" r"{\pard \ql \f0 \par}" + title_paragraph
                 + r"{\pard \ql \f0 \outlinelevel0 \b \fs36 Headers\par}{\pard \ql \f0 Body text.\par}}", encoding="ascii")
    doc = one(f)
    assert doc.title == expected
    assert [b.text for b in doc.headings()] == ["Headers"]
    assert "Body text." in doc.text()


def test_rtf_not_rtf() -> None:
    with pytest.raises(CorruptFile):
        rtf.convert(Source(uri="mem:x", name="x.rtf", data=b"plain words"), "application/rtf")


def test_pptx(tmp_path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    prs.core_properties.title = "Roadmap 2025"
    prs.core_properties.author = "Grace Hopper"
    prs.core_properties.language = "en-US"
    s = prs.slides.add_slide(prs.slide_layouts[1])
    s.shapes.title.text = "Goals"
    body = s.placeholders[1].text_frame
    body.text = "Ship the compiler"
    sub = body.add_paragraph()
    sub.text = "with tests"
    sub.level = 1
    s.notes_slide.notes_text_frame.text = "Mention the budget"
    s2 = prs.slides.add_slide(prs.slide_layouts[5])
    s2.shapes.title.text = "Numbers"
    table = s2.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    table.cell(0, 0).text = "quarter"
    table.cell(1, 1).text = "revenue"
    f = tmp_path / "roadmap.pptx"
    prs.save(str(f))
    doc = one(f)
    assert doc.title == "Roadmap 2025"
    assert doc.meta["author"] == "Grace Hopper" and doc.meta["language"] == "en-US"
    assert [(b.kind, b.level, b.text) for b in doc.blocks] == [
        ("h", 2, "Goals"), ("p", 0, "Ship the compiler"), ("li", 1, "with tests"), ("p", 0, "Mention the budget"),
        ("h", 2, "Numbers"), ("td", 0, "quarter"), ("td", 0, "revenue")]


def test_xlsx(tmp_path: Path) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Inventory"
    ws.append(["item", "count", "since"])
    ws.append(["lanterns", 12.0, dt.date(2021, 4, 1)])
    wb.create_sheet("Empty")
    wb.properties.title = "Stock list"
    wb.properties.creator = "Ida Wells"
    wb.properties.subject = "warehouse"
    f = tmp_path / "stock.xlsx"
    wb.save(f)
    doc = one(f)
    assert doc.title == "Stock list"
    assert doc.meta["author"] == "Ida Wells" and doc.meta["subject"] == "warehouse"
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("h", "Inventory"), ("td", "item"), ("td", "count"), ("td", "since"), ("td", "lanterns"), ("td", "12"),
        ("td", "2021-04-01T00:00:00"), ("h", "Empty")]


def epub(encrypted: bool = False) -> bytes:
    opf = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
           '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The Long Road</dc:title>'
           '<dc:creator>Homer</dc:creator><dc:creator>Anon</dc:creator><dc:language>el</dc:language>'
           '<dc:date>1999-12-31</dc:date></metadata>'
           '<manifest><item id="c1" href="text/one.xhtml" media-type="application/xhtml+xml"/>'
           '<item id="c2" href="text/two%20b.xhtml" media-type="application/xhtml+xml"/>'
           '<item id="img" href="cover.jpg" media-type="image/jpeg"/></manifest>'
           '<spine><itemref idref="c2"/><itemref idref="img"/><itemref idref="c1"/></spine></package>')
    chapter = ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
               '<title>{t}</title></head><body><h1>{t}</h1><p>{p}</p></body></html>')
    members: dict[str, str | bytes] = {
        "META-INF/container.xml": '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                                  '<rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/>'
                                  '</rootfiles></container>',
        "OEBPS/book.opf": opf,
        "OEBPS/text/one.xhtml": chapter.format(t="Ithaca", p="The journey home ends."),
        "OEBPS/text/two b.xhtml": chapter.format(t="Troy", p="The journey begins at sea."),
    }
    if encrypted:
        members["META-INF/encryption.xml"] = (
            '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
            'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
            '<enc:CipherReference URI="OEBPS/text/one.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>')
    return zip_of(members, first=("mimetype", "application/epub+zip"))


def test_epub(tmp_path: Path) -> None:
    f = tmp_path / "road.epub"
    f.write_bytes(epub())
    doc = one(f)
    assert doc.title == "The Long Road"
    assert doc.meta["author"] == "Homer; Anon" and doc.meta["language"] == "el"
    assert doc.meta["created"] == "1999-12-31"
    # spine order, not manifest order
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("h", "Troy"), ("p", "The journey begins at sea."), ("h", "Ithaca"), ("p", "The journey home ends.")]


def test_epub_with_drm_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "locked.epub"
    f.write_bytes(epub(encrypted=True))
    outcome = convert(Source.from_path(f))[0]
    assert not outcome.ok and outcome.reason == "encrypted" and "DRM" in outcome.message


@pytest.mark.parametrize("ext,module", [
    ("pdf", "deskdex.converters.pdf"), ("odt", "deskdex.converters.opendocument"), ("ott", "deskdex.converters.opendocument"),
    ("ods", "deskdex.converters.opendocument"), ("odp", "deskdex.converters.opendocument"), ("fodt", "deskdex.converters.opendocument"),
    ("rtf", "deskdex.converters.rtf"), ("pptx", "deskdex.converters.slides"), ("xlsx", "deskdex.converters.sheets"),
    ("xlsm", "deskdex.converters.sheets"), ("epub", "deskdex.converters.epub")])
def test_registered(ext: str, module: str) -> None:
    reg = default_registry()
    mime = reg.mime_for_extension(ext)
    assert mime is not None
    assert reg.converter(mime).__module__ == module


CORPUS_FORMATS = ("pdf", "odt", "ods", "odp", "rtf", "pptx", "xlsx", "epub")


def corpus_files(ext: str, n: int = 4, max_bytes: int = 3_000_000) -> list[Path]:
    found = sorted(p for p in CORPUS.rglob(f"*.{ext}") if p.is_file() and p.stat().st_size <= max_bytes)
    step = max(1, len(found) // n)
    return found[::step][:n]


@pytest.mark.corpus
@pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus /tmp/corpora/mixed absent (build it with shared/corpus/build.sh)")
@pytest.mark.parametrize("ext", CORPUS_FORMATS)
def test_corpus_files_convert(ext: str) -> None:
    files = corpus_files(ext)
    if not files:
        pytest.skip(f"no .{ext} files in the corpus")
    for f in files:
        doc = one(f)
        assert doc.title, f
    assert any(d.blocks for d in (one(f) for f in files)), f"no text from any of {files}"
