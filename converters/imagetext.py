"""The words in an image's pixels (OCR), added to the Document its metadata made (``media.image``).

Every page of a TIFF is read, the first frame of an animated GIF or WebP. An image with fewer
pixels than ``ocr.min_pixels`` (an icon) is not read, nor one larger than Pillow's decompression
bomb limit (its metadata is all it gets). Whatever happens to OCR, the metadata stays: the
Document says what OCR did in ``meta["ocr"]``:

    yes          every page read            partial       the time budget ran out (``ocr_pages_left``)
    off          the setting ocr.enabled    unavailable   tesserocr or the language data is missing
    (none)       under ocr.min_pixels       skipped       too large to decode (``ocr_error`` says why)
    failed       the pixels cannot be decoded (truncated, damaged): ``ocr_error`` says why
"""

from __future__ import annotations

import logging
import re
import struct
from typing import TYPE_CHECKING

from .convert import current_limits
from .document import Document, clean
from .ocr import reader

if TYPE_CHECKING:
    from PIL.Image import Image

logger = logging.getLogger(__name__)

_BROKEN_WORD = re.compile(r"(\w)-\n(\w)")  # a word the line end hyphenated

# What decoding a damaged image raises in Pillow (a truncated file: OSError; bad tables: the rest).
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, IndexError, KeyError, EOFError, OverflowError, struct.error,
                  RuntimeError)


def add_text(im: Image, doc: Document) -> None:
    """OCR ``im`` (opened, pixels not yet decoded) into ``doc``: one paragraph per block of text."""
    from PIL import Image as PILImage

    limits = current_limits()
    options = limits.ocr
    w, h = im.size
    if w * h < options.min_pixels:
        return  # an icon: not read, by design, so nothing to say
    if not options.enabled:
        doc.meta["ocr"] = "off"
        return
    bomb = PILImage.MAX_IMAGE_PIXELS
    if bomb is not None and w * h > bomb:
        doc.meta["ocr"] = "skipped"
        doc.meta["ocr_error"] = f"{w} x {h} pixels: over the {bomb} Pillow decodes"
        return
    ocr = reader(options, limits.time_seconds)
    if isinstance(ocr, str):
        doc.meta["ocr"] = "off" if ocr == "off" else "unavailable"
        if ocr != "off":
            doc.meta["ocr_error"] = ocr
        return
    pages = getattr(im, "n_frames", 1) if im.format == "TIFF" else 1
    try:
        for i in range(pages):
            if i:
                im.seek(i)
            pw, ph = im.size
            if pw * ph < options.min_pixels or (bomb is not None and pw * ph > bomb):
                continue
            text = ocr.read(_decoded(im), _dpi(im))
            if text is None:
                ocr.left = pages - i
                break
            for para in _paragraphs(text):
                doc.add("p", para)
    except MemoryError:
        raise
    except _DECODE_ERRORS as exc:
        logger.info("%s: cannot decode the pixels for OCR: %s", doc.uri, exc)
        doc.meta["ocr"] = "failed"
        doc.meta["ocr_error"] = f"{type(exc).__name__}: {exc}"[:300]
        return
    ocr.describe(doc.meta)


def _decoded(im: Image) -> Image:
    """The pixels of the current frame; a large JPEG decoded at a reduced size (less memory)."""
    from .ocr import MAX_PIXELS

    w, h = im.size
    if im.format == "JPEG" and w * h > MAX_PIXELS:
        im.draft("L", (w // 2, h // 2))
    im.load()
    return im


def _dpi(im: Image) -> float | None:
    dpi = im.info.get("dpi")
    try:
        return float(dpi[0]) if dpi else None
    except (TypeError, ValueError, IndexError):
        return None


def _paragraphs(text: str) -> list[str]:
    """Tesseract's blocks (blank-line separated) as paragraphs, their lines joined."""
    out = []
    for block in _BROKEN_WORD.sub(r"\1\2", clean(text)).split("\n\n"):
        para = " ".join(block.split())
        if para:
            out.append(para)
    return out
