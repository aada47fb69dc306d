"""PDF: a compiled fast path (pypdfium2) with pdfminer.six as the fallback for files it cannot open.
Pages that are pictures of text (scans) are read by OCR (``pdf_ocr``; pdfium only).

pypdfium2 gives the text of each page as lines; ``paragraphs`` rebuilds paragraphs from them,
bookmarks (the outline) become headings, and lines repeated at the top or bottom of most
pages (running heads, page numbers) are kept as boilerplate. Metadata comes from the info
dictionary (title, author, subject, keywords, dates as ISO 8601) and the catalog's /Lang.

PDFium is neither thread- nor fork-safe: conversions run one per worker process
(``converters.isolation``), and nothing here opens a document in a parent that forks.
Encrypted files that need a password raise Encrypted (one PDFium refuses is tried with pdfminer first:
an AES-256 file with an empty owner password opens without one); truncated files and junk raise CorruptFile.
"""

from __future__ import annotations

import ctypes
import logging
import re
from collections import Counter
from typing import TYPE_CHECKING

from .document import Document
from deskdex.errors import CorruptFile, Encrypted, HostileInput
from .pdf_ocr import read_pages
from .pdf_text import META_KEYS, paragraphs, pdf_date
from .source import Source

if TYPE_CHECKING:  # pypdfium2 is imported when a PDF is converted; it has no types (Any to mypy)
    from pypdfium2 import PdfDocument

logger = logging.getLogger(__name__)

_ERR_PASSWORD, _ERR_SECURITY = 4, 5
_MAX_BOOKMARKS = 5000
_DIGITS = re.compile(r"\d+")
_SECTION_NO = re.compile(r"^(?:\d+(?:\.\d+)*|[ivxlc]+|[a-z])\.?\s+")


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    if b"%PDF" not in data[:1024]:
        raise CorruptFile("not a PDF (no %PDF header in the first 1024 bytes)")
    try:
        import pypdfium2  # noqa: F401
    except ImportError:  # the compiled wheel is missing on this platform: the slow path still works
        return convert_pdfminer(data, source, mime)
    try:
        return convert_pdfium(data, source, mime)
    except Encrypted as exc:
        # PDFium tries an empty password as the user password only (its CheckSecurity skips the owner
        # check when the password is empty), so a file with a user password and an empty owner
        # password, which opens in any viewer, is refused. Those are AES-256 (R5, R6) files: below R5
        # an empty owner password is replaced by the user password when the file is encrypted.
        # pdfminer, as poppler, tries the empty password as either; a file it refuses is encrypted.
        logger.info("pdfium asks a password for %s (%s); trying pdfminer", source.uri, exc)
        try:
            return convert_pdfminer(data, source, mime)
        except CorruptFile as exc2:
            raise Encrypted(f"{exc} (pdfminer: {exc2})") from exc2
    except _PdfiumUnreadable as exc:
        logger.info("pdfium cannot open %s (%s); trying pdfminer", source.uri, exc)
        try:
            return convert_pdfminer(data, source, mime)
        except CorruptFile as exc2:
            raise CorruptFile(f"unreadable PDF (damaged or truncated): pdfium: {exc}; pdfminer: {exc2}") from exc2


class _PdfiumUnreadable(Exception):
    """PDFium could not open the file; pdfminer may still read it."""


def convert_pdfium(data: bytes, source: Source, mime: str) -> Document:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        if exc.err_code in (_ERR_PASSWORD, _ERR_SECURITY):
            raise Encrypted("encrypted PDF: it needs a password to be read") from exc
        raise _PdfiumUnreadable(str(exc)) from exc
    try:
        doc = Document(uri=source.uri, mime=mime)
        doc.meta.update(_pdfium_meta(pdf))
        doc.meta["pages"] = str(len(pdf))
        pages = [_page_text(pdf, i) for i in range(len(pdf))]
        read_pages(pdf, pages, doc.meta)
        fill(doc, pages, _bookmarks(pdf))
    except pdfium.PdfiumError as exc:
        raise CorruptFile(f"unreadable PDF page: {exc}") from exc
    finally:
        pdf.close()
    doc.title = doc.meta.pop("title", "") or _first_line(doc) or source.name
    return doc


def _page_text(pdf: PdfDocument, i: int) -> str:
    page = pdf[i]
    try:
        tp = page.get_textpage()
        try:
            # U+FFFE marks a hyphen the layout added inside a word pdfium already joined.
            return str(tp.get_text_range()).replace("\ufffe", "").replace("\x02", "")
        finally:
            tp.close()
    finally:
        page.close()


def _pdfium_meta(pdf: PdfDocument) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in pdf.get_metadata_dict(skip_empty=True).items():
        name = META_KEYS.get(key)
        value = value.strip()
        if name and value:
            out[name] = pdf_date(value) if name in ("created", "modified") else value
    lang = _catalog_language(pdf)
    if lang:
        out["language"] = lang
    return out


