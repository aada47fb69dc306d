"""EPUB (2 and 3) as one Document: OPF metadata, then the chapters in spine order.

The package file is found through META-INF/container.xml; its Dublin Core metadata gives
title, authors, language, date, subject and publisher. Each XHTML chapter goes through the
HTML converter (``converters.html.from_text``), so headings, lists, tables, links and
boilerplate (``nav``) are read the same way as on the web. Chapters encrypted with DRM are
refused (Encrypted); obfuscated fonts are not a reason to refuse a book.
"""

from __future__ import annotations

import logging
import posixpath
import re
import zipfile
from urllib.parse import unquote

from lxml import etree

from .document import Document
from deskdex.errors import CorruptFile, Encrypted
from . import content
from .html import from_text
from .source import Source
from .textcodec import decode
from .zipcheck import open_zip, read_member

logger = logging.getLogger(__name__)

NS = {"c": "urn:oasis:names:tc:opendocument:xmlns:container", "opf": "http://www.idpf.org/2007/opf",
      "dc": "http://purl.org/dc/elements/1.1/", "enc": "http://www.w3.org/2001/04/xmlenc#"}
HTML_TYPES = {"application/xhtml+xml", "text/html", "application/xml", "text/x-oeb1-document"}
MAX_CHAPTERS = 5000

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*encoding=["']([A-Za-z0-9_.:-]+)""")
_DC = {"title": "title", "creator": "author", "language": "language", "date": "created",
       "subject": "subject", "publisher": "publisher", "description": "description"}


def convert(source: Source, mime: str) -> Document:
    zf = open_zip(source.read(), "EPUB")
    opf_path = _package_path(zf)
    opf = _xml(read_member(zf, opf_path, "EPUB"), opf_path)
    doc = Document(uri=source.uri, mime=mime)
    doc.meta.update(_metadata(opf))
    chapters = _spine(opf, posixpath.dirname(opf_path))
    encrypted = _encrypted(zf)
    for path in chapters[:MAX_CHAPTERS]:
        if path in encrypted:
            raise Encrypted(f"encrypted EPUB (DRM): {path} cannot be read")
        if path not in zf.NameToInfo:
            logger.debug("EPUB %s: spine item %s is missing", source.uri, path)
            continue
        data = read_member(zf, path, "EPUB")
        m = _ENCODING.match(data[:200])
        text, _ = decode(data, m.group(1).decode("ascii") if m else None)
        if not text.strip():
            continue
        # A chapter is all text: the DOM method only flags its navigation, at a third of the library's cost.
        chapter = from_text(text, f"{source.uri}#{path}", "application/xhtml+xml", main_content=content.FOR_WHOLE_TEXTS)
        doc.blocks.extend(chapter.blocks)
    if len(chapters) > MAX_CHAPTERS:
        doc.meta["truncated"] = f"over {MAX_CHAPTERS} chapters"
    doc.settle_title(doc.meta.pop("title", ""), source.name)
    return doc


def _xml(data: bytes, what: str) -> etree._Element:
    try:
        return etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise CorruptFile(f"EPUB {what} is not well-formed XML: {exc}") from exc


def _package_path(zf: zipfile.ZipFile) -> str:
    if "META-INF/container.xml" in zf.NameToInfo:
        container = _xml(read_member(zf, "META-INF/container.xml", "EPUB"), "container.xml")
        for rootfile in container.iterfind(".//c:rootfile", NS):
            path = rootfile.get("full-path", "")
            if path.endswith(".opf") or rootfile.get("media-type") == "application/oebps-package+xml":
                return path
    # Some books lack the container (or name the package oddly); any .opf will do.
    opf = next((n for n in zf.namelist() if n.lower().endswith(".opf")), None)
    if opf is None:
        raise CorruptFile("EPUB has no package (.opf) file")
    return opf


def _metadata(opf: etree._Element) -> dict[str, str]:
    out: dict[str, str] = {}
    md = opf.find("opf:metadata", NS)
    if md is None:
        return out
    for tag, key in _DC.items():
        values = [" ".join("".join(el.itertext()).split()) for el in md.iterfind(f".//dc:{tag}", NS)]
        values = [v for v in values if v]
        if values:
            out[key] = values[0] if key in ("title", "created", "language", "description") else "; ".join(values)
    for meta in md.iterfind(".//opf:meta", NS):
        if meta.get("property") == "dcterms:modified" and (modified := (meta.text or "").strip()):
            out["modified"] = modified
    if "description" in out:  # often HTML in a string
        out["description"] = re.sub(r"<[^>]+>", " ", out["description"]).strip()
    return out


def _spine(opf: etree._Element, base: str) -> list[str]:
    manifest = {item.get("id"): item for item in opf.iterfind(".//opf:manifest/opf:item", NS)}
    paths: list[str] = []
    for ref in opf.iterfind(".//opf:spine/opf:itemref", NS):
        item = manifest.get(ref.get("idref"))
        if item is None or (item.get("media-type") or "").split(";")[0].strip() not in HTML_TYPES:
            continue
        href = unquote((item.get("href") or "").split("#")[0])
        if href:
            paths.append(posixpath.normpath(posixpath.join(base, href)).lstrip("/"))
    return paths


def _encrypted(zf: zipfile.ZipFile) -> set[str]:
    """Members listed in META-INF/encryption.xml (fonts are usually there too, merely obfuscated)."""
    if "META-INF/encryption.xml" not in zf.NameToInfo:
        return set()
    try:
        root = _xml(read_member(zf, "META-INF/encryption.xml", "EPUB"), "encryption.xml")
    except CorruptFile:
        return set()
    return {unquote(ref.get("URI", "")).lstrip("/") for ref in root.iterfind(".//enc:CipherReference", NS)}
