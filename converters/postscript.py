"""PostScript and EPS (plain, DOS binary EPS, or gzip'd as ``.ps.gz``/``.eps.gz`` through ``archive``).

The text: Ghostscript turns the program into a PDF (``gs -sDEVICE=pdfwrite``, under -dSAFER, run
by ``helpers.run``), which the PDF converter reads as any PDF (paragraphs, running heads, pages).
Measured against ``ps2ascii`` (a script that runs ``gs -sDEVICE=txtwrite``) on groff's PostScript of
as(1), 33 pages: txtwrite glues words whose space groff draws as a move (2.6% of the words lost,
195 glued junk words, ligatures left as U+FB01); pdfwrite + PDF text lost none, 3 junk words, in
0.38 s against 0.28 s. Title, author (``%%For``), creator and creation date come from the DSC
comments of the header (or of the trailer when the header says ``(atend)``), never from the PDF's
info, which Ghostscript fills with its own name and today's date.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import struct

from .document import Document
from deskdex.errors import CorruptFile
from . import helpers
from .pdf import convert as pdf_convert
from .registry import GHOSTSCRIPT
from .source import Source

logger = logging.getLogger(__name__)

_EPS_BINARY = b"\xc5\xd0\xd3\xc6"  # DOS EPS: a header giving where the PostScript section lies
_DSC = re.compile(rb"^%%(Title|For|Creator|CreationDate|Pages):[ \t]*(.*?)[ \t]*\r?$", re.M)
_DSC_KEYS = {b"Title": "title", b"For": "author", b"Creator": "creator", b"CreationDate": "created",
             b"Pages": "pages"}
_WINDOW = 64 * 1024  # the header comments and the trailer are read from this much at each end
_DATES = ("%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M:%S %Z %Y", "%m/%d/%y %H:%M:%S", "%m/%d/%Y %H:%M:%S",
          "%d %b %Y %H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%a %b %d %Y", "%m/%d/%y", "%Y-%m-%d")
_PDF_DATE = re.compile(r"^\(?D:(\d{4})(\d{2})(\d{2})(\d{2})?(\d{2})?(\d{2})?")


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    program = _postscript_section(data)
    meta = dsc_comments(program)
    eps = program.startswith(b"%!PS-Adobe") and b"EPSF" in program[:40]
    args = ["-q", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-dNOINTERPOLATE", "-sstdout=%stderr",
            "-sDEVICE=pdfwrite", "-sOutputFile=-", *(["-dEPSCrop"] if eps else []), "{}"]
    # A binary EPS is written out as its PostScript section alone (Ghostscript reads both; this
    # keeps the TIFF or WMF preview away from it).
    target = source if program is data else Source(uri=source.uri, name=source.name, data=program)
    pdf = helpers.run(GHOSTSCRIPT, args, target, suffix=".eps" if eps else ".ps")
    doc = Document(uri=source.uri, mime=mime)
    if pdf.startswith(b"%PDF"):
        printed = pdf_convert(Source(uri=source.uri, name=source.name + ".pdf", data=pdf), "application/pdf")
        doc.blocks = printed.blocks
        if "pages" in printed.meta:
            meta["pages"] = printed.meta["pages"]
        fallback = printed.title if printed.title != source.name + ".pdf" else ""
    else:
        fallback = ""
    if not doc.blocks:
        meta["content"] = "none"  # drawings, scanned pages: no text to find (no OCR here)
    if eps:
        meta["eps"] = "yes"
    doc.meta.update(meta)
    doc.settle_title(doc.meta.pop("title", "") or fallback, source.name)
    return doc


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
    head_end = program.find(b"%%EndComments", 0, _WINDOW)
    head = program[:head_end if head_end > 0 else _WINDOW]
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
