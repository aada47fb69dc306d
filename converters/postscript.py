"""PostScript and EPS (plain, DOS binary EPS, or gzip'd as ``.ps.gz``/``.eps.gz`` through ``archive``).

The text: Ghostscript turns the program into a PDF (``gs -sDEVICE=pdfwrite``, under -dSAFER), and
poppler's ``pdftotext`` reads that, a form feed between pages; both run by ``helpers.run``. Lines
become paragraphs as for PDF (``pdf_text.paragraphs``), and a paragraph repeated on half the pages
(running heads, footers) is boilerplate. Measured on groff's PostScript of as(1), 33 pages, against
the words of its text rendering: ``ps2ascii`` (a script running ``gs -sDEVICE=txtwrite``) glues
words whose space groff draws as a move (97.4% of the words found, 195 glued junk words, ligatures
left as U+FB01); gs to PDF then pypdfium2 98.4% and 141; gs to PDF then pdftotext 100% and 3, in
0.38 s against txtwrite's 0.28 s. Title, author (``%%For``), creator and creation date come from the DSC
comments of the header (or of the trailer when the header says ``(atend)``), never from the PDF's
info, which Ghostscript fills with its own name and today's date.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import struct
import unicodedata
from collections import Counter

from .document import Document
from deskdex.errors import CorruptFile
from . import helpers
from .pdf_text import paragraphs
from .registry import GHOSTSCRIPT, PDFTOTEXT
from .source import Source

logger = logging.getLogger(__name__)

_EPS_BINARY = b"\xc5\xd0\xd3\xc6"  # DOS EPS: a header giving where the PostScript section lies
_DSC = re.compile(rb"^%%(Title|For|Creator|CreationDate|Pages):[ \t]*(.*?)[ \t]*\r?$", re.M)
_DSC_KEYS = {b"Title": "title", b"For": "author", b"Creator": "creator", b"CreationDate": "created",
             b"Pages": "pages"}
_WINDOW = 64 * 1024  # the header comments and the trailer are read from this much at each end
_DATES = ("%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M:%S %Z %Y", "%m/%d/%y %H:%M:%S", "%m/%d/%Y %H:%M:%S",
          "%d %b %Y %H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%a %b %d %Y", "%m/%d/%y", "%Y-%m-%d")
_DIGITS = re.compile(r"\d+")
_PDF_DATE = re.compile(r"^\(?D:(\d{4})(\d{2})(\d{2})(\d{2})?(\d{2})?(\d{2})?")


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    program = _postscript_section(data)
    meta = dsc_comments(program)
    eps = program.startswith(b"%!PS-Adobe") and b"EPSF" in program[:40]
    args = ["-q", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-sstdout=%stderr",
            "-sDEVICE=pdfwrite", "-sOutputFile=-", *(["-dEPSCrop"] if eps else []), "{}"]
    # A binary EPS is written out as its PostScript section alone (Ghostscript reads both; this
    # keeps the TIFF or WMF preview away from it).
    target = source if program is data else Source(uri=source.uri, name=source.name, data=program)
    pdf = helpers.run(GHOSTSCRIPT, args, target, suffix=".eps" if eps else ".ps")
    doc = Document(uri=source.uri, mime=mime)
    if pdf.startswith(b"%PDF"):
        printed = Source(uri=source.uri, name=source.name + ".pdf", data=pdf)
        text = helpers.run(PDFTOTEXT, ["-q", "-enc", "UTF-8", "{}", "-"], printed, suffix=".pdf")
        meta.setdefault("pages", str(_fill(doc, text.decode("utf-8", "replace").split("\f"))))
    if not doc.blocks:
        meta["content"] = "none"  # drawings, scanned pages: no text to find (no OCR here)
    if eps:
        meta["eps"] = "yes"
    doc.meta.update(meta)
    first = next((b.text for b in doc.blocks if not b.boilerplate and 3 <= len(b.text) <= 120), "")
    doc.title = doc.meta.pop("title", "") or first or source.name
    return doc


def _fill(doc: Document, pages: list[str]) -> int:
    """Paragraphs of each page; one seen on half the pages or more (a running head, a footer with
    its page number) is boilerplate. Returns the number of pages."""
    if pages and not pages[-1].strip():
        pages.pop()  # pdftotext ends the last page with a form feed too
    paras = [paragraphs([unicodedata.normalize("NFKC", ln).strip() for ln in page.splitlines()]) for page in pages]
    seen = Counter(key for page in paras for key in {_DIGITS.sub("#", p) for p in page})
    repeated = max(2, (len(pages) + 1) // 2)
    for n, page in enumerate(paras, 1):
        for p in page:
            doc.add("p", p, boilerplate=len(pages) > 1 and seen[_DIGITS.sub("#", p)] >= repeated, page=n)
    return len(pages)


def _postscript_section(data: bytes) -> bytes:
    """The PostScript program: the whole file, or a DOS binary EPS's PostScript section."""
    if data.startswith(_EPS_BINARY):
        if len(data) < 30:
            raise CorruptFile("binary EPS header is truncated")
        start, length = struct.unpack("<II", data[4:12])
        section = data[start:start + length]
        if not section.startswith(b"%!"):
            raise CorruptFile("binary EPS: no PostScript where its header points")
        return section
    if not data.lstrip(b"\x04\r\n\t ").startswith(b"%!"):  # \x04: a ^D some drivers send first
        raise CorruptFile("not PostScript (no %! at the start)")
    return data


