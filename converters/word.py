"""DOCX with python-docx: headings by paragraph style, paragraphs, lists, tables, core properties.

The body is walked element by element rather than with python-docx's ``iter_inner_content``, which
returns only direct ``w:p`` and ``w:tbl`` children: content controls (``w:sdt``, their content in
``w:sdtContent``, nested at any depth) and custom XML elements wrap paragraphs, tables, rows, cells
and runs, and Word documents made from forms and templates keep much or all of their text there.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import TYPE_CHECKING, Iterator

from .document import Block, Document, Inline
from deskdex.errors import CorruptFile
from .source import Source
from .zipcheck import refuse_encrypted_office

if TYPE_CHECKING:  # python-docx is imported when a DOCX is converted
    from docx.document import Document as DocxDocument
    from docx.oxml.table import CT_Tbl
    from docx.oxml.text.paragraph import CT_P
    from docx.text.hyperlink import Hyperlink
    from docx.text.paragraph import Paragraph
    from docx.text.run import Run
    from docx.types import ProvidesStoryPart
    from lxml import etree

_HEADING = re.compile(r"^(?:heading|überschrift|titre|título|titolo)\s*(\d)", re.I)


def convert(source: Source, mime: str) -> Document:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    data = source.read()
    try:
        d = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        refuse_encrypted_office(data, "DOCX")
        raise CorruptFile(f"not a readable DOCX: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # lxml and python-docx raise many kinds on broken parts
        return _salvaged(source, mime, data, f"{type(exc).__name__}: {exc}")
    doc = Document(uri=source.uri, mime=mime)
    props = d.core_properties
    for name in ("author", "subject", "keywords", "language", "category", "comments"):
        value = getattr(props, name, None)
        if value:
            doc.meta[name] = str(value)
    for name in ("created", "modified"):
        value = getattr(props, name, None)
        if value:
            doc.meta[name] = value.isoformat()
    _body(d, doc)
    doc.settle_title(props.title or "", source.name)
    return doc


def _body(d: DocxDocument, doc: Document) -> None:
    from docx.oxml.table import CT_Tbl
    from docx.oxml.text.paragraph import CT_P
    from docx.text.paragraph import Paragraph

    # The Document itself is the parent proxies need: python-docx asks a parent only for its part.
    for el in _unwrapped(d.element.body):
        if isinstance(el, CT_P):
            _paragraph(el, Paragraph(el, d), doc)
        elif isinstance(el, CT_Tbl):
            for text in _cells(el, d):
                doc.add("td", text)


def _unwrapped(parent: etree._Element) -> Iterator[etree._Element]:
    """``parent``'s children in document order, a content control (``w:sdt``) or custom XML element
    replaced by what it wraps, at any depth."""
    for child in parent.iterchildren():
        if child.tag == _SDT:
            content = child.find(_SDT_CONTENT)
            if content is not None:
                yield from _unwrapped(content)
        elif child.tag == _CUSTOM_XML:
            yield from _unwrapped(child)
        else:
            yield child


def _cells(tbl: CT_Tbl, story: ProvidesStoryPart) -> Iterator[str]:
    """The text of each cell, row by row. A cell spanning columns is one ``w:tc``; the cells below
    the first of a vertical merge are empty ones. A table inside a cell adds its cells' lines."""
    from docx.oxml.table import CT_Row, CT_Tbl, CT_Tc
    from docx.oxml.text.paragraph import CT_P

    for tr in _unwrapped(tbl):
        if not isinstance(tr, CT_Row):
            continue
        for tc in _unwrapped(tr):
            if not isinstance(tc, CT_Tc):
                continue
            lines: list[str] = []
            for el in _unwrapped(tc):
                if isinstance(el, CT_P):
                    lines.append("".join(item.text for item in _inline(el, story)))
                elif isinstance(el, CT_Tbl):
                    lines.extend(_cells(el, story))
            yield "\n".join(lines).strip()


def _inline(p: CT_P, story: ProvidesStoryPart) -> Iterator[Run | Hyperlink]:
    """The runs and hyperlinks of paragraph element ``p``, those inside inline content controls
    included. A run or hyperlink asks its parent only for the story part (styles, link targets)."""
    from docx.oxml.text.hyperlink import CT_Hyperlink
    from docx.oxml.text.run import CT_R
    from docx.text.hyperlink import Hyperlink
    from docx.text.run import Run

    for el in _unwrapped(p):
        if isinstance(el, CT_R):
            yield Run(el, story)
        elif isinstance(el, CT_Hyperlink):
            yield Hyperlink(el, story)


def _paragraph(el: CT_P, p: Paragraph, doc: Document) -> None:
    """Paragraph ``p`` of element ``el`` (the caller holds both: python-docx's element of a
    Paragraph has no public name)."""
    from docx.text.hyperlink import Hyperlink

    style = (p.style.name if p.style is not None else "") or ""
    runs: list[Inline] = []
    for item in _inline(el, p):
        if isinstance(item, Hyperlink):
            if item.text:
                runs.append(Inline(item.text, "", item.url or item.address or ""))
        elif item.text:
            runs.append(Inline(item.text, "strong" if item.bold else "em" if item.italic else ""))
    text = "".join(r.text for r in runs).strip()
    if not text:
        return
    m = _HEADING.match(style)
    if m or style.lower() == "title":
        doc.blocks.append(Block("h", [Inline(text)], level=int(m.group(1)) if m else 1))
    elif "list" in style.lower():
        doc.blocks.append(Block("li", runs, level=1))
    else:
        doc.blocks.append(Block("p", runs))


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_SDT, _SDT_CONTENT, _CUSTOM_XML = _W + "sdt", _W + "sdtContent", _W + "customXml"


def _salvaged(source: Source, mime: str, data: bytes, why: str) -> Document:
    """A DOCX whose XML python-docx rejects: the paragraphs' text read by a recovering parser
    from word/document.xml (never resolving entities), the document marked as salvaged."""
    from lxml import etree

    from .zipcheck import open_zip, read_member

    xml = read_member(open_zip(data, "DOCX"), "word/document.xml", "DOCX")
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, load_dtd=False)
    try:
        root = etree.fromstring(xml, parser)
    except etree.XMLSyntaxError as exc:
        raise CorruptFile(f"not a readable DOCX: {why}") from exc
    if root is None:
        raise CorruptFile(f"not a readable DOCX: {why}")
    doc = Document(uri=source.uri, mime=mime, title=source.name, meta={"salvaged": why[:200]})
    for p in root.iter(_W + "p"):
        doc.add("p", "".join(t.text or "" for t in p.iter(_W + "t")).strip())
    if not doc.blocks:
        raise CorruptFile(f"not a readable DOCX: {why}")
    return doc
