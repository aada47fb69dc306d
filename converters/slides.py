"""PowerPoint (PPTX, PPTM, PPSX, POTX) with python-pptx: slide titles as headings, text, tables, notes.

Each slide's title becomes a level-2 heading; other text frames give paragraphs (indented
paragraphs become list items at their level), tables give one ``td`` per non-empty cell,
group shapes are walked, and the speaker notes follow the slide. Core properties give the
title, author, subject, keywords, language and dates.
"""

from __future__ import annotations

import io
import logging
import warnings
import zipfile
from typing import TYPE_CHECKING

from .document import Block, Document, Inline
from deskdex.errors import CorruptFile
from .source import Source
from .zipcheck import open_zip

if TYPE_CHECKING:  # python-pptx is imported when a presentation is converted
    from pptx.shapes.base import BaseShape
    from pptx.slide import Slide
    from pptx.text.text import TextFrame

logger = logging.getLogger(__name__)

_MAX_DEPTH = 20  # group shapes inside group shapes


def convert(source: Source, mime: str) -> Document:
    from pptx import Presentation

    data = source.read()
    zf = open_zip(data, "PowerPoint file")  # refuses bombs before python-pptx inflates anything
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                prs = Presentation(io.BytesIO(data))
            except ValueError as exc:
                if "not a PowerPoint file" not in str(exc):
                    raise
                prs = Presentation(io.BytesIO(_as_presentation(zf)))
    except Exception as exc:  # python-pptx raises KeyError, ValueError, lxml and zip errors on bad parts
        raise CorruptFile(f"not a readable PowerPoint file: {type(exc).__name__}: {exc}") from exc
    doc = Document(uri=source.uri, mime=mime)
    doc.meta.update(core_properties(prs.core_properties))
    try:
        for n, slide in enumerate(prs.slides, 1):
            _slide(doc, slide, n)
    except (KeyError, ValueError, AttributeError) as exc:
        raise CorruptFile(f"broken slide in PowerPoint file: {type(exc).__name__}: {exc}") from exc
    doc.settle_title(doc.meta.pop("title", ""), source.name)
    return doc


_OTHER_MAINS = (b"presentationml.slideshow.main+xml", b"presentationml.template.main+xml")


def _as_presentation(zf: zipfile.ZipFile) -> bytes:
    """A slide show or template (PPSX, POTX) relabelled as a presentation, which python-pptx opens."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for info in zf.infolist():
            data = zf.read(info)
            if info.filename == "[Content_Types].xml":
                for main in _OTHER_MAINS:
                    data = data.replace(main, b"presentationml.presentation.main+xml")
            z.writestr(info, data)
    return out.getvalue()


def core_properties(props: object) -> dict[str, str]:
    """Title, author, dates... from OOXML core properties (python-pptx and openpyxl name them alike)."""
    out: dict[str, str] = {}
    names = {"title": "title", "author": "author", "creator": "author", "subject": "subject",
             "keywords": "keywords", "language": "language", "category": "category",
             "comments": "comments", "description": "comments", "last_modified_by": "modified_by",
             "lastModifiedBy": "modified_by"}
    for attr, key in names.items():
        value = getattr(props, attr, None)
        if isinstance(value, str) and value.strip() and key not in out:
            out[key] = " ".join(value.split())
    for attr in ("created", "modified"):
        value = getattr(props, attr, None)
        if value is not None and hasattr(value, "isoformat"):
            out[attr] = value.isoformat()
    return out


def _slide(doc: Document, slide: Slide, n: int) -> None:
    title_shape = slide.shapes.title
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None and title_shape.has_text_frame else ""
    doc.add("h", title, level=2)
    for shape in slide.shapes:
        if title_shape is not None and shape.shape_id == title_shape.shape_id:
            continue
        _shape(doc, shape, 0)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        if frame is not None:
            _frame(doc, frame, boilerplate=False)


def _shape(doc: Document, shape: BaseShape, depth: int) -> None:
    """Shapes are told apart by what they have (shape_type, has_table, has_text_frame), as
    python-pptx documents it, so the attribute of each kind is unknown to BaseShape's type."""
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if depth > _MAX_DEPTH:
        return
    if getattr(shape, "shape_type", None) == MSO_SHAPE_TYPE.GROUP:
        for child in shape.shapes:  # type: ignore[attr-defined]
            _shape(doc, child, depth + 1)
        return
    if getattr(shape, "has_table", False):
        for row in shape.table.rows:  # type: ignore[attr-defined]
            for cell in row.cells:
                if not cell.is_spanned:
                    doc.add("td", " ".join(cell.text.split()))
        return
    if getattr(shape, "has_text_frame", False):
        _frame(doc, shape.text_frame, boilerplate=False)  # type: ignore[attr-defined]


def _frame(doc: Document, frame: TextFrame, boilerplate: bool) -> None:
    for para in frame.paragraphs:
        runs: list[Inline] = []
        for run in para.runs:
            if not run.text:
                continue
            address = run.hyperlink.address if run.hyperlink is not None else None
            style = "strong" if run.font.bold else "em" if run.font.italic else ""
            runs.append(Inline(run.text, style, address or None))
        text = "".join(r.text for r in runs)
        if not text.strip():
            continue
        runs[0].text = runs[0].text.lstrip()
        runs[-1].text = runs[-1].text.rstrip()
        if para.level > 0:
            doc.blocks.append(Block("li", runs, level=min(para.level, 6), boilerplate=boilerplate))
        else:
            doc.blocks.append(Block("p", runs, boilerplate=boilerplate))
