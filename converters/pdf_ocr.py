"""The pages of a PDF that are pictures of text (scans, faxes), read by OCR (``ocr``).

A page is read when its text layer holds (nearly) nothing, under ``NEARLY_NONE`` letters, while
the page draws something; pages with text are never read, so a mixed PDF has only its scanned pages
read. Each such page is rendered by PDFium at ``ocr.TARGET_DPI`` (grey, at most ``ocr.MAX_PIXELS``)
and its text takes the page's place. Under the file's OCR budget: pages past it are left, and the
Document says ``ocr: partial`` with ``ocr_pages_left``. A PDF whose every page needs OCR while OCR
cannot run here fails with ``helper_missing`` (tried again later), not a document with no text;
one with some text keeps it and says ``ocr: unavailable`` (or ``off``, with the setting).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from deskdex.errors import HelperMissing

from .convert import current_limits
from .ocr import MAX_PIXELS, TARGET_DPI, reader

if TYPE_CHECKING:  # pypdfium2 has no types (Any to mypy)
    from PIL.Image import Image
    from pypdfium2 import PdfDocument

logger = logging.getLogger(__name__)

NEARLY_NONE = 20  # letters and digits below which a page's text layer counts as none (a page number, a stamp)


def needs_ocr(pdf: PdfDocument, i: int, text: str) -> bool:
    """Whether page ``i`` (text layer ``text``) is a picture: next to no text, and something drawn."""
    if sum(ch.isalnum() for ch in text) >= NEARLY_NONE:
        return False
    import pypdfium2.raw as raw

    page = pdf[i]
    try:
        return int(raw.FPDFPage_CountObjects(page)) > 0
    finally:
        page.close()


def read_pages(pdf: PdfDocument, pages: list[str], meta: dict[str, str]) -> None:
    """Put the OCR text of every page of ``pdf`` that needs it in ``pages``; say what was done in ``meta``."""
    todo = [i for i, text in enumerate(pages) if needs_ocr(pdf, i, text)]
    if not todo:
        return
    limits = current_limits()
    ocr = reader(limits.ocr, limits.time_seconds)
    if isinstance(ocr, str):
        if ocr != "off" and len(todo) == len(pages) and not any(p.strip() for p in pages):
            raise HelperMissing(f"a PDF of scanned pages, which need OCR: {ocr}")
        meta["ocr"] = "off" if ocr == "off" else "unavailable"
        meta["ocr_pages_left"] = str(len(todo))
        if ocr != "off":
            meta["ocr_error"] = ocr
        return
    for n, i in enumerate(todo):
        image = _render(pdf, i)
        text = ocr.read(image, TARGET_DPI)
        if text is None:
            ocr.left = len(todo) - n
            logger.info("OCR budget spent: %d of %d scanned pages left", ocr.left, len(todo))
            break
        if text.strip():
            pages[i] = text
    ocr.describe(meta)


def _render(pdf: PdfDocument, i: int) -> Image:
    """Page ``i`` as a grey PIL image at TARGET_DPI, or less for a page so large it would pass MAX_PIXELS."""
    page = pdf[i]
    try:
        w, h = page.get_size()  # in points
        scale = TARGET_DPI / 72.0
        if w * h * scale * scale > MAX_PIXELS:
            scale = (MAX_PIXELS / max(1.0, w * h)) ** 0.5
        # The image shares the bitmap's memory (and keeps it alive): not closed here.
        image: Image = page.render(scale=scale, grayscale=True).to_pil()
        return image
    finally:
        page.close()
