"""Page numbers of paged documents (issue 30): each block of a PDF, DjVu, DVI or PostScript file
carries the 1-based page it starts on, kept through tagged text, so the web preview can show the
page of every hit. Files are made here with each format's own tools (fpdf2, djvulibre, TeX, a
hand-written PostScript program) and converted through the whole pipeline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from deskdex.converters import Block, Document, Inline, Source, convert, tagged
from deskdex.converters import pdf
from deskdex.errors import CorruptFile

from .test_formats_djvu import djvused, page as djvu_page, text_layer
from .test_formats_dvi import typeset


def converted(path: Path) -> Document:
    outcome = convert(Source.from_path(path))[0]
    assert outcome.document is not None, (outcome.reason, outcome.message)
    return outcome.document


def three_page_pdf() -> bytes:
    """Page 1: a heading (bookmarked) and a paragraph; page 2: a paragraph; page 3: a
    bookmarked heading whose text is not on the page (a heading from the outline alone)."""
    from fpdf import FPDF

    p = FPDF()
    p.set_font("Helvetica", size=12)
    p.add_page()
    p.start_section("Marsh birds")
    p.cell(text="Marsh birds")
    p.ln()
    p.multi_cell(w=0, text="Herons stand still in the shallows of the first page.")
    p.add_page()
    p.multi_cell(w=0, text="Bitterns boom at dusk on the second page.")
    p.add_page()
    p.start_section("Reed dwellers")  # outline entry only: no line of this text on the page
    p.multi_cell(w=0, text="Rails hide in the reeds on the third.")
    return bytes(p.output())


def pages_of(doc: Document) -> list[tuple[str, str, int | None]]:
    return [(b.kind, b.text, b.page) for b in doc.blocks]


EXPECTED_PDF = [
    ("h", "Marsh birds", 1),
    ("p", "Herons stand still in the shallows of the first page.", 1),
    ("p", "Bitterns boom at dusk on the second page.", 2),
    ("h", "Reed dwellers", 3),
    ("p", "Rails hide in the reeds on the third.", 3),
]


def test_pdf_blocks_carry_their_page_and_survive_tagged_text(tmp_path: Path) -> None:
    f = tmp_path / "birds.pdf"
    f.write_bytes(three_page_pdf())
    doc = converted(f)
    assert doc.meta["pages"] == "3"
    assert pages_of(doc) == EXPECTED_PDF
    text = tagged.dumps(doc)
    assert '<p page="2">Bitterns boom at dusk on the second page.</p>' in text
    assert '<h level="1" page="3">Reed dwellers</h>' in text
    assert tagged.loads(text) == doc


def test_pdfminer_fallback_gives_the_same_pages_and_counts_them() -> None:
    data = three_page_pdf()
    doc = pdf.convert_pdfminer(data, Source(uri="mem:b.pdf", name="b.pdf", data=data), "application/pdf")
    assert doc.meta["pages"] == "3"
    # No outline on this path (the heading joins its paragraph), but every block is on its page.
    assert [(t, n) for _, t, n in pages_of(doc)] == [
        ("Marsh birds Herons stand still in the shallows of the first page.", 1),
        ("Bitterns boom at dusk on the second page.", 2),
        ("Rails hide in the reeds on the third.", 3),
    ]


def test_documents_without_pages_are_unchanged_and_round_trip() -> None:
    doc = Document(uri="u", title="t", blocks=[Block("p", [Inline("plain")]), Block.of("h", "head", level=2)])
    text = tagged.dumps(doc)
    assert "page=" not in text
    again = tagged.loads(text)
    assert again == doc and all(b.page is None for b in again.blocks)


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", ""])
def test_a_bad_page_attribute_is_corrupt_tagged_text(value: str) -> None:
    with pytest.raises(CorruptFile, match="page must be a positive integer"):
        tagged.loads(f'<doc uri="u" mime="text/plain"><p page="{value}">x</p></doc>')


@pytest.mark.skipif(any(shutil.which(p) is None for p in ("cjb2", "djvm", "djvused", "djvutxt")),
                    reason="djvulibre-bin is not installed")
def test_djvu_blocks_carry_their_page(tmp_path: Path) -> None:
    first, second = djvu_page(tmp_path, "p1", "Okapis"), djvu_page(tmp_path, "p2", "Flamingos")
    book = tmp_path / "atlas.djvu"
    subprocess.run(["djvm", "-c", str(book), str(first), str(second)], check=True, capture_output=True)
    (tmp_path / "t1").write_text(text_layer("Okapis graze quietly"))
    (tmp_path / "t2").write_text(text_layer("Flamingos wade at dawn"))
    djvused(book, f"select 1; set-txt {tmp_path / 't1'}; select 2; set-txt {tmp_path / 't2'}")
    doc = converted(book)
    assert [(b.text, b.page) for b in doc.blocks] == [("Okapis graze quietly", 1), ("Flamingos wade at dawn", 2)]


@pytest.mark.skipif(shutil.which("catdvi") is None, reason="catdvi is not installed (Debian catdvi)")
def test_dvi_blocks_carry_their_page(tmp_path: Path) -> None:
    doc = converted(typeset(tmp_path))
    body = [(b.text, b.page) for b in doc.blocks if not b.boilerplate]
    assert body[-2:] == [("Bitterns boom at dusk on the second page.", 2), ("Rails hide in the reeds on the third.", 3)]
    assert [(b.text, b.page) for b in doc.blocks if b.boilerplate] == [("1", 1), ("2", 2), ("3", 3)]


TWO_PAGES_PS = b"""%!PS-Adobe-3.0
%%Pages: 2
%%EndComments
/Helvetica findfont 12 scalefont setfont
72 700 moveto (Capybaras swim on the first page) show
showpage
72 700 moveto (Tapirs browse on the second page) show
showpage
%%EOF
"""


@pytest.mark.skipif(shutil.which("gs") is None or shutil.which("pdftotext") is None,
                    reason="Ghostscript or poppler-utils is not installed")
def test_postscript_blocks_carry_their_page(tmp_path: Path) -> None:
    f = tmp_path / "animals.ps"
    f.write_bytes(TWO_PAGES_PS)
    doc = converted(f)
    assert doc.meta["pages"] == "2"
    assert [(b.text, b.page) for b in doc.blocks] == [
        ("Capybaras swim on the first page", 1), ("Tapirs browse on the second page", 2)]