def dsc_comments(program: bytes) -> dict[str, str]:
    """Title, author (``%%For``), creator, creation date (ISO 8601 when it parses) and page count
    from the document structuring comments; ``(atend)`` values are looked up in the trailer."""
    # The header ends at %%EndComments or at the first line of code: comments of an embedded
    # figure further on (its own %%Title) are not the document's.
    lines = []
    for line in program[:_WINDOW].splitlines():
        if line.startswith(b"%%EndComments") or (line.strip() and not line.startswith(b"%")):
            break
        lines.append(line)
    head = b"\n".join(lines)
    found: dict[str, str] = {}
    atend: set[bytes] = set()
    for key, raw in _DSC.findall(head):
        if raw.strip() == b"(atend)":
            atend.add(key)
        elif _DSC_KEYS[key] not in found and (value := _dsc_value(raw)):
            found[_DSC_KEYS[key]] = value
    if atend:
        trailer = program[-_WINDOW:]
        for key, raw in _DSC.findall(trailer[trailer.rfind(b"%%Trailer"):] if b"%%Trailer" in trailer else trailer):
            if key in atend and (value := _dsc_value(raw)):
                found[_DSC_KEYS[key]] = value
    if "created" in found:
        found["created"] = _iso_date(found["created"])
    if not found.get("pages", "").isdigit():
        found.pop("pages", None)
    return found


def _dsc_value(raw: bytes) -> str:
    """A comment's value: a PostScript string's parentheses and escapes removed; UTF-8 when it
    decodes so, else Latin-1 (what most DSC writers emit)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    text = text.strip()
    if len(text) >= 2 and text[0] == "(" and text[-1] == ")":
        text = re.sub(r"\\([()\\])", r"\1", text[1:-1])
    return " ".join(text.split())


def _iso_date(value: str) -> str:
    m = _PDF_DATE.match(value)
    if m:
        y, mo, d, h, mi, s = m.groups()
        return f"{y}-{mo}-{d}" + (f"T{h}:{mi or '00'}:{s or '00'}" if h else "")
    for fmt in _DATES:
        try:
            parsed = dt.datetime.strptime(value, fmt)
        except ValueError:
            continue
        return parsed.date().isoformat() if fmt in ("%m/%d/%y", "%Y-%m-%d", "%a %b %d %Y") else parsed.isoformat()
    return value
