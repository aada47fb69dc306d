"""AbiWord documents and templates (``.abw``, ``.awt``, and gzip'd ``.zabw``) with lxml.

The ``metadata`` element's ``m`` entries give title (``dc.title``), author (``dc.creator``),
subject, description, keywords, language, publisher and dates. Paragraphs (``p``) keep their
inline runs (``c`` spans, ``a`` links); a paragraph whose style is a heading ("Heading 2",
"Numbered Heading 1", "Chapter Heading") is a heading of that level, a list paragraph a list item,
one in a table cell a ``td``; sections of page headers and footers are boilerplate. Fields,
images and embedded data are skipped. Parsed by ``xmlsafe``; a ``.zabw`` is inflated under the
member limit and expansion ratio first (``archive.compressed``).
"""

from __future__ import annotations

import logging
import re

from lxml import etree

from .archive import compressed
from .document import Block, Document, Inline, clean
from deskdex.errors import CorruptFile
from .source import Source
from .xmlsafe import local, parse

logger = logging.getLogger(__name__)

XLINK = "{http://www.w3.org/1999/xlink}href"
_META = {"dc.title": "title", "dc.creator": "author", "dc.subject": "subject", "dc.description": "description",
         "abiword.keywords": "keywords", "dc.language": "language", "dc.publisher": "publisher",
         "dc.contributor": "contributor", "dc.date": "created", "abiword.date_last_changed": "modified"}
_HEADING = re.compile(r"(?:^|\s)heading(?:\s+(\d))?$|^(chapter|section)\s+heading$", re.I)
_SKIP = {"field", "image", "data", "styles", "lists", "pagesize", "metadata", "history", "revisions",
         "ignoredwords", "rdf", "math", "embed", "bookmark"}
_BOILER_SECTIONS = ("header", "footer")
_SPACE = re.compile(r"\s+")


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    if data.startswith(b"\x1f\x8b"):  # .zabw
        data = compressed(source, "application/gzip").read()
    root = parse(data, "AbiWord document")
    if local(root.tag) != "abiword":
        raise CorruptFile(f"not an AbiWord document (root element {local(root.tag)!r})")
    doc = Document(uri=source.uri, mime=mime)
    for child in root:
        name = local(child.tag)
        if name == "metadata":
            doc.meta.update(_metadata(child))
        elif name == "section":
            boiler = any((child.get("type") or "").startswith(b) for b in _BOILER_SECTIONS)
            _blocks(doc, child, boiler, False)
    if root.get("template") == "true":
        doc.meta["template"] = "yes"
    doc.settle_title(doc.meta.pop("title", ""), source.name)
    return doc


def _metadata(el: etree._Element) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in el:
        key = _META.get(m.get("key") or "")
        value = " ".join("".join(t for t in m.itertext() if isinstance(t, str)).split())
        if key and value and key not in out:
            out[key] = value
    return out


def _blocks(doc: Document, el: etree._Element, boiler: bool, cell: bool) -> None:
    """Paragraphs under ``el`` in order (sections, tables, frames, footnotes hold paragraphs)."""
    for child in el:
        name = local(child.tag)
        if not name or name in _SKIP:
            continue
        if name == "p":
            kind, level = _kind(child, cell)
            runs: list[Inline] = []
            _inline(child, runs, None)
            text = "".join(r.text for r in runs)
            if text.strip():
                runs[0].text = runs[0].text.lstrip()
                runs[-1].text = runs[-1].text.rstrip()
                doc.blocks.append(Block(kind, [r for r in runs if r.text], level, boiler))
        else:  # table, cell, frame, foot, endnote, toc, textbox...
            _blocks(doc, child, boiler, cell or name == "cell")


def _kind(p: etree._Element, cell: bool) -> tuple[str, int]:
    style = (p.get("style") or "").strip()
    if cell:
        return "td", 0
    if m := _HEADING.search(style):
        return "h", int(m.group(1)) if m.group(1) else (1 if (m.group(2) or "").lower() == "chapter" else 2)
    if (p.get("listid") or "0") != "0" or "list" in style.lower():
        return "li", int(p.get("level") or 1) if (p.get("level") or "").isdigit() else 1
    return "p", 0


def _inline(el: etree._Element, runs: list[Inline], href: str | None) -> None:
    _add(runs, el.text, href)
    for child in el:
        name = local(child.tag)
        if name == "br" or name == "cbr" or name == "pbr":
            _add(runs, " ", href)
        elif name and name not in _SKIP:
            _inline(child, runs, child.get(XLINK) if name == "a" else href)
        _add(runs, child.tail, href)


def _add(runs: list[Inline], text: str | None, href: str | None) -> None:
    if not text:
        return
    text = _SPACE.sub(" ", clean(text))
    if runs and runs[-1].href == href:
        runs[-1].text = (runs[-1].text + text).replace("  ", " ")
    else:
        runs.append(Inline(text, "", href))
