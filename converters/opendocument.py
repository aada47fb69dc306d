"""OpenDocument (ODT, ODS, ODP, ODG, their templates and flat XML forms) with zipfile and lxml.

content.xml gives headings (``text:h`` with its outline level), paragraphs, lists, tables
(one ``td`` block per non-empty cell; a sheet's name becomes a heading) and slides (the
title frame as a heading, then the other frames and the speaker notes). meta.xml gives the
title, author, dates, subject, keywords and language. Entities are never resolved and no
DTD or network is loaded; member sizes are checked before inflating (``zipcheck``). A file saved
with a password (its manifest marks content.xml or meta.xml encrypted) is Encrypted, not corrupt;
flat XML files cannot be encrypted.
"""

from __future__ import annotations

import logging
import re
import zipfile
from typing import Iterator

from lxml import etree

from .document import Block, Document, Inline
from deskdex.errors import CorruptFile, Encrypted, HostileInput
from .source import Source
from .zipcheck import open_zip, read_member

logger = logging.getLogger(__name__)

NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "xlink": "http://www.w3.org/1999/xlink",
    "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
}
_SPACE = re.compile(r"\s+")
MAX_CELLS = 200_000  # td blocks per document; a sheet of numbers past this adds little to search

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
_META = {"dc:title": "title", "meta:initial-creator": "author", "dc:creator": "modified_by",
         "meta:creation-date": "created", "dc:date": "modified", "dc:subject": "subject",
         "dc:description": "description", "dc:language": "language"}


def q(name: str) -> str:
    prefix, _, local = name.partition(":")
    return f"{{{NS[prefix]}}}{local}"


H, P, LIST, SPAN, A, S, TAB, BR, NOTE, NOTE_BODY = (q("text:" + n) for n in (
    "h", "p", "list", "span", "a", "s", "tab", "line-break", "note", "note-body"))
TABLE, ROW, CELL, COVERED = (q("table:" + n) for n in ("table", "table-row", "table-cell", "covered-table-cell"))
ROW_GROUPS = {q("table:" + n) for n in ("table-header-rows", "table-rows", "table-row-group")}
PAGE, FRAME = q("draw:page"), q("draw:frame")
NOTES = q("presentation:notes")
SKIP = {q(n) for n in ("text:tracked-changes", "text:sequence-decls", "text:variable-decls", "text:user-field-decls",
                       "text:note-citation", "office:forms", "table:named-expressions", "office:annotation-end",
                       "draw:object", "draw:object-ole", "draw:image", "svg:title", "svg:desc",
                       "table:database-ranges", "table:calculation-settings", "text:soft-page-break")}
BOILER = {q("text:table-of-content"), q("text:alphabetical-index"), q("text:illustration-index"),
          q("text:bibliography"), q("text:table-index"), q("text:object-index"), q("text:user-index")}
DEFERRED = {FRAME, q("draw:a"), q("office:annotation"), q("draw:custom-shape"), q("draw:g")}


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    doc = Document(uri=source.uri, mime=mime)
    if data.lstrip()[:5] == b"<?xml" or mime.endswith("-flat-xml"):
        root = _parse(data, "flat OpenDocument")
        meta, body = root.find(q("office:meta")), root.find(q("office:body"))
    else:
        zf = open_zip(data, "OpenDocument file")
        _refuse_encrypted(zf)
        body_root = _parse(read_member(zf, "content.xml", "OpenDocument file"), "content.xml")
        body = body_root.find(q("office:body"))
        meta = None
        if "meta.xml" in zf.namelist():
            meta = _parse(read_member(zf, "meta.xml", "OpenDocument file"), "meta.xml").find(q("office:meta"))
    if body is None:
        raise CorruptFile("OpenDocument file has no office:body")
    if meta is not None:
        doc.meta.update(_metadata(meta))
    _Walker(doc).walk_body(body)
    doc.settle_title(doc.meta.pop("title", ""), source.name)
    return doc


_MANIFEST = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
# The parts read here, and the one part LibreOffice writes when it encrypts the whole package.
_READ = ("content.xml", "meta.xml", "encrypted-package")


def _refuse_encrypted(zf: zipfile.ZipFile) -> None:
    """A document saved with a password keeps its manifest in the clear and says there which parts
    it encrypted (``manifest:encryption-data``, ODF 1.2 part 3, 3.8): content.xml (or styles.xml,
    meta.xml) is then ciphertext, which would fail to parse and read as damage."""
    if "META-INF/manifest.xml" not in zf.NameToInfo:
        return
    try:
        manifest = _parse(read_member(zf, "META-INF/manifest.xml", "OpenDocument file"), "manifest.xml")
    except (CorruptFile, HostileInput):
        return  # the parts themselves say whether they can be read
    for entry in manifest.iterfind(f"{{{_MANIFEST}}}file-entry"):
        path = entry.get(f"{{{_MANIFEST}}}full-path", "")
        if path in _READ and entry.find(f"{{{_MANIFEST}}}encryption-data") is not None:
            raise Encrypted(f"OpenDocument file is encrypted ({path}): it needs a password to be read")


