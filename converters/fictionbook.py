"""FictionBook 2 (``.fb2``, and ``.fb2.zip``: a zip holding one book) with lxml.

``description/title-info`` gives the title (``book-title``), authors (first, middle and last
name, or nickname), genres, language, date, keywords, series and the annotation; the bodies give
the text: a ``title`` is a heading one level deeper than its section, paragraphs, poem lines,
epigraphs and citations (quotes), table cells, and the notes body after the main one. Emphasis,
strong text, code and links stay inline runs. Images (``image``) are skipped wherever they stand,
their text around them kept; the embedded images themselves (``binary``, base64) are emptied before
parsing: a cover scan over 7.5 MB is a text node past libxml2's 10 MB limit, which would refuse
the whole book as hostile. Parsed by ``xmlsafe`` (no DTD, entity or network).
"""

from __future__ import annotations

import logging
import re

from lxml import etree

from .document import Block, Document, Inline, clean
from deskdex.errors import CorruptFile
from .source import Source
from .xmlsafe import local, parse, text_of
from .zipcheck import open_zip, read_member

logger = logging.getLogger(__name__)

FB2 = "http://www.gribuser.ru/xml/fictionbook/2.0"
XLINK = "{http://www.w3.org/1999/xlink}href"
_STYLES = {"emphasis": "em", "strong": "strong", "code": "code"}
_QUOTES = {"epigraph", "cite", "annotation"}
_SKIP = {"binary", "image", "empty-line"}
MAX_DEPTH = 100  # sections nested deeper are read as one level (a hostile book nests for ever)
# A <binary> element and its base64 text (which has no "<"), in any ASCII-compatible encoding.
_BINARY = re.compile(rb"(<(?:[\w.-]+:)?binary(?=[\s>])[^>]*>)[^<]*(</(?:[\w.-]+:)?binary\s*>)")


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    if data.startswith(b"PK\x03\x04"):
        data = _from_zip(data)
    root = parse(_BINARY.sub(rb"\1\2", data), "FictionBook book")
    if local(root.tag) != "FictionBook":
        raise CorruptFile(f"not a FictionBook book (root element {local(root.tag)!r})")
    doc = Document(uri=source.uri, mime=mime)
    description = _child(root, "description")
    if description is not None:
        doc.meta.update(_metadata(description))
    main = 0
    for n, body in enumerate(c for c in root if local(c.tag) == "body"):
        _Walker(doc).section(body, 0)
        if n == 0:
            main = len(doc.blocks)
    # A book without a book-title is named by its main body's first heading, never by a note's.
    heading = next((b.text for b in doc.blocks[:main] if b.kind == "h"), "")
    doc.title = doc.meta.pop("title", "") or heading or source.name
    return doc


def _from_zip(data: bytes) -> bytes:
    zf = open_zip(data, "zipped FictionBook book")
    books = [n for n in zf.namelist() if n.lower().endswith(".fb2")]
    if not books:
        raise CorruptFile("zipped FictionBook book holds no .fb2 file")
    return read_member(zf, books[0], "zipped FictionBook book")


def _child(el: etree._Element, name: str) -> etree._Element | None:
    return next((c for c in el if local(c.tag) == name), None)


def _children(el: etree._Element | None, name: str) -> list[etree._Element]:
    return [] if el is None else [c for c in el if local(c.tag) == name]


