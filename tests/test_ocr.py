"""OCR with the real Tesseract: words drawn into images and into the pages of PDFs are found.

The pictures are made here (Pillow, a TrueType font), small enough that each page reads in well
under a second."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Iterator

import pytest
from PIL import Image, ImageDraw, ImageFont

from deskdex.converters import Limits, Source, convert
from deskdex.converters import ocr
from deskdex.converters.document import Document
from deskdex.converters.limits import OcrOptions
from deskdex.pipeline.indexer import cost
from deskdex.pipeline.scan import FileInfo

from .conftest import CLI

FONTS = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf")

if ocr.unavailable(OcrOptions()):
    pytest.skip(f"OCR cannot run here: {ocr.unavailable(OcrOptions())}", allow_module_level=True)


def font(size: int = 36) -> ImageFont.FreeTypeFont:
    for path in FONTS:
        if Path(path).exists():
            return ImageFont.truetype(path, size)
    pytest.skip("no TrueType font (apt install fonts-dejavu-core)")


def picture(lines: list[str], size: tuple[int, int] = (1000, 260), px: int = 36) -> Image.Image:
    """Black words on white, one line each, as a 300-dpi scan of 12-point text would have them."""
    im = Image.new("L", size, 255)
    draw = ImageDraw.Draw(im)
    for i, line in enumerate(lines):
        draw.text((40, 30 + i * int(px * 1.6)), line, font=font(px), fill=0)
    return im


def converted(path: Path, limits: Limits = Limits()) -> Document:
    out = convert(Source.from_path(path), limits=limits)
    assert len(out) == 1 and out[0].document is not None, out[0].message
    return out[0].document


def words(doc: Document) -> set[str]:
    return set(doc.text().lower().replace(".", " ").split())


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "files"
    root.mkdir()
    yield root


@pytest.mark.slow
def test_image_words_are_found_by_search(cli: CLI, tree: Path) -> None:
    picture(["The quokka waved at Zanzibar", "harbour lights"]).save(tree / "note.png")
    picture(["Invoice for marmalade jars"]).convert("RGB").save(tree / "scan.jpg", quality=90)
    picture(["Bitmap of a lighthouse keeper"]).save(tree / "old.bmp")
    (tree / "plain.txt").write_text("nothing about animals\n")
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["indexed"] == 4 and summary["failed"] == 0, summary
    assert [h["path"].rsplit("/", 1)[-1] for h in cli.json("search", "quokka")["hits"]] == ["note.png"]
    assert [h["path"].rsplit("/", 1)[-1] for h in cli.json("search", "marmalade")["hits"]] == ["scan.jpg"]
    assert [h["path"].rsplit("/", 1)[-1] for h in cli.json("search", "lighthouse")["hits"]] == ["old.bmp"]
    assert cli.json("status")["ocr"].startswith("on (eng")


@pytest.mark.slow
def test_scanned_pdf_words_are_found_by_search(cli: CLI, tree: Path) -> None:
    picture(["Minutes of the allotment committee", "Rhubarb prices rose sharply"], size=(1200, 300)) \
        .save(tree / "minutes.pdf", resolution=300)
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["failed"] == 0, summary
    assert [h["path"].rsplit("/", 1)[-1] for h in cli.json("search", "rhubarb")["hits"]] == ["minutes.pdf"]
    shown = cli.run("show", str(tree / "minutes.pdf")).stdout
    assert "allotment" in shown.lower()


def test_mixed_pdf_reads_only_its_image_page(tmp_path: Path) -> None:
    from fpdf import FPDF

    picture(["Scanned page about pelicans"], size=(1200, 200)).save(tmp_path / "page.png", dpi=(300, 300))
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 8, "A typed page about walruses and their tusks, with a real text layer that needs no OCR.")
    pdf.add_page()
    pdf.image(str(tmp_path / "page.png"), x=10, y=10, w=100)
    pdf.output(str(tmp_path / "mixed.pdf"))
    doc = converted(tmp_path / "mixed.pdf")
    assert {"walruses", "pelicans"} <= words(doc)
    assert doc.meta["ocr"] == "yes" and doc.meta["ocr_pages"] == "1"  # the typed page was not read


@pytest.mark.slow
def test_ocr_off_by_setting(cli: CLI, tree: Path, home: Path) -> None:
    picture(["Secret word platypus"]).save(tree / "a.png")
    (home / "config").mkdir(exist_ok=True)
    (home / "config" / "config.toml").write_text("[ocr]\nenabled = false\n")
    cli.run("index", str(tree))
    assert cli.json("search", "platypus")["total"] == 0
    assert cli.json("search", "a.png")["total"] == 1  # still indexed, by name and metadata
    assert cli.json("status")["ocr"].startswith("off")
    doc = converted(tree / "a.png", Limits(ocr=OcrOptions(enabled=False)))
    assert doc.meta["ocr"] == "off" and "platypus" not in words(doc)


def test_small_images_are_not_read(tmp_path: Path) -> None:
    picture(["Tiny icon text"], size=(240, 60), px=20).save(tmp_path / "icon.png")
    doc = converted(tmp_path / "icon.png")
    assert "ocr" not in doc.meta and "tiny" not in words(doc)
    doc = converted(tmp_path / "icon.png", Limits(ocr=OcrOptions(min_pixels=1000)))
    assert doc.meta["ocr"] == "yes" and "tiny" in words(doc)


def test_every_page_of_a_tiff(tmp_path: Path) -> None:
    pages = [picture([f"Page {w}"], size=(700, 120)) for w in ("albatross", "buffalo", "chameleon")]
    pages[0].save(tmp_path / "fax.tif", save_all=True, append_images=pages[1:], compression="tiff_deflate")
    doc = converted(tmp_path / "fax.tif")
    assert {"albatross", "buffalo", "chameleon"} <= words(doc)
    assert doc.meta["ocr"] == "yes" and doc.meta["ocr_pages"] == "3"


def test_time_budget_leaves_pages_and_says_so(tmp_path: Path) -> None:
    page = picture(["A long fax page " * 3] * 12, size=(2400, 900), px=30)
    page.save(tmp_path / "long.tif", save_all=True, append_images=[page] * 30, compression="tiff_deflate")
    doc = converted(tmp_path / "long.tif", Limits(ocr=OcrOptions(seconds=1.0)))
    assert doc.meta["ocr"] == "partial"
    assert 0 < int(doc.meta["ocr_pages_left"]) <= 31


@pytest.mark.slow
def test_same_bytes_are_read_once(cli: CLI, tree: Path) -> None:
    picture(["Gnu antelope migration"]).save(tree / "one.png")
    picture(["Scanned heron survey"], size=(1200, 300)).save(tree / "one.pdf", resolution=300)
    (tree / "sub").mkdir()
    for name in ("one.png", "one.pdf"):
        shutil.copy(tree / name, tree / f"copy-{name}")
        shutil.copy(tree / name, tree / "sub" / name)
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    # Six files, two distinct contents: two conversions (OCR), four reuses of their text.
    assert (summary["indexed"], summary["reused"], summary["failed"]) == (2, 4, 0), summary
    assert cli.json("search", "antelope")["total"] >= 1 and cli.json("search", "heron")["total"] >= 1
    for copy in ("copy-one.png", "sub/one.png", "copy-one.pdf"):
        shown = cli.run("show", str(tree / copy)).stdout.lower()
        assert ("antelope" in shown or "heron" in shown) and Path(copy).name in shown  # its own name
    shutil.copy(tree / "one.png", tree / "later.png")
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert (summary["indexed"], summary["reused"]) == (0, 1), summary


def test_truncated_image_keeps_its_metadata(tmp_path: Path) -> None:
    buf = io.BytesIO()
    picture(["Broken file words"]).save(buf, "PNG")
    (tmp_path / "cut.png").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    doc = converted(tmp_path / "cut.png")
    assert doc.meta["ocr"] == "failed" and "truncated" in doc.meta["ocr_error"].lower()
    assert doc.meta["dimensions"] == "1000x260"


def test_image_over_the_bomb_limit_is_not_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    picture(["Too many pixels"]).save(tmp_path / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 200_000)  # the picture has 260,000: over, not twice over
    doc = converted(tmp_path / "big.png")
    assert doc.meta["ocr"] == "skipped" and "pixels" not in words(doc)


def test_without_ocr_images_say_so_and_scans_fail_helper_missing(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    picture(["Words nobody reads"]).save(tmp_path / "a.png")
    picture(["Words nobody reads"]).save(tmp_path / "scan.pdf", resolution=300)
    monkeypatch.setattr(ocr, "tessdata", lambda: None)
    doc = converted(tmp_path / "a.png")
    assert doc.meta["ocr"] == "unavailable" and "tesseract-ocr-eng" in doc.meta["ocr_error"]
    out = convert(Source.from_path(tmp_path / "scan.pdf"))
    assert out[0].reason == "helper_missing" and "tesseract-ocr-eng" in out[0].message
    assert ocr.state(OcrOptions()).startswith("unavailable")


def test_ocr_candidates_are_converted_last() -> None:
    names = ["b.png", "a.txt", "c.pdf", "d.JPG", "e.docx", "f.tiff", "g", "h.pdf"]
    ordered = [f.path for f in sorted((FileInfo(n, 1, 0.0) for n in names), key=cost)]
    assert ordered == ["a.txt", "e.docx", "g", "c.pdf", "h.pdf", "b.png", "d.JPG", "f.tiff"]


def test_languages_installed_english_first() -> None:
    langs = ocr.installed_languages()
    assert langs[0] == "eng" and "osd" not in langs
    assert ocr.languages(OcrOptions(languages=("xyz", "eng"))) == ["eng"]
    assert "tesseract-ocr-xyz" in ocr.unavailable(OcrOptions(languages=("xyz",)))


def test_a_batch_converts_images_and_pdfs_last(tmp_path: Path) -> None:
    from deskdex.index import Collection
    from deskdex.pipeline.indexer import Indexer

    root = tmp_path / "files"
    root.mkdir()
    picture(["Late image"]).save(root / "a.png")
    picture(["Late scan"]).save(root / "c.pdf", resolution=300)
    (root / "b.txt").write_text("early text\n")
    (root / "d.md").write_text("# early notes\n")
    seen: list[str] = []

    class InProcess:  # the pool's interface, converting here, in the order it is handed files
        def map(self, sources: Iterator[Source], stop: object = None) -> Iterator[tuple[Source, list]]:
            for s in sources:
                seen.append(Path(str(s.path)).name)
                yield s, convert(s)

        def close(self) -> None:
            pass

    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        indexer._pool = InProcess()  # type: ignore[assignment]
        summary = indexer.sync([str(root)], indexer.scan([str(root)]))
    assert summary.indexed == 4 and not summary.failed, summary
    assert sorted(seen[:2]) == ["b.txt", "d.md"] and seen[2:] == ["c.pdf", "a.png"]
