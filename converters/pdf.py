"""PDF with pdfminer.six: text by page and paragraph, title/author/subject/dates from the info dictionary."""

from __future__ import annotations

import io
import logging
import re

from .document import Document
from .errors import CorruptFile, HostileInput
from .source import Source

logger = logging.getLogger(__name__)
_PARA = re.compile(r"\n\s*\n")
_INFO_KEYS = {"Title": "title", "Author": "author", "Subject": "subject", "Keywords": "keywords",
              "Creator": "creator", "Producer": "producer", "CreationDate": "created", "ModDate": "modified"}


def convert(source: Source, mime: str) -> Document:
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    from pdfminer.high_level import extract_text
    from pdfminer.layout import LAParams
    from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfparser import PDFParser, PDFSyntaxError
    from pdfminer.psparser import PSException

    data = source.read()
    if not data.startswith(b"%PDF") and b"%PDF" not in data[:1024]:
        raise CorruptFile("not a PDF (no %PDF header)")
    doc = Document(uri=source.uri, mime=mime)
    try:
        pdf = PDFDocument(PDFParser(io.BytesIO(data)))
        doc.meta.update(info(pdf))
        text = extract_text(io.BytesIO(data), laparams=LAParams())
    except (PDFEncryptionError, PDFPasswordIncorrect) as exc:
        raise CorruptFile(f"encrypted PDF: {exc}") from exc
    except RecursionError as exc:
        raise HostileInput("PDF nests objects too deeply") from exc
    except (PDFSyntaxError, PSException, ValueError, KeyError, TypeError, AttributeError,
            IndexError, AssertionError, struct_error()) as exc:
        raise CorruptFile(f"unreadable PDF: {type(exc).__name__}: {exc}") from exc
    fill(doc, text.split("\f"))
    doc.title = doc.meta.pop("title", "") or _first_line(doc) or source.name
    return doc


def fill(doc: Document, pages: list[str]) -> None:
    """Paragraphs from page texts; a paragraph does not run across a page break."""
    for page in pages:
        for para in _PARA.split(page):
            doc.add("p", " ".join(para.split()))


def info(pdf: object) -> dict[str, str]:
    from pdfminer.pdftypes import resolve1
    from pdfminer.utils import decode_text

    out: dict[str, str] = {}
    for d in getattr(pdf, "info", []) or []:
        for key, name in _INFO_KEYS.items():
            v = resolve1(d.get(key))
            if isinstance(v, bytes):
                v = decode_text(v)
            if isinstance(v, str) and v.strip():
                out[name] = v.strip()
    return out


def _first_line(doc: Document) -> str:
    for b in doc.blocks:
        line = b.text.strip()
        if 3 <= len(line) <= 120:
            return line
        break
    return ""


def struct_error() -> type[Exception]:
    import struct

    return struct.error
