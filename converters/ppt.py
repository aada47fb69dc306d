"""PowerPoint 97–2003 presentations (PPT, PPS, POT) with catppt (from catdoc).

catppt prints the text of each slide (and master), form feeds between them: the first line of each
becomes a level-2 heading (a slide's title comes first), the other lines paragraphs. Title, author
and dates come from the document properties; the title falls back to the file name, not a heading,
since catppt's order puts masters ("Office Theme") among the slides. A password-protected file
fails as ``encrypted``.

Known gap: catppt reads the text PowerPoint keeps in its slide list (titles, body placeholders),
not text inside drawing shapes: free text boxes, and every text of a file LibreOffice saved.
"""

from __future__ import annotations

from . import helpers
from .doc import add_lines
from .document import Document
from .ole import checked_properties
from .registry import CATPPT
from .source import Source



def convert(source: Source, mime: str) -> Document:
    data = source.read()
    props = checked_properties(data, "PowerPoint Document", "PowerPoint file")
    text = helpers.run(CATPPT, ["-d", "utf-8", "{}"], source, suffix=".ppt").decode("utf-8", "replace")
    doc = Document(uri=source.uri, mime=mime)
    title = props.pop("title", "")
    doc.meta.update(props)
    for slide in text.split("\f"):
        head, _, rest = slide.strip().partition("\n")
        doc.add("h", " ".join(head.split()), level=2)
        add_lines(doc, rest)
    doc.title = title or source.name
    return doc
