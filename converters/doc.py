"""Word 97–2003 documents (DOC, DOT; Word 6 and 95 too) with antiword, catdoc when antiword fails.

antiword first: it prints the results of fields, not their codes (catdoc prints "HYPERLINK ...",
"REF _Ref123 \\h" and whole EndNote citations as text) and draws tables as ``|cell|cell|`` rows,
which become ``td`` blocks. It refuses documents whose text is short ("the text stream of this
file is too small"), which catdoc reads, so catdoc is the fallback. Measured on 54 .doc files (53
saved by LibreOffice from the corpus's DOCX, ODT and RTF, one from Word): antiword refused 30, all
short, catdoc none; where both read a file, antiword's words were LibreOffice's own reading, catdoc
added field codes (a third more words on some files); both take 1 to 20 ms a file. Each line of the
helper's output is one paragraph (``-w 0``: no wrapping). Title, author, dates from the document
properties (``ole.properties``); a password-protected file fails as ``encrypted``.
"""

from __future__ import annotations

import re

from . import helpers
from .document import Document
from deskdex.errors import CorruptFile, HelperMissing
from .ole import checked_properties
from .registry import WORD_HELPERS, Need
from .source import Source

_ANTIWORD = Need(("antiword",), "apt-get install antiword")
_CATDOC = Need(("catdoc",), "apt-get install catdoc")

_PICTURE = re.compile(r"\[pic\]")
_BULLET = re.compile(r"^[•·●○▪■□◦–-]\s+")


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    props = checked_properties(data, "WordDocument", "Word document")
    text = _text(source)
    doc = Document(uri=source.uri, mime=mime)
    title = props.pop("title", "")
    doc.meta.update(props)
    add_lines(doc, text)
    doc.settle_title(title, source.name)
    return doc


def _text(source: Source) -> str:
    """The document's text from antiword, or from catdoc when antiword is missing or fails."""
    if not WORD_HELPERS.found():
        raise HelperMissing(f"antiword or catdoc is not installed: {WORD_HELPERS.install}")
    why = ""
    if _ANTIWORD.found():
        try:
            return helpers.run(_ANTIWORD, ["-w", "0", "-i", "1", "-m", "UTF-8.txt", "{}"], source,
                               suffix=".doc").decode("utf-8", "replace")
        except CorruptFile as exc:
            why = str(exc)
            if not _CATDOC.found():
                raise
    try:
        return helpers.run(_CATDOC, ["-d", "utf-8", "-w", "{}"], source, suffix=".doc").decode("utf-8", "replace")
    except CorruptFile as exc:
        raise CorruptFile(f"not a readable Word document: {'; '.join(filter(None, (why, str(exc))))}") from exc


def add_lines(doc: Document, text: str) -> None:
    """A helper's plain text as blocks: ``|a|b|`` rows as table cells, bulleted lines as list
    items, every other line a paragraph; picture placeholders and page breaks dropped."""
    for line in _PICTURE.sub("", text.replace("\f", "\n")).split("\n"):
        line = line.strip()
        if not line:
            continue
        if len(line) > 1 and line.startswith("|") and line.endswith("|"):
            for cell in line[1:-1].split("|"):
                doc.add("td", " ".join(cell.split()))
        elif (bullet := _BULLET.match(line)) is not None:
            doc.add("li", line[bullet.end():], level=1)
        else:
            doc.add("p", line)