def _catalog_language(pdf: PdfDocument) -> str:
    import pypdfium2.raw as raw

    n = raw.FPDFCatalog_GetLanguage(pdf, None, 0)
    if n <= 2:
        return ""
    buf = (ctypes.c_ushort * (n // 2))()  # UTF-16LE with a terminating NUL
    raw.FPDFCatalog_GetLanguage(pdf, buf, n)
    return bytes(buf)[: n - 2].decode("utf-16-le", "replace").strip()


def _bookmarks(pdf: PdfDocument) -> dict[int, list[tuple[int, str]]]:
    """Outline entries by page: (level, title)."""
    out: dict[int, list[tuple[int, str]]] = {}
    for n, bm in enumerate(pdf.get_toc(max_depth=6)):
        if n >= _MAX_BOOKMARKS:
            break
        dest = bm.get_dest()
        page = dest.get_index() if dest is not None else None
        title = " ".join((bm.get_title() or "").split())
        if page is not None and title:
            out.setdefault(page, []).append((min(bm.level + 1, 6), title))
    return out


def fill(doc: Document, pages: list[str], bookmarks: dict[int, list[tuple[int, str]]] | None = None) -> None:
    """Headings, paragraphs and boilerplate from the text of each page; every block carries the
    (1-based) page it is on: a paragraph never runs across pages here, each page is flushed."""
    bookmarks = bookmarks or {}
    page_lines = [[ln.strip() for ln in p.replace("\r\n", "\n").replace("\r", "\n").split("\n")] for p in pages]
    running = _running_lines(page_lines)
    for i, lines in enumerate(page_lines):
        page = i + 1
        marks = {_key(t): lvl for lvl, t in bookmarks.get(i, [])}
        found = {_heading_key(ln, marks) for ln in lines}
        for lvl, title in bookmarks.get(i, []):
            if _key(title) not in found:  # the bookmark's text is not on its page as a line
                doc.add("h", title, level=lvl, page=page)
        body: list[str] = []
        for ln in lines:
            k = _heading_key(ln, marks)
            if k in marks:
                _flush(doc, body, page)
                doc.add("h", ln, level=marks.pop(k), page=page)
            elif _DIGITS.sub("#", ln) in running:
                _flush(doc, body, page)
                doc.add("p", ln, boilerplate=True, page=page)
            else:
                body.append(ln)
        _flush(doc, body, page)


def _flush(doc: Document, lines: list[str], page: int) -> None:
    for para in paragraphs(lines):
        doc.add("p", para, page=page)
    lines.clear()


def _key(line: str) -> str:
    return " ".join(line.split()).casefold()


def _heading_key(line: str, marks: dict[str, int]) -> str:
    """The bookmark a line shows, allowing a section number before it ("1.2 Title" for "Title")."""
    if not marks or len(line) > 200:
        return ""
    k = _key(line)
    if k in marks:
        return k
    bare = _SECTION_NO.sub("", k, count=1)
    return bare if bare in marks else ""


def _running_lines(page_lines: list[list[str]]) -> set[str]:
    """First and last lines (digits masked) seen on at least 3 pages and 40% of all."""
    if len(page_lines) < 3:
        return set()
    counts: Counter[str] = Counter()
    for lines in page_lines:
        edge = [ln for ln in lines if ln]
        counts.update({_DIGITS.sub("#", ln) for ln in edge[:1] + edge[-1:]})
    need = max(3, int(0.4 * len(page_lines)))
    return {ln for ln, c in counts.items() if c >= need}


def convert_pdfminer(data: bytes, source: Source, mime: str) -> Document:
    import io

    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    from pdfminer.high_level import extract_text
    from pdfminer.layout import LAParams
    from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfparser import PDFParser, PDFSyntaxError
    from pdfminer.psparser import PSException

    doc = Document(uri=source.uri, mime=mime)
    try:
        pdf = PDFDocument(PDFParser(io.BytesIO(data)))
        doc.meta.update(pdfminer_info(pdf))
        text = extract_text(io.BytesIO(data), laparams=LAParams())
    except PDFPasswordIncorrect as exc:  # neither the user nor the owner password is empty
        raise Encrypted("encrypted PDF: it needs a password to be read") from exc
    except PDFEncryptionError as exc:  # a security handler pdfminer does not know
        raise Encrypted(f"encrypted PDF: {exc}") from exc
    except RecursionError as exc:
        raise HostileInput("PDF nests objects too deeply") from exc
    except Exception as exc:  # pdfminer raises many kinds (PDFSyntaxError, PSException, struct.error...)
        kind = "syntax" if isinstance(exc, (PDFSyntaxError, PSException)) else type(exc).__name__
        raise CorruptFile(f"unreadable PDF ({kind}): {exc}") from exc
    pages = text.split("\f")
    if len(pages) > 1 and not pages[-1].strip():
        pages.pop()  # extract_text ends every page with a form feed, the last one too
    doc.meta["pages"] = str(len(pages))
    fill(doc, pages)
    doc.title = doc.meta.pop("title", "") or _first_line(doc) or source.name
    return doc


def pdfminer_info(pdf: object) -> dict[str, str]:
    from pdfminer.pdftypes import resolve1
    from pdfminer.utils import decode_text

    out: dict[str, str] = {}
    for d in getattr(pdf, "info", []) or []:
        for key, name in META_KEYS.items():
            v = resolve1(d.get(key))
            if isinstance(v, bytes):
                v = decode_text(v)
            if isinstance(v, str) and v.strip():
                out[name] = pdf_date(v.strip()) if name in ("created", "modified") else v.strip()
    return out


def _first_line(doc: Document) -> str:
    for b in doc.blocks:
        if b.boilerplate:
            continue
        line = b.text.strip()
        return line if 3 <= len(line) <= 120 else ""
    return ""
