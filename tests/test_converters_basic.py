"""The first converters on files generated here with each format's own library."""

from __future__ import annotations

from pathlib import Path

from deskdex.converters import Source, convert
from deskdex.converters.detect import sniff

from .conftest import make_docx, make_pdf


def one(path: Path):
    outcomes = convert(Source.from_path(path))
    assert outcomes[0].uri.endswith(path.name.replace(" ", "%20"))
    return outcomes[0]


def test_plain_text_encodings_are_detected(tmp_path: Path):
    text = "Les élèves français étudient l'économie à l'université. " * 4
    for enc in ("utf-8", "utf-16", "cp1252", "latin-1"):
        p = tmp_path / f"note-{enc}.txt"
        p.write_bytes(text.encode(enc))
        o = one(p)
        assert o.ok, o.message
        assert "élèves français étudient l'économie" in o.document.text(), enc


def test_plain_text_paragraphs_and_title(tmp_path: Path):
    p = tmp_path / "readme.txt"
    p.write_text("Shopping list\n\nmilk and eggs\nbread\n\n\nCall the plumber")
    doc = one(p).document
    assert doc.title == "Shopping list"
    assert [b.text for b in doc.blocks] == ["Shopping list", "milk and eggs\nbread", "Call the plumber"]


def test_binary_junk_named_txt_is_a_clear_error(tmp_path: Path):
    p = tmp_path / "junk.txt"
    p.write_bytes(bytes(range(256)) * 40)
    o = one(p)
    assert not o.ok and o.reason == "corrupt" and "binary" in o.message


def test_html_title_headings_links_and_boilerplate(tmp_path: Path):
    p = tmp_path / "page.html"
    p.write_text("""<!doctype html><html lang="en"><head><title>Gardening tips</title>
      <meta name="author" content="Ann Gardener"><style>body{color:red}</style>
      <script>var hidden = "scriptword";</script></head>
      <body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
      <h1>Growing tomatoes</h1><p>Water them <em>every</em> morning, see <a href="care.html">the care guide</a>.</p>
      <ul><li>sun</li><li>soil</li></ul><footer>Copyright 2026</footer></body></html>""", encoding="utf-8")
    doc = one(p).document
    assert doc.title == "Gardening tips"
    assert doc.meta["author"] == "Ann Gardener" and doc.meta["language"] == "en"
    assert [(b.level, b.text) for b in doc.headings()] == [(1, "Growing tomatoes")]
    assert "Water them every morning, see the care guide." in doc.body_text()
    assert [(r.text, r.href) for r in doc.links()][-1] == ("the care guide", "care.html")
    assert "scriptword" not in doc.text() and "color:red" not in doc.text()
    boiler = doc.body_text(boilerplate=True)
    assert "Home About" in boiler and "Copyright 2026" in boiler
    assert "Copyright" not in doc.body_text()
    assert [b.text for b in doc.blocks if b.kind == "li"] == ["sun", "soil"]


def test_html_declared_charset_is_honoured(tmp_path: Path):
    p = tmp_path / "old.htm"
    p.write_bytes('<html><head><meta charset="windows-1252"><title>Résumé</title></head><body><p>naïve café</p></body></html>'
                  .encode("cp1252"))
    doc = one(p).document
    assert doc.title == "Résumé" and "naïve café" in doc.text()


def test_pdf_text_and_metadata(tmp_path: Path):
    p = make_pdf(tmp_path / "report.pdf", "Annual Report 2026", "Jane Auditor",
                 ["Revenue grew in the northern region.", "Costs fell after the warehouse moved."])
    o = one(p)
    assert o.ok, o.message
    assert o.document.title == "Annual Report 2026"
    assert o.document.meta["author"] == "Jane Auditor"
    assert "Revenue grew in the northern region." in o.document.text()
    assert "warehouse" in o.document.text()


def test_truncated_pdf_is_a_clear_error(tmp_path: Path):
    good = make_pdf(tmp_path / "good.pdf", "T", "A", ["some text here"])
    bad = tmp_path / "truncated.pdf"
    bad.write_bytes(good.read_bytes()[:300])
    o = one(bad)
    assert not o.ok and o.reason == "corrupt", (o.reason, o.message)


