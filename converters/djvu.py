"""DjVu (single-page, bundled and indirect documents) with djvulibre's helper programs.

``djvused -e 'n; print-meta; select 1; print-meta'`` gives the page count and the metadata
(title, author, year... from the document's shared annotations or the first page's); ``djvutxt``
the hidden text layer, a form feed between pages, each page a run of paragraphs. A scan without
a text layer is a document with its metadata and ``content: none``: DjVu is not OCRed here.
Both helpers run through ``helpers.run`` (missing: ``helper_missing``; failing: ``corrupt``).
"""

from __future__ import annotations

import logging
import re

from .document import Document
from deskdex.errors import CorruptFile
from . import helpers
from .registry import DJVUSED, DJVUTXT
from .source import Source

logger = logging.getLogger(__name__)

_META_LINE = re.compile(rb'^([A-Za-z][\w-]*)\s+"((?:[^"\\]|\\.)*)"\s*$')
_ESCAPE = re.compile(rb'\\([0-7]{1,3}|.)', re.S)
_ESCAPES = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"f": b"\f", b"v": b"\v", b"a": b"\a", b"b": b"\b"}
# Metadata keys (BibTeX-like, as djvused documents them) and ours.
_KEYS = {"title": "title", "author": "author", "year": "year", "subject": "subject", "keywords": "keywords",
         "publisher": "publisher", "note": "description", "booktitle": "booktitle", "editor": "editor",
         "creationdate": "created", "moddate": "modified", "creator": "creator", "producer": "producer"}


def convert(source: Source, mime: str) -> Document:
    head = source.head(16)
    if not (head.startswith(b"AT&TFORM") and head[12:15] == b"DJV"):
        raise CorruptFile("not a DjVu file (no AT&TFORM...DJVU header)")
    declared, size = 12 + int.from_bytes(head[8:12], "big"), source.size()
    if size < declared:  # the helpers read what is there and say nothing of the rest
        raise CorruptFile(f"truncated DjVu file: {size} bytes of the {declared} its header declares")
    info = helpers.run(DJVUSED, ["-u", "{}", "-e", "n; print-meta; select 1; print-meta"], source, suffix=".djvu")
    doc = Document(uri=source.uri, mime=mime)
    lines = info.splitlines()
    if lines and lines[0].strip().isdigit():
        doc.meta["pages"] = lines.pop(0).strip().decode("ascii")
    for line in lines:
        m = _META_LINE.match(line.strip())
        if m is None:
            continue
        key = _KEYS.get(m.group(1).decode("ascii").lower())
        value = " ".join(_unescape(m.group(2)).split())
        if key and value and key not in doc.meta:
            doc.meta[key] = value
    text = helpers.run(DJVUTXT, ["{}"], source, suffix=".djvu").decode("utf-8", "replace")
    for n, page in enumerate(text.split("\f"), 1):  # djvutxt: a form feed between pages
        for para in re.split(r"\n\s*\n", page):
            doc.add("p", " ".join(para.split()), page=n)
    if not doc.blocks:
        doc.meta["content"] = "none"  # a scan without a text layer: no OCR for DjVu
    doc.settle_title(doc.meta.pop("title", ""), source.name)
    return doc


def _unescape(raw: bytes) -> str:
    """A djvused string: C escapes and octal bytes (UTF-8 sequences written byte by byte)."""
    def one(m: re.Match[bytes]) -> bytes:
        e = m.group(1)
        if e[:1].isdigit():
            return bytes([int(e, 8) & 0xFF])
        return _ESCAPES.get(e, e)

    return _ESCAPE.sub(one, raw).decode("utf-8", "replace")