def _parse(data: bytes, what: str) -> etree._Element:
    try:
        return etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        if "depth" in str(exc).lower() or "huge" in str(exc).lower():
            raise HostileInput(f"{what}: {exc}") from exc
        raise CorruptFile(f"{what} is not well-formed XML: {exc}") from exc


def _metadata(meta: etree._Element) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, key in _META.items():
        el = meta.find(q(name))
        text = " ".join((el.text or "").split()) if el is not None else ""
        if text:
            out[key] = text
    if out.get("modified_by") and "author" not in out:
        out["author"] = out.pop("modified_by")
    keywords = [w for w in (" ".join((k.text or "").split()) for k in meta.iterfind(q("meta:keyword"))) if w]
    if keywords:
        out["keywords"] = ", ".join(keywords)
    return out


class _Walker:
    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.cells = 0
        self.boiler = False

    def walk_body(self, body: etree._Element) -> None:
        for kind in body:
            sheets = kind.tag == q("office:spreadsheet")
            for child in kind:
                if sheets and child.tag == TABLE:
                    self.doc.add("h", child.get(q("table:name"), ""), level=2)
                self.block(child, 0)

    def block(self, el: etree._Element, depth: int) -> None:
        tag = el.tag
        if not isinstance(tag, str) or tag in SKIP:
            return
        if tag == H:
            self.para(el, "h", int(el.get(q("text:outline-level"), "1") or 1))
        elif tag == P:
            self.para(el, "li" if depth else "p", depth)
        elif tag == LIST:
            for item in el:
                for child in item:
                    self.block(child, depth + 1)
        elif tag == TABLE:
            self.table(el)
        elif tag == PAGE:
            self.slide(el)
        elif tag in BOILER:
            was, self.boiler = self.boiler, True
            for child in el:
                self.block(child, depth)
            self.boiler = was
        else:  # sections, frames, text boxes, shapes: containers of blocks
            for child in el:
                self.block(child, depth)

    def para(self, el: etree._Element, kind: str, level: int) -> None:
        runs: list[Inline] = []
        deferred: list[etree._Element] = []
        _inline(el, runs, deferred, None, top=True)
        text = "".join(r.text for r in runs)
        if text.strip():
            self.doc.blocks.append(Block(kind, _tidy(runs), min(max(level, 0), 6), self.boiler))
        for d in deferred:  # text boxes and notes anchored in this paragraph come after it
            self.block(d, 0)

    def table(self, el: etree._Element) -> None:
        for row in _rows(el):
            for cell in row:
                if cell.tag != CELL:
                    continue
                if self.cells >= MAX_CELLS:
                    self.doc.meta["truncated"] = f"over {MAX_CELLS} table cells"
                    return
                text = " ".join(_plain(p) for p in cell.iter(P, H))
                if text.strip():
                    self.cells += 1
                    self.doc.add("td", " ".join(text.split()), boilerplate=self.boiler)

    def slide(self, page: etree._Element) -> None:
        title_class = q("presentation:class")
        frames = list(page)
        titles = [f for f in frames if f.get(title_class) == "title"]
        for f in titles:
            self.doc.add("h", " ".join(_plain(p) for p in f.iter(P, H)).strip(), level=2)
        for child in frames:
            if child not in titles:
                self.block(child, 0)


def _rows(el: etree._Element) -> Iterator[etree._Element]:
    for child in el:
        if child.tag == ROW:
            yield child
        elif child.tag in ROW_GROUPS:
            yield from _rows(child)


def _inline(el: etree._Element, runs: list[Inline], deferred: list[etree._Element], href: str | None,
            top: bool = False) -> None:
    if not top:
        tag = el.tag
        if tag == S:
            _add(runs, " ", href)
        elif tag in (TAB, BR):
            _add(runs, " ", href)
        elif tag == NOTE:
            deferred.extend(el.iterfind(NOTE_BODY))
            _add(runs, el.tail, href)
            return
        elif tag in DEFERRED:
            deferred.append(el)
            _add(runs, el.tail, href)
            return
        elif tag in SKIP:
            _add(runs, el.tail, href)
            return
        elif tag == A:
            href = el.get(f"{{{NS['xlink']}}}href") or href
    _add(runs, el.text, href)
    for child in el:
        if isinstance(child.tag, str):
            _inline(child, runs, deferred, href)
        else:  # comments, processing instructions, unresolved entities: their tails are text
            _add(runs, child.tail, href)
    if not top:
        _add(runs, el.tail, None if el.tag == A else href)


def _add(runs: list[Inline], text: str | None, href: str | None) -> None:
    if not text:
        return
    if runs and runs[-1].href == href:
        runs[-1].text += text
    else:
        runs.append(Inline(text, "", href))


def _tidy(runs: list[Inline]) -> list[Inline]:
    """Whitespace collapsed inside runs, trimmed at the ends of the block."""
    for r in runs:
        r.text = _SPACE.sub(" ", r.text)
    runs[0].text = runs[0].text.lstrip()
    runs[-1].text = runs[-1].text.rstrip()
    return [r for r in runs if r.text]


def _plain(el: etree._Element) -> str:
    runs: list[Inline] = []
    _inline(el, runs, [], None, top=True)
    return " ".join("".join(r.text for r in runs).split())
