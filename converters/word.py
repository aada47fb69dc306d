"""DOCX with python-docx: headings by paragraph style, paragraphs, lists, tables, core properties."""

from __future__ import annotations

import io
import re
import zipfile
from typing import TYPE_CHECKING

from .document import Block, Document, Inline
from deskdex.errors import CorruptFile
from .source import Source
from .zipcheck import refuse_encrypted_office

if TYPE_CHECKING:  # python-docx is imported when a DOCX is converted
    from docx.document import Document as DocxDocument
    from docx.text.paragraph import Paragraph

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
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for item in d.iter_inner_content():
        if isinstance(item, Paragraph):
            _paragraph(item, doc)
        elif isinstance(item, Table):
            for row in item.rows:
                seen: set[int] = set()
                for cell in row.cells:
                    if id(cell._tc) in seen:  # merged cells repeat
                        continue
                    seen.add(id(cell._tc))
                    doc.add("td", cell.text.strip())


def _paragraph(p: Paragraph, doc: Document) -> None:
    from docx.text.hyperlink import Hyperlink

    style = (p.style.name if p.style is not None else "") or ""
    runs: list[Inline] = []
    for item in p.iter_inner_content():
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
