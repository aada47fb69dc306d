"""One indexed document as the ``document`` op answers it (deskdex.protocol's DocumentAnswer): its
metadata, and its stored text block by block with the page each starts on and the places where a
query's terms match, marked as a snippet's highlights are (index/snippets.py). The web UI's
preview and download are built on it.

Rights as a search's: with ``reader`` (a uid), a document that user may not read is answered
exactly as one not indexed, NotFound with the same message, so the answer tells nothing of
others' files; copies and similar documents are counted among what the reader may read.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from deskdex.errors import NotFound

from .readable import ReadableClusters, may_read
from .search import parse
from .snippets import Snippets

if TYPE_CHECKING:
    from deskdex.converters import Document
    from deskdex.protocol import DocumentAnswer, DocumentBlock

    from .collection import Collection
    from .store import Row

NOT_FOUND = "no such document"  # one message for not indexed and not readable alike
_PAGES = re.compile(rb'<meta name="pages">(\d{1,9})</meta>')
_HEAD = 64 << 10  # bytes of stored text read for the page count when the text is not wanted


def document(coll: Collection, uri: str, query: str = "", text: bool = True, max_blocks: int = 20_000,
             reader: int | None = None) -> DocumentAnswer:
    """The document ``uri`` of ``coll``; ``text``: with its blocks (at most ``max_blocks``),
    marked where ``query``'s terms match; ``reader``: a uid (None: root's view, everything).
    NotFound for a document not indexed or not readable by ``reader``; QueryError (with the
    position) for a malformed ``query``. A document indexed without text (a failed conversion)
    has its metadata and no blocks."""
    row = coll.get(uri)
    if row is None or (reader is not None and not may_read(row.readers, reader)):
        raise NotFound(NOT_FOUND)
    if query.strip():
        parse(coll.index, query)  # a malformed query is the caller's error, as in a search
    view = ReadableClusters(coll.catalog.db, reader)
    cluster = row.cluster or 0
    members = view.component(row.uri, cluster)
    copies = view.copies(row.uri, cluster)
    if reader is not None:  # the id of the global cluster would tell of others' documents
        cluster = members[0] if len(members) > 1 else 0
    doc = coll.document(row) if text and row.status == "ok" else None
    blocks, truncated = _blocks(doc, query, row.lang, max_blocks) if doc is not None else ([], False)
    return {
        "uri": row.uri, "path": row.path or "", "title": row.title or "", "mime": row.mime or "",
        "size": row.size, "mtime": int(row.mtime), "lang": row.lang,
        "pages": _pages(coll, row, doc), "source": row.source, "cluster": cluster,
        "duplicates": max(0, len(copies) - 1), "similar": len(members) - len(copies),
        "blocks": blocks, "marks": sum(len(b["marks"]) for b in blocks), "truncated": truncated,
    }


def _blocks(doc: Document, query: str, lang: str | None, max_blocks: int) -> tuple[list[DocumentBlock], bool]:
    blocks = doc.blocks[:max_blocks]
    texts = [b.text for b in blocks]
    marks = Snippets(query).marks_of(texts, lang) if query.strip() else [[] for _ in texts]
    out: list[DocumentBlock] = [
        {"kind": b.kind, "level": b.level, "text": plain, "page": b.page, "boilerplate": b.boilerplate, "marks": m}
        for b, plain, m in zip(blocks, texts, marks)]
    return out, len(doc.blocks) > max_blocks


def _pages(coll: Collection, row: Row, doc: Document | None) -> int | None:
    """The page count the converter recorded (meta ``pages``), None for a format without pages.
    Without the document at hand, read from the start of its stored text: the metadata comes
    before the blocks, so the download's metadata-only question stays cheap."""
    if doc is not None:
        value = doc.meta.get("pages", "")
        return int(value) if value.isdigit() else None
    if row.status != "ok" or not row.blob:
        return None
    stream = coll.catalog.texts.open(row.blob)
    if stream is None:
        return None
    m = _PAGES.search(stream.read(_HEAD))
    return int(m.group(1)) if m else None