def _metadata(description: etree._Element) -> dict[str, str]:
    out: dict[str, str] = {}
    info = _child(description, "title-info")
    if info is not None:
        fields = {"title": text_of(_child(info, "book-title")),
                  "author": "; ".join(a for a in (_person(p) for p in _children(info, "author")) if a),
                  "genre": ", ".join(g for g in (text_of(e) for e in _children(info, "genre")) if g),
                  "language": text_of(_child(info, "lang")),
                  "keywords": text_of(_child(info, "keywords")),
                  "description": " ".join(t for a in _children(info, "annotation") for t in map(text_of, a) if t)}
        date = _child(info, "date")
        if date is not None:
            fields["created"] = (date.get("value") or "").strip() or text_of(date)
        series = _child(info, "sequence")
        if series is not None and (name := (series.get("name") or "").strip()):
            fields["series"] = f"{name} {series.get('number', '')}".strip()
        translators = [t for t in (_person(p) for p in _children(info, "translator")) if t]
        if translators:
            fields["translator"] = "; ".join(translators)
        out.update({k: v for k, v in fields.items() if v})
    publish = _child(description, "publish-info")
    if publish is not None and (publisher := text_of(_child(publish, "publisher"))):
        out["publisher"] = publisher
    return out


def _person(el: etree._Element) -> str:
    names = [text_of(_child(el, n)) for n in ("first-name", "middle-name", "last-name")]
    return " ".join(n for n in names if n) or text_of(_child(el, "nickname"))


class _Walker:
    def __init__(self, doc: Document) -> None:
        self.doc = doc

    def section(self, el: etree._Element, depth: int) -> None:
        """A body or a section: its title one level below its parent's, then its content."""
        level = min(depth + 1, 6)
        for child in el:
            name = local(child.tag)
            if name == "title":
                self.paragraphs(child, "h", level)
            elif name == "subtitle":
                self.para(child, "h", min(level + 1, 6))
            elif name == "section":
                self.section(child, min(depth + 1, MAX_DEPTH))
            else:
                self.block(child, "p")

    def block(self, el: etree._Element, kind: str) -> None:
        name = local(el.tag)
        if not name or name in _SKIP:
            return
        if name in ("p", "v", "text-author", "subtitle"):
            self.para(el, kind)
        elif name in ("td", "th"):
            self.para(el, "td")
        elif name == "title":  # a poem's or stanza's title
            self.paragraphs(el, kind, 0)
        elif name == "section":
            self.section(el, MAX_DEPTH)
        else:  # poem, stanza, epigraph, cite, table, tr: containers of blocks
            inner = "quote" if name in _QUOTES else kind
            for child in el:
                self.block(child, inner)

    def paragraphs(self, title: etree._Element, kind: str, level: int) -> None:
        """A title of several paragraphs is one heading."""
        runs: list[Inline] = []
        for p in title:
            if local(p.tag) == "p":
                if runs:
                    runs.append(Inline(" "))
                _inline(p, runs, "", None)
        self.emit(runs, kind, level)

    def para(self, el: etree._Element, kind: str, level: int = 0) -> None:
        runs: list[Inline] = []
        _inline(el, runs, "", None)
        self.emit(runs, kind, level)

    def emit(self, runs: list[Inline], kind: str, level: int) -> None:
        for r in runs:
            r.text = _squash(clean(r.text))
        runs = [r for r in runs if r.text]
        if runs and "".join(r.text for r in runs).strip():
            runs[0].text = runs[0].text.lstrip()
            runs[-1].text = runs[-1].text.rstrip()
            self.doc.blocks.append(Block(kind, [r for r in runs if r.text], level))


def _squash(text: str) -> str:
    """Whitespace collapsed, a space kept at either end (it separates this run from its neighbours)."""
    inner = " ".join(text.split())
    if not inner:
        return " "
    return (" " if text[:1].isspace() else "") + inner + (" " if text[-1:].isspace() else "")


def _inline(el: etree._Element, runs: list[Inline], style: str, href: str | None) -> None:
    _add(runs, el.text, style, href)
    for child in el:
        name = local(child.tag)
        if name and name not in _SKIP:
            link = child.get(XLINK) if name == "a" else None
            _inline(child, runs, _STYLES.get(name, style), link if link and not link.startswith("#") else href)
        _add(runs, child.tail, style, href)


def _add(runs: list[Inline], text: str | None, style: str, href: str | None) -> None:
    if not text:
        return
    if runs and runs[-1].style == style and runs[-1].href == href:
        runs[-1].text += text
    else:
        runs.append(Inline(text, style, href))