def test_docx_headings_paragraphs_tables_properties(tmp_path: Path):
    p = make_docx(tmp_path / "minutes.docx", "Board minutes", "Sam Secretary", "Decisions",
                  ["The board approved the new budget."], table=[["Item", "Owner"], ["Roof", "Lee"]])
    doc = one(p).document
    assert doc.title == "Board minutes" and doc.meta["author"] == "Sam Secretary"
    assert [(b.level, b.text) for b in doc.headings()] == [(1, "Decisions")]
    assert "The board approved the new budget." in doc.body_text()
    assert [b.text for b in doc.blocks if b.kind == "td"] == ["Item", "Owner", "Roof", "Lee"]


def test_corrupt_docx_is_a_clear_error(tmp_path: Path):
    p = tmp_path / "broken.docx"
    p.write_bytes(b"PK\x03\x04" + b"\x00" * 200)
    o = one(p)
    assert not o.ok and o.reason == "corrupt"


def test_unknown_format_is_kept_by_name(tmp_path: Path):
    p = tmp_path / "holiday-photo.xyz"
    p.write_bytes(b"\x00\x01\x02garbage" * 50)
    o = one(p)
    assert o.ok and o.document.title == "holiday-photo.xyz" and not o.document.blocks


def test_sniffing_without_a_suffix(tmp_path: Path):
    assert sniff(b"%PDF-1.7\n") == "application/pdf"
    assert sniff(b"<!DOCTYPE html><html>") == "text/html"
    assert sniff("plain words here".encode()) == "text/plain"
    assert sniff(bytes(range(256))) == "application/octet-stream"
    p = tmp_path / "NOTES"
    p.write_text("<html><head><title>Sniffed</title></head><body>x</body></html>")
    assert one(p).document.title == "Sniffed"


def test_wide_and_escape_encodings_without_a_bom(tmp_path: Path):
    for enc, text in (("utf-32-be", "Candide, ou l'optimisme, traduit de l'allemand."),
                      ("utf-16-le", "Candide, ou l'optimisme, traduit de l'allemand."),
                      ("iso2022_kr", "파이썬은 배우기 쉽고, 강력한 프로그래밍 언어입니다."),
                      ("cp949", "파이썬은 배우기 쉽고, 강력한 프로그래밍 언어입니다.")):
        p = tmp_path / f"{enc}.txt"
        p.write_bytes(text.encode(enc))
        o = one(p)
        assert o.ok, (enc, o.message)
        assert text in o.document.text(), enc


def test_broken_markup_is_salvaged_not_lost(tmp_path: Path):
    frag = tmp_path / "fragment.xml"
    frag.write_text("<!-- a DocBook fragment -->\n<para>The &product; manual</para><<<para>more words about spreadsheets")
    o = one(frag)
    assert o.ok and "spreadsheets" in o.document.text() and "salvaged" in o.document.meta
    import zipfile

    good = make_docx(tmp_path / "good.docx", "T", "A", "H", ["the salvaged paragraph survives"])
    broken = tmp_path / "broken-xml.docx"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(broken, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "word/document.xml":
                data = data.replace(b"<w:body>", b"<w:body><w:p bad attr>", 1)
            dst.writestr(item, data)
    o = one(broken)
    assert o.ok and "the salvaged paragraph survives" in o.document.text(), o.message
    assert "salvaged" in o.document.meta


def test_text_with_a_few_stray_nuls_is_text_and_binary_with_few_nuls_is_not(tmp_path: Path):
    """A patch of a binary file keeps its text; bytes that are not UTF-8 with as few NULs stay binary."""
    from deskdex.converters.detect import looks_like_text

    patch = b"diff --git a/file b/file\n" + b"Lorem ipsum dolor sit amet, harbour lights\n" * 40
    patch = patch[:900] + b"\x00\x00" + patch[900:1500] + b"\x00" + patch[1500:]
    assert looks_like_text(patch)
    f = tmp_path / "nul.expect"
    f.write_bytes(patch)
    out = convert(Source.from_path(f))[0]
    assert out.ok and out.document is not None and "harbour lights" in out.document.text()
    printer = bytes(range(128, 256)) * 12 + b"\x00" * 3 + b"settings" * 40
    assert not looks_like_text(printer)
    assert not looks_like_text(b"plain words " * 50 + b"\x00" * 40)  # many NULs: binary
