"""Plain text in any encoding: paragraphs split at blank lines, the first short line as title."""

from __future__ import annotations

import re

from .detect import looks_like_text
from .document import Document
from deskdex.errors import CorruptFile
from .source import Source
from .textcodec import decode

_PARA = re.compile(r"\n\s*\n")


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    if not looks_like_text(data[:8192]):
        raise CorruptFile("binary data, not text")
    text, encoding = decode(data)
    del data  # a large file's bytes are not kept while its text is split
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    doc = Document(uri=source.uri, mime=mime, meta={"encoding": encoding})
    for para in _PARA.split(text):
        doc.add("p", para.strip("\n"))
    first = next((b.text.strip().split("\n", 1)[0] for b in doc.blocks), "")
    doc.title = first if 0 < len(first) <= 120 else source.name
    return doc
