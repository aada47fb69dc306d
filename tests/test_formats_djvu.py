"""DjVu through djvulibre (issue 16): documents made here with Pillow and djvulibre's own tools
(cjb2, c44, djvm, djvused set-txt and set-meta); text by page, title and author from the
metadata; a scan without a text layer has no content; junk is ``corrupt``, a missing djvulibre
``helper_missing``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from deskdex.converters import Source, convert
from deskdex.converters.document import Document
from deskdex.converters.registry import which

pytestmark = pytest.mark.skipif(any(shutil.which(p) is None for p in ("cjb2", "c44", "djvm", "djvused", "djvutxt")),
                                reason="djvulibre-bin is not installed")


def page(tmp: Path, name: str, words: str, color: bool = False) -> Path:
    """One page: an image drawn with Pillow, encoded bilevel (cjb2) or in colour (c44)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB" if color else "1", (400, 200), "white" if color else 1)
    ImageDraw.Draw(img).text((20, 20), words, fill="black" if color else 0)
    src = tmp / f"{name}.{'ppm' if color else 'pbm'}"
    img.save(src)
    out = tmp / f"{name}.djvu"
    subprocess.run(["c44" if color else "cjb2", str(src), str(out)], check=True, capture_output=True)
    return out


def text_layer(words: str) -> str:
    """A page's hidden text as djvused's set-txt reads it: one line of words with their boxes."""
    boxes = " ".join(f'(word {20 + 60 * i} 160 {70 + 60 * i} 180 "{w}")' for i, w in enumerate(words.split()))
    return f"(page 0 0 400 200 (line 20 160 380 180 {boxes}))\n"


def djvused(path: Path, script: str) -> None:
    subprocess.run(["djvused", str(path), "-e", script, "-s"], check=True, capture_output=True)


def converted(path: Path) -> tuple[str, str, Document | None]:
    outcome = convert(Source.from_path(path))[0]
    return outcome.reason, outcome.message, outcome.document


def test_bundled_djvu_with_text_layer_and_metadata(tmp_path: Path) -> None:
    first, second = page(tmp_path, "p1", "Okapis graze"), page(tmp_path, "p2", "Flamingos wade", color=True)
    book = tmp_path / "atlas.djvu"
    subprocess.run(["djvm", "-c", str(book), str(first), str(second)], check=True, capture_output=True)
    (tmp_path / "t1").write_text(text_layer("Okapis graze quietly"))
    (tmp_path / "t2").write_text(text_layer("Flamingos wade at dawn"))
    (tmp_path / "meta").write_text('title\t"The Okapi Atlas"\nauthor\t"Jane Quägga"\nyear\t"2021"\n')
    djvused(book, f"select 1; set-txt {tmp_path / 't1'}; select 2; set-txt {tmp_path / 't2'}; "
                  f"select; set-meta {tmp_path / 'meta'}")
    reason, message, doc = converted(book)
    assert doc is not None, (reason, message)
    assert doc.mime == "image/vnd.djvu" and doc.title == "The Okapi Atlas"
    assert doc.meta["author"] == "Jane Quägga" and doc.meta["year"] == "2021" and doc.meta["pages"] == "2"
    assert [b.text for b in doc.blocks] == ["Okapis graze quietly", "Flamingos wade at dawn"]  # page by page


def test_single_page_metadata_on_the_page_and_no_text_layer(tmp_path: Path) -> None:
    scan = page(tmp_path, "scan", "words only in pixels", color=True)
    (tmp_path / "meta").write_text('title\t"Scanned \\"okapi\\" notes"\nauthor\t"Zoë Example"\n')
    djvused(scan, f"select 1; set-meta {tmp_path / 'meta'}")
    reason, message, doc = converted(scan)
    assert doc is not None, (reason, message)
    assert doc.title == 'Scanned "okapi" notes' and doc.meta["author"] == "Zoë Example"
    assert not doc.blocks and doc.meta["content"] == "none"  # DjVu is not OCRed


def test_djvu_found_by_content_without_suffix(tmp_path: Path) -> None:
    plain = page(tmp_path, "plain", "x")
    (tmp_path / "t").write_text(text_layer("Quagga stripes"))
    djvused(plain, f"select 1; set-txt {tmp_path / 't'}")
    unnamed = tmp_path / "scan-without-suffix"
    unnamed.write_bytes(plain.read_bytes())
    reason, message, doc = converted(unnamed)
    assert doc is not None and doc.mime == "image/vnd.djvu", (reason, message)
    assert doc.text().endswith("Quagga stripes")


@pytest.mark.parametrize("cut", [0.0, 0.2, 0.6])  # junk, then the first fifth or three fifths of a book
def test_junk_and_truncated_djvu_is_corrupt(tmp_path: Path, cut: float) -> None:
    first, second = page(tmp_path, "p1", "a"), page(tmp_path, "p2", "b")
    book = tmp_path / "book.djvu"
    subprocess.run(["djvm", "-c", str(book), str(first), str(second)], check=True, capture_output=True)
    bad = tmp_path / "bad.djvu"
    data = book.read_bytes()
    bad.write_bytes(data[:int(len(data) * cut)] if cut else b"\x00\x01 not a DjVu file \xff" * 10)
    reason, message, doc = converted(bad)
    assert doc is None and reason == "corrupt", (reason, message)


def test_missing_djvulibre_is_helper_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    book = page(tmp_path, "p1", "a")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    which.cache_clear()
    try:
        reason, message, doc = converted(book)
    finally:
        which.cache_clear()
    assert doc is None and reason == "helper_missing" and "apt-get install djvulibre-bin" in message
