"""Gnumeric workbooks (``.gnumeric``: gzip'd XML, or the XML itself) with lxml.

Each sheet's name is a heading and its cells ``td`` blocks, row by row (``sheets.emit_sheets``,
shared with XLSX and XLS: the same cell cap, the same end of a sheet after a long run of empty
rows). Every cell with content is text, whatever its ValueType, merged or not (a merged region's
cells are ordinary cells in the file): a formula as written (``="Total "&A1``: the file keeps no
cached result, and its strings and names are the words a user remembers); a cell repeating a
shared expression (``ExprID``) holds nothing of its own. Cell comments (``CellComment``'s ``Text``
attribute, which holds the plain text of a rich-text comment too; ``TextFormat`` only styles it)
follow their sheet's cells. Title, author, subject, keywords and dates come from the embedded ODF metadata
(``office:document-meta``) or, in older files, the ``gnm:Summary`` items. The file is inflated
under the member limit and expansion ratio (``archive.compressed``) and parsed by ``xmlsafe``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from lxml import etree

from .archive import compressed
from .document import Document
from deskdex.errors import CorruptFile
from .sheets import emit_sheets
from .source import Source
from .xmlsafe import local, parse, text_of

logger = logging.getLogger(__name__)

# ODF metadata elements by local name (dc:title, meta:initial-creator...), and the old Summary's items.
_ODF_META = {"title": "title", "initial-creator": "author", "creator": "modified_by", "subject": "subject",
             "description": "description", "creation-date": "created", "date": "modified", "language": "language"}
_SUMMARY = {"title": "title", "author": "author", "category": "category", "keywords": "keywords",
            "comments": "description", "company": "company", "manager": "manager"}


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    if data.startswith(b"\x1f\x8b"):
        data = compressed(source, "application/gzip").read()
    root = parse(data, "Gnumeric workbook")
    if local(root.tag) != "Workbook":
        raise CorruptFile(f"not a Gnumeric workbook (root element {local(root.tag)!r})")
    doc = Document(uri=source.uri, mime=mime)
    doc.meta.update(_metadata(root))
    sheets = _child(root, "Sheets")
    if sheets is not None:
        emit_sheets(doc, ((text_of(_child(s, "Name")), _rows(s)) for s in sheets if local(s.tag) == "Sheet"))
    if doc.meta.get("modified_by") and "author" not in doc.meta:
        doc.meta["author"] = doc.meta.pop("modified_by")
    doc.title = doc.meta.pop("title", "") or source.name
    return doc


def _child(el: etree._Element, name: str) -> etree._Element | None:
    return next((c for c in el if local(c.tag) == name), None)


def _metadata(root: etree._Element) -> dict[str, str]:
    out: dict[str, str] = {}
    meta = _child(root, "document-meta")
    office = _child(meta, "meta") if meta is not None else None
    if office is not None:
        keywords = []
        for el in office:
            name = local(el.tag)
            if name == "keyword" and (word := text_of(el)):
                keywords.append(word)
            elif name in _ODF_META and (value := text_of(el)):
                out.setdefault(_ODF_META[name], value)
        if keywords:
            out["keywords"] = ", ".join(keywords)
    summary = _child(root, "Summary")
    for item in summary if summary is not None else ():
        key = _SUMMARY.get(text_of(_child(item, "name")).lower())
        value = next((text_of(c) for c in item if local(c.tag).startswith("val-")), "")
        if key and value:
            out.setdefault(key, value)
    return out


def _rows(sheet: etree._Element) -> Iterator[Sequence[object]]:
    """The sheet's cell texts row by row (cells sorted: writers need not keep them in order), then
    each cell comment as a row of its own."""
    cells = _child(sheet, "Cells")
    found: list[tuple[int, int, str]] = []
    for cell in cells if cells is not None else ():
        if local(cell.tag) != "Cell":
            continue
        content = _child(cell, "Content")  # the old format: the value or formula in a child
        text = (content.text if content is not None else cell.text) or ""
        if not text.strip():
            continue  # empty, or a later cell of a shared expression (its ExprID names the first)
        try:
            found.append((int(cell.get("Row", "0")), int(cell.get("Col", "0")), text))
        except ValueError:
            continue
    found.sort(key=lambda c: (c[0], c[1]))
    row: list[str] = []
    current = None
    for r, _col, text in found:
        if current is not None and r != current:
            yield row
            row = []
        current = r
        row.append(text)
    if row:
        yield row
    objects = _child(sheet, "Objects")
    for obj in objects if objects is not None else ():
        if local(obj.tag) == "CellComment" and (comment := obj.get("Text") or text_of(obj)):
            yield [comment]  # text_of: a writer that put the text in the element, not the attribute
