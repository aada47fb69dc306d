"""TeX's DVI output (``.dvi``, and ``.dvi.gz`` through ``archive.compressed``) with ``catdvi``, as Recoll.

``catdvi -s`` prints the glyphs in the order the DVI file sets them (TeX's reading order), with the
spaces between words and a form feed after each page; the pages become paragraphs as a PDF's do
(``pdf.fill``: lines joined, running heads and page numbers as boilerplate), NFKC-normalised as
PostScript's are, so that a word set with a ligature glyph (ﬁ, ﬄ) is found. The title is the first line of text, else the file's
name; TeX's date in the preamble (`` TeX output 2022.02.26:1725``) is the creation date. catdvi runs
through ``helpers.run`` (missing: ``helper_missing``; refusing the file: ``corrupt``).
"""

from __future__ import annotations

import logging
import re
import unicodedata

from .document import Document
from deskdex.errors import CorruptFile
from . import helpers
from .pdf import fill
from .registry import CATDVI
from .source import Source

logger = logging.getLogger(__name__)

_PRE, _ID = 247, 2  # the preamble opcode and the DVI format's identification byte
_TEX_DATE = re.compile(rb"(\d{4})\.(\d{2})\.(\d{2}):(\d{2})(\d{2})")


def convert(source: Source, mime: str) -> Document:
    head = source.head(15 + 255)
    if len(head) < 15 or head[0] != _PRE or head[1] != _ID:
        raise CorruptFile("not a DVI file (no preamble: bytes F7 02)")
    text = helpers.run(CATDVI, ["-s", "-e", "0", "{}"], source, suffix=".dvi").decode("utf-8", "replace")
    pages = unicodedata.normalize("NFKC", text).split("\f")
    if pages and not pages[-1].strip():
        pages.pop()  # after the last page's form feed
    doc = Document(uri=source.uri, mime=mime)
    doc.meta["pages"] = str(len(pages))
    created = _tex_date(head[15:15 + head[14]])
    if created:
        doc.meta["created"] = created
    fill(doc, pages)
    if not doc.blocks:
        doc.meta["content"] = "none"  # pages of rules and pictures only
    first = next((" ".join(ln.split()) for page in pages for ln in page.splitlines() if ln.strip()), "")
    doc.title = first if 3 <= len(first) <= 120 else source.name
    return doc


def _tex_date(comment: bytes) -> str:
    """The preamble's comment as TeX writes it (`` TeX output 2022.02.26:1725``) as ISO 8601."""
    m = _TEX_DATE.search(comment)
    if m is None:
        return ""
    y, mo, d, h, mi = (g.decode("ascii") for g in m.groups())
    return f"{y}-{mo}-{d}T{h}:{mi}:00"
